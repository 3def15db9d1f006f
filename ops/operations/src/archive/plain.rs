//! Archive lines as plain JSON: what `sidestream archive cat` prints.

use std::collections::HashMap;
use std::io::Write;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use formats::archive::{self, DynamoJson, Line};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_dynamo::AttributeValue;

use crate::archive::ArchiveError;

/// Writes an archive object's lines to `out`, one JSON object per line. Items are plain JSON
/// (`{"id":"a","n":42,"tags":["x"]}`: sets become arrays, binary becomes base64, numbers stay
/// exact); metadata lines keep their fields with `keys` in plain JSON. With `typed`, lines are
/// written as archived (DynamoDB JSON). Returns the number of lines.
///
/// One object holds no line twice; overlap between objects is dealt with by [`crate::archive::items`] and
/// [`crate::archive::restore`].
pub fn cat(object: &[u8], mut out: impl Write, typed: bool) -> Result<usize, ArchiveError> {
    let lines = archive::read(object)
        .map_err(|source| ArchiveError::Format { object: "the object".to_owned(), cause: source })?;
    let written = |source: std::io::Error| ArchiveError::Io {
        what: "cannot write the lines".to_owned(),
        cause: source,
    };
    for line in &lines {
        match (line, typed) {
            (Line::Item(item), true) => {
                serde_json::to_writer(&mut out, &archive::ItemLineRef { item: DynamoJson(item) })
            }
            (Line::Item(item), false) => serde_json::to_writer(&mut out, &Plain::Item(item)),
            (Line::Meta(meta), true) => {
                serde_json::to_writer(&mut out, &meta.with_keys(DynamoJson(&meta.keys)))
            }
            (Line::Meta(meta), false) => {
                serde_json::to_writer(&mut out, &meta.with_keys(Plain::Item(&meta.keys)))
            }
        }
        .map_err(|e| written(e.into()))?;
        out.write_all(b"\n").map_err(written)?;
    }
    out.flush().map_err(written)?;
    Ok(lines.len())
}

/// DynamoDB values as plain JSON.
enum Plain<'a> {
    Item(&'a HashMap<String, AttributeValue>),
    Value(&'a AttributeValue),
}

impl Serialize for Plain<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = match self {
            Plain::Item(item) => {
                let mut entries: Vec<_> = item.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, &Plain::Value(v))?;
                }
                return map.end();
            }
            Plain::Value(value) => value,
        };
        match value {
            AttributeValue::S(s) => serializer.serialize_str(s),
            AttributeValue::N(n) => Number(n).serialize(serializer),
            AttributeValue::B(b) => serializer.serialize_str(&BASE64.encode(b)),
            AttributeValue::Bool(b) => serializer.serialize_bool(*b),
            AttributeValue::Null(_) => serializer.serialize_unit(),
            AttributeValue::Ss(v) => v.serialize(serializer),
            AttributeValue::Ns(v) => {
                let mut seq = serializer.serialize_seq(Some(v.len()))?;
                for n in v {
                    seq.serialize_element(&Number(n))?;
                }
                seq.end()
            }
            AttributeValue::Bs(v) => {
                let mut seq = serializer.serialize_seq(Some(v.len()))?;
                for b in v {
                    seq.serialize_element(&BASE64.encode(b))?;
                }
                seq.end()
            }
            AttributeValue::M(m) => Plain::Item(m).serialize(serializer),
            AttributeValue::L(l) => {
                let mut seq = serializer.serialize_seq(Some(l.len()))?;
                for v in l {
                    seq.serialize_element(&Plain::Value(v))?;
                }
                seq.end()
            }
        }
    }
}

/// A DynamoDB number as a JSON number token, digit for digit (all 38 significant digits
/// survive), or as a string in the case JSON has no token for it.
struct Number<'a>(&'a str);

impl Serialize for Number<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.parse::<serde_json::Number>().is_ok()
            && let Ok(raw) = serde_json::value::RawValue::from_string(self.0.to_owned())
        {
            return raw.serialize(serializer);
        }
        serializer.serialize_str(self.0)
    }
}
