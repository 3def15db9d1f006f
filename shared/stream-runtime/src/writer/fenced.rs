//! Writes behind a fence: each item's writes in a `TransactWriteItems` with a put of the item's
//! version head, conditioned on the head's version, so that a request landing late (sent by an
//! invocation that has since been superseded) is cancelled whole instead of undoing newer writes.
//!
//! DynamoDB applies a request it has received even after its sender has given up on it, and a
//! `BatchWriteItem` cannot be conditioned. So a write of version `v` can land after the writes of
//! a newer version `w` of the same item. Here every write of `v` travels with the head put
//! `version := v`, in one transaction, on the condition that the head is absent or older than `v`.
//! Once `w` is applied the head says `w`, so a late transaction of `v` fails its condition and
//! nothing of it is applied; and once `v` itself is applied, a second copy of it is refused too,
//! harmlessly (it was applied whole).
//!
//! - **Packing.** A transaction holds at most [`MAX_ACTIONS`] actions and [`MAX_TRANSACTION_BYTES`];
//!   groups are packed whole, several to a transaction. A group too large for one is cut into
//!   parts sent one after another: each but the last checks the head's condition
//!   (`ConditionCheck`), and the last puts the head, so that the head moves only once every part
//!   is applied; see [`Fenced`].
//! - **Superseded groups.** A cancellation whose reason for a head is `ConditionalCheckFailed`
//!   means a newer version has been applied: that group's writes are dropped (counted in
//!   [`FencedReport::superseded`]) and the rest of the transaction is sent again at once.
//! - **Failures** are the writer's: throttling and conflicts back off and retry; a write DynamoDB
//!   refuses for its content (a `ValidationError` reason) is given up on as record-permanent and
//!   the rest sent again; a transaction refused whole for its content is narrowed down by halves.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::{Attributes, ItemWrite, Op};
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};
use futures_util::{Stream, StreamExt as _};
use io_policy::{Budget, Failure, FailureKind};

use crate::writer::Report;
use crate::writer::send::sdk_item;

/// DynamoDB's limit on actions per `TransactWriteItems`.
pub const MAX_ACTIONS: usize = 100;

/// DynamoDB's limit on a transaction's size is 4 MB; items are counted by DynamoDB's size rules,
/// with room left for the request's own encoding.
pub(crate) const MAX_TRANSACTION_BYTES: usize = 3_500_000;

/// The version head that fences one item's writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Fence {
    /// The head's table (the writes' table).
    pub table: Arc<str>,
    /// The whole head item to put: its key, `version_attribute` = `version`, and whatever else
    /// the head holds.
    pub head: Attributes,
    /// The head's key (its partition and sort key attributes), for a part's `ConditionCheck`.
    pub key: Attributes,
    /// The attribute holding the version (S, fixed width, so that strings compare as numbers).
    pub version_attribute: &'static str,
    /// The version of the writes: the head must be absent or older.
    pub version: String,
    /// The record the head put finishes.
    pub origin: usize,
}

/// One item's writes and their fence. The writes must not touch the head's key, and no two
/// writes of a call may share a table and key.
///
/// A group of more than [`MAX_ACTIONS`] − 1 writes (or over [`MAX_TRANSACTION_BYTES`]) is sent
/// in parts, one after another, each checking the head's condition and the last putting the
/// head: a failure leaves the head where it was, so the group is sent again whole when its
/// records are. A late part of an older version is refused once the head has moved past it; a
/// late part of a version never applied can still land between two parts of a newer one (an item
/// with more than 99 writes in one batch, in any order), which `index verify` would report.
#[derive(Debug, Clone, PartialEq)]
pub struct Fenced {
    /// The fence.
    pub fence: Fence,
    /// The item's writes; may be empty (the head alone moves).
    pub writes: Vec<ItemWrite>,
}

/// What [`Writer::write_fenced`](crate::writer::Writer::write_fenced) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FencedReport {
    /// Writes applied and given up on (head puts included), as for unfenced writes.
    pub report: Report,
    /// Groups (or parts) not applied because their head was already newer: written by a later
    /// version, so nothing of them is needed.
    pub superseded: u64,
    /// Their writes, head puts included.
    pub superseded_writes: u64,
}

impl FencedReport {
    fn merge(&mut self, other: FencedReport) {
        self.report.merge(other.report);
        self.superseded += other.superseded;
        self.superseded_writes += other.superseded_writes;
    }
}

/// What is sent as one: a transaction of whole groups, or the parts of one group too large for
/// a transaction, in order.
#[derive(Debug, Clone, PartialEq)]
enum Unit {
    Transaction(Vec<Fenced>),
    Parts(Vec<Fenced>),
}

/// One action of a transaction, with where it came from.
#[derive(Clone)]
struct Action {
    /// The group (part) it belongs to, within its transaction.
    group: usize,
    origin: usize,
    /// The head's put or check, which carries the fence's condition.
    head: bool,
    /// Whether it writes (a put or a delete; not a check).
    writes: bool,
    item: TransactWriteItem,
}

/// Fills transactions with whole groups, in the order they come: a transaction is closed when
/// the next group does not fit beside it.
#[derive(Default)]
struct Packer {
    open: Vec<Fenced>,
    actions: usize,
    bytes: usize,
}

impl Packer {
    /// Adds a group; what it makes ready to send: a transaction it closed, or the group's own
    /// parts when it is too large for one.
    fn push(&mut self, group: Fenced) -> Option<Unit> {
        if !fits(&group) {
            return Some(Unit::Parts(parts(group)));
        }
        let (n, size) = (group.writes.len() + 1, group_size(&group));
        let closed = if !self.open.is_empty()
            && (self.actions + n > MAX_ACTIONS || self.bytes + size > MAX_TRANSACTION_BYTES)
        {
            (self.actions, self.bytes) = (0, 0);
            Some(Unit::Transaction(std::mem::take(&mut self.open)))
        } else {
            None
        };
        self.actions += n;
        self.bytes += size;
        self.open.push(group);
        closed
    }

    /// The last transaction, if any group is left.
    fn finish(self) -> Option<Unit> {
        Some(self.open).filter(|open| !open.is_empty()).map(Unit::Transaction)
    }
}

/// What `groups` are sent as.
#[cfg(test)]
fn pack(groups: Vec<Fenced>) -> Vec<Unit> {
    let mut packer = Packer::default();
    let mut units: Vec<Unit> = groups.into_iter().filter_map(|group| packer.push(group)).collect();
    units.extend(packer.finish());
    units
}

/// What groups that come as a stream are sent as, packed as [`pack`] packs them all at once: a
/// transaction leaves when it is full, or when the groups end, never short while more come.
fn pack_as_ready(lots: impl Stream<Item = Vec<Fenced>> + Send) -> impl Stream<Item = Unit> + Send {
    let groups = Box::pin(lots.flat_map(futures_util::stream::iter));
    futures_util::stream::unfold(Some((groups, Packer::default())), |state| async move {
        let (mut groups, mut packer) = state?;
        loop {
            match groups.next().await {
                Some(group) => {
                    if let Some(unit) = packer.push(group) {
                        return Some((unit, Some((groups, packer))));
                    }
                }
                None => return packer.finish().map(|last| (last, None)),
            }
        }
    })
}

/// The requests `groups` take when nothing is retried or refused: the transactions they are
/// packed into, and one per part of a group too large for one (what a plan made in steps takes
/// too: [`crate::writer::Writer::write_fenced_as_ready`] packs across lots).
pub fn requests_for_fenced(groups: &[Fenced]) -> usize {
    let (mut requests, mut actions, mut bytes) = (0, 0, 0);
    for group in groups {
        if !fits(group) {
            requests += parts(group.clone()).len();
            continue;
        }
        let (n, size) = (group.writes.len() + 1, group_size(group));
        if actions == 0 || actions + n > MAX_ACTIONS || bytes + size > MAX_TRANSACTION_BYTES {
            requests += 1;
            (actions, bytes) = (0, 0);
        }
        actions += n;
        bytes += size;
    }
    requests
}

/// Whether a group fits one transaction with its head put.
fn fits(group: &Fenced) -> bool {
    group.writes.len() < MAX_ACTIONS && group_size(group) <= MAX_TRANSACTION_BYTES
}

/// A group too large for a transaction cut into parts that each fit one with a head action.
fn parts(group: Fenced) -> Vec<Fenced> {
    let head = group.fence.head.size();
    let Fenced { fence, writes } = group;
    let mut out: Vec<Fenced> = Vec::new();
    let mut bytes = 0;
    for write in writes {
        let size = write_size(&write);
        let full = out
            .last()
            .is_none_or(|p| p.writes.len() + 1 >= MAX_ACTIONS || head + bytes + size > MAX_TRANSACTION_BYTES);
        if full {
            out.push(Fenced { fence: fence.clone(), writes: Vec::new() });
            bytes = 0;
        }
        bytes += size;
        if let Some(part) = out.last_mut() {
            part.writes.push(write);
        }
    }
    out
}

fn write_size(write: &ItemWrite) -> usize {
    match &write.op {
        Op::Put(item) | Op::Delete(item) => item.size(),
    }
}

fn group_size(group: &Fenced) -> usize {
    group.fence.head.size() + group.writes.iter().map(write_size).sum::<usize>()
}

impl crate::writer::Writer {
    /// Applies `groups` within `budget`, each item's writes fenced by its head ([`Fenced`]).
    pub async fn write_fenced(&self, groups: Vec<Fenced>, budget: &Budget) -> FencedReport {
        self.write_fenced_as_ready(futures_util::stream::iter([groups]), budget).await
    }

    /// Applies groups as they come (a plan's, made in steps), each lot packed into transactions
    /// sent once the window admits them.
    pub async fn write_fenced_as_ready(
        &self,
        lots: impl Stream<Item = Vec<Fenced>> + Send,
        budget: &Budget,
    ) -> FencedReport {
        let units = pack_as_ready(lots);
        let reports = budget.in_window_as_ready(units.map(|unit| self.send_unit(unit, budget))).await;
        let mut report = FencedReport::default();
        for r in reports {
            report.merge(r);
        }
        report
    }

    /// Sends a unit: a transaction, or a large group's parts one after another, the head put
    /// last; a part that is not applied (refused, superseded or failed) ends the group there.
    async fn send_unit(&self, unit: Unit, budget: &Budget) -> FencedReport {
        let parts = match unit {
            Unit::Transaction(groups) => return self.convert_and_transact(groups, budget, true).await,
            Unit::Parts(parts) => parts,
        };
        let mut report = FencedReport::default();
        let last = parts.len() - 1;
        let mut parts = parts.into_iter().enumerate();
        let mut stopped = None;
        for (at, part) in parts.by_ref() {
            let sent = self.convert_and_transact(vec![part], budget, at == last).await;
            let failure = sent.report.failures.first().map(|(_, f)| f.clone());
            let superseded = sent.superseded > 0;
            report.merge(sent);
            if failure.is_some() || superseded {
                stopped = Some(failure);
                break;
            }
        }
        // A part not applied: the rest is not sent. Its records fail as that part's did, or,
        // superseded by a newer version, need nothing.
        if let Some(failure) = stopped {
            for (_, rest) in parts {
                let origins = rest.writes.iter().map(|w| w.origin).chain([rest.fence.origin]);
                match &failure {
                    Some(failure) => {
                        crate::writer::send::give_up(&mut report.report, origins.collect(), failure);
                    }
                    None => report.superseded_writes += rest.writes.len() as u64 + 1,
                }
            }
        }
        report
    }

    /// Sends whole groups in one transaction, each with its head put (`put_heads`), or with a
    /// check of its head's condition only (a part before the last).
    async fn convert_and_transact(
        &self,
        groups: Vec<Fenced>,
        budget: &Budget,
        put_heads: bool,
    ) -> FencedReport {
        let mut report = FencedReport::default();
        let mut actions = Vec::new();
        for (at, group) in groups.into_iter().enumerate() {
            match convert(at, group, put_heads) {
                Ok(converted) => actions.extend(converted),
                Err((origins, reason)) => {
                    crate::writer::send::give_up(
                        &mut report.report,
                        origins,
                        &Failure::record_permanent(reason),
                    );
                }
            }
        }
        if !actions.is_empty() {
            report.merge(self.transact(actions, budget).await);
        }
        report
    }

    /// Sends one transaction until it is applied or given up on; see the module's documentation.
    fn transact<'a>(
        &'a self,
        mut actions: Vec<Action>,
        budget: &'a Budget,
    ) -> Pin<Box<dyn Future<Output = FencedReport> + Send + 'a>> {
        Box::pin(async move {
            let mut report = FencedReport::default();
            let mut attempts = budget.attempts();
            let mut last = None;
            loop {
                if actions.is_empty() {
                    return report;
                }
                if let Err(failure) = attempts.next(last.take()).await {
                    let groups = group_count(&actions);
                    if failure.kind == FailureKind::RecordPermanent && groups > 1 {
                        tracing::warn!(groups, error = %failure.message, "narrowing a rejected TransactWriteItems down by halves");
                        let (first, second) = halves(actions);
                        report.merge(self.transact(first, budget).await);
                        report.merge(self.transact(second, budget).await);
                    } else {
                        crate::writer::send::give_up(
                            &mut report.report,
                            actions.iter().map(|a| a.origin).collect(),
                            &failure,
                        );
                    }
                    return report;
                }
                let call = self
                    .client
                    .transact_write_items()
                    .set_transact_items(Some(actions.iter().map(|a| a.item.clone()).collect()))
                    .send();
                // A cancellation is an answer, read below; any other error is the attempt's failure.
                let call = Box::pin(async {
                    match call.await {
                        Ok(_) => Ok(None),
                        Err(e) => match Rejected::from(e) {
                            Rejected::Cancelled(reasons) => Ok(Some(reasons)),
                            Rejected::Failure(failure) => Err(failure),
                        },
                    }
                });
                match attempts.run(call).await {
                    Ok(None) => {
                        report.report.writes += actions.iter().filter(|a| a.writes).count() as u64;
                        return report;
                    }
                    Err(failure) => last = Some(failure),
                    Ok(Some(reasons)) if reasons.len() == actions.len() => {
                        last = Self::cancelled(&mut actions, &reasons, &mut report, budget);
                    }
                    Ok(Some(reasons)) => {
                        last = Some(Failure::transient(format!(
                            "TransactWriteItems: cancelled with {} reasons for {} actions",
                            reasons.len(),
                            actions.len()
                        )));
                    }
                }
            }
        })
    }

    /// Takes a cancelled transaction's reasons: drops superseded groups and writes refused for
    /// their content, and says how the rest failed (`None`: send it again at once).
    fn cancelled(
        actions: &mut Vec<Action>,
        reasons: &[Reason],
        report: &mut FencedReport,
        budget: &Budget,
    ) -> Option<Failure> {
        let code = |at: usize| reasons[at].code.as_deref().unwrap_or("None");
        let superseded: Vec<usize> = (0..actions.len())
            .filter(|&at| actions[at].head && code(at) == "ConditionalCheckFailed")
            .map(|at| actions[at].group)
            .collect();
        let refused: Vec<usize> = (0..actions.len())
            .filter(|&at| matches!(code(at), "ValidationError" | "ItemCollectionSizeLimitExceeded"))
            .collect();
        if superseded.is_empty() && refused.is_empty() {
            let throttled = (0..actions.len()).any(|at| {
                matches!(
                    code(at),
                    "ThrottlingError" | "ProvisionedThroughputExceeded" | "RequestLimitExceeded"
                )
            });
            let codes: Vec<&str> = (0..actions.len()).map(code).filter(|c| *c != "None").collect();
            let message = format!("TransactWriteItems: cancelled ({})", codes.join(", "));
            return Some(if throttled {
                budget.window.throttled(std::time::Instant::now());
                Failure::throttling(message)
            } else {
                Failure::transient(message)
            });
        }
        for &at in &refused {
            let failure = Failure::record_permanent(format!(
                "TransactWriteItems: DynamoDB refused this record's write for its content: {}: {}",
                code(at),
                reasons[at].message.as_deref().unwrap_or("no message")
            ));
            crate::writer::send::give_up(&mut report.report, vec![actions[at].origin], &failure);
        }
        let mut groups: Vec<usize> = superseded;
        groups.sort_unstable();
        groups.dedup();
        report.superseded += groups.len() as u64;
        let mut at = 0;
        actions.retain(|a| {
            let (dropped, refusal) = (groups.contains(&a.group), refused.contains(&at));
            at += 1;
            if dropped && !refusal {
                report.superseded_writes += 1;
            }
            !dropped && !refusal
        });
        tracing::info!(
            superseded = groups.len(),
            refused = refused.len(),
            left = actions.len(),
            "a fenced transaction was cancelled; sending the rest again"
        );
        None
    }
}

/// How a transaction failed: a failure as classified, or a cancellation with each action's
/// reason.
enum Rejected {
    Failure(Failure),
    Cancelled(Vec<Reason>),
}

/// Why one action of a cancelled transaction was not applied: its code (`None` where the action
/// was fine) and DynamoDB's message.
struct Reason {
    code: Option<String>,
    message: Option<String>,
}

impl From<SdkError<TransactWriteItemsError, HttpResponse>> for Rejected {
    fn from(error: SdkError<TransactWriteItemsError, HttpResponse>) -> Rejected {
        if let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) =
            error.as_service_error()
            && !cancelled.cancellation_reasons().is_empty()
        {
            return Rejected::Cancelled(
                cancelled
                    .cancellation_reasons()
                    .iter()
                    .map(|r| Reason {
                        code: r.code().filter(|c| *c != "None").map(str::to_owned),
                        message: r.message().map(str::to_owned),
                    })
                    .collect(),
            );
        }
        Rejected::Failure(io_policy::classify("TransactWriteItems", &error))
    }
}

fn group_count(actions: &[Action]) -> usize {
    let mut groups: Vec<usize> = actions.iter().map(|a| a.group).collect();
    groups.dedup();
    groups.len()
}

/// The actions cut in two between groups.
fn halves(actions: Vec<Action>) -> (Vec<Action>, Vec<Action>) {
    let groups = group_count(&actions);
    let mut seen = 0;
    let mut previous = None;
    let (first, second): (Vec<Action>, Vec<Action>) = actions.into_iter().partition(|a| {
        if previous != Some(a.group) {
            seen += 1;
            previous = Some(a.group);
        }
        seen <= groups / 2
    });
    (first, second)
}

/// A group's actions in the SDK's form: its writes, then its head put (or, with `put_head`
/// false, a check) with the fence's condition; the origins and reason when it cannot be built.
fn convert(group: usize, fenced: Fenced, put_head: bool) -> Result<Vec<Action>, (Vec<usize>, String)> {
    let Fenced { fence, writes } = fenced;
    let origins: Vec<usize> = writes.iter().map(|w| w.origin).chain([fence.origin]).collect();
    let mut actions = Vec::with_capacity(writes.len() + 1);
    for write in writes {
        let item = match write.op {
            Op::Put(item) => Put::builder()
                .table_name(&*write.table)
                .set_item(Some(sdk_item(item)))
                .build()
                .map(|put| TransactWriteItem::builder().put(put).build()),
            Op::Delete(key) => Delete::builder()
                .table_name(&*write.table)
                .set_key(Some(sdk_item(key)))
                .build()
                .map(|delete| TransactWriteItem::builder().delete(delete).build()),
        }
        .map_err(|e| (origins.clone(), e.to_string()))?;
        actions.push(Action { group, origin: write.origin, head: false, writes: true, item });
    }
    let condition = "attribute_not_exists(#v) OR #v < :v";
    let names = HashMap::from([("#v".to_owned(), fence.version_attribute.to_owned())]);
    let values = HashMap::from([(":v".to_owned(), AttributeValue::S(fence.version.clone()))]);
    let item = if put_head {
        Put::builder()
            .table_name(&*fence.table)
            .set_item(Some(sdk_item(fence.head)))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .map(|put| TransactWriteItem::builder().put(put).build())
    } else {
        ConditionCheck::builder()
            .table_name(&*fence.table)
            .set_key(Some(sdk_item(fence.key)))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .map(|check| TransactWriteItem::builder().condition_check(check).build())
    }
    .map_err(|e| (origins, e.to_string()))?;
    actions.push(Action { group, origin: fence.origin, head: true, writes: put_head, item });
    Ok(actions)
}

#[cfg(test)]
mod tests;
