//! The command line's flags: every subcommand and option, parsed by clap in this one layer, and
//! resolved into library objects by `main.rs`.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use sidestream_combined::{COMBINED_BINARY, FUNCTIONS};

use crate::key::KeyOptions;

/// Sidestream: DynamoDB stream processing toolkit.
#[derive(Debug, Parser)]
#[command(name = "sidestream", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Order-preserving DynamoDB keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Runs a function's planning step on an event file, without touching AWS.
    ///
    /// Configuration comes from the same environment variables as the Lambda (multikey-indexer:
    /// `MULTIKEY_INDEXES`; ttl-archiver: `ARCHIVE_PREFIX`, `ARCHIVE_GZIP_LEVEL`;
    /// counter-aggregator: `COUNTER_PARTITION_KEY`). Prints one JSON object per planned write
    /// (multikey-indexer), per archive object (ttl-archiver) or per counter total to update
    /// (counter-aggregator); what is left out and the record planning stopped at go to stderr,
    /// and a stop exits with status 1.
    Plan {
        /// The function whose plan to run.
        #[arg(value_parser = stream_functions(false))]
        function: String,
        /// A DynamoDB stream event (`{"Records":[…]}`), as Lambda delivers it.
        #[arg(long, value_name = "FILE")]
        event: PathBuf,
        /// ttl-archiver: also write the archive objects under DIR, at their keys.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// The ttl-archiver's archives: read them, restore them.
    ///
    /// S3 and DynamoDB are reached with the usual AWS configuration (`AWS_PROFILE`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL` for an emulator); set `S3_FORCE_PATH_STYLE=true` for emulators that
    /// need it.
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// What the functions gave up on: ranges in the on-failure SQS queue or a failure log (the
    /// local replayer's, or saved message bodies), and records parked in S3. List them, or
    /// replay them through a function.
    #[command(subcommand)]
    Failures(FailuresCommand),
    /// The multikey index against what the base table calls for. Configured like the indexer:
    /// `MULTIKEY_INDEXES` from the environment.
    #[command(subcommand)]
    Index(IndexCommand),
    /// One page of a scope's items sorted by an indexed field (the multikey index's read side):
    /// the items that have the field in its order, then those without it in `num` order.
    ///
    /// Prints a table and `next: <cursor>`; pass the cursor back with --cursor for the next page.
    /// Cursors are signed with `GRID_CURSOR_KEY` (a built-in development key when unset, which
    /// makes them tamper-evident but not unforgeable) and last a day.
    Grid(GridArgs),
    /// A deployed stack's health in one screen: each stream function's lag, events, parked
    /// records not yet replayed, ranges given up and not yet replayed (kept in the parking
    /// bucket, or waiting in an older stack's on-failure queue), and alarms in ALARM; each index's drift at the last verification; the archive's newest object and
    /// its age. Reads CloudWatch (`GetMetricData`, `ListMetrics`, `DescribeAlarms`), S3 and SQS with
    /// the usual AWS configuration. Exit status 1 when something needs an operator, and the
    /// report says what.
    Status(StatusArgs),
    /// The web grid: a page on http://127.0.0.1:PORT that lists a scope's items in a table and
    /// sorts them by any custom field through the index, with the same reads and cursors as
    /// `grid`. The index comes from `MULTIKEY_INDEXES`, as for `grid`.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub(crate) struct GridArgs {
    #[command(flatten)]
    pub(crate) source: GridSource,
    /// The scope's value, e.g. a project id.
    #[arg(long)]
    pub(crate) scope: String,
    /// The field to sort by (a key of the indexed map).
    #[arg(long)]
    pub(crate) field: String,
    /// Highest values first (items without an indexed value still come last).
    #[arg(long)]
    pub(crate) desc: bool,
    /// Items per page (1-100).
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: usize,
    /// The cursor a previous page printed.
    #[arg(long)]
    pub(crate) cursor: Option<String>,
    /// Values from this one (a typed component, e.g. `{"N":"10"}` or `{"S":"2023-05-01"}`).
    #[arg(long, value_name = "JSON")]
    pub(crate) from: Option<String>,
    /// Values up to this one, included.
    #[arg(long, value_name = "JSON")]
    pub(crate) to: Option<String>,
    /// String values beginning with this.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    pub(crate) prefix: Option<String>,
    /// Base attributes to show besides the index's (fetched with one `BatchGetItem`).
    #[arg(long, value_delimiter = ',')]
    pub(crate) attributes: Vec<String>,
    /// `text` (a table) or `json` (one object per item, then one with the next cursor).
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(crate) output: Output,
}

/// `sidestream status`'s flags. The stack's outputs give the parking bucket (`ParkingBucket`,
/// also its on-failure destination) and the archive's bucket (`ArchiveBucket`), read from
/// CloudFormation when the flags leave them out, with the archiver's `ARCHIVE_PREFIX`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The stack's name: its functions and alarms are named `<stack>-…` by CloudFormation, and
    /// its outputs name the parking bucket and the archive unless `--parking` and `--archive` do.
    #[arg(long)]
    pub(crate) stack: String,
    /// The functions' metrics namespace (the template's `MetricsNamespace`).
    #[arg(long, default_value = formats::METRICS_NAMESPACE)]
    pub(crate) namespace: String,
    /// An SQS on-failure queue, by URL: the `FailureQueueUrl` of a stack deployed before the
    /// parking bucket became the on-failure destination.
    #[arg(long = "queue", value_name = "URL")]
    pub(crate) queue: Option<String>,
    /// The parking bucket (`BUCKET` or `s3://BUCKET`): parked records under `parked/`, and the
    /// ranges Lambda gave up under `aws/lambda/`.
    #[arg(long = "parking", value_name = "BUCKET", value_parser = bucket)]
    pub(crate) parking: Option<String>,
    /// The archive, `s3://BUCKET/PREFIX` or `BUCKET/PREFIX` (the template's `ArchivePrefix`,
    /// `archive/` by default).
    #[arg(long, value_name = "S3URL", value_parser = S3Place::parse)]
    pub(crate) archive: Option<S3Place>,
    /// The window of the functions' metrics, in minutes.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub(crate) window: u64,
    /// How far back to look for the last verification, in hours (the verifier runs on
    /// `IndexVerifySchedule`).
    #[arg(long, default_value_t = 48, value_parser = clap::value_parser!(u64).range(1..=336))]
    pub(crate) verify_window: u64,
    /// A function more than this many seconds behind its stream needs an operator (the
    /// template's `IteratorAgeAlarmMilliseconds` is 300,000 by default).
    #[arg(long, default_value_t = 300)]
    pub(crate) max_lag: u64,
    /// `text` (one screen) or `json` (one object).
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(crate) output: Output,
}

/// The tables a grid reads, shared by `grid` and `serve`.
#[derive(Debug, Args)]
pub(crate) struct GridSource {
    /// A deployed stack, by name: its issues table, its `GridNullsIndex` and its indexer's
    /// `MULTIKEY_INDEXES` (CloudFormation's outputs and the function's configuration), unless
    /// given here. Without it, `MULTIKEY_INDEXES` comes from this process's environment.
    #[arg(long)]
    pub(crate) stack: Option<String>,
    /// The base table (the issues). Default: the stack's.
    #[arg(long, required_unless_present = "stack")]
    pub(crate) table: Option<String>,
    /// The base table's index by the index's scope and first tiebreaker. Default: the stack's
    /// `GridNullsIndex`, else `project-num`.
    #[arg(long)]
    pub(crate) nulls_index: Option<String>,
    /// Which index of `MULTIKEY_INDEXES` to read (needed when it defines several). The index
    /// table, the attribute names and the projected attributes all come from there.
    #[arg(long)]
    pub(crate) index: Option<String>,
}

/// The web grid's flags.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) source: GridSource,
    /// The port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 8080)]
    pub(crate) port: u16,
}

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// For people.
    Text,
    /// For programs: JSON lines.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ArchiveCommand {
    /// Prints an archive object as plain JSON lines: items as ordinary JSON (sets as arrays,
    /// binary as base64, numbers exact), metadata lines with their keys likewise.
    Cat {
        /// `s3://BUCKET/KEY`, or a local file.
        source: String,
        /// Print the lines as archived, in DynamoDB JSON.
        #[arg(long)]
        typed: bool,
    },
    /// Puts the items archived under a prefix back into an existing table, object by object in
    /// key order, each deletion once (by `eventID`), replacing items with the same key unless
    /// --if-absent. Archived items were deleted by TTL, so their TTL attribute is in the past:
    /// unless --ttl says what to do with it, such a restore is refused before anything is
    /// written. Progress goes to stderr.
    Restore {
        /// The archive bucket (`BUCKET` or `s3://BUCKET`).
        #[arg(long, value_parser = bucket)]
        bucket: String,
        /// The key prefix to restore, for example `archive/table=issues/` or a single day.
        #[arg(long)]
        prefix: String,
        /// The table to put the items into.
        #[arg(long)]
        table: String,
        /// The table's TTL attribute (the template's `TtlAttribute`).
        #[arg(long, default_value = "expires_at", value_name = "NAME")]
        ttl_attribute: String,
        /// What to do with each item's TTL attribute: `keep`, `clear` or `extend=DAYS`. Without
        /// it, a restore of items whose TTL has passed (DynamoDB would delete them again) is
        /// refused, with their count, before anything is written.
        #[arg(long, value_name = "CHOICE", value_parser = operations::archive::TtlChoice::parse)]
        ttl: Option<operations::archive::TtlChoice>,
        /// Put an item only where the table has none with its key (a conditional put); items
        /// already there are left as they are, and counted.
        #[arg(long)]
        if_absent: bool,
        /// `text` (a progress bar, then a summary) or `json` (one object of counts).
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Creates a new table from the items archived from one source table, by DynamoDB's
    /// `ImportTable` (no write capacity used; at most 50,000 objects an import), and follows it
    /// until it ends. The new table has no TTL: the archived items' TTL has passed, and enabling
    /// it on that attribute would delete them again. To put items into an existing table, use
    /// `archive restore`.
    Import {
        /// The archive bucket (`BUCKET` or `s3://BUCKET`).
        #[arg(long, value_parser = bucket)]
        bucket: String,
        /// The archive's prefix (the template's `ArchivePrefix`).
        #[arg(long, default_value = "archive/")]
        prefix: String,
        /// The source table whose archived items to import (`table=SOURCE/` under the prefix).
        #[arg(long)]
        source: String,
        /// The table to create.
        #[arg(long)]
        table: String,
        /// Its partition key: `NAME` (a string) or `NAME:S`, `NAME:N`, `NAME:B`.
        #[arg(long, value_name = "NAME[:TYPE]", value_parser = operations::archive::import::KeyAttribute::parse)]
        partition_key: operations::archive::import::KeyAttribute,
        /// Its sort key, if it has one, the same way.
        #[arg(long, value_name = "NAME[:TYPE]", value_parser = operations::archive::import::KeyAttribute::parse)]
        sort_key: Option<operations::archive::import::KeyAttribute>,
        /// Start the import and print it without waiting for it to end.
        #[arg(long)]
        no_wait: bool,
        /// `text` (the import's progress, then a summary) or `json` (the import's last state).
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
}

/// `sidestream index backfill`'s flags.
#[derive(Debug, clap::Args)]
pub(crate) struct BackfillArgs {
    /// The base table.
    #[arg(long)]
    pub(crate) table: String,
    /// Which index of `MULTIKEY_INDEXES` (default: every index).
    #[arg(long)]
    pub(crate) index: Option<String>,
    /// Scan segments, run concurrently.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) segments: u32,
    /// Items per scan page.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(i32).range(1..=10_000))]
    pub(crate) page_size: i32,
    /// Read capacity units per second, at most (default: no limit).
    #[arg(long)]
    pub(crate) read_units: Option<f64>,
    /// Write capacity units per second, at most (default: no limit).
    #[arg(long)]
    pub(crate) write_units: Option<f64>,
    /// The checkpoint file: resumed from when it exists, written after every page.
    #[arg(long, default_value = "backfill-checkpoint.json")]
    pub(crate) checkpoint: std::path::PathBuf,
    /// Scan and count what would be touched; write nothing (no checkpoint either).
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// `text` (a progress bar, then a summary) or `json` (one object of counts).
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(crate) output: Output,
}

#[derive(Debug, Subcommand)]
pub(crate) enum IndexCommand {
    /// Brings the base table's existing items into the index, race-free with the live stream: it
    /// sets a touch marker on each item (`sidestream_touch` or `sidestream_retouch`) to the run
    /// id, and the running indexer, which
    /// the stream hands the change in the item's own order, puts the item's entries. Parallel
    /// scan segments, paced, resumable from its checkpoint file.
    Backfill(BackfillArgs),
    /// Removes the touch markers (`sidestream_touch`, `sidestream_retouch`) that backfills,
    /// repairs and replays left on the base table's items, once none of them runs: each removal
    /// conditioned on the markers still being the ones read, paced, with progress.
    Untouch {
        /// The base table.
        #[arg(long)]
        table: String,
        /// Read at most this many read units a second (each item read counted as one).
        #[arg(long, value_name = "UNITS", value_parser = positive_units)]
        read_units: Option<f64>,
        /// Untouch at most this many items a second (each counted as one write unit).
        #[arg(long, value_name = "UNITS", value_parser = positive_units)]
        write_units: Option<f64>,
        /// `text` or `json` (one object).
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Rebuilds one index (`--index`, required) into its table: creates the table named in its
    /// definition unless it exists (on-demand; its key attributes, the sort key S or B by its
    /// key format), then backfills it. For a new or changed definition, deployed beside the old
    /// one: see docs/operations.md, "Changing an index's definition".
    Rebuild(BackfillArgs),
    /// Compares the index table with what the base table calls for (consistent scans, and the
    /// expected entries computed from the format's rules, not the indexer's code): counts of
    /// missing, stale and extra entries with the first examples. Exit status 1 on drift (after
    /// --repair, if drift remains).
    Verify {
        /// A deployed stack, by name: its issues table and its indexer's `MULTIKEY_INDEXES`
        /// (CloudFormation's outputs and the function's configuration), unless given here.
        #[arg(long)]
        stack: Option<String>,
        /// The base table. Default: the stack's.
        #[arg(long, required_unless_present = "stack")]
        table: Option<String>,
        /// Which index of `MULTIKEY_INDEXES` (needed when it defines several).
        #[arg(long)]
        index: Option<String>,
        /// Mend the difference through the stream: the base items of missing and stale entries
        /// are touched, so the indexer re-puts their entries in each item's order; an extra
        /// entry is deleted only if its item, read again, no longer calls for it, and only if
        /// nothing has written it since. Then verify again until the index is exact or
        /// --settle seconds have passed. Safe while the stream runs; the indexer must be running.
        #[arg(long)]
        repair: bool,
        /// With --repair: how long to wait for the stream to carry the touches (seconds).
        #[arg(long, default_value_t = 120)]
        settle: u64,
        /// Read at most this many read units a second over both tables (each item read counted
        /// as one), leaving the rest of a production table's capacity to the app.
        #[arg(long, value_name = "UNITS", value_parser = positive_units)]
        read_units: Option<f64>,
        /// With --repair: write at most this many write units a second (each touch and delete
        /// counted as one).
        #[arg(long, value_name = "UNITS", value_parser = positive_units, requires = "repair")]
        write_units: Option<f64>,
        /// `text` or `json` (one object).
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum FailuresCommand {
    /// Lists the failures: function, when, why, where the records are, and whether a range is
    /// still in the stream (24 hours).
    List {
        #[command(flatten)]
        from: FailureSources,
        /// `text` (a line each) or `json` (one object per failure).
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Replays one function's failures, configured from this process's environment exactly as
    /// the function is from its own (`MULTIKEY_INDEXES`, `PARKING_BUCKET`, …): ranges read
    /// again from the stream (whole, or not at all), parked records as stored. The archiver's
    /// and the aggregator's records run through their code in this process; the indexer's are
    /// replayed through the stream (their items touched, their deletes conditioned on newer
    /// writes), so that an old record never puts back a stale entry. A range's queue message (or
    /// S3 destination object), and a parked record, is deleted once it is replayed. With
    /// `--function sidestream-combined` (`Consumers=Combined`, configured with its
    /// `COMBINED_FUNCTIONS` and `COMBINED_FILTERS`), each range is replayed by each of its
    /// functions on the records its own patterns pass, and is done when all are.
    /// Exit status 1 if any failure still fails, is short or gone from the stream, or if no
    /// failure is the function's.
    Replay {
        #[command(flatten)]
        from: FailureSources,
        /// The function whose failures to replay. `sidestream-combined`: the indexer and the
        /// archiver behind one mapping (`Consumers=Combined`), whose ranges hold both functions'
        /// records; their parked records are under their own names.
        #[arg(long, value_parser = stream_functions(true))]
        function: String,
        /// The function's name or ARN as deployed (repeatable). Without it, ranges match a
        /// function named as CloudFormation names it (`<stack>-<LogicalId>-<suffix>`) or as the
        /// binary.
        #[arg(long = "function-name", value_name = "NAME_OR_ARN")]
        function_names: Vec<String>,
        /// Each replay invocation's timeout, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// `text` (a line each) or `json` (one object per failure).
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
}

/// Where failures are read from: at least one source.
#[derive(Debug, Args)]
#[group(required = true, multiple = true)]
pub(crate) struct FailureSources {
    /// A deployed stack, by name: its parking bucket (`ParkingBucket`: the parked records, and
    /// the ranges Lambda gave up, its on-failure destination); and for `replay`, the function's
    /// deployed name and configuration, read from Lambda instead of this process's environment.
    #[arg(long)]
    pub(crate) stack: Option<String>,
    /// A file of on-failure records, one JSON object per line (repeatable).
    #[arg(long = "log", value_name = "FILE")]
    pub(crate) logs: Vec<PathBuf>,
    /// The on-failure SQS queue, by URL (repeatable). Reading hides its messages for five
    /// minutes and deletes none; `replay` deletes a message once its range is applied.
    #[arg(long = "queue", value_name = "URL")]
    pub(crate) queues: Vec<String>,
    /// Records parked under `s3://BUCKET/PREFIX` (repeatable; `BUCKET` or `s3://BUCKET` alone
    /// reads the whole parking bucket).
    #[arg(long = "parked", value_name = "S3URL", value_parser = S3Place::parse)]
    pub(crate) parked: Vec<S3Place>,
    /// An S3 on-failure destination, `s3://BUCKET` or `s3://BUCKET/PREFIX` (or without `s3://`;
    /// repeatable; the prefix defaults to Lambda's `aws/lambda/`). Its objects keep the given-up
    /// records themselves, so they replay after the stream has dropped them; `replay` deletes an
    /// object once its range is replayed.
    #[arg(long = "destination", value_name = "S3URL", value_parser = S3Place::parse)]
    pub(crate) destinations: Vec<S3Place>,
}

/// A place in S3, as every flag that names one takes it: `s3://BUCKET/PREFIX`, `s3://BUCKET`,
/// or the same without `s3://`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct S3Place {
    /// The bucket.
    pub(crate) bucket: String,
    /// The key prefix (empty: the whole bucket).
    pub(crate) prefix: String,
}

impl S3Place {
    /// `text` as a place, the bucket checked against S3's naming rules.
    pub(crate) fn parse(text: &str) -> Result<S3Place, String> {
        let rest = text.strip_prefix("s3://").unwrap_or(text);
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let fine = (3..=63).contains(&bucket.len())
            && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
            && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !fine {
            return Err(format!(
                "{bucket:?} is not a bucket name (3-63 lowercase letters, digits, dots and hyphens, \
                 beginning and ending with a letter or digit); give BUCKET, s3://BUCKET or s3://BUCKET/PREFIX"
            ));
        }
        Ok(S3Place { bucket: bucket.to_owned(), prefix: prefix.to_owned() })
    }
}

impl std::fmt::Display for S3Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

/// A bucket, as `BUCKET` or `s3://BUCKET` (a trailing `/` allowed, a prefix refused).
fn bucket(text: &str) -> Result<String, String> {
    let place = S3Place::parse(text)?;
    if !place.prefix.is_empty() {
        return Err(format!(
            "{text:?} has a key prefix ({:?}); this flag takes a bucket alone",
            place.prefix
        ));
    }
    Ok(place.bucket)
}

impl FailureSources {
    /// The sources, in words.
    pub(crate) fn describe(&self) -> String {
        let mut all: Vec<String> = self.logs.iter().map(|l| l.display().to_string()).collect();
        all.extend(self.queues.iter().cloned());
        all.extend(self.parked.iter().map(ToString::to_string));
        all.extend(self.destinations.iter().map(ToString::to_string));
        if all.is_empty() {
            "no source (give --log, --queue, --parked or --destination)".to_owned()
        } else {
            all.join(", ")
        }
    }
}

/// A deployed function whose failures `failures replay` takes: a stream function, or the one
/// that runs several behind one mapping.
/// The stream functions by name ([`sidestream_combined::FUNCTIONS`]), and the combined one's
/// if `combined`.
fn stream_functions(combined: bool) -> PossibleValuesParser {
    let functions = FUNCTIONS.iter().map(|f| PossibleValue::new(f.name).help(f.about));
    let combined = combined.then(|| {
        PossibleValue::new(COMBINED_BINARY).help("the functions behind one mapping (COMBINED_FUNCTIONS)")
    });
    PossibleValuesParser::new(functions.chain(combined))
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeyCommand {
    /// Encodes typed tuples, one JSON array per line, into keys: `{"S":"…"}` or `{"B":"…"}`.
    ///
    /// Components are DynamoDB JSON ({"S":"Open"}, {"N":"42"}, {"B":"AQI="}, {"BOOL":true},
    /// {"NULL":true}) or {"DATE":"2024-05-01"} / {"DATETIME":"2024-05-01T12:34:56Z"}.
    /// A line that cannot be encoded yields {"error":"…"}; the exit status is then 1.
    Encode {
        #[command(flatten)]
        form: Form,
        /// Check against the 2048-byte partition-key limit instead of the 1024-byte sort-key one.
        #[arg(long)]
        partition: bool,
    },
    /// Decodes keys, one per line ({"S":"…"}, {"B":"…"}, or the bare key), into JSON arrays.
    Decode {
        #[command(flatten)]
        form: Form,
    },
}

#[derive(Debug, Args)]
pub(crate) struct Form {
    /// The binary form (B keys, base64) instead of the text form (S keys).
    #[arg(long)]
    pub(crate) binary: bool,
    /// Comma-separated 0-based positions that sort descending, e.g. `--desc 1,2`. When decoding,
    /// the key's recorded directions are checked against it.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub(crate) desc: Option<Vec<usize>>,
}

impl Form {
    pub(crate) fn options(&self) -> KeyOptions {
        KeyOptions {
            binary: self.binary,
            desc: self.desc.as_ref().map(|positions| positions.iter().copied().collect()),
            partition: false,
        }
    }
}

/// A rate in capacity units per second: a number above 0.
fn positive_units(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(units) if units.is_finite() && units > 0.0 => Ok(units),
        _ => Err(format!("{text:?} is not a number of units per second above 0")),
    }
}
