//! Planned item writes: what a function's pure plan hands to its I/O shell.

use std::sync::Arc;

use serde_dynamo::Item;

/// One item write to a DynamoDB table.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemWrite {
    /// The table written to.
    pub table: Arc<str>,
    /// A put of a whole item, or a delete by key.
    pub op: Op,
    /// The position, in the delivered batch, of the record this write finishes. When the write
    /// fails, the batch resumes from the earliest such record.
    pub origin: usize,
}

/// The two idempotent item operations.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Write the whole item, replacing any item with the same key.
    Put(Item),
    /// Delete the item with this key, if there is one.
    Delete(Item),
}

impl Op {
    /// `"put"` or `"delete"`.
    pub const fn name(&self) -> &'static str {
        match self {
            Op::Put(_) => "put",
            Op::Delete(_) => "delete",
        }
    }
}
