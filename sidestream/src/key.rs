//! `sidestream key encode` and `sidestream key decode`: typed tuples to order-preserving keys and
//! back, one JSON line in, one JSON line out.

use std::collections::BTreeSet;
use std::io::{self, BufRead, Write};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use key_codec::{BinaryKey, Dir, KeyKind, TextKey, Value, binary, text};
use serde_json::{Value as Json, json};

use crate::typed_json::{value_from_json, value_to_json};

/// Options shared by both directions.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyOptions {
    /// The binary form (B keys, base64 in JSON) instead of the text form (S keys).
    pub(crate) binary: bool,
    /// 0-based positions that sort descending. Positions past a tuple's end are ignored, so one
    /// list serves full tuples and their prefixes. When given, decode checks the directions the
    /// key records against it; when not, encode makes every component ascending.
    pub(crate) desc: Option<BTreeSet<usize>>,
    /// Encode against the 2048-byte partition-key limit instead of the 1024-byte sort-key one.
    pub(crate) partition: bool,
}

/// What a run processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Summary {
    /// Input lines read.
    pub(crate) lines: usize,
    /// Lines answered with `{"error":…}`.
    pub(crate) errors: usize,
}

/// Encodes each input line (a JSON array of typed values) to `{"S":"<key>"}` or
/// `{"B":"<base64>"}`; a line that cannot be encoded gets `{"error":"<reason>"}`.
pub(crate) fn encode(input: impl BufRead, output: impl Write, options: &KeyOptions) -> io::Result<Summary> {
    each_line(input, output, |line| encode_line(line, options))
}

/// Decodes each input line (a key as `encode` writes it, or the bare key) to a JSON array of
/// typed values; a line that cannot be decoded gets `{"error":"<reason>"}`.
pub(crate) fn decode(input: impl BufRead, output: impl Write, options: &KeyOptions) -> io::Result<Summary> {
    each_line(input, output, |line| decode_line(line, options))
}

fn each_line(
    mut input: impl BufRead,
    mut output: impl Write,
    mut convert: impl FnMut(&str) -> Result<Json, String>,
) -> io::Result<Summary> {
    let mut summary = Summary::default();
    let mut raw = Vec::new();
    loop {
        raw.clear();
        if input.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        summary.lines += 1;
        let line = raw.strip_suffix(b"\n").unwrap_or(&raw);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let answer = std::str::from_utf8(line)
            .map_err(|e| format!("line is not valid UTF-8: {e}"))
            .and_then(&mut convert)
            .unwrap_or_else(|reason| {
                summary.errors += 1;
                json!({ "error": reason })
            });
        serde_json::to_writer(&mut output, &answer)?;
        output.write_all(b"\n")?;
    }
    output.flush()?;
    Ok(summary)
}

fn encode_line(line: &str, options: &KeyOptions) -> Result<Json, String> {
    let json: Json = serde_json::from_str(line).map_err(|e| format!("line is not JSON: {e}"))?;
    let Json::Array(items) = json else {
        return Err(
            "expected a JSON array of typed values, like [{\"S\":\"Open\"},{\"N\":\"42\"}]".to_owned()
        );
    };
    let mut tuple = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        let value = value_from_json(item).map_err(|e| format!("component {position}: {e}"))?;
        let dir = if options.desc.as_ref().is_some_and(|desc| desc.contains(&position)) {
            Dir::Desc
        } else {
            Dir::Asc
        };
        tuple.push((value, dir));
    }
    let kind = if options.partition { KeyKind::Partition } else { KeyKind::Sort };
    let components = tuple.iter().map(|(v, d)| (v, *d));
    Ok(if options.binary {
        let key = BinaryKey::from_tuple(components).finish(kind).map_err(|e| e.to_string())?;
        json!({ "B": BASE64.encode(key) })
    } else {
        json!({ "S": TextKey::from_tuple(components).finish(kind).map_err(|e| e.to_string())? })
    })
}

fn decode_line(line: &str, options: &KeyOptions) -> Result<Json, String> {
    let (field, name) = if options.binary { ("B", "base64 B value") } else { ("S", "S value") };
    let key = if line.trim_start().starts_with('{') {
        let json: Json = serde_json::from_str(line).map_err(|e| format!("line is not JSON: {e}"))?;
        json.get(field)
            .and_then(Json::as_str)
            .ok_or_else(|| format!("expected {{\"{field}\":…}} holding a {name}"))?
            .to_owned()
    } else {
        line.to_owned()
    };
    let tuple = if options.binary {
        let bytes = BASE64.decode(key.trim()).map_err(|e| format!("key is not valid base64: {e}"))?;
        binary::decode(&bytes)
    } else {
        text::decode(&key)
    }
    .map_err(|e| e.to_string())?;
    if let Some(desc) = &options.desc {
        check_directions(&tuple, desc)?;
    }
    Ok(Json::Array(tuple.iter().map(|(v, _)| value_to_json(v)).collect()))
}

fn check_directions(tuple: &[(Value, Dir)], desc: &BTreeSet<usize>) -> Result<(), String> {
    for (position, (_, dir)) in tuple.iter().enumerate() {
        match (dir, desc.contains(&position)) {
            (Dir::Desc, false) => {
                return Err(format!("component {position} is descending but --desc does not list it"));
            }
            (Dir::Asc, true) => return Err(format!("component {position} is ascending but --desc lists it")),
            _ => {}
        }
    }
    Ok(())
}
