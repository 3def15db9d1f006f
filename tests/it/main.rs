//! Sidestream's integration tests: one binary, one module per area.

#![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]

mod key_cli;
