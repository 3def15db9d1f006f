//! The `sidestream` command line as a library: each subcommand is a function over readers and
//! writers, so tests drive it without a process. `main.rs` only parses arguments.

pub mod archive;
pub mod check;
pub mod demo;
pub mod grid;
pub mod key;
pub mod local;
pub mod plan;
pub mod typed_json;
