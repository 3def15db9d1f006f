//! What the integration tests share: the functions' binaries under Lambda's emulator (`lambda`),
//! moto's clients and tables (`moto`), the template's stack with its pipeline and checks
//! (`pipeline`), the binaries as processes (`process`), a scripted AWS endpoint (`scripted`),
//! how large the scale tests run (`scale`), and the template as the tests read it (`template`).

pub(crate) mod lambda;
pub(crate) mod moto;
pub(crate) mod pipeline;
pub(crate) mod process;
pub(crate) mod scale;
pub(crate) mod scripted;
pub(crate) mod template;
