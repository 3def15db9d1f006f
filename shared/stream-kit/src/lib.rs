//! Fail-fast DynamoDB Streams plumbing shared by Sidestream's functions.
//!
//! Lambda delivers a DynamoDB stream to a function in batches, at least once, in order per item
//! only. When the function reports a record in `batchItemFailures`, Lambda checkpoints at the
//! lowest reported sequence number and retries the batch from that record on. This crate holds the
//! pieces every Sidestream function needs to live by those rules:
//!
//! - [`record`]: a typed view of one stream record ([`Record`]): the change kind as an enum, the
//!   keys, and the images a change implies, with errors that say when the stream's view type
//!   lacks an image the function needs.
//! - [`outcome`]: what a plan reports besides its writes: every plan's loop over its records
//!   (record-permanent failures rejected, any other stops), and the records it skipped. The
//!   checkpoint response is the runtime's (`stream_runtime::conclude`).
//! - [`metrics`]: counters written as one CloudWatch Embedded Metric Format line per invocation.
//! - [`env`]: configuration read from environment variables once at cold start, with errors that
//!   name the variable.
//! - [`write`]: the item writes a plan produces, each tagged with the record it finishes.
//! - [`limits`]: DynamoDB's item size limit, measured before a request is sent.
//! - [`touch`]: the marker a backfill sets so that the stream carries existing items.
//! - [`kinesis`]: DynamoDB change records delivered through Kinesis Data Streams, turned into
//!   these records, with each change's time as precise as Kinesis gives it.
//! - [`wire`]: Lambda's DynamoDB event read in place, borrowed from its bytes, for the hot path.
//!
//! Nothing here talks to AWS; the DynamoDB writer lives in the `ddb-writer` crate.

pub mod env;
pub mod kinesis;
pub mod limits;
pub mod metrics;
pub mod outcome;
pub mod record;
pub mod touch;
pub mod wire;
pub mod write;

pub use aws_lambda_events::event::dynamodb::{Event, EventRecord};
pub use aws_lambda_events::event::streams::DynamoDbEventResponse;
pub use env::{ConfigError, Vars};
pub use io_policy::Deadline;

pub use metrics::{Metric, Metrics};
pub use outcome::{PlanFailure, PlanFailures, Skipped};
pub use record::{ChangeKind, Image, Record, RecordError};
pub use write::{Attributes, ItemWrite, Op};
