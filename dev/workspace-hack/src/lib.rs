//! No code: this crate's dependencies carry the features that the workspace's dev-dependencies
//! turn on, so that every build asks for the same ones (see its `Cargo.toml`).
