//! Tests of the key formats: golden vectors, edge cases, and properties.

mod edges;
mod golden;
mod properties;

use crate::{BinaryKey, Date, DateTime, Dir, Number, TextKey, Value, binary, text};

/// Shorthands for building test values.
pub(super) fn n(s: &str) -> Value {
    Value::Number(Number::parse(s).unwrap())
}

pub(super) fn s(s: &str) -> Value {
    Value::String(s.to_owned())
}

pub(super) fn date(s: &str) -> Value {
    Value::Date(Date::parse(s).unwrap())
}

pub(super) fn datetime(s: &str) -> Value {
    Value::DateTime(DateTime::parse(s).unwrap())
}

pub(super) fn text_of(tuple: &[(Value, Dir)]) -> String {
    TextKey::from_tuple(tuple.iter().map(|(v, d)| (v, *d))).into_string()
}

pub(super) fn binary_of(tuple: &[(Value, Dir)]) -> Vec<u8> {
    BinaryKey::from_tuple(tuple.iter().map(|(v, d)| (v, *d))).into_bytes()
}

/// Asserts both directions of a golden vector: the tuple encodes to exactly these keys, and the
/// keys decode to exactly this tuple.
pub(super) fn check(tuple: &[(Value, Dir)], text_key: &str, binary_hex: &str) {
    assert_eq!(text_of(tuple), text_key, "text encoding of {tuple:?}");
    assert_eq!(text::decode(text_key).unwrap(), tuple, "text decoding of {text_key:?}");
    let bytes = hex(binary_hex);
    assert_eq!(binary_of(tuple), bytes, "binary encoding of {tuple:?}");
    assert_eq!(binary::decode(&bytes).unwrap(), tuple, "binary decoding of {binary_hex}");
}

/// Parses space-separated hex, with `xN` repeating the previous byte N more times in total.
pub(super) fn hex(spec: &str) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    for word in spec.split_whitespace() {
        if let Some(count) = word.strip_prefix('x') {
            let last = *out.last().unwrap();
            out.extend(std::iter::repeat_n(last, count.parse::<usize>().unwrap() - 1));
        } else {
            out.push(u8::from_str_radix(word, 16).unwrap());
        }
    }
    out
}
