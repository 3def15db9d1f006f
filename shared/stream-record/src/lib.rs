//! The ground a DynamoDB stream function stands on, below any runtime: Lambda's stream event
//! read in place ([`wire`]), a typed record ([`record`]), item writes as a plan hands them on
//! ([`write`](mod@write)), DynamoDB's item size limit ([`limits`]), and configuration read from the
//! environment with errors that name the variable ([`env`](mod@env)); and, for tests, records
//! built as Lambda delivers them ([`fixture`]).
//!
//! It makes no AWS call and starts no runtime: a plan and a format built on it stay pure.
//!
//! The crate's README shows a batch read, and is compiled and run as a doctest.

pub mod env;
pub mod fixture;
pub mod limits;
pub mod record;
pub mod wire;
pub mod write;

pub use env::{ConfigError, Vars};
pub use record::{ChangeKind, Image, Record, RecordError};
pub use serde_dynamo::AttributeValue;
pub use wire::WireRecord;
pub use write::{Attributes, ItemWrite, Op};

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
