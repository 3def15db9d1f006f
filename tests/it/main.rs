//! Sidestream's integration tests: one binary, one module per area. Tests that talk to AWS run
//! against the moto server `scripts/test` starts.

#![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]

mod archive;
mod archive_queries;
mod backfill;
mod bench;
mod blocks;
mod browser;
mod chaos;
mod cli;
mod combined;
mod counters;
mod dashboard;
mod deploy;
mod emulator;
mod errors;
mod failures;
mod fixtures;
mod formats;
mod global;
mod grid;
mod grid_api;
mod iam;
mod key_cli;
mod kinesis;
mod lambda;
mod late;
mod layout;
mod mend;
mod multikey;
mod parking;
mod pipeline;
mod plan_cli;
mod policy;
mod restore;
mod state_machines;
mod status;
mod support;
mod template;
mod verify;
mod your_table;
