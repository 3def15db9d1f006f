//! What the integration tests share: moto's clients and tables (`moto`), the template's stack
//! with its pipeline and checks (`pipeline`), the binaries as processes (`process`), a scripted
//! AWS endpoint (`scripted`), and how large the scale tests run (`scale`).

pub(crate) mod moto;
pub(crate) mod pipeline;
pub(crate) mod process;
pub(crate) mod scale;
pub(crate) mod scripted;
