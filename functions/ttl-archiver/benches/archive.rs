//! Encoding and compressing a 10,000-record TTL batch into archive objects.
//!
//! `cargo bench -p ttl-archiver --bench archive` prints the event's size and the objects' sizes,
//! then times the plan (encode and gzip, on decoded records) at gzip levels 1, 6 (the default)
//! and 9, with throughput in bytes of event input per second, and the bare `serde_json` decode
//! for comparison; then the codecs alone on the item objects' lines, each with the size it
//! makes: gzip through flate2's zlib-rs backend (what the function used before libdeflate) at
//! levels 1, 6 and 9, gzip through libdeflate (what it uses) at levels 1 to 6 and 9, and zstd at
//! levels 1, 3, 6, 9, 12 and 15. It also writes the event to `target/bench-data/ttl-10k.json` and a batch of
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
        let _ =
            std::fs::write(dir.join("ttl-6mb.json"), serde_json::to_vec(&six_mb).expect("events serialise"));
    }

    let event: Event = serde_json::from_slice(&bytes).expect("the event decodes");
    let layout = |gzip_level| ObjectSettings {
        prefix: "archive/".to_owned(),
        gzip_level,
        replicated_ttl_attribute: None,
    };
    let plan = Plan::from_wire(&layout(6), &stream_runtime::WireRecord::view_all(&event.records));
    let (raw, data, meta): (usize, usize, usize) = plan
        .objects
        .iter()
        .fold((0, 0, 0), |(r, d, m), o| (r + o.raw_bytes, d + o.data.len(), m + o.meta.len()));
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
            b.iter(|| {
                black_box(Plan::from_wire(
                    &layout,
                    &stream_runtime::WireRecord::view_all(black_box(&event.records)),
                ))
            });
        });
    }
    group.finish();
    codecs(c, &plan);
}

/// The codecs alone, on the item objects' JSON lines as the plan encodes them.
fn codecs(c: &mut Criterion, plan: &Plan) {
    use std::io::Read as _;
    let mut lines = Vec::new();
    for object in &plan.objects {
        flate2::read::MultiGzDecoder::new(&object.data[..])
            .read_to_end(&mut lines)
            .expect("the plan's gzip reads back");
    }
    let mut group = c.benchmark_group("item-lines-codec");
    group.sample_size(20);
    group.throughput(Throughput::Bytes(lines.len() as u64));
    let codecs: [(&str, &[i32], Compress); 3] = [
        ("zlib-rs", &[1, 6, 9], zlib_rs),
        ("libdeflate", &[1, 2, 3, 4, 5, 6, 9], libdeflate),
        ("zstd", &[1, 3, 6, 9, 12, 15], |level, lines| {
            zstd::bulk::compress(lines, level).expect("in memory")
        }),
    ];
    for (codec, levels, compress) in codecs {
        for &level in levels {
            eprintln!(
                "{codec}-{level}: {} KB of lines -> {} KB",
                lines.len() / 1000,
                compress(level, &lines).len() / 1000
            );
            group.bench_function(format!("{codec}-{level}"), |b| {
                b.iter(|| compress(level, black_box(&lines)));
            });
        }
    }
    group.finish();
}

/// A codec at a level, on a buffer.
type Compress = fn(i32, &[u8]) -> Vec<u8>;

/// Gzip through flate2's zlib-rs backend, streamed.
fn zlib_rs(level: i32, lines: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let level = u32::try_from(level).expect("a level 1-9");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    encoder.write_all(lines).expect("in memory");
    encoder.finish().expect("in memory")
}

/// Gzip through libdeflate, whole-buffer.
fn libdeflate(level: i32, lines: &[u8]) -> Vec<u8> {
    let mut compressor =
        libdeflater::Compressor::new(libdeflater::CompressionLvl::new(level).expect("a level 1-12"));
    let mut out = vec![0; compressor.gzip_compress_bound(lines.len())];
    let n = compressor.gzip_compress(lines, &mut out).expect("the bound holds");
    out.truncate(n);
    out
}

criterion_group!(benches, bench);
criterion_main!(benches);
