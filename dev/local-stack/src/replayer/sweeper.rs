//! TTL for emulators that never expire items: deletes the items whose TTL attribute has passed,
//! and marks the stream records of those deletes as DynamoDB's own, the way AWS does.
//!
//! DynamoDB's TTL deletes an item some time after its TTL attribute (a Number, epoch seconds)
//! is in the past, unless the value is more than five years in the past; its REMOVE record
//! carries `userIdentity: {"type": "Service", "principalId": "dynamodb.amazonaws.com"}`, which
//! is how the ttl-archiver (and its stream filter) tells it from a user's delete.
//!
//! The sweeper learns which items carry a TTL from the stream it is swept beside: every record
//! read passes through [`Sweeper::observe`], which keeps each live item's key and TTL value from
//! its new image ([`Expiries`]), so a sweep deletes the items due without scanning the table (a
//! whole-table scan a second was three quarters of moto's time in a 20,000-op chaos run). A
//! stream whose records carry no new image (`KEYS_ONLY`, `OLD_IMAGE`) cannot say, and its table
//! is scanned at each sweep instead.
//!
//! The sweeper deletes with a condition (the item is still expired), so an item a user updated
//! or deleted meanwhile is left alone. It marks each delete with the header
//! [`TTL_DELETE_HEADER`]; the project's moto launcher (`scripts/moto-server.py`) then writes that
//! delete's stream record with the service identity, as DynamoDB writes it. The identity is in
//! the stream itself, so every reader sees it: the local mapping, and `failures replay` reading
//! a range again.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::replayer::ReplayError;
use stream_runtime::delivery::RequestError;

/// Five years, the age past which DynamoDB ignores a TTL value.
const IGNORED_AFTER_SECONDS: f64 = 5.0 * 365.0 * 24.0 * 3600.0;

/// Whether a TTL attribute's Number value means the item is due for deletion at `now` (epoch
/// seconds).
pub fn expired(value: &str, now: i64) -> bool {
    #[expect(clippy::cast_precision_loss, reason = "epoch seconds are far below 2^52")]
    let now = now as f64;
    value.parse::<f64>().is_ok_and(|at| at.is_finite() && at < now && now - at <= IGNORED_AFTER_SECONDS)
}

/// Expires one table's items.
#[derive(Debug)]
pub struct Sweeper {
    client: Client,
    table: String,
    attribute: String,
    key: Vec<String>,
    expiries: Expiries,
}

/// The header that marks the sweeper's deletes as DynamoDB's own (with the value `service`).
pub(crate) const TTL_DELETE_HEADER: &str = "x-sidestream-ttl-delete";

/// The TTL value of every live item with one, as the stream has told it so far.
#[derive(Debug, Default)]
pub(crate) struct Expiries {
    /// By the item's key (its key attributes' DynamoDB JSON, in key order): the TTL attribute's
    /// Number value and the key itself.
    items: HashMap<String, (String, HashMap<String, AttributeValue>)>,
    /// A record of an insert or a change came without its new image: the stream cannot say.
    blind: bool,
}

impl Expiries {
    /// Takes in one stream record of the table: an item's TTL value from its new image (or its
    /// absence, which forgets the item), or its deletion.
    pub(crate) fn observe(&mut self, record: &EventRecord, attribute: &str, key: &[String]) {
        let name =
            |k: &String| record.change.keys.get(k).map(|v| serde_json::to_string(v).unwrap_or_default());
        let Some(id) = key.iter().map(name).collect::<Option<Vec<_>>>().map(|parts| parts.join("|")) else {
            return;
        };
        if record.event_name == "REMOVE" {
            self.items.remove(&id);
            return;
        }
        if record.change.new_image.is_empty() {
            self.blind = true;
            return;
        }
        match record.change.new_image.get(attribute) {
            Some(serde_dynamo::AttributeValue::N(at)) => {
                let item = || {
                    record
                        .change
                        .keys
                        .iter()
                        .map(|(k, v)| (k.clone(), AttributeValue::from(v.clone())))
                        .collect()
                };
                match self.items.entry(id) {
                    Entry::Occupied(mut known) => at.clone_into(&mut known.get_mut().0),
                    Entry::Vacant(new) => {
                        new.insert((at.clone(), item()));
                    }
                }
            }
            _ => {
                self.items.remove(&id);
            }
        }
    }

    /// Whether the stream could not say which items carry a TTL.
    pub(crate) fn blind(&self) -> bool {
        self.blind
    }

    /// The items due at `now` (epoch seconds), by their ids for [`Expiries::key`] and
    /// [`Expiries::forget`].
    pub(crate) fn due(&self, now: i64) -> Vec<String> {
        self.items.iter().filter(|(_, (at, _))| expired(at, now)).map(|(id, _)| id.clone()).collect()
    }

    /// The key of the item with this id.
    pub(crate) fn key(&self, id: &str) -> Option<&HashMap<String, AttributeValue>> {
        self.items.get(id).map(|(_, key)| key)
    }

    /// Forgets an item once the sweep has deleted it, or found it changed: a record of the change
    /// will tell its TTL again.
    pub(crate) fn forget(&mut self, id: &str) {
        self.items.remove(id);
    }

    /// How many items with a TTL are known.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item with a TTL is known.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl Sweeper {
    /// A sweeper of `table`, whose TTL attribute is `attribute` and key attributes `key`.
    pub fn new(
        client: Client,
        table: impl Into<String>,
        attribute: impl Into<String>,
        key: Vec<String>,
    ) -> Sweeper {
        Sweeper {
            client,
            table: table.into(),
            attribute: attribute.into(),
            key,
            expiries: Expiries::default(),
        }
    }

    /// Takes in a record read from the table's stream (see [`Expiries::observe`]).
    pub(crate) fn observe(&mut self, record: &EventRecord) {
        self.expiries.observe(record, &self.attribute, &self.key);
    }

    /// The table swept.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Deletes every item expired at `now` (epoch seconds); returns how many. The items are
    /// those the stream has told of, or, if it could not, those a scan of the table finds.
    pub async fn sweep(&mut self, now: i64) -> Result<usize, ReplayError> {
        if self.expiries.blind() {
            return self.sweep_by_scan(now).await;
        }
        let mut deleted = 0;
        for id in self.expiries.due(now) {
            let Some(key) = self.expiries.key(&id).cloned() else {
                continue;
            };
            // Forgotten only once the delete is answered: after an error the next sweep tries
            // again.
            deleted += usize::from(self.delete(key, now).await?);
            self.expiries.forget(&id);
        }
        Ok(deleted)
    }

    /// [`Sweeper::sweep`] by scanning the whole table.
    async fn sweep_by_scan(&mut self, now: i64) -> Result<usize, ReplayError> {
        let mut deleted = 0;
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            // Keys and the TTL attribute only, filtered here rather than by a FilterExpression:
            // moto fails a `<` between a number and an attribute of another type.
            let mut request = self
                .client
                .scan()
                .table_name(&self.table)
                .projection_expression(self.projection())
                .expression_attribute_names("#ttl", &self.attribute);
            for (i, key) in self.key.iter().enumerate() {
                request = request.expression_attribute_names(format!("#k{i}"), key);
            }
            let page = request
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| RequestError::request("Scan", &self.table, &e))?;
            for item in page.items() {
                let due =
                    matches!(item.get(&self.attribute), Some(AttributeValue::N(at)) if expired(at, now));
                if due {
                    let key =
                        self.key.iter().filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone()))).collect();
                    deleted += usize::from(self.delete(key, now).await?);
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(deleted),
            }
        }
    }

    /// `#ttl, #k0, #k1…`.
    fn projection(&self) -> String {
        std::iter::once("#ttl".to_owned())
            .chain((0..self.key.len()).map(|i| format!("#k{i}")))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Deletes one item if it is still expired; whether it was.
    async fn delete(&mut self, key: HashMap<String, AttributeValue>, now: i64) -> Result<bool, ReplayError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .condition_expression("#ttl < :now")
            .expression_attribute_names("#ttl", &self.attribute)
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .customize()
            .mutate_request(|request| {
                request.headers_mut().insert(TTL_DELETE_HEADER, "service");
            })
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(aws_sdk_dynamodb::operation::delete_item::DeleteItemError::is_conditional_check_failed_exception) => {
                Ok(false)
            }
            Err(e) => Err(RequestError::request("DeleteItem", &self.table, &e).into()),
        }
    }
}

#[cfg(test)]
mod tests;
