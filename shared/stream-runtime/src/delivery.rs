//! How DynamoDB stream records reach a function, in the shapes Lambda's event
//! source mapping uses.
//!
//! - [`reader`]: reads a table's stream through the DynamoDB Streams API into records shaped as
//!   Lambda delivers them, through the empty pages the service answers.
//! - [`invoke`]: the [`Invoker`] interface by which a batch reaches a function, and what it comes
//!   back with ([`Invocation`]).
//!
//! Operator tools (`operations::failures`) read and invoke through this crate alone; the local stack's
//! replayer (`dev/local-stack/src/replayer.rs`) and the in-process functions (`sidestream-combined`) implement
//! and use the same interface.

mod error;
pub mod invoke;
pub mod reader;

pub use error::RequestError;
pub use invoke::{Invocation, Invoker, KinesisInvoker, event, in_process};
pub use reader::{StreamReader, event_record};
