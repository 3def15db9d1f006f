//! Decode plus plan of a 10,000-record (8.4 MB) stream event, and of its first 6 MB (Lambda's
//! payload limit), the event read in place (`stream_runtime::wire`) as the runtime reads it, against
//! a bare `serde_json` decode of the same bytes into `aws_lambda_events` types; and the read and
//! the plan alone.
//!
//! `cargo bench -p multikey-indexer --bench plan` prints each event's size and the writes and
//! requests its plan makes, then times both. The events are also written to
//! `target/bench-data/multikey-10k.json` and `multikey-6mb.json`: for measuring the CLI's peak
//! memory, and for the Python peer (`benches/peers/run`), which must plan the same counts.

use std::hint::black_box;

use aws_lambda_events::event::dynamodb::Event;
use criterion::{Criterion, criterion_group, criterion_main};
use multikey_indexer::{Indexes, Plan, synthetic};
use stream_runtime::wire::Batch;

/// The functions' allocator (their `main.rs`), so that the figures are the deployed ones.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench(c: &mut Criterion) {
    let indexes = Indexes::from_json(synthetic::INDEXES_JSON).expect("the synthetic configuration is valid");
    let bytes = serde_json::to_vec(&synthetic::batch(10_000, 2_000, 7)).expect("events serialise");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-data");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("multikey-10k.json"), &bytes);
    }

    let event: Event = serde_json::from_slice(&bytes).expect("the event decodes");
    let mut six = event.clone();
    let mut six_bytes = bytes.clone();
    while six_bytes.len() > 6_000_000 {
        let keep = six.records.len() * 6_000_000 / six_bytes.len();
        six.records.truncate(keep.min(six.records.len() - 1));
        six_bytes = serde_json::to_vec(&six).expect("events serialise");
    }
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("multikey-6mb.json"), &six_bytes);
    }
    for (name, bytes) in [("10k-records", &bytes), ("6mb", &six_bytes)] {
        group(c, &indexes, name, bytes);
    }
}

fn group(c: &mut Criterion, indexes: &Indexes, name: &str, bytes: &[u8]) {
    let event: Event = serde_json::from_slice(bytes).expect("the event decodes");
    let plan = Plan::from_wire(indexes, &stream_runtime::WireRecord::view_all(&event.records));
    let (puts, deletes) = plan.counts();
    eprintln!(
        "{name}: {} records, {} KB; plan: {} writes ({puts} puts, {deletes} deletes), {} BatchWriteItem requests, {} skipped",
        event.records.len(),
        bytes.len() / 1000,
        plan.writes.len(),
        stream_runtime::writer::requests_for(plan.writes.len()),
        plan.skipped.len(),
    );

    let text = std::str::from_utf8(bytes).expect("the event is UTF-8");
    let batch = Batch::parse(text).expect("the event reads in place");
    assert_eq!(Plan::from_wire(indexes, &batch.records), plan, "both decoders plan alike");

    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    // The yardstick: a bare decode into `aws_lambda_events`, as `lambda_runtime` would do.
    group.bench_function("decode", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Event>(black_box(bytes)).expect("decodes")));
    });
    // What the runtime does: the event read in place (`stream_runtime::wire`), then planned.
    group.bench_function("wire-decode", |b| {
        b.iter(|| black_box(read(black_box(bytes)).records.len()));
    });
    group.bench_function("plan", |b| {
        b.iter(|| black_box(Plan::from_wire(indexes, black_box(&batch.records))));
    });
    group.bench_function("decode+plan", |b| {
        b.iter(|| {
            let batch = read(black_box(bytes));
            black_box(Plan::from_wire(indexes, &batch.records))
        });
    });
    group.finish();
}

/// The event's bytes read in place, checked as UTF-8 first (as the runtime does).
fn read(bytes: &[u8]) -> Batch<'_> {
    Batch::parse(std::str::from_utf8(bytes).expect("UTF-8")).expect("decodes")
}

criterion_group!(benches, bench);
criterion_main!(benches);
