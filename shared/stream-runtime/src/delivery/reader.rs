//! Reads a table's stream from the DynamoDB Streams API, every shard from its trim horizon, into
//! records shaped as Lambda delivers them.

use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodbstreams::Client;
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use serde_json::{Value, json};

use crate::delivery::RequestError;

/// The most records one poll reads from a shard, so that a backlog is delivered as it is read
/// (as Lambda does) rather than read whole first.
pub const POLL_LIMIT: usize = 2_000;

/// How many empty pages in a row one poll reads through before it takes a shard to have nothing
/// more for now. DynamoDB Streams may answer empty pages before the part of a shard that holds
/// records ("it might take multiple calls"); the local emulator answers at most two in a row
/// (`scripts/moto-server.py`), so three never take a shard with records for an idle one.
pub const EMPTY_PAGES_IN_A_ROW: usize = 3;

/// A stream being read: where each shard's reading has got to.
#[derive(Debug)]
pub struct StreamReader {
    client: Client,
    arn: String,
    shards: Vec<Shard>,
    /// Empty pages met so far.
    empty_pages: u64,
    /// Iterators replaced after they expired.
    renewed: u64,
}

#[derive(Debug)]
struct Shard {
    id: String,
    /// `None` once a closed shard has been read to its end.
    iterator: Option<String>,
    /// The sequence number of the last record read, where a new iterator starts after when the
    /// one held has expired (15 minutes after it was handed out).
    last: Option<String>,
}

impl StreamReader {
    /// A reader of the stream `arn` that has read nothing yet.
    pub fn new(client: Client, arn: impl Into<String>) -> StreamReader {
        StreamReader { client, arn: arn.into(), shards: Vec::new(), empty_pages: 0, renewed: 0 }
    }

    /// Iterators that had expired and were replaced by one after the last record read.
    pub fn renewed_iterators(&self) -> u64 {
        self.renewed
    }

    /// Empty pages the stream has answered so far (read through, up to
    /// [`EMPTY_PAGES_IN_A_ROW`] a poll).
    pub fn empty_pages(&self) -> u64 {
        self.empty_pages
    }

    /// The stream's ARN.
    pub fn arn(&self) -> &str {
        &self.arn
    }

    /// The shards read to their end: closed, and every record of theirs delivered. When every
    /// shard of a disabled stream has ended, the stream holds nothing more for this reader.
    pub fn ended_shards(&self) -> usize {
        self.shards.iter().filter(|s| s.iterator.is_none()).count()
    }

    /// The records written since the last poll, at most [`POLL_LIMIT`] a shard, with their shard
    /// ids, in stream order within each shard. Shards that appeared since are read from their
    /// start. A shard is read through empty pages, up to [`EMPTY_PAGES_IN_A_ROW`] in a row. An
    /// iterator that has expired since the last poll (DynamoDB Streams' last 15 minutes) is
    /// replaced by one after the last record read, once a poll.
    pub async fn poll(&mut self) -> Result<Vec<(String, EventRecord)>, RequestError> {
        self.discover().await?;
        let mut out = Vec::new();
        for shard in &mut self.shards {
            let start = out.len();
            let mut empty_in_a_row = 0;
            let mut renewed = false;
            while out.len() - start < POLL_LIMIT
                && let Some(iterator) = shard.iterator.take()
            {
                let page = match self.client.get_records().shard_iterator(&iterator).send().await {
                    Ok(page) => page,
                    Err(e)
                        if !renewed
                            && e.as_service_error()
                                .is_some_and(aws_sdk_dynamodbstreams::operation::get_records::GetRecordsError::is_expired_iterator_exception) =>
                    {
                        renewed = true;
                        self.renewed += 1;
                        shard.iterator = iterator_after(&self.client, &self.arn, &shard.id, shard.last.as_deref()).await?;
                        continue;
                    }
                    Err(e) => {
                        // The iterator is kept: the next poll reads the shard from where it is.
                        shard.iterator = Some(iterator);
                        return Err(RequestError::request("GetRecords", &self.arn, &e));
                    }
                };
                let empty = page.records().is_empty();
                for record in page.records() {
                    out.push((shard.id.clone(), event_record(record, &self.arn)?));
                }
                if let Some(last) =
                    page.records().last().and_then(|r| r.dynamodb()).and_then(|d| d.sequence_number())
                {
                    shard.last = Some(last.to_owned());
                }
                // None: the shard is closed and read to its end (a stream turned off, a shard
                // split); it is never read again.
                shard.iterator = page.next_shard_iterator;
                if empty {
                    self.empty_pages += 1;
                    empty_in_a_row += 1;
                    if empty_in_a_row >= EMPTY_PAGES_IN_A_ROW {
                        break;
                    }
                } else {
                    empty_in_a_row = 0;
                }
            }
        }
        Ok(out)
    }

    /// Where each shard of the stream ends now: its id and the sequence number of its last
    /// record, read by a reader of its own from the trim horizon (this one's place is kept).
    /// Shards without a record are left out. What a mapping created now with `StartingPosition:
    /// LATEST` will not read.
    pub async fn ends(&self) -> Result<Vec<(String, String)>, RequestError> {
        let mut reader = StreamReader::new(self.client.clone(), self.arn.clone());
        while !reader.poll().await?.is_empty() {}
        Ok(reader.shards.into_iter().filter_map(|s| Some((s.id, s.last?))).collect())
    }

    async fn discover(&mut self) -> Result<(), RequestError> {
        let described = self
            .client
            .describe_stream()
            .stream_arn(&self.arn)
            .send()
            .await
            .map_err(|e| RequestError::request("DescribeStream", &self.arn, &e))?;
        let shards = described
            .stream_description()
            .map(aws_sdk_dynamodbstreams::types::StreamDescription::shards)
            .unwrap_or_default();
        for shard in shards {
            let Some(id) = shard.shard_id() else { continue };
            if self.shards.iter().any(|s| s.id == id) {
                continue;
            }
            let iterator = iterator_after(&self.client, &self.arn, id, None).await?;
            self.shards.push(Shard { id: id.to_owned(), iterator, last: None });
        }
        Ok(())
    }
}

/// An iterator of `shard` just after the record `last`, or at its trim horizon.
async fn iterator_after(
    client: &Client,
    arn: &str,
    shard: &str,
    last: Option<&str>,
) -> Result<Option<String>, RequestError> {
    let request = client.get_shard_iterator().stream_arn(arn).shard_id(shard);
    let request = match last {
        Some(last) => {
            request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).sequence_number(last)
        }
        None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
    };
    Ok(request.send().await.map_err(|e| RequestError::request("GetShardIterator", arn, &e))?.shard_iterator)
}

/// A DynamoDB Streams record as Lambda's event source mapping delivers it.
pub fn event_record(record: &Record, arn: &str) -> Result<EventRecord, RequestError> {
    let change = record
        .dynamodb()
        .ok_or_else(|| RequestError::unexpected(arn, "a stream record without its change"))?;
    let image = |m: Option<
        &std::collections::HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>,
    >| { m.map(|m| serde_json::to_value(serde_dynamo::Item::from(m.clone()))).transpose() };
    let fail = |e: serde_json::Error| RequestError::unexpected(arn, format!("a stream record's image: {e}"));
    let mut dynamodb = json!({
        "Keys": image(change.keys()).map_err(fail)?,
        "SequenceNumber": change.sequence_number(),
        "SizeBytes": change.size_bytes(),
        "StreamViewType": change.stream_view_type().map(aws_sdk_dynamodbstreams::types::StreamViewType::as_str),
    });
    if let Some(created) = change.approximate_creation_date_time() {
        dynamodb["ApproximateCreationDateTime"] = json!(created.secs());
    }
    if let Some(old) = image(change.old_image()).map_err(fail)? {
        dynamodb["OldImage"] = old;
    }
    if let Some(new) = image(change.new_image()).map_err(fail)? {
        dynamodb["NewImage"] = new;
    }
    let mut event = json!({
        "eventID": record.event_id(),
        "eventName": record.event_name().map(aws_sdk_dynamodbstreams::types::OperationType::as_str),
        "eventVersion": record.event_version(),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.aws_region(),
        "eventSourceARN": arn,
        "dynamodb": dynamodb,
    });
    if let Some(identity) = record.user_identity() {
        event["userIdentity"] = json!({
            "type": identity.r#type(),
            "principalId": identity.principal_id(),
        });
    }
    serde_json::from_value::<EventRecord>(event)
        .map_err(|e| RequestError::unexpected(arn, format!("a stream record Lambda could not deliver: {e}")))
}

/// A record as JSON, the form `FilterCriteria` patterns match.
pub fn record_json(record: &EventRecord) -> Value {
    serde_json::to_value(record).unwrap_or(Value::Null)
}
