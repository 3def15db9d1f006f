//! The read side the multikey index exists for. Pages through a scope's items (a
//! project's issues) sorted by any indexed field, then the items without it.
//!
//! It follows *Grid View on DynamoDB*: query the index table for a page of items in field order;
//! once the index is exhausted, continue with the items that have no entry for the field (they
//! lack it, or its value cannot be keyed), in `num` order, through the base table's
//! `project-num` index ("nulls last", in either order). Every item appears exactly once.
//!
//! - [`schema`]: the tables and attribute names, from the indexer's own `MULTIKEY_INDEXES`.
//! - [`cursor`]: the one opaque, signed cursor that spans both phases.
//! - [`query`]: the request and its key condition, pure.
//! - [`Grid::page`]: one page; see its docs for the order, full pages and what each page costs.
//! - [`output`]: a page as JSON lines.

pub mod output;
pub mod query;
mod read;
pub mod schema;

pub(crate) use query::MAX_LIMIT;
pub use query::{Filter, Query, QueryError};
pub use read::{Grid, GridError, Page, Requests, Row};
pub use schema::{GridSchema, SchemaError};
