//! How a function's records are replayed: the indexer's through the stream, the archiver's and
//! the aggregator's through their code again, and a combined function's by each of its
//! functions, on the records its own filter patterns pass.
//!
//! A range given up by `sidestream-combined` holds the records its one mapping delivered: some
//! for the indexer, some for the archiver, some for both. Lambda gave the whole range up because
//! one of them stopped; the other may have applied its part. Each function replays its part the
//! way it replays alone, and both ways are idempotent, so the part already applied changes
//! nothing. The range is done only when every function's part is.

use std::time::Duration;

use crate::verify::Mender;
use aws_lambda_events::event::dynamodb::EventRecord;
use aws_types::SdkConfig;
use formats::Indexes;
use stream_runtime::Replay;
use stream_runtime::Vars;
use stream_runtime::delivery::Invoker;
use stream_runtime::filter::Pattern;

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
    /// ordered by version).
    Rerun(Invoker),
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
        let invoker = sidestream_combined::Built::new(binary, binary, vars, sdk)
            .map_err(|e| FailureError::Config { function: binary.to_owned(), reason: e.to_string() })?
            .invoker(sidestream_combined::MetricsTo::Stdout);
        Way::Rerun(invoker)
    };
    Ok(Member { function: binary.to_owned(), patterns, way })
}

impl Way {
    async fn replay(&self, records: Vec<EventRecord>, timeout: Duration) -> Result<Replayed, FailureError> {
        match self {
            Way::Rerun(invoker) => Ok(rerun(records, invoker, timeout).await),
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
