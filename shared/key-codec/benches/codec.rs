//! Encode and decode speed of typical index keys, compared with `storekey` on the same tuples.
//!
//! Run with `cargo bench -p key-codec`; the closing figures of issue 2 come from it.

#![expect(clippy::unwrap_used, reason = "benchmark inputs are fixed and known to be valid")]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use key_codec::{BinaryKey, Date, Dir, Number, TextKey, binary, text};

fn components(c: &mut Criterion) {
    let mut g = c.benchmark_group("component");
    let date = Date::parse("2024-05-01").unwrap();
    g.bench_function("encode/short-string", |b| {
        b.iter(|| TextKey::new().push_str(black_box("Open"), Dir::Asc).len());
    });
    g.bench_function("encode/small-integer", |b| {
        b.iter(|| TextKey::new().push_number(&Number::from(black_box(42i64)), Dir::Asc).len());
    });
    g.bench_function("encode/date", |b| {
        b.iter(|| TextKey::new().push_date(black_box(date), Dir::Asc).len());
    });
    for (name, key) in [("short-string", "sOpen#"), ("small-integer", "nB42#"), ("date", "d2024-05-01#")] {
        g.bench_function(format!("decode/{name}"), |b| {
            b.iter(|| text::decode(black_box(key)).unwrap());
        });
    }
    g.finish();
}

/// The multikey index's typical sort key: a value, the `num` tiebreaker, and the item id.
fn tuples(c: &mut Criterion) {
    let mut g = c.benchmark_group("tuple(status,num,id)");
    let (status, num, id) = ("In progress", 42i64, "SRC-1");
    // The tuple pushed component by component, as the indexer builds its keys, in either form.
    macro_rules! encode {
        ($form:ident, $into:ident) => {
            || {
                let mut k = $form::new();
                k.push_str(black_box(status), Dir::Asc)
                    .push_number(&Number::from(black_box(num)), Dir::Asc)
                    .push_str(black_box(id), Dir::Asc);
                k.$into()
            }
        };
    }
    let (encode_text, encode_binary) = (encode!(TextKey, into_string), encode!(BinaryKey, into_bytes));
    let owned = (status.to_owned(), num, id.to_owned());
    g.bench_function("encode/key-codec-text", |b| b.iter(encode_text));
    g.bench_function("encode/key-codec-binary", |b| b.iter(encode_binary));
    g.bench_function("encode/storekey", |b| {
        b.iter(|| storekey::encode_vec(black_box(&owned)).unwrap());
    });

    let (t, bin, sk) = (encode_text(), encode_binary(), storekey::encode_vec(&owned).unwrap());
    g.bench_function("decode/key-codec-text", |b| {
        b.iter(|| text::decode(black_box(&t)).unwrap());
    });
    g.bench_function("decode/key-codec-binary", |b| {
        b.iter(|| binary::decode(black_box(&bin)).unwrap());
    });
    // storekey decodes into a typed tuple with no Vec; the streaming decoders are the equivalent.
    g.bench_function("decode-each/key-codec-text", |b| {
        b.iter(|| {
            let mut d = text::Decoder::new(black_box(&t));
            (d.next(), d.next(), d.next())
        });
    });
    // The typed reads: the caller knows the layout, as storekey's decode into a typed tuple does.
    g.bench_function("decode-typed/key-codec-text", |b| {
        b.iter(|| {
            let mut d = text::Decoder::new(black_box(&t));
            (d.string().unwrap(), d.integer().unwrap(), d.string().unwrap())
        });
    });
    g.bench_function("decode-each/key-codec-binary", |b| {
        b.iter(|| {
            let mut d = binary::Decoder::new(black_box(&bin));
            (d.next(), d.next(), d.next())
        });
    });
    g.bench_function("decode/storekey", |b| {
        b.iter(|| storekey::decode::<_, (String, i64, String)>(black_box(&sk[..])).unwrap());
    });
    g.finish();
}

fn number38(c: &mut Criterion) {
    let mut g = c.benchmark_group("number-38-digits");
    let n = Number::parse("-1234567890.1234567890123456789012345678").unwrap();
    let mut t = TextKey::new();
    t.push_number(&n, Dir::Asc);
    let mut bin = BinaryKey::new();
    bin.push_number(&n, Dir::Asc);
    g.bench_function("parse", |b| {
        b.iter(|| Number::parse(black_box("-1234567890.1234567890123456789012345678")));
    });
    g.bench_function("encode/text", |b| {
        b.iter(|| TextKey::new().push_number(black_box(&n), Dir::Asc).len());
    });
    g.bench_function("encode/binary", |b| {
        b.iter(|| BinaryKey::new().push_number(black_box(&n), Dir::Asc).len());
    });
    g.bench_function("decode/text", |b| {
        b.iter(|| text::decode(black_box(t.as_str())).unwrap());
    });
    g.bench_function("decode/binary", |b| {
        b.iter(|| binary::decode(black_box(bin.as_bytes())).unwrap());
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = components, tuples, number38 }
criterion_main!(benches);
