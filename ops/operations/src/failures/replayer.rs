//! How a function's records are replayed: the indexer's through the stream, the archiver's and
//! the aggregator's through their code again, and a combined function's by each of its
//! functions, on the records its own filter patterns pass.
//!
//! A range given up by `sidestream-combined` holds the records its one mapping delivered: some
//! for the indexer, some for the archiver, some for both. Lambda gave the whole range up because
//! one of them stopped; the other may have applied its part. Each function replays its part the
//! way it replays alone, and both ways are idempotent, so the part already applied changes
//! nothing. The range is done only when every function's part is.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::verify::Mender;
use aws_lambda_events::event::dynamodb::EventRecord;
use aws_types::SdkConfig;
use formats::Indexes;
use stream_runtime::Replay;
use stream_runtime::Vars;
use stream_runtime::delivery::Invoker;
use stream_runtime::filter::Pattern;
use stream_runtime::{Metric, Metrics};

use crate::failures::{FailureError, Replayed, rerun};

/// How one function's records are replayed.
enum Way {
    /// Through the stream ([`Replay::ThroughTheStream`], the indexer): items touched, deletes
    /// conditioned on newer writes.
    ThroughTheStream {
        /// The index definitions (`MULTIKEY_INDEXES`).
        indexes: Indexes,
        /// Writes to the base and index tables.
        client: aws_sdk_dynamodb::Client,
        /// Names this replay in the touch marker.
        run_id: String,
    },
    /// Through the function's code again ([`Replay::Rerun`], the archiver and the aggregator:
    /// ordered by version), counting the records it parks.
    Rerun {
        /// The function, in this process.
        invoker: Invoker,
        /// Records it has parked in this process so far (its `ParkedRecords`).
        parked: Arc<AtomicU64>,
        /// The aggregator's counter tables' partition key and a client to read their totals:
        /// a record whose shard the total holds a newer state of is not run again.
        counters: Option<(String, aws_sdk_dynamodb::Client)>,
    },
}

/// One function of a replay, with the patterns that pick its records (none: every record).
struct Member {
    function: String,
    patterns: Vec<Pattern>,
    way: Way,
}

/// Replays the records of one deployed function: a stream function, or a combined one.
pub struct Replayer {
    members: Vec<Member>,
    combined: bool,
}

impl std::fmt::Debug for Replayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let members: Vec<_> = self.members.iter().map(|m| (m.function.as_str(), m.patterns.len())).collect();
        f.debug_struct("Replayer")
            .field("members (function, patterns)", &members)
            .field("combined", &self.combined)
            .finish()
    }
}

impl Replayer {
    /// The replayer of the function built from `binary`, configured from `vars` as that function
    /// reads its environment on Lambda; its clients from `sdk`. For `sidestream-combined`, each
    /// function `COMBINED_FUNCTIONS` names, picking its records by its `COMBINED_FILTERS`
    /// patterns, as the combined function does.
    pub fn for_function(binary: &str, vars: &Vars<'_>, sdk: &SdkConfig) -> Result<Replayer, FailureError> {
        if binary != sidestream_combined::COMBINED_BINARY {
            return Ok(Replayer { members: vec![member(binary, Vec::new(), vars, sdk)?], combined: false });
        }
        let config = |e: stream_runtime::ConfigError| FailureError::Config {
            function: binary.to_owned(),
            reason: e.to_string(),
        };
        let filters = vars.optional(stream_runtime::combined::FILTERS_VAR);
        let mut members = Vec::new();
        for function in sidestream_combined::combined_functions(vars).map_err(config)? {
            let patterns =
                stream_runtime::combined::patterns_for(filters.as_deref(), function.name).map_err(config)?;
            members.push(member(function.name, patterns, vars, sdk)?);
        }
        Ok(Replayer { members, combined: true })
    }

    /// The functions it replays for, in order.
    pub fn functions(&self) -> Vec<&str> {
        self.members.iter().map(|m| m.function.as_str()).collect()
    }

    /// Replays `records` (one failure's, in stream order), each invocation bounded by `timeout`.
    /// A combined function's answer has each function's part.
    pub async fn replay(
        &self,
        records: Vec<EventRecord>,
        timeout: Duration,
    ) -> Result<Replayed, FailureError> {
        let mut parts = Vec::with_capacity(self.members.len());
        for member in &self.members {
            let mine: Vec<EventRecord> = stream_runtime::combined::select(&records, &member.patterns)
                .into_iter()
                .map(|i| records[i].clone())
                .collect();
            let replayed = if mine.is_empty() {
                Replayed::Applied { records: 0 }
            } else {
                member.way.replay(mine, timeout).await?
            };
            parts.push(crate::failures::Part { function: member.function.clone(), replayed });
        }
        if !self.combined && parts.len() == 1 {
            return Ok(parts.swap_remove(0).replayed);
        }
        Ok(Replayed::Combined { functions: parts })
    }
}

/// `records` without those of a counter shard whose total already holds a newer state of the
/// shard (a later write, applied since): run again, they would change nothing, as the total keeps
/// each shard's newest state; and one the aggregator parked for its content (a count that is not
/// an integer) is mended by writing the shard again, which supersedes it. With each left out,
/// the newer state's sequence number.
async fn not_superseded(
    records: Vec<EventRecord>,
    partition_key: &str,
    client: &aws_sdk_dynamodb::Client,
    timeout: Duration,
) -> Result<(Vec<EventRecord>, Vec<String>), FailureError> {
    let budget = io_policy::Policy::default().within(timeout);
    let (mut kept, mut superseded) = (Vec::new(), Vec::new());
    for record in records {
        let Some(table) = crate::verify::mend::table_of(&record) else {
            kept.push(record);
            continue;
        };
        let aggregator = counter_aggregator::Aggregator::new(table, partition_key, client.clone());
        let newer = aggregator.superseded(&record, &budget).await.map_err(|failure| {
            FailureError::Request(io_policy::RequestFailed::new("GetItem", table, failure))
        })?;
        match newer {
            Some(sequence) => superseded.push(format!(
                "{} by {sequence}",
                record.change.sequence_number.as_deref().unwrap_or("a record")
            )),
            None => kept.push(record),
        }
    }
    Ok((kept, superseded))
}

/// Where a rerun function's metrics go: its `ParkedRecords` added to `parked`, and its EMF line to
/// stderr, so that a command's own output (stdout) holds nothing else.
fn counting_parked(parked: Arc<AtomicU64>) -> Arc<dyn Fn(&Metrics) + Send + Sync> {
    Arc::new(move |metrics: &Metrics| {
        parked.fetch_add(metrics.get(Metric::ParkedRecords), Ordering::Relaxed);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        // Best effort, as a log line is: a closed stderr loses the line, never the replay.
        let _ =
            writeln!(std::io::stderr().lock(), "{}", metrics.render(u64::try_from(now).unwrap_or(u64::MAX)));
    })
}

/// The function built from `binary`, with its patterns.
fn member(
    binary: &str,
    patterns: Vec<Pattern>,
    vars: &Vars<'_>,
    sdk: &SdkConfig,
) -> Result<Member, FailureError> {
    let replay = sidestream_combined::Function::named(binary).map(|f| f.replay);
    let way = if replay == Some(Replay::ThroughTheStream) {
        Way::ThroughTheStream {
            indexes: Indexes::from_vars(vars)
                .map_err(|e| FailureError::Config { function: binary.to_owned(), reason: e.to_string() })?,
            client: aws_sdk_dynamodb::Client::new(sdk),
            run_id: crate::verify::run_id("replay"),
        }
    } else {
        let parked = Arc::new(AtomicU64::new(0));
        let invoker = sidestream_combined::Built::new(binary, binary, vars, sdk)
            .map_err(|e| FailureError::Config { function: binary.to_owned(), reason: e.to_string() })?
            .invoker(sidestream_combined::MetricsTo::Each(counting_parked(Arc::clone(&parked))));
        let counters = (binary == <counter_aggregator::Aggregator as stream_runtime::StreamFunction>::NAME)
            .then(|| (counter_aggregator::config::partition_key(vars), aws_sdk_dynamodb::Client::new(sdk)));
        Way::Rerun { invoker, parked, counters }
    };
    Ok(Member { function: binary.to_owned(), patterns, way })
}

impl Way {
    async fn replay(&self, records: Vec<EventRecord>, timeout: Duration) -> Result<Replayed, FailureError> {
        match self {
            Way::Rerun { invoker, parked, counters } => {
                let (records, superseded) = match counters {
                    Some((partition_key, client)) => {
                        not_superseded(records, partition_key, client, timeout).await?
                    }
                    None => (records, Vec::new()),
                };
                if records.is_empty() {
                    return Ok(Replayed::Superseded { records: superseded.len(), by: superseded.join(", ") });
                }
                let before = parked.load(Ordering::Relaxed);
                let outcome = rerun(records, invoker, timeout).await;
                let again = parked.load(Ordering::Relaxed).saturating_sub(before);
                Ok(match outcome {
                    // Parking is how a function goes past a record it can never apply: the
                    // batch "succeeds", but the record is no more applied than before.
                    Replayed::Applied { records } if again > 0 => Replayed::ParkedAgain {
                        records,
                        parked: again,
                        reason: format!(
                            "the function parked {again} of the {records} records again (a \
                             record-permanent failure: their content still cannot succeed); its \
                             log, on stderr, says why"
                        ),
                    },
                    other => other,
                })
            }
            Way::ThroughTheStream { indexes, client, run_id } => {
                let table = records
                    .first()
                    .and_then(crate::verify::mend::table_of)
                    .ok_or_else(|| FailureError::Format {
                        at: "the replayed records".to_owned(),
                        reason: "a record without the eventSourceARN of its table".to_owned(),
                    })?
                    .to_owned();
                let through_stream = Mender::new(client.clone(), indexes.clone(), &table, run_id);
                let mended = through_stream.records(&records).await?;
                Ok(Replayed::Mended {
                    records: records.len(),
                    touched: mended.touched,
                    gone: mended.gone,
                    deleted: mended.deleted,
                    newer: mended.newer,
                })
            }
        }
    }
}
