//! Puts guarded by the version they carry: each item is put on the condition that the item it
//! replaces is absent or holds an older version, so that a write landing late (sent by an
//! invocation that has since been superseded) or delivered again can never undo a newer one.
//!
//! DynamoDB applies a request it has received even after its sender has given up on it, and a
//! `BatchWriteItem` cannot be conditioned. So each put goes alone, as a `PutItem` with the
//! condition `attribute_not_exists(#v) OR #v < :v`, `:v` being the version the item itself
//! carries. Whatever order the puts of one key land in, the key ends holding the newest: the
//! guard is per item, so there is nothing to fence across items and no transaction (which
//! DynamoDB bills twice).
//!
//! - **Versions** are strings of one width (or numbers), so that comparing them compares the
//!   order they were made in; the caller chooses the attribute ([`Writer::write_versioned`]).
//!   A removal that must stay guarded is a put too: a *tombstone* holding the remover's version,
//!   which the caller expires (a TTL attribute) once no older write can still come.
//! - **Chunks.** Puts go [`CHUNK`] at a time, each chunk's requests at once in one place of the
//!   budget's window: the window bounds chunks in flight, so single-item requests do not cost a
//!   round trip each, and its 16 places (the default `WRITE_MAX_CONCURRENCY`) hold at most 128
//!   requests, each an HTTP connection. A chunk of 25, a `BatchWriteItem`'s size, let 400
//!   connections open at once: more than a round trip saves, and on the local stack more than
//!   moto answers within the attempt timeout, so that whole chunks timed out, were sent again and
//!   refused (docs/benchmarks.md, "Guarded puts"). Each request is cut off at the attempt
//!   timeout on its own, and only the puts that failed are sent again.
//! - **Refused puts** (`ConditionalCheckFailedException`) are *superseded*: a newer version is
//!   stored, so nothing of them is needed. They are counted in [`VersionedReport::superseded`]
//!   and done. DynamoDB bills them all the same (docs/cost.md).
//! - **Failures** are the writer's: throttling and server errors back off and are retried, the
//!   puts that failed only; a put DynamoDB refuses for its content is given up on as
//!   record-permanent alone, the rest of its chunk applied.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue as SdkValue;
use futures_util::{Stream, StreamExt as _};
use io_policy::{Budget, Failure, FailureKind};

use crate::writer::send::{give_up, sdk_item};
use crate::writer::{Report, Retry};
use crate::{ItemWrite, Op};

/// Puts sent together, in one place of the window (module documentation).
pub const CHUNK: usize = 8;

/// The guard every put carries.
const CONDITION: &str = "attribute_not_exists(#v) OR #v < :v";

/// What [`Writer::write_versioned`](crate::writer::Writer::write_versioned) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionedReport {
    /// Puts applied (superseded ones included: they are done) and given up on.
    pub report: Report,
    /// Puts refused because the stored item was as new or newer: late or repeated, not needed.
    pub superseded: u64,
}

impl VersionedReport {
    fn merge(&mut self, other: VersionedReport) {
        self.report.merge(other.report);
        self.superseded += other.superseded;
    }
}

/// One put ready to send, with the record it finishes.
#[derive(Clone)]
struct Guarded {
    origin: usize,
    request: PutItemFluentBuilder,
}

/// The requests `puts` versioned puts make when nothing is retried: one each.
pub const fn requests_for_versioned(puts: usize) -> usize {
    puts
}

impl crate::writer::Writer {
    /// Applies `puts` within `budget`, each on the condition that the stored item under its key
    /// is absent or older than the version it carries in `version_attribute` (module
    /// documentation). Every write must be a put holding that attribute; one that is not is
    /// given up on as record-permanent. No two puts may share a table and key.
    pub async fn write_versioned(
        &self,
        puts: Vec<ItemWrite>,
        version_attribute: &str,
        budget: &Budget,
    ) -> VersionedReport {
        self.write_versioned_as_ready(futures_util::stream::iter([puts]), version_attribute, budget).await
    }

    /// [`Writer::write_versioned`](crate::writer::Writer::write_versioned) of puts that come in
    /// lots (a plan's, made in steps): each lot's chunks are sent once they are ready and the
    /// window admits them.
    pub async fn write_versioned_as_ready(
        &self,
        lots: impl Stream<Item = Vec<ItemWrite>> + Send,
        version_attribute: &str,
        budget: &Budget,
    ) -> VersionedReport {
        let chunks = lots.flat_map(|lot| futures_util::stream::iter(crate::writer::chunks(lot, CHUNK)));
        let sent = chunks.map(|chunk| self.send_chunk(chunk, version_attribute, budget));
        let mut report = VersionedReport::default();
        for r in budget.in_window_as_ready(sent).await {
            report.merge(r);
        }
        report
    }

    /// Sends one chunk's puts together until each is applied, superseded or given up on: each
    /// attempt sends the puts still pending at once, each cut off on its own
    /// ([`io_policy::Attempts::run_each`]), and only those that failed go again.
    async fn send_chunk(
        &self,
        chunk: Vec<ItemWrite>,
        version_attribute: &str,
        budget: &Budget,
    ) -> VersionedReport {
        let mut report = VersionedReport::default();
        let mut pending = Vec::with_capacity(chunk.len());
        for write in chunk {
            let origin = write.origin;
            match self.guarded(write, version_attribute) {
                Ok(put) => pending.push(put),
                Err(reason) => give_up(&mut report.report, vec![origin], &Failure::record_permanent(reason)),
            }
        }
        let mut retry = Retry::new(budget, pending);
        loop {
            let (pending, attempts) = match retry.next().await {
                Ok(Some(next)) => next,
                Ok(None) => break,
                Err((left, failure)) => {
                    give_up(&mut report.report, left.iter().map(|p| p.origin).collect(), &failure);
                    break;
                }
            };
            let calls: Vec<_> = pending
                .iter()
                .map(|put| {
                    let request = put.request.clone();
                    async move { io_policy::conditional("PutItem", request.send().await) }
                })
                .collect();
            let answers = match attempts.run_each(calls).await {
                Ok(answers) => answers,
                Err(failure) => {
                    retry.left(pending, failure);
                    continue;
                }
            };
            let (mut retried, mut last) = (Vec::new(), None);
            for (put, answer) in pending.into_iter().zip(answers) {
                match answer {
                    Ok(applied) => {
                        report.report.writes += 1;
                        // Refused: the key holds a newer version (or this one: a copy of it
                        // landed first), so nothing of it is needed.
                        report.superseded += u64::from(applied.is_none());
                    }
                    Err(failure) if failure.kind == FailureKind::RecordPermanent => {
                        give_up(&mut report.report, vec![put.origin], &failure);
                    }
                    Err(failure) => {
                        // A systemic failure (access denied, a missing table) gives every put
                        // left up at once; a transient one backs off and sends them again.
                        if last.as_ref().is_none_or(|l: &Failure| l.kind == FailureKind::Transient) {
                            last = Some(failure);
                        }
                        retried.push(put);
                    }
                }
            }
            // A put is kept for another attempt only beside the failure that kept it: none is
            // left behind unreported.
            debug_assert_eq!(retried.is_empty(), last.is_none(), "puts kept without their failure");
            if let Some(failure) = last {
                retry.left(retried, failure);
            }
        }
        report
    }

    /// `write` as a guarded `PutItem`, or why it cannot be one.
    fn guarded(&self, write: ItemWrite, version_attribute: &str) -> Result<Guarded, String> {
        let Op::Put(item) = write.op else {
            return Err(format!("table {}: a versioned write must be a put, not a delete", write.table));
        };
        let version = item.get(version_attribute).cloned().ok_or_else(|| {
            format!("table {}: a versioned put has no version attribute {version_attribute:?}", write.table)
        })?;
        let request = self
            .client
            .put_item()
            .table_name(Arc::clone(&write.table).to_string())
            .set_item(Some(sdk_item(item)))
            .condition_expression(CONDITION)
            .set_expression_attribute_names(Some(HashMap::from([(
                "#v".to_owned(),
                version_attribute.to_owned(),
            )])))
            .set_expression_attribute_values(Some(HashMap::from([(
                ":v".to_owned(),
                SdkValue::from(version),
            )])));
        Ok(Guarded { origin: write.origin, request })
    }
}
