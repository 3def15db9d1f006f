//! What a million changes cost: a seeded workload through each function, billed by the meter
//! (`crate::meter`, scripts/meter.py) for DynamoDB and S3, and here for Lambda and CloudWatch
//! Logs, at the prices in scripts/prices.json.
//!
//! **The workload** is the issue tracker's, or a team's [`Shape`]: issues of three custom fields
//! each (`fields`), whose changes are 20% inserts (an entry a field), 70% modifies of one field's
//! value (one entry moved) or, for the share `include_edits`, of an `include`d attribute (every
//! entry of the item rewritten), and 10% removes by TTL (an entry a field taken out, and the item
//! archived), in one seeded history. **A month** at the shape's change rate scales the bill per
//! million, and adds the grid's pages at their rate, each billed the read units a page of the
//! index measured here takes ([`Monthly`]). The
//! indexer takes every change, in order and in any order (`MULTIKEY_ORDER`), each on a fresh
//! index table; the archiver the TTL removes only (its mapping's filter; Lambda bills no
//! invocation for what a filter drops); the aggregator a history of counter-shard increments of
//! the same length. Batches of the template's `BatchSize`, 100.
//!
//! **Lambda** is billed per invocation and per GB-second: each invocation's wall time in this
//! process, rounded up to the millisecond, at the template's `MemorySize`, timed on a second run of
//! the same batches against the proxy's sink (every call answered after the bench's fixed latency,
//! a stand-in for an AWS round trip): against moto, its one-at-a-time answers would be billed as
//! Lambda time. **CloudWatch Logs** by the bytes each invocation logs: its EMF line,
//! measured, and Lambda's own START, END and REPORT lines ([`PLATFORM_LOG_BYTES`]). The functions
//! log nothing else on a clean run. **Kinesis change data capture units** (with
//! `IssuesChangeSource=Kinesis`) by rule: one per KB of the larger image of each change.
//!
//! Every figure is per million source changes. `index_wru_per_plain_write` divides the index
//! table's billed write units by what the same item writes cost as single unconditional writes
//! (the meter's `wru_single`): the price of guarding them.
#![expect(
    clippy::cast_precision_loss,
    reason = "counts of one bench's requests, bytes and milliseconds, far below 2^52, made into bills"
)]

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::EventRecord;
use io_policy::Deadline;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stream_runtime::{Runtime, StreamFunction};

use crate::bench::events::{Batch, CounterSim};
use crate::bench::{Bench, BenchError, Ground};
use crate::meter::Metered;

/// Lambda's START, END and REPORT lines of one invocation in the JSON log format, about: the
/// shapes of `platform.start`, `platform.runtimeDone` and `platform.report` records with their
/// request id and metrics (Lambda developer guide, "Telemetry API", event schemas).
pub const PLATFORM_LOG_BYTES: u64 = 450;

/// Records per invocation: the template's `BatchSize`.
const BATCH: usize = 100;

/// One function's bill for the workload.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    /// The function (and for the indexer, its order mode).
    pub function: String,
    /// Source changes of the workload (what "per million" divides by).
    pub changes: u64,
    /// Records the function was invoked with.
    pub records: u64,
    /// Its invocations.
    pub invocations: u64,
    /// Per million source changes.
    pub per_million: Bill,
}

/// What a million source changes cost, by what AWS bills.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Bill {
    /// DynamoDB requests (stream reads, free to Lambda, left out).
    pub dynamodb_requests: f64,
    /// Write request units.
    pub wru: f64,
    /// Read request units.
    pub rru: f64,
    /// Lambda invocations.
    pub lambda_requests: f64,
    /// Lambda GB-seconds, arm64.
    pub gb_seconds: f64,
    /// S3 PUT, COPY, POST and LIST requests.
    pub s3_put_requests: f64,
    /// S3 GET and other requests.
    pub s3_get_requests: f64,
    /// CloudWatch Logs bytes ingested.
    pub log_bytes: f64,
    /// Kinesis change data capture units, had the changes come through Kinesis (not in `usd`).
    pub kinesis_cdc_units: f64,
    /// Step Functions state transitions (Standard workflows: the operations' jobs).
    pub state_transitions: f64,
    /// All of it in US dollars, Kinesis aside.
    pub usd: f64,
}

impl Bill {
    fn add(&mut self, o: &Bill) {
        self.dynamodb_requests += o.dynamodb_requests;
        self.wru += o.wru;
        self.rru += o.rru;
        self.lambda_requests += o.lambda_requests;
        self.gb_seconds += o.gb_seconds;
        self.s3_put_requests += o.s3_put_requests;
        self.s3_get_requests += o.s3_get_requests;
        self.log_bytes += o.log_bytes;
        self.kinesis_cdc_units += o.kinesis_cdc_units;
        self.state_transitions += o.state_transitions;
        self.usd += o.usd;
    }

    fn priced(mut self, prices: &Prices) -> Bill {
        self.usd = self.wru * prices.get("dynamodb_write_request_unit")
            + self.rru * prices.get("dynamodb_read_request_unit")
            + self.lambda_requests * prices.get("lambda_request")
            + self.gb_seconds * prices.get("lambda_arm64_gb_second")
            + self.s3_put_requests * prices.get("s3_put_copy_post_list")
            + self.s3_get_requests * prices.get("s3_get_and_other")
            + self.log_bytes / 1e9 * prices.get("cloudwatch_logs_ingested_gb")
            + self.state_transitions * prices.get("step_functions_state_transition");
        self
    }
}

/// The whole bill.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Source changes in the workload.
    pub changes: u64,
    /// Each function (the indexer once per order mode).
    pub functions: Vec<Row>,
    /// The stack as deployed by default: the in-order indexer, the archiver and the aggregator.
    pub total: Bill,
    /// The index table's billed write units over the same writes as single unconditional ones,
    /// in order (`stream`) and in any order (`any`).
    pub index_wru_per_plain_write: IndexRatio,
    /// What tombstones add to the read units of a `Query` that reads through them: their bytes
    /// over the live entries' bytes in the index table at the end of the in-order run, every
    /// tombstone the workload left still there (none has expired yet: the worst case).
    pub tombstone_read_share: f64,
    /// Tombstones left by the workload, per million changes.
    pub tombstones: f64,
    /// Where the prices come from.
    pub prices: String,
    /// The workload's shape and rates.
    pub shape: Shape,
    /// The month at the shape's rates.
    pub monthly: Monthly,
}

impl Report {
    /// Adds a function of the stack as deployed by default: its row, and its bill to the total.
    fn add(&mut self, row: Row) {
        self.total.add(&row.per_million);
        self.functions.push(row);
    }
}

/// The workload's shape, as a team's table has it, and the rates its month is billed at
/// (`sidestream-local bench --only cost --fields … --include-edits … --changes-per-second …
/// --grid-pages-per-second …`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Shape {
    /// Custom fields per issue: an insert or a remove writes one entry each.
    pub fields: usize,
    /// The share of modifies that edit an `include`d attribute (`state`) rather than a field:
    /// each rewrites every entry of its item.
    pub include_edits: f64,
    /// Source changes a second, for [`Monthly`].
    pub changes_per_second: f64,
    /// Grid pages read a second, for [`Monthly`].
    pub grid_pages_per_second: f64,
}

impl Default for Shape {
    /// The issue tracker's: three fields, no edit of an included attribute, 100 changes and 10
    /// grid pages a second.
    fn default() -> Shape {
        Shape { fields: 3, include_edits: 0.0, changes_per_second: 100.0, grid_pages_per_second: 10.0 }
    }
}

/// Seconds in a month of 730 hours, as AWS's pricing pages count one.
pub const MONTH_SECONDS: f64 = 730.0 * 3600.0;

/// Rows of a grid page read for [`Monthly::rru_per_page`]: the grid's default `--limit`.
const PAGE_ROWS: i32 = 20;

/// What the stack costs a month at the shape's rates, its grid's reads included.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Monthly {
    /// Source changes a month.
    pub changes: f64,
    /// The stack's bill for them (the per-million total, scaled).
    pub stack_usd: f64,
    /// Read units of one grid page in the index phase, measured: a `Query` of [`PAGE_ROWS`]
    /// entries of one partition, eventually consistent, their `include`d attributes enough (no
    /// base item read).
    pub rru_per_page: f64,
    /// Grid pages a month.
    pub grid_pages: f64,
    /// Their read units' bill.
    pub grid_usd: f64,
    /// The whole month.
    pub usd: f64,
}

/// `index_wru_per_plain_write` in both order modes.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct IndexRatio {
    /// `MULTIKEY_ORDER=stream`.
    pub stream: f64,
    /// `MULTIKEY_ORDER=any`.
    pub any: f64,
}

/// scripts/prices.json.
#[derive(Debug, Clone, Deserialize)]
struct Prices {
    collected: String,
    prices: std::collections::BTreeMap<String, Price>,
}

#[derive(Debug, Clone, Deserialize)]
struct Price {
    usd: f64,
}

impl Prices {
    fn load() -> Result<Prices, BenchError> {
        serde_json::from_str(include_str!("../../../../scripts/prices.json"))
            .map_err(|e| BenchError::Io(format!("scripts/prices.json: {e}")))
    }

    fn get(&self, name: &str) -> f64 {
        self.prices.get(name).map_or(0.0, |p| p.usd)
    }
}

/// What a whole run (the chaos run, the demo) was billed for DynamoDB, S3 and Lambda's
/// requests, by the meter, and for its jobs' Step Functions state transitions, and per million of
/// its stream records. Lambda's duration is not counted: faults (timeouts, kills, held writes)
/// make a run's wall time no measure of it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunBill {
    /// Stream records the run's mappings read.
    pub records: u64,
    /// The run's whole bill.
    pub total: Bill,
    /// Per million stream records.
    pub per_million_records: Bill,
}

impl RunBill {
    /// Bills `metered` (the meter's totals over the run), `invocations` and `transitions` (its
    /// jobs' executions', [`crate::states::Execution`]), for `records` stream records.
    pub fn of(
        metered: &Metered,
        invocations: u64,
        transitions: u64,
        records: u64,
    ) -> Result<RunBill, BenchError> {
        let prices = Prices::load()?;
        let total = Bill {
            dynamodb_requests: metered.dynamodb_requests() as f64,
            wru: metered.wru(),
            rru: metered.rru(),
            lambda_requests: invocations as f64,
            s3_put_requests: metered.s3("put_copy_post_list") as f64,
            s3_get_requests: metered.s3("get_and_other") as f64,
            log_bytes: (invocations * (PLATFORM_LOG_BYTES + EMF_LINE_BYTES)) as f64,
            state_transitions: transitions as f64,
            ..Bill::default()
        }
        .priced(&prices);
        let scale = 1e6 / records.max(1) as f64;
        let per_million_records = Bill {
            dynamodb_requests: total.dynamodb_requests * scale,
            wru: total.wru * scale,
            rru: total.rru * scale,
            lambda_requests: total.lambda_requests * scale,
            s3_put_requests: total.s3_put_requests * scale,
            s3_get_requests: total.s3_get_requests * scale,
            log_bytes: total.log_bytes * scale,
            state_transitions: total.state_transitions * scale,
            ..Bill::default()
        }
        .priced(&prices);
        Ok(RunBill { records, total, per_million_records })
    }

    /// One line for people.
    pub fn line(&self) -> String {
        let t = &self.total;
        format!(
            "{:.0} DynamoDB requests, {:.0} WRU, {:.0} RRU, {:.0} S3 PUT/LIST and {:.0} GET requests, {:.0} invocations, \
             {:.0} state transitions: ${:.4} for {} stream records, ${:.2} per million (Lambda duration aside; docs/cost.md)",
            t.dynamodb_requests,
            t.wru,
            t.rru,
            t.s3_put_requests,
            t.s3_get_requests,
            t.lambda_requests,
            t.state_transitions,
            t.usd,
            self.records,
            self.per_million_records.usd
        )
    }
}

/// About what one invocation's EMF line weighs (the cost bench measures it: 1,030 bytes on
/// 2026-11-29).
const EMF_LINE_BYTES: u64 = 1_030;

/// Bills the workload of `changes` source changes of `shape` through each function, and a month
/// at its rates.
pub async fn run(ground: Ground<'_>, changes: usize, shape: Shape) -> Result<Report, BenchError> {
    let Ground { sdk, stack, spec, options, progress, .. } = ground;
    let prices = Prices::load()?;
    let bench = ground.bench(spec).await?;
    let sink = ground.bench(&format!("{spec},sink=1")).await?;
    let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
    let workload = Workload::new(0xC057, shape).take(changes);
    let n = workload.len() as u64;
    let mut report = Report { changes: n, prices: prices.collected.clone(), shape, ..Report::default() };
    let mut rru_per_page = 0.0;

    for order in ["stream", "any"] {
        let table = format!("{}-cost-{order}", options.stack);
        ground.index_table(table.clone()).await?;
        let env = crate::environment(stack.function("multikey-indexer")?);
        let indexes = env.get("MULTIKEY_INDEXES").cloned().unwrap_or_default();
        let indexes = indexes.replace(&stack.table("IndexTable")?.name, &table);
        let overrides = [("MULTIKEY_INDEXES", indexes), ("MULTIKEY_ORDER", order.to_owned())];
        let (mut row, metered) =
            bill::<multikey_indexer::Indexer>(ground, (&bench, &sink), &overrides, &workload, n, &prices)
                .await?;
        row.function = format!("multikey-indexer ({order})");
        row.per_million.kinesis_cdc_units = per_million(cdc_units(&workload), n);
        let units = metered.dynamodb.tables.get(&table).copied().unwrap_or_default();
        let ratio = units.wru / units.wru_single.max(f64::EPSILON);
        if order == "stream" {
            report.index_wru_per_plain_write.stream = ratio;
            report.total.add(&row.per_million);
            let items = crate::scan(&dynamodb, &table).await.map_err(|e| BenchError::Io(e.to_string()))?;
            let (mut live, mut dead, mut tombstones) = (0, 0, 0);
            for item in &items {
                if item.get(formats::tombstone::EXPIRES_ATTRIBUTE).is_some() {
                    dead += item_bytes(item);
                    tombstones += 1;
                } else {
                    live += item_bytes(item);
                }
            }
            report.tombstone_read_share = dead as f64 / live.max(1) as f64;
            report.tombstones = per_million(f64::from(tombstones), n);
            rru_per_page = page_reads(ground, &dynamodb, &table, shape.fields).await?;
        } else {
            report.index_wru_per_plain_write.any = ratio;
        }
        report.functions.push(row);
        progress.done.fetch_add(1, Ordering::Relaxed);
    }

    let removes: Vec<EventRecord> = workload.iter().filter(|r| r.event_name == "REMOVE").cloned().collect();
    let (row, _) = bill::<ttl_archiver::Archiver>(ground, (&bench, &sink), &[], &removes, n, &prices).await?;
    report.add(row);
    progress.done.fetch_add(1, Ordering::Relaxed);

    let sharding = formats::counter::Sharding::new(10).map_err(|e| BenchError::Io(e.to_string()))?;
    let mut counters = CounterSim::new("cost", 200, sharding, 0xC057);
    let increments: Vec<EventRecord> =
        counters.changes(workload.len()).into_iter().map(|c| c.record).collect();
    let (row, _) =
        bill::<counter_aggregator::Aggregator>(ground, (&bench, &sink), &[], &increments, n, &prices).await?;
    report.add(row);
    progress.done.fetch_add(1, Ordering::Relaxed);

    report.total = report.total.priced(&prices);
    let changes = shape.changes_per_second * MONTH_SECONDS;
    let grid_pages = shape.grid_pages_per_second * MONTH_SECONDS;
    let grid_usd = grid_pages * rru_per_page * prices.get("dynamodb_read_request_unit");
    let stack_usd = report.total.usd * changes / 1e6;
    report.monthly =
        Monthly { changes, stack_usd, rru_per_page, grid_pages, grid_usd, usd: stack_usd + grid_usd };
    Ok(report)
}

/// The read units of a grid page in the index phase, by the meter: the mean of a `Query` of
/// [`PAGE_ROWS`] entries, eventually consistent, over each field of a few projects of `table`.
async fn page_reads(
    ground: Ground<'_>,
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    fields: usize,
) -> Result<f64, BenchError> {
    let before = crate::meter::read(ground.sdk).await?;
    let mut pages = 0_u32;
    for project in 0..4 {
        for field in 0..fields {
            dynamodb
                .query()
                .table_name(table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_values(
                    ":pk",
                    aws_sdk_dynamodb::types::AttributeValue::S(format!("p{project}#f{field}")),
                )
                .limit(PAGE_ROWS)
                .send()
                .await
                .map_err(|e| BenchError::Io(format!("Query {table}: {e}")))?;
            pages += 1;
        }
    }
    let metered = crate::meter::read(ground.sdk).await?.since(&before).only(&ground.options.stack);
    Ok(metered.rru() / f64::from(pages.max(1)))
}

/// Invokes the function `F` (its configuration with `overrides`) on `records` in batches, as a
/// mapping would, and bills it per million of `changes`: the meter's totals over the run through
/// `bench` against moto (the stack's tables and buckets), and the invocations' own time through
/// `sink` (the proxy answering every call itself after the latency: an AWS round trip, where
/// moto's own serialized answers would be billed as Lambda time), at the function's
/// `MemorySize`, and logs.
async fn bill<F: StreamFunction>(
    ground: Ground<'_>,
    (bench, sink): (&Bench<'_>, &Bench<'_>),
    overrides: &[(&str, String)],
    records: &[EventRecord],
    changes: u64,
    prices: &Prices,
) -> Result<(Row, Metered), BenchError> {
    let on_moto = bench.runtime::<F>(F::NAME, overrides)?;
    let on_sink = sink.runtime::<F>(F::NAME, overrides)?;
    let (sdk, stack) = (ground.sdk, ground.options.stack.as_str());
    let memory_mb = ground.stack.function(F::NAME)?.memory_size;
    let before = crate::meter::read(sdk).await?;
    invoke_all(&on_moto, records).await?;
    let metered = crate::meter::read(sdk).await?.since(&before).only(stack);
    let (billed_ms, log_bytes, invocations) = invoke_all(&on_sink, records).await?;
    let f = |x: f64| x * 1e6 / changes.max(1) as f64;
    let gb_seconds = billed_ms as f64 / 1000.0 * memory_mb as f64 / 1024.0;
    let bill = Bill {
        dynamodb_requests: f(metered.dynamodb_requests() as f64),
        wru: f(metered.wru()),
        rru: f(metered.rru()),
        lambda_requests: f(invocations as f64),
        gb_seconds: f(gb_seconds),
        s3_put_requests: f(metered.s3("put_copy_post_list") as f64),
        s3_get_requests: f(metered.s3("get_and_other") as f64),
        log_bytes: f(log_bytes as f64),
        // A stream function runs no state machine.
        kinesis_cdc_units: 0.0,
        state_transitions: 0.0,
        usd: 0.0,
    }
    .priced(prices);
    let row = Row {
        function: F::NAME.to_owned(),
        changes,
        records: records.len() as u64,
        invocations,
        per_million: bill,
    };
    Ok((row, metered))
}

/// Invokes `runtime` on `records` in batches of [`BATCH`]: the milliseconds Lambda would bill
/// (each invocation's wall time rounded up), the bytes it would log, and the invocations.
async fn invoke_all<F: StreamFunction>(
    runtime: &Runtime<F>,
    records: &[EventRecord],
) -> Result<(u64, u64, u64), BenchError> {
    let (mut billed_ms, mut log_bytes, mut invocations) = (0_u64, 0_u64, 0_u64);
    for chunk in records.chunks(BATCH) {
        let (_, bytes) = Batch::Records(BATCH).encode(chunk.to_vec());
        let text = String::from_utf8_lossy(&bytes);
        let started = Instant::now();
        let (response, metrics) = runtime
            .handle_json(&text, Deadline::after(Duration::from_secs(900)))
            .await
            .map_err(|e| BenchError::Invocation { function: F::NAME, message: e.to_string() })?;
        let wall = started.elapsed();
        let response =
            response.map_err(|e| BenchError::Invocation { function: F::NAME, message: e.to_string() })?;
        if !response.batch_item_failures.is_empty() {
            return Err(BenchError::Invocation {
                function: F::NAME,
                message: "stopped at a checkpoint without faults injected".to_owned(),
            });
        }
        invocations += 1;
        // Lambda bills duration rounded up to the millisecond.
        billed_ms += u64::try_from(wall.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
        log_bytes += metrics.render(0).len() as u64 + 1 + PLATFORM_LOG_BYTES;
    }
    Ok((billed_ms, log_bytes, invocations))
}

fn per_million(x: f64, changes: u64) -> f64 {
    x * 1e6 / changes.max(1) as f64
}

/// Change data capture units of the changes, had they gone to Kinesis: one per KB of the larger
/// image, rounded up (DynamoDB's pricing page).
fn cdc_units(records: &[EventRecord]) -> f64 {
    records
        .iter()
        .map(|r| {
            let size = |image: &serde_dynamo::Item| serde_json::to_value(image).map_or(0, |v| item_bytes(&v));
            let larger = size(&r.change.old_image).max(size(&r.change.new_image));
            larger.div_ceil(1024).max(1) as f64
        })
        .sum()
}

/// An item's size in DynamoDB JSON, by DynamoDB's rules (as `stream_runtime::limits` measures).
pub(crate) fn item_bytes(item: &serde_json::Value) -> usize {
    let Some(map) = item.as_object() else { return 0 };
    map.iter().map(|(name, value)| name.len() + value_bytes(value)).sum()
}

fn value_bytes(value: &serde_json::Value) -> usize {
    let Some((kind, v)) = value.as_object().and_then(|o| o.iter().next()) else { return 0 };
    match (kind.as_str(), v) {
        ("S", serde_json::Value::String(s)) => s.len(),
        ("N", serde_json::Value::String(n)) => stream_runtime::limits::number_size(n),
        ("L", serde_json::Value::Array(list)) => 3 + list.iter().map(|e| 1 + value_bytes(e)).sum::<usize>(),
        ("M", serde_json::Value::Object(map)) => {
            3 + map.iter().map(|(k, e)| 1 + k.len() + value_bytes(e)).sum::<usize>()
        }
        ("BOOL" | "NULL", _) => 1,
        (_, other) => other.to_string().len(),
    }
}

/// The seeded history of issue changes (module documentation), of a [`Shape`].
struct Workload {
    rng: fastrand::Rng,
    shape: Shape,
    /// The live issues: id, custom field values, and the number of their `state`'s edits.
    live: Vec<(u64, Vec<u32>, u32)>,
    next_id: u64,
    sequence: u128,
}

impl Workload {
    fn new(seed: u64, shape: Shape) -> Workload {
        Workload { rng: fastrand::Rng::with_seed(seed), shape, live: Vec::new(), next_id: 0, sequence: 0 }
    }

    /// The next `n` changes.
    fn take(mut self, n: usize) -> Vec<EventRecord> {
        (0..n).map(|_| self.change()).collect()
    }

    fn change(&mut self) -> EventRecord {
        let roll = self.rng.u32(..100);
        self.sequence += 1;
        if self.live.is_empty() || roll < 20 {
            let fields: Vec<u32> = (0..self.shape.fields).map(|_| self.rng.u32(..1_000_000)).collect();
            let id = self.next_id;
            self.next_id += 1;
            self.live.push((id, fields.clone(), 0));
            return self.record("INSERT", id, None, Some((&fields, 0)));
        }
        let at = self.rng.usize(..self.live.len());
        if roll < 90 {
            let (id, old, state) = self.live[at].clone();
            let mut new = old.clone();
            let mut new_state = state;
            if self.rng.f64() < self.shape.include_edits {
                // An edit of an included attribute: every entry of the item carries it.
                new_state += 1;
            } else {
                let field = self.rng.usize(..new.len());
                new[field] = self.rng.u32(..1_000_000);
            }
            self.live[at] = (id, new.clone(), new_state);
            return self.record("MODIFY", id, Some((&old, state)), Some((&new, new_state)));
        }
        let (id, old, state) = self.live.swap_remove(at);
        self.record("REMOVE", id, Some((&old, state)), None)
    }

    fn record(
        &self,
        name: &str,
        id: u64,
        old: Option<(&[u32], u32)>,
        new: Option<(&[u32], u32)>,
    ) -> EventRecord {
        let key = format!("issue-{id:08}");
        let image = |(fields, state): (&[u32], u32)| {
            let custom: serde_json::Map<String, serde_json::Value> = fields
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("f{i}"), json!({"N": v.to_string()})))
                .collect();
            json!({
                "id": {"S": key}, "project": {"S": format!("p{}", id % 20)}, "num": {"N": id.to_string()},
                "name": {"S": format!("Issue {id}: a title of a few words")},
                "state": {"S": if state == 0 { "open".to_owned() } else { format!("state {state}") }},
                "custom_fields": {"M": custom},
            })
        };
        let mut dynamodb = json!({
            "ApproximateCreationDateTime": 1_795_168_800 + u64::try_from(self.sequence).unwrap_or(0) / 100,
            "Keys": {"id": {"S": key}},
            "SequenceNumber": (10_u128.pow(20) + self.sequence).to_string(),
            "SizeBytes": 300,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        });
        if let Some(old) = old {
            dynamodb["OldImage"] = image(old);
        }
        if let Some(new) = new {
            dynamodb["NewImage"] = image(new);
        }
        let mut record = crate::bench::events::stream_record(self.sequence, name, "issues", dynamodb);
        if name == "REMOVE" {
            // Removed by TTL, as the archiver's mapping filters for.
            record["userIdentity"] = json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
        }
        serde_json::from_value(record).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_has_the_mix_it_states() {
        let records = Workload::new(1, Shape::default()).take(20_000);
        let count = |name: &str| records.iter().filter(|r| r.event_name == name).count() as f64 / 20_000.0;
        let (inserts, modifies, removes) = (count("INSERT"), count("MODIFY"), count("REMOVE"));
        assert!(
            (inserts - 0.2).abs() < 0.02 && (modifies - 0.7).abs() < 0.02 && (removes - 0.1).abs() < 0.02,
            "{inserts} {modifies} {removes}"
        );
        // A modify moves exactly one entry.
        for r in records.iter().filter(|r| r.event_name == "MODIFY") {
            let fields = |image: &serde_dynamo::Item| {
                serde_json::to_value(image).unwrap()["custom_fields"]["M"].clone()
            };
            let (old, new) = (fields(&r.change.old_image), fields(&r.change.new_image));
            let moved = (0..3).filter(|i| old[format!("f{i}")] != new[format!("f{i}")]).count();
            assert!(moved <= 1, "{old} {new}");
        }
    }

    /// A shape's fields are each issue's, and its share of modifies edits `state` (an included
    /// attribute) and no field.
    #[test]
    fn the_workload_takes_the_shape_given() {
        let shape = Shape { fields: 8, include_edits: 0.5, ..Shape::default() };
        let records = Workload::new(2, shape).take(10_000);
        let image = |image: &serde_dynamo::Item| serde_json::to_value(image).unwrap();
        let inserted = records.iter().find(|r| r.event_name == "INSERT").unwrap();
        assert_eq!(image(&inserted.change.new_image)["custom_fields"]["M"].as_object().unwrap().len(), 8);
        let modifies: Vec<_> = records.iter().filter(|r| r.event_name == "MODIFY").collect();
        let state_edits = modifies
            .iter()
            .filter(|r| image(&r.change.old_image)["state"] != image(&r.change.new_image)["state"])
            .count() as f64
            / modifies.len() as f64;
        assert!((state_edits - 0.5).abs() < 0.03, "{state_edits}");
    }

    #[test]
    fn items_are_measured_by_dynamodbs_rules() {
        let item = json!({"id": {"S": "abc"}, "n": {"N": "123.40"}, "m": {"M": {"k": {"BOOL": true}}}, "l": {"L": [{"S": "x"}]}});
        // id 2+3; n 1+(4 digits: 2+1); m 1+(3+1+1+1); l 1+(3+1+1).
        assert_eq!(item_bytes(&item), 5 + 4 + 7 + 6);
    }
}
