//! fuzz: hostile input for everything that reads what a user or AWS sends, on the stable
//! toolchain (cargo-fuzz needs nightly). Each [`Target`] starts from valid seeds (golden keys,
//! fixture events and their Kinesis forms, a real cursor, archive lines, the template's filter
//! patterns) and feeds its
//! decoder mutated copies: bytes flipped, inserted, deleted and repeated, and for JSON inputs
//! values replaced by other types, huge strings and deep nesting. A target fails when its code
//! panics or breaks an invariant (a key that decodes must re-encode to the same bytes). [`run`]
//! counts executions and records each failure with its input.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// What is fuzzed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `key_codec::text::decode`, and re-encoding what decodes; the typed reads
    /// (`Decoder::string`, `Decoder::integer`) against it.
    KeyText,
    /// `key_codec::binary::decode`, and re-encoding what decodes.
    KeyBinary,
    /// `formats::cursor::Signer::decode` of cursors.
    Cursor,
    /// `formats::archive::read` of archive objects (gzip of JSON lines).
    ArchiveLines,
    /// `local_stack::template::Pattern::parse_dynamodb` of event filter patterns.
    FilterPattern,
    /// The three plans over stream events, decoded as Lambda's runtime decodes them.
    Plans,
    /// `stream_runtime::wire::Batch::parse` of stream events against `aws_lambda_events`: whatever
    /// that decoder reads, the wire reader reads alike (the same records, images and checks),
    /// and the indexer plans the same writes from either.
    Wire,
    /// `stream_runtime::kinesis::decode` of Kinesis events, and of a Kinesis record's data, then
    /// the plans over what decodes.
    Kinesis,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 8] = [
        Target::KeyText,
        Target::KeyBinary,
        Target::Cursor,
        Target::ArchiveLines,
        Target::FilterPattern,
        Target::Plans,
        Target::Wire,
        Target::Kinesis,
    ];

    /// How the target's inputs are mutated: for the wire target, mostly one node inside a
    /// record's change, since its comparison needs events `aws_lambda_events` still reads.
    pub fn mutator(self) -> Mutator {
        if self == Target::Wire { Mutator { json_in_4: 3, in_change: true } } else { Mutator::ANYWHERE }
    }

    /// The target's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Target::KeyText => "key-text",
            Target::KeyBinary => "key-binary",
            Target::Cursor => "cursor",
            Target::ArchiveLines => "archive-lines",
            Target::FilterPattern => "filter-pattern",
            Target::Plans => "plans",
            Target::Wire => "wire",
            Target::Kinesis => "kinesis",
        }
    }

    /// The target named `name`.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Valid inputs to start from.
    pub fn seeds(self) -> Vec<Vec<u8>> {
        match self {
            Target::KeyText => [
                "n0#",
                "nA7#",
                "n-Y57~#",
                "MB42#",
                "sa$_b#",
                "s$?#",
                "H9e~#",
                "d2024-05-01#",
                "t#f#%#",
                "sIn$_progress#MA1.5#sSRC$b7#",
                "nZ02610000000000000000000000000#",
            ]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
            Target::KeyBinary => vec![
                vec![0x41],
                vec![0x42, 0x82, 0x8c],
                vec![0x40, 0x7c, 0xab],
                vec![0x50, 0x61, 0x20, 0x62, 0x00, 0x01],
                vec![0x20, 0x80, 0x00, 0x4d, 0x84, 0x00],
                vec![0x60, 0x30, 0x01],
                vec![0xbf, 0x83, 0x54],
            ],
            Target::Cursor => {
                let signer = signer();
                let cursor = formats::cursor::Cursor {
                    phase: formats::cursor::Phase::Index,
                    key: Some(json!({"pk": {"S": "35e9#3fe6"}, "sk": {"S": "nA42#nA3#saf34#"}})),
                };
                vec![signer.encode(&cursor, FINGERPRINT, NOW).into_bytes()]
            }
            Target::ArchiveLines => vec![
                br#"{"Item":{"id":{"S":"e005"},"n":{"N":"-12.5"},"b":{"B":"AAEC/w=="},"l":{"L":[{"S":"a"},{"M":{}}]},"ss":{"SS":["a","b"]}}}"#.to_vec(),
                br#"{"v":1,"eventID":"e0030","sequenceNumber":"400000000000000000030","deletedAt":"2026-11-20T10:00:00Z","table":"issues","keys":{"id":{"S":"e005"}},"keysOnly":false}"#.to_vec(),
            ],
            Target::FilterPattern => [
                r#"{"eventName": ["REMOVE"], "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}}"#,
                r#"{"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "COUNTER#"}]}}, "NewImage": {"count": {"N": [{"exists": true}]}}}}"#,
                r#"{"$or": [{"dynamodb": {"NewImage": {"n": {"N": [{"numeric": [">", 0, "<=", 5]}]}}}}, {"eventName": [{"anything-but": ["INSERT"]}]}]}"#,
                r#"{"dynamodb": {"NewImage": {"s": {"S": [{"equals-ignore-case": "x"}, {"suffix": ".png"}]}}}}"#,
            ]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
            Target::Plans | Target::Wire => EVENTS.iter().map(|e| e.as_bytes().to_vec()).collect(),
            Target::Kinesis => kinesis_seeds(),
        }
    }

    /// Runs one input.
    ///
    /// # Panics
    ///
    /// When the code under test panics, or breaks an invariant: that is what a fuzzer looks for.
    pub fn exec(self, input: &[u8]) {
        match self {
            Target::KeyText => {
                if let Ok(text) = std::str::from_utf8(input)
                    && let Ok(components) = key_codec::text::decode(text)
                {
                    let again = key_codec::TextKey::from_tuple(components.iter().map(|(v, d)| (v, *d)));
                    assert_eq!(again.as_str(), text, "a decoded K1 key re-encodes to itself");
                }
                if let Ok(text) = std::str::from_utf8(input) {
                    typed_reads_agree(text);
                }
            }
            Target::KeyBinary => {
                if let Ok(components) = key_codec::binary::decode(input) {
                    let again = key_codec::BinaryKey::from_tuple(components.iter().map(|(v, d)| (v, *d)));
                    assert_eq!(again.as_bytes(), input, "a decoded B1 key re-encodes to itself");
                }
            }
            Target::Cursor => {
                if let Ok(text) = std::str::from_utf8(input) {
                    let _ = signer().decode(text, FINGERPRINT, NOW);
                }
            }
            Target::ArchiveLines => {
                let _ = formats::archive::read(input);
                let _ = formats::archive::read(&gzip(input));
            }
            Target::FilterPattern => {
                if let Ok(text) = std::str::from_utf8(input) {
                    let _ = local_stack::template::Pattern::parse_dynamodb(text);
                    let _ = local_stack::template::Pattern::parse(text);
                }
            }
            Target::Plans => drop(plan_batch(input)),
            Target::Wire => drop(wire(input)),
            Target::Kinesis => {
                kinesis(input);
                // The input as one record's data, to reach the change record's own parsing.
                let data = base64::engine::general_purpose::STANDARD.encode(input);
                let event = json!({"Records": [{"kinesis": {"sequenceNumber": "1", "data": data},
                    "eventSource": "aws:kinesis", "eventSourceARN": KINESIS_ARN}]});
                kinesis(event.to_string().as_bytes());
            }
        }
    }
}

const FINGERPRINT: &str = "2ca137ecc6129738";
const NOW: u64 = 1_800_000_000;

fn signer() -> formats::cursor::Signer {
    formats::cursor::Signer::new(b"fuzz", 3_600)
}

/// The fixture events: every kind of record the functions meet.
const EVENTS: [&str; 9] = [
    include_str!("../../events/multikey-indexer/insert.json"),
    include_str!("../../events/multikey-indexer/modify-fields.json"),
    include_str!("../../events/multikey-indexer/keys-only.json"),
    include_str!("../../events/multikey-indexer/poison.json"),
    include_str!("../../events/ttl-archiver/every-type.json"),
    include_str!("../../events/ttl-archiver/mixed.json"),
    include_str!("../../events/counter-aggregator/increments.json"),
    include_str!("../../events/counter-aggregator/shard-removal.json"),
    include_str!("../../events/counter-aggregator/foreign.json"),
];

/// The plans target on one input: whether the indexer's steps were compared with its whole plan
/// on a batch of several records that writes something ([`in_steps_as_whole`]).
pub fn plan_batch(input: &[u8]) -> bool {
    serde_json::from_slice::<stream_runtime::Event>(input).is_ok_and(|event| plans(&event.records))
}

/// Every function's plan of `records`; whether the indexer's steps were compared.
fn plans(records: &[stream_runtime::EventRecord]) -> bool {
    thread_local! {
        static INDEXES: multikey_indexer::Indexes =
            multikey_indexer::Indexes::from_json(include_str!("../../functions/multikey-indexer/indexes.example.json"))
                .unwrap_or_else(|e| panic!("the example configuration: {e}"));
    }
    let compared = INDEXES.with(|indexes| in_steps_as_whole(indexes, records));
    drop(ttl_archiver::Plan::from_wire(
        &ttl_archiver::ObjectSettings::default(),
        &stream_runtime::WireRecord::view_all(records),
    ));
    drop(counter_aggregator::Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(records)));
    compared
}

/// The indexer's plan of `records` cut into steps by item (a step per record at most) against its
/// plan of the whole batch: the same writes, rejections and skips. A batch whose plan stops (a
/// systemic failure) is planned, not compared: the steps before the stop may plan past it
/// (docs/functions.md, the indexer's steps). Returns whether they were compared on several
/// records that write something.
fn in_steps_as_whole(indexes: &multikey_indexer::Indexes, records: &[stream_runtime::EventRecord]) -> bool {
    use multikey_indexer::plan::{Plan, steps};
    let whole = Plan::from_wire(indexes, &stream_runtime::WireRecord::view_all(records));
    if whole.failures.stopped.is_some() {
        return false;
    }
    let wire = stream_runtime::wire::WireRecord::view_all(records);
    let described = |plan: &Plan| {
        let mut writes: Vec<String> = plan.writes.iter().map(|w| format!("{w:?}")).collect();
        writes.sort_unstable();
        let mut rejected: Vec<usize> = plan.failures.rejected.iter().map(|f| f.record).collect();
        rejected.sort_unstable();
        let mut skipped: Vec<String> = plan.skipped.iter().map(|s| format!("{s:?}")).collect();
        skipped.sort_unstable();
        (writes, rejected, skipped, plan.unindexed_records)
    };
    let mut cut = Plan::default();
    for step in steps::by_item(indexes, &wire, 1) {
        let plan = Plan::from_wire_at(indexes, &wire, &step, multikey_indexer::plan::Order::Stream, 0);
        assert!(plan.failures.stopped.is_none(), "a step stopped where the whole batch's plan did not");
        cut.writes.extend(plan.writes);
        cut.failures.rejected.extend(plan.failures.rejected);
        cut.skipped.extend(plan.skipped);
        cut.unindexed_records += plan.unindexed_records;
    }
    assert_eq!(described(&cut), described(&whole), "the steps' plans are the whole plan's");
    records.len() > 1 && !whole.writes.is_empty()
}

/// The wire reader against `aws_lambda_events` on one input, and on the input with each
/// record's required fields that the wire reader does not read made whole ([`lambda_shaped`]),
/// so that a mutant that broke only those still reaches the comparison. Returns how many
/// documents both decoders read (and so were compared).
pub fn wire(input: &[u8]) -> usize {
    let mut compared = usize::from(wire_compare(input));
    if let Ok(mut value) = serde_json::from_slice::<Value>(input)
        && lambda_shaped(&mut value)
    {
        compared += usize::from(wire_compare(value.to_string().as_bytes()));
    }
    compared
}

/// Gives each record of an event the fields `aws_lambda_events` requires and no plan reads
/// (`eventID`, `awsRegion`, `dynamodb.SizeBytes`, a known `StreamViewType` or none). False when
/// `value` has no `Records` list or nothing needed changing.
fn lambda_shaped(value: &mut Value) -> bool {
    let Some(records) = value.get_mut("Records").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for record in records.iter_mut().filter_map(Value::as_object_mut) {
        for (field, default) in
            [("eventID", json!("1")), ("awsRegion", json!("us-east-1")), ("eventName", json!("INSERT"))]
        {
            if !record.get(field).is_some_and(Value::is_string) {
                record.insert(field.to_owned(), default);
                changed = true;
            }
        }
        if !record.get("dynamodb").is_some_and(Value::is_object) {
            record.insert("dynamodb".to_owned(), json!({}));
            changed = true;
        }
        let Some(change) = record.get_mut("dynamodb").and_then(Value::as_object_mut) else {
            continue;
        };
        if !change.get("SizeBytes").is_some_and(Value::is_i64) {
            change.insert("SizeBytes".to_owned(), json!(1));
            changed = true;
        }
        let views = ["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"];
        if change.get("StreamViewType").is_some_and(|v| !v.as_str().is_some_and(|v| views.contains(&v))) {
            change.remove("StreamViewType");
            changed = true;
        }
    }
    changed
}

/// Whether `aws_lambda_events` reads `input`; when it does, the wire reader must read it alike.
fn wire_compare(input: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(input) else {
        return false;
    };
    let batch = stream_runtime::wire::Batch::parse(text);
    let Ok(event) = serde_json::from_str::<stream_runtime::Event>(text) else {
        return false;
    };
    let batch = batch.unwrap_or_else(|e| panic!("aws_lambda_events reads it, the wire reader does not: {e}"));
    assert_eq!(batch.records.len(), event.records.len());
    for (wire, owned) in batch.records.iter().zip(&event.records) {
        assert_eq!(wire, &stream_runtime::wire::WireRecord::from_event_record(owned), "the same record");
        // The whole check (the indexer's) and the lazy view (the archiver's and the aggregator's).
        let record = stream_runtime::Record::new(wire);
        let checked = record.and_then(|r| r.keys().and(r.before()).and(r.after()).map(|_| ()));
        assert_eq!(wire.change().map(|_| ()), checked, "the same checks");
    }
    thread_local! {
        static INDEXES: multikey_indexer::Indexes =
            multikey_indexer::Indexes::from_json(include_str!("../../functions/multikey-indexer/indexes.example.json"))
                .unwrap_or_else(|e| panic!("the example configuration: {e}"));
    }
    INDEXES.with(|indexes| {
        assert_eq!(
            multikey_indexer::Plan::from_wire(indexes, &batch.records),
            multikey_indexer::Plan::from_wire(indexes, &stream_runtime::WireRecord::view_all(&event.records)),
            "the same plan"
        );
        in_steps_as_whole(indexes, &event.records);
    });
    let layout = ttl_archiver::ObjectSettings::default();
    assert_eq!(
        ttl_archiver::Plan::from_wire(&layout, &batch.records),
        ttl_archiver::Plan::from_wire(&layout, &stream_runtime::WireRecord::view_all(&event.records)),
        "the same archive"
    );
    assert_eq!(
        counter_aggregator::Plan::from_wire("pk", &batch.records),
        counter_aggregator::Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&event.records)),
        "the same counts"
    );
    true
}

const KINESIS_ARN: &str = "arn:aws:kinesis:us-east-1:123456789012:stream/changes";

/// Kinesis events of the fixture events' changes, as Kinesis Data Streams for DynamoDB writes
/// them, and each change's data alone.
fn kinesis_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for text in EVENTS {
        let Ok(event) = serde_json::from_str::<stream_runtime::Event>(text) else {
            continue;
        };
        let mut writer = local_stack::replayer::kinesis::Writer::new(KINESIS_ARN, "issues");
        let records: Vec<Value> = event.records.iter().map(|r| writer.write(r)).collect();
        for record in &records {
            let data = record["kinesis"]["data"].as_str().unwrap_or_default();
            seeds.extend(base64::engine::general_purpose::STANDARD.decode(data).ok());
        }
        seeds.push(json!({ "Records": records }).to_string().into_bytes());
    }
    seeds
}

/// Decodes a Kinesis event; what decodes must be whole, versioned and plannable.
fn kinesis(input: &[u8]) {
    if let Ok(batch) = stream_runtime::kinesis::decode(input) {
        let n = batch.event.records.len();
        assert_eq!(batch.changed_at.len(), n, "a change time per record");
        assert_eq!(batch.places.sequence_numbers().count(), n, "a place per record");
        for (record, at) in batch.event.records.iter().zip(&batch.changed_at) {
            assert_eq!(
                record.change.sequence_number.as_deref(),
                Some(at.micros.to_string().as_str()),
                "a record's version is its change time"
            );
        }
        plans(&batch.event.records);
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

/// A mutated copy of `input`.
pub fn mutate(rng: &mut fastrand::Rng, input: &[u8]) -> Vec<u8> {
    mutate_as(rng, input, Mutator::ANYWHERE)
}

impl Mutator {
    /// One mutant in 4 changes a JSON node anywhere; the rest change bytes.
    pub const ANYWHERE: Mutator = Mutator { json_in_4: 1, in_change: false };
}

fn mutate_as(rng: &mut fastrand::Rng, input: &[u8], mutator: Mutator) -> Vec<u8> {
    if rng.u8(..4) < mutator.json_in_4
        && let Ok(mut value) = serde_json::from_slice::<Value>(input)
    {
        let pointer = if mutator.in_change { a_change(rng, &value) } else { None };
        match pointer {
            Some(pointer) => mutate_json(rng, value.pointer_mut(&pointer).unwrap_or(&mut Value::Null), 0),
            None => mutate_json(rng, &mut value, 0),
        }
        return serde_json::to_vec(&value).unwrap_or_default();
    }
    let mut out = input.to_vec();
    for _ in 0..=rng.usize(..4) {
        let at = rng.usize(..=out.len());
        match rng.u8(..6) {
            0 if !out.is_empty() => {
                let i = rng.usize(..out.len());
                out[i] ^= 1 << rng.u8(..8);
            }
            1 => out.insert(at, INTERESTING[rng.usize(..INTERESTING.len())]),
            2 => out.insert(at, rng.u8(..)),
            3 if at < out.len() => {
                let end = (at + 1 + rng.usize(..8)).min(out.len());
                out.drain(at..end);
            }
            4 if at < out.len() => {
                let end = (at + 1 + rng.usize(..16)).min(out.len());
                let piece = out[at..end].to_vec();
                let times = 1 + rng.usize(..4);
                for _ in 0..times {
                    out.splice(at..at, piece.iter().copied());
                }
            }
            _ => out.truncate(at),
        }
    }
    out
}

const INTERESTING: [u8; 14] =
    [0, 0xff, 0x7f, 0x80, b'#', b'$', b'%', b'~', b'"', b'{', b'}', b'[', b'-', b'.'];

/// The JSON pointer of one record's `dynamodb` in an event, picked at random: its keys, an
/// image, or all of it.
fn a_change(rng: &mut fastrand::Rng, event: &Value) -> Option<String> {
    let records = event.get("Records")?.as_array()?;
    if records.is_empty() {
        return None;
    }
    let at = rng.usize(..records.len());
    let change = records[at].get("dynamodb")?;
    let part = ["Keys", "NewImage", "OldImage", ""][rng.usize(..4)];
    Some(if part.is_empty() || change.get(part).is_none() {
        format!("/Records/{at}/dynamodb")
    } else {
        format!("/Records/{at}/dynamodb/{part}")
    })
}

/// Replaces one node of a JSON document: another type, a huge or empty string, deep nesting, a
/// dropped key, an extreme number.
fn mutate_json(rng: &mut fastrand::Rng, value: &mut Value, depth: usize) {
    let descend = depth < 12 && rng.u8(..3) != 0;
    match value {
        Value::Object(map) if descend && !map.is_empty() => {
            let key = map.keys().nth(rng.usize(..map.len())).cloned().unwrap_or_default();
            if rng.u8(..8) == 0 {
                map.remove(&key);
            } else if let Some(child) = map.get_mut(&key) {
                mutate_json(rng, child, depth + 1);
            }
            return;
        }
        Value::Array(items) if descend && !items.is_empty() => {
            let i = rng.usize(..items.len());
            mutate_json(rng, &mut items[i], depth + 1);
            return;
        }
        _ => {}
    }
    *value = match rng.u8(..9) {
        0 => Value::Null,
        1 => json!(rng.bool()),
        2 => json!("x".repeat(rng.usize(..70_000))),
        3 => json!(""),
        4 => json!(
            ["1E126", "-0", "1e-131", "NaN", "99999999999999999999999999999999999999999"][rng.usize(..5)]
        ),
        5 => json!(rng.i64(..)),
        6 => (0..rng.usize(..64)).fold(json!({"S": "deep"}), |inner, _| json!({"M": {"x": inner}})),
        7 => json!({"S": "a"}),
        _ => json!([{"N": "1"}, {"S": "#$%"}, {"B": "AP8="}]),
    };
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Inputs executed.
    pub execs: u64,
    /// The longest one input took.
    pub slowest: Duration,
    /// Inputs that failed, with the panic message (at most 10 kept).
    pub failures: Vec<(Vec<u8>, String)>,
    /// How many failed in all.
    pub failed: u64,
}

/// Runs `execs` mutated inputs of `target` from `seed`, calling `progress` every 10,000.
pub fn run(target: Target, execs: u64, seed: u64, progress: impl FnMut(u64)) -> Report {
    let mutator = target.mutator();
    run_mutating(&target.seeds(), mutator, |input| target.exec(input), execs, seed, progress)
}

/// How inputs are mutated: in how many of 4 mutants of a JSON input one node of the document
/// is replaced (the others have their bytes changed), and whether that node is taken inside a
/// stream record's `dynamodb` (its keys and images) rather than anywhere.
#[derive(Debug, Clone, Copy)]
pub struct Mutator {
    /// Out of 4.
    pub json_in_4: u8,
    /// Mutate inside a record's change.
    pub in_change: bool,
}

/// Runs `execs` inputs through `exec`: the `seeds` first, then mutants of them and of earlier
/// mutants. A panic is caught, counted and kept with its input.
pub fn run_with(
    seeds: &[Vec<u8>],
    exec: impl Fn(&[u8]),
    execs: u64,
    seed: u64,
    progress: impl FnMut(u64),
) -> Report {
    run_mutating(seeds, Mutator::ANYWHERE, exec, execs, seed, progress)
}

/// [`run_with`], mutating as `mutator` says.
pub fn run_mutating(
    seeds: &[Vec<u8>],
    mutator: Mutator,
    exec: impl Fn(&[u8]),
    execs: u64,
    seed: u64,
    mut progress: impl FnMut(u64),
) -> Report {
    let seeds = seeds.to_vec();
    let mut corpus: Vec<Vec<u8>> = seeds.clone();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut report = Report::default();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for n in 0..execs {
        let parent = &corpus[rng.usize(..corpus.len())];
        let input =
            if n < seeds.len() as u64 { parent.clone() } else { mutate_as(&mut rng, parent, mutator) };
        let started = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| exec(&input)));
        report.slowest = report.slowest.max(started.elapsed());
        report.execs += 1;
        if let Err(panic) = result {
            report.failed += 1;
            if report.failures.len() < 10 {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                report.failures.push((input, message));
            }
        } else if corpus.len() < 512 && input.len() < 100_000 && rng.u8(..16) == 0 {
            // Keep some mutants as parents, so mutations compound.
            corpus.push(input);
        }
        if n % 10_000 == 9_999 {
            progress(n + 1);
        }
    }
    std::panic::set_hook(hook);
    report
}

/// Reads `text` as (string, integer, string) with the typed reads: each read succeeds exactly
/// when the generic decoder's component there is of its type (an integer within `i64`), and
/// gives the same value and direction.
fn typed_reads_agree(text: &str) {
    use key_codec::Value;
    let generic: Vec<_> = key_codec::text::Decoder::new(text).take(3).collect();
    let mut typed = key_codec::text::Decoder::new(text);
    for (i, component) in generic.into_iter().enumerate() {
        let component = component.ok();
        let (read, want) = if i == 1 {
            let want = component.and_then(|(v, d)| match v {
                Value::Number(n) => n.to_i64().map(|n| (Value::from(n), d)),
                _ => None,
            });
            (typed.integer().ok().map(|(n, d)| (Value::from(n), d)), want)
        } else {
            let want = component.filter(|(v, _)| matches!(v, Value::String(_)));
            (typed.string().ok().map(|(s, d)| (Value::String(s), d)), want)
        };
        assert_eq!(read, want, "typed read {i} of {text:?}");
        if read.is_none() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run of every target, as the test suite's share of `scripts/fuzz`.
    #[test]
    fn every_target_survives_a_short_run() {
        for target in Target::ALL {
            let report = run(target, 3_000, 7, |_| {});
            assert_eq!(report.execs, 3_000);
            assert!(report.failures.is_empty(), "{}: {:?}", target.name(), report.failures);
        }
    }

    /// The wire target compares the two decoders only on inputs `aws_lambda_events` reads: the
    /// mutants must reach that comparison often, or the target proves nothing.
    #[test]
    fn the_wire_target_compares_both_decoders_on_many_mutants() {
        let compared = compared_of_3000(Target::Wire, Target::Wire.mutator(), 11, |input| {
            u32::try_from(wire(input)).unwrap_or(0)
        });
        // About one in ten: most mutants of a value are no DynamoDB value, which both refuse.
        assert!(compared > 200, "only {compared} of 3,000 inputs compared");
    }

    /// The plans target compares the indexer's steps with its whole plan only on batches that
    /// plan without stopping: the mutants must reach that comparison often.
    #[test]
    fn the_plans_target_compares_steps_with_the_whole_plan_on_many_mutants() {
        // The wire target's mutants, which keep the JSON whole: most of the plans target's are
        // no event at all (it also runs the comparison, less often).
        let compared =
            compared_of_3000(Target::Plans, Target::Wire.mutator(), 13, |input| u32::from(plan_batch(input)));
        // About one in 70: of the nine seeds, two are indexer events that plan without stopping.
        assert!(compared > 20, "only {compared} of 3,000 inputs compared");
    }

    /// Runs 3,000 of `mutator`'s mutants of `target`'s seeds through `compare`, which says
    /// whether it compared an input (1) or not (0); none may fail. How many were compared.
    fn compared_of_3000(target: Target, mutator: Mutator, seed: u64, compare: impl Fn(&[u8]) -> u32) -> u32 {
        let compared = std::cell::Cell::new(0_u32);
        let report = run_mutating(
            &target.seeds(),
            mutator,
            |input| compared.set(compared.get() + compare(input)),
            3_000,
            seed,
            |_| {},
        );
        assert!(report.failures.is_empty(), "{}: {:?}", target.name(), report.failures);
        compared.get()
    }

    #[test]
    fn a_panic_is_caught_counted_and_kept_with_its_input() {
        let seeds = vec![b"sOpen#".to_vec()];
        let report =
            run_with(&seeds, |input| assert!(!input.contains(&b'%'), "a percent sign"), 20_000, 3, |_| {});
        assert_eq!(report.execs, 20_000);
        assert!(report.failed > 0, "mutation inserts '%' among its interesting bytes");
        assert!(report.failures.len() <= 10);
        let (input, message) = &report.failures[0];
        assert!(input.contains(&b'%'));
        assert_eq!(message, "a percent sign");
    }
}
