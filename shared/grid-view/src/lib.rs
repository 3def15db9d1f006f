//! grid-view: the read side the multikey index exists for. Pages through a scope's items (a
//! project's issues) sorted by any indexed field, then the items without it.
//!
//! It follows *Grid View on DynamoDB*: query the index table for a page of items in field order;
//! once the index is exhausted, continue with the items that lack the field, in `num` order,
//! through the base table's `project-num` index ("nulls last", in either order).
//!
//! - [`cursor`]: the one opaque, signed cursor that spans both phases.
//! - [`query`]: the request and its key condition, pure.
//! - [`Grid::page`]: one page; see its docs for what each page costs.

pub mod cursor;
mod grid;
pub mod query;

pub use cursor::{Cursor, CursorError, Phase, Signer};
pub use grid::{Grid, GridError, PAGE_TIME, Page, Requests, Row};
pub use query::{Filter, GridSchema, MAX_LIMIT, Query, QueryError};
