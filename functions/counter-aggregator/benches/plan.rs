//! Planning a 10,000-record counter-table batch over 100 counters.
//!
//! `cargo bench -p counter-aggregator --bench plan` prints the batch's counters and writes (one
//! conditional write per touched counter), then times the plan on decoded records, with
//! throughput in records per second, and the bare `serde_json` decode for comparison.

use std::hint::black_box;

use aws_lambda_events::event::dynamodb::Event;
use counter_aggregator::{Plan, synthetic};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// The functions' allocator (their `main.rs`), so that the figures are the deployed ones.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench(c: &mut Criterion) {
    let event = synthetic::increments(10_000, 100, 10, 7);
    let bytes = serde_json::to_vec(&event).expect("events serialise");
    let plan = Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(&event.records));
    eprintln!(
        "event: {} records, {} KB; plan: {} counter updates (one write each), {} shard states, {} skipped",
        event.records.len(),
        bytes.len() / 1000,
        plan.updates.len(),
        plan.updates.iter().map(|u| u.shards.len()).sum::<usize>(),
        plan.skipped.len(),
    );
    let mut group = c.benchmark_group("10k-counter-records");
    group.sample_size(30);
    group.throughput(Throughput::Elements(event.records.len() as u64));
    group.bench_function("decode", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Event>(black_box(&bytes)).expect("decodes")));
    });
    group.bench_function("plan", |b| {
        b.iter(|| {
            black_box(Plan::from_wire("pk", &stream_runtime::WireRecord::view_all(black_box(&event.records))))
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
