//! The persisted archive format (version 2; version 1 is read too): object keys, and the encoding
//! and decoding of lines.
//!
//! The crate documentation specifies the format; this module is its only implementation, used by
//! the function to write archives and by `sidestream archive` to read them back.

use std::io::{self, Read};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{Datelike, NaiveDate};
use flate2::read::MultiGzDecoder;
use key_codec::SequenceNumber;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_dynamo::Item;
use stream_record::wire::{Attr, WireImage};

/// The format version written, in every metadata line and on every object. Version 2 names an
/// object by its run's first and last sequence numbers (version 1: by the first alone); the
/// lines are the same.
pub const VERSION: u32 = 2;

/// The versions read.
pub const READS: [u32; 2] = [1, VERSION];

/// The folder, right under the prefix, that holds the metadata objects.
pub(crate) const META_DIR: &str = "_meta";

/// The suffix of every archive object.
pub const SUFFIX: &str = ".json.gz";

/// A source table and a UTC deletion day: the Hive partition an object lives in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Partition {
    /// The source table's name.
    pub table: String,
    /// The day TTL deleted the items, in UTC.
    pub date: NaiveDate,
}

impl Partition {
    /// `table=…/year=YYYY/month=MM/day=DD/`.
    pub fn path(&self) -> String {
        format!(
            "table={}/year={:04}/month={:02}/day={:02}/",
            self.table,
            self.date.year(),
            self.date.month(),
            self.date.day()
        )
    }
}

/// An object's name: the run's first and last records' sequence numbers, each zero-padded to 40
/// digits, then the first record's `eventID` with everything but ASCII letters, digits and `-`
/// left out, joined by `-`. A retry that archives fewer records of the same run (it starts at
/// the same record but ends earlier) names another object, so it can never replace an object
/// that holds more records.
pub fn object_name(first: &SequenceNumber, last: &SequenceNumber, event_id: &str) -> String {
    let mut name = first.to_fixed_width();
    name.push('-');
    name.push_str(&last.to_fixed_width());
    let id: String = event_id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(128).collect();
    if !id.is_empty() {
        name.push('-');
        name.push_str(&id);
    }
    name
}

/// The key of an item object.
pub fn data_key(prefix: &str, partition: &Partition, name: &str) -> String {
    format!("{prefix}{}{name}{SUFFIX}", partition.path())
}

/// The key of the metadata object that goes with an item object.
pub fn meta_key(prefix: &str, partition: &Partition, name: &str) -> String {
    format!("{prefix}{META_DIR}/{}{name}{SUFFIX}", partition.path())
}

/// The key of the metadata object that goes with the item object `data_key`: `_meta/` inserted
/// before its `table=` partition. `None` when it has none.
pub fn meta_key_of(data_key: &str) -> Option<String> {
    let at = data_key
        .match_indices("table=")
        .map(|(at, _)| at)
        .find(|&at| at == 0 || data_key[..at].ends_with('/'))?;
    Some(format!("{}{META_DIR}/{}", &data_key[..at], &data_key[at..]))
}

/// Whether `key` is a metadata object (some folder in it is `_meta`).
pub fn is_meta_key(key: &str) -> bool {
    key.split('/').rev().skip(1).any(|segment| segment == META_DIR)
}

/// The table an archive key's `table=` partition names, if it has one.
pub fn table_of_key(key: &str) -> Option<&str> {
    key.split('/').find_map(|segment| segment.strip_prefix("table="))
}

/// An item as DynamoDB JSON, attributes in byte order of their names (so the same item always
/// encodes to the same bytes), binary as standard base64: [`ImageJson`] of the same item.
#[derive(Debug, Clone, Copy)]
pub struct DynamoJson<'a>(pub &'a Item);

impl Serialize for DynamoJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ImageJson(&WireImage::from_item(self.0)).serialize(serializer)
    }
}

struct Base64List<'a>(&'a [Vec<u8>]);

impl Serialize for Base64List<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for b in self.0 {
            seq.serialize_element(&BASE64.encode(b))?;
        }
        seq.end()
    }
}

/// An image read in place ([`stream_record::wire`]) as DynamoDB JSON: `{"S":"…"}`, `{"N":"…"}`,
/// `{"B":"<base64>"}`, and so on, attributes in byte order of their names (an image keeps them
/// so), binary as standard base64.
#[derive(Debug, Clone, Copy)]
pub struct ImageJson<'r, 'a>(pub &'r WireImage<'a>);

impl Serialize for ImageJson<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0.iter() {
            map.serialize_entry(name, &TypedAttr(value))?;
        }
        map.end()
    }
}

/// One value as DynamoDB JSON.
struct TypedAttr<'r, 'a>(&'r Attr<'a>);

impl Serialize for TypedAttr<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match self.0 {
            Attr::S(s) => map.serialize_entry("S", s)?,
            Attr::N(n) => map.serialize_entry("N", n)?,
            Attr::B(b) => map.serialize_entry("B", &BASE64.encode(b))?,
            Attr::Bool(b) => map.serialize_entry("BOOL", b)?,
            Attr::Null => map.serialize_entry("NULL", &true)?,
            Attr::Ss(v) => map.serialize_entry("SS", v)?,
            Attr::Ns(v) => map.serialize_entry("NS", v)?,
            Attr::Bs(v) => map.serialize_entry("BS", &Base64List(v))?,
            Attr::M(m) => map.serialize_entry("M", &ImageJson(m))?,
            Attr::L(l) => map.serialize_entry("L", &AttrList(l))?,
        }
        map.end()
    }
}

struct AttrList<'r, 'a>(&'r [Attr<'a>]);

impl Serialize for AttrList<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for v in self.0 {
            seq.serialize_element(&TypedAttr(v))?;
        }
        seq.end()
    }
}

/// An item line as written: `{"Item":…}`, the item as [`DynamoJson`] or [`ImageJson`].
#[derive(Debug, Serialize)]
pub struct ItemLineRef<T> {
    /// The deleted item.
    #[serde(rename = "Item")]
    pub item: T,
}

/// A metadata line as written, with its keys in DynamoDB JSON ([`DynamoJson`]) or, for display,
/// in any other form.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaLineRef<'a, K> {
    /// [`VERSION`].
    pub v: u32,
    /// The record's `eventID`.
    #[serde(rename = "eventID")]
    pub event_id: &'a str,
    /// The record's sequence number.
    pub sequence_number: &'a str,
    /// When TTL deleted the item (`ApproximateCreationDateTime`), RFC 3339 in UTC.
    pub deleted_at: &'a str,
    /// The source table.
    pub table: &'a str,
    /// The item's key.
    pub keys: K,
    /// Whether only the keys were archived (the stream had no `OldImage`).
    pub keys_only: bool,
}

/// A metadata line as read back.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetaLine {
    /// The format version.
    pub v: u32,
    /// The record's `eventID`.
    #[serde(rename = "eventID")]
    pub event_id: String,
    /// The record's sequence number.
    pub sequence_number: String,
    /// When TTL deleted the item, RFC 3339 in UTC.
    pub deleted_at: String,
    /// The source table.
    pub table: String,
    /// The item's key.
    pub keys: Item,
    /// Whether only the keys were archived.
    pub keys_only: bool,
}

impl MetaLine {
    /// The line for writing, with `keys` in place of the line's own.
    pub fn with_keys<K>(&self, keys: K) -> MetaLineRef<'_, K> {
        MetaLineRef {
            v: self.v,
            event_id: &self.event_id,
            sequence_number: &self.sequence_number,
            deleted_at: &self.deleted_at,
            table: &self.table,
            keys,
            keys_only: self.keys_only,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemLine {
    #[serde(rename = "Item")]
    item: Item,
}

/// One line of an archive object, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A line of an item object.
    Item(Item),
    /// A line of a metadata object.
    Meta(MetaLine),
}

/// Why an archive object cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The object is not gzip, or is truncated.
    #[error("not a readable gzip stream: {0}")]
    Gzip(io::Error),
    /// A line is neither an item line nor a metadata line.
    #[error("line {line}: {reason} (expected {{\"Item\":{{…}}}} or a version-{VERSION} metadata line)")]
    Line {
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A metadata line of a format version this build does not know.
    #[error("line {line}: archive format version {found}, but this build reads versions {READS:?}")]
    Version {
        /// The 1-based line number.
        line: usize,
        /// The version the line states.
        found: u32,
    },
}

/// Decompresses an archive object and parses its lines.
pub fn read(object: &[u8]) -> Result<Vec<Line>, FormatError> {
    let mut text = Vec::with_capacity(object.len().saturating_mul(6));
    MultiGzDecoder::new(object).read_to_end(&mut text).map_err(FormatError::Gzip)?;
    text.split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| parse_line(i + 1, line))
        .collect()
}

/// The one field every metadata line has, read first so a newer version gets its own error.
#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

fn parse_line(line: usize, bytes: &[u8]) -> Result<Line, FormatError> {
    let bad = |e: serde_json::Error| FormatError::Line { line, reason: e.to_string() };
    if bytes.starts_with(b"{\"Item\"") {
        return serde_json::from_slice::<ItemLine>(bytes).map(|l| Line::Item(l.item)).map_err(bad);
    }
    let VersionOnly { v } = serde_json::from_slice(bytes).map_err(bad)?;
    if !READS.contains(&v) {
        return Err(FormatError::Version { line, found: v });
    }
    serde_json::from_slice::<MetaLine>(bytes).map(Line::Meta).map_err(bad)
}

/// Gzip-compressed JSON lines, built one line at a time and compressed whole when finished, by
/// libdeflate (whole-buffer: a batch's lines are at most a few MB, Lambda's payload limit being
/// 6 MB).
pub struct GzLines {
    level: libdeflater::CompressionLvl,
    lines_json: Vec<u8>,
    lines: usize,
}

impl GzLines {
    /// An empty object compressed at `level` (1-9). The gzip header has no file name and a zero
    /// timestamp, so the same lines always compress to the same bytes.
    pub fn new(level: u32) -> GzLines {
        let level = i32::try_from(level.clamp(1, 9)).unwrap_or(6);
        GzLines {
            level: libdeflater::CompressionLvl::new(level).unwrap_or_default(),
            lines_json: Vec::with_capacity(64 * 1024),
            lines: 0,
        }
    }

    /// Appends `value` as one line of JSON; a value that cannot be written leaves nothing of
    /// itself behind.
    pub fn push(&mut self, value: &impl Serialize) -> io::Result<()> {
        let start = self.lines_json.len();
        if let Err(e) = serde_json::to_writer(&mut self.lines_json, value) {
            self.lines_json.truncate(start);
            return Err(e.into());
        }
        self.lines_json.push(b'\n');
        self.lines += 1;
        Ok(())
    }

    /// Lines pushed so far.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Uncompressed bytes pushed so far.
    pub fn raw_bytes(&self) -> usize {
        self.lines_json.len()
    }

    /// The compressed object.
    pub fn finish(self) -> io::Result<Vec<u8>> {
        let mut compressor = libdeflater::Compressor::new(self.level);
        let mut out = vec![0; compressor.gzip_compress_bound(self.lines_json.len())];
        let n = compressor
            .gzip_compress(&self.lines_json, &mut out)
            .map_err(|e| io::Error::other(format!("libdeflate: {e}")))?;
        out.truncate(n);
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
