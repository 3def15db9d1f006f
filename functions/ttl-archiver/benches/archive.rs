//! Encoding and compressing a 10,000-record TTL batch into archive objects.
//!
//! `cargo bench -p ttl-archiver --bench archive` prints the event's size and the objects' sizes,
//! then times the plan (encode and gzip, on decoded records) at gzip levels 1, 6 (the default)
//! and 9, with throughput in bytes of event input per second, and the bare `serde_json` decode
//! for comparison. It also writes the event to `target/bench-data/ttl-10k.json` and a batch of
//! about 6 MB (Lambda's payload limit) to `target/bench-data/ttl-6mb.json`, for measuring the
//! CLI's peak memory on them.

use std::hint::black_box;

use aws_lambda_events::event::dynamodb::Event;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ttl_archiver::{ObjectSettings, Plan, synthetic};

/// The functions' allocator (their `main.rs`), so that the figures are the deployed ones.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench(c: &mut Criterion) {
    let bytes =
        serde_json::to_vec(&synthetic::ttl_batch(10_000, 7, 1_795_168_800, 0.5)).expect("events serialise");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-data");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("ttl-10k.json"), &bytes);
        let per_record = bytes.len() / 10_000;
        let six_mb = synthetic::ttl_batch(6_000_000 / per_record, 7, 1_795_168_800, 0.5);
        let _ = std::fs::write(
            dir.join("ttl-6mb.json"),
            serde_json::to_vec(&six_mb).expect("events serialise"),
        );
    }

    let event: Event = serde_json::from_slice(&bytes).expect("the event decodes");
    let layout = |gzip_level| ObjectSettings {
        prefix: "archive/".to_owned(),
        gzip_level,
        replicated_ttl_attribute: None,
    };
    let plan = Plan::new(&layout(6), &event.records);
    let (raw, data, meta): (usize, usize, usize) = plan.objects.iter().fold((0, 0, 0), |(r, d, m), o| {
        (r + o.raw_bytes, d + o.data.len(), m + o.meta.len())
    });
    eprintln!(
        "event: {} records, {} KB; plan: {} object pair(s); items {} KB as JSON lines -> {} KB gzip; metadata {} KB gzip",
        event.records.len(),
        bytes.len() / 1000,
        plan.objects.len(),
        raw / 1000,
        data / 1000,
        meta / 1000,
    );

    let mut group = c.benchmark_group("10k-ttl-records");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("decode", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Event>(black_box(&bytes)).expect("decodes")));
    });
    for level in [1, 6, 9] {
        let layout = layout(level);
        group.bench_function(format!("encode+gzip-{level}"), |b| {
            b.iter(|| black_box(Plan::new(&layout, black_box(&event.records))));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
