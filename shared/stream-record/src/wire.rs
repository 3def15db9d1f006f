//! Lambda's DynamoDB event read in place: records, images and values borrowed from the event's
//! bytes, for the hot path of a batch.
//!
//! [`Batch::parse`] reads the event's JSON once into compact types that point into the input:
//! a string without escapes is a slice of it, a number stays its text, an image is a vector of
//! (name, value) pairs sorted by name (no hashing, no owned copies). This is how the runtime
//! reads Lambda's invocation, and every function plans from it; the edges that keep a record
//! whole (parking) go back to the event's text (`stream_runtime::whole`).
//! [`WireRecord::from_event_record`] views records decoded already (in process, Kinesis) the
//! same way.
//!
//! The reader is strict where a plan depends on it (a value is one of DynamoDB's ten types,
//! written as one `{"T": …}` object; a record's `dynamodb` is an object) and lenient elsewhere
//! (unknown fields are ignored, a missing image is empty, fields no plan reads such as
//! `SizeBytes` are not required), so that it accepts every event `aws_lambda_events` accepts
//! (the `wire` fuzz target checks it). `B` and `BS` values are decoded from base64 here.

use std::borrow::Cow;
use std::fmt;

use aws_lambda_events::event::dynamodb::StreamViewType;
use base64::Engine as _;
use chrono::{DateTime, TimeZone as _, Utc};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_dynamo::{AttributeValue, Item};

use crate::record::{ChangeKind, Image, RecordError};
use aws_lambda_events::event::dynamodb::EventRecord;

/// A string of the event: borrowed unless it held escapes.
pub(crate) type Str<'a> = Cow<'a, str>;

/// One attribute value, borrowed from the event where it can be.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr<'a> {
    /// A string.
    S(Str<'a>),
    /// A number, as its text.
    N(Str<'a>),
    /// Binary, decoded from base64.
    B(Vec<u8>),
    /// A boolean.
    Bool(bool),
    /// Null.
    Null,
    /// A map.
    M(WireImage<'a>),
    /// A list.
    L(Vec<Attr<'a>>),
    /// A string set.
    Ss(Vec<Str<'a>>),
    /// A number set, as the numbers' text.
    Ns(Vec<Str<'a>>),
    /// A binary set.
    Bs(Vec<Vec<u8>>),
}

/// An item, an image or a map: (name, value) pairs sorted by name, names unique.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireImage<'a>(Vec<(Str<'a>, Attr<'a>)>);

/// Images up to this many attributes are searched by a scan, larger ones by halves.
const SCAN_UP_TO: usize = 16;

impl<'a> WireImage<'a> {
    /// The value of `name`, if the image has it.
    pub fn get(&self, name: &str) -> Option<&Attr<'a>> {
        // Most images are small: a scan that compares lengths first costs fewer string
        // comparisons than a binary search does (the plan looks up a few names a record).
        if self.0.len() <= SCAN_UP_TO {
            return self.0.iter().find(|(n, _)| n.len() == name.len() && n.as_ref() == name).map(|(_, v)| v);
        }
        self.0.binary_search_by(|(n, _)| n.as_ref().cmp(name)).ok().map(|i| &self.0[i].1)
    }

    /// Whether the image has `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// How many attributes it has.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has none (an image a stream's view type left out).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Its attributes, sorted by name.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Attr<'a>)> {
        self.0.iter().map(|(n, v)| (n.as_ref(), v))
    }

    /// An owned item (`serde_dynamo`), equal to this image.
    pub fn to_item(&self) -> Item {
        let mut item = Item::default();
        item.reserve(self.0.len());
        for (name, value) in &self.0 {
            item.insert(name.to_string(), value.to_attribute());
        }
        item
    }

    /// An image borrowing from an owned item.
    pub fn from_item(item: &'a Item) -> WireImage<'a> {
        WireImage::from_pairs(
            item.iter().map(|(n, v)| (Cow::Borrowed(n.as_str()), Attr::from_attribute(v))).collect(),
        )
    }

    /// Sorts and deduplicates pairs (the last of equal names wins, as in a JSON object read into a map).
    fn from_pairs(mut pairs: Vec<(Str<'a>, Attr<'a>)>) -> WireImage<'a> {
        if !pairs.is_sorted_by(|a, b| name_order(&a.0, &b.0).is_lt()) {
            // Stable, so that among equal names the last written comes last; `dedup_by` keeps
            // the first of a run, so the later value is swapped into it.
            pairs.sort_by(|a, b| name_order(&a.0, &b.0));
            pairs.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    std::mem::swap(later, kept);
                }
                same
            });
        }
        WireImage(pairs)
    }
}

/// Byte order of two names, deciding on the first byte where it differs: an image's names mostly
/// do (`id`, `name`, `state`), and an inline byte comparison is cheaper than a call to `memcmp`
/// for each of a sort's comparisons (docs/benchmarks.md, the decode path).
fn name_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

impl<'a> Attr<'a> {
    /// DynamoDB's name for the value's type (`S`, `N`, `M`, …), for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Attr::S(_) => "S",
            Attr::N(_) => "N",
            Attr::B(_) => "B",
            Attr::Bool(_) => "BOOL",
            Attr::Null => "NULL",
            Attr::M(_) => "M",
            Attr::L(_) => "L",
            Attr::Ss(_) => "SS",
            Attr::Ns(_) => "NS",
            Attr::Bs(_) => "BS",
        }
    }

    /// The owned value (`serde_dynamo`).
    pub fn to_attribute(&self) -> AttributeValue {
        let strings = |v: &[Str<'_>]| v.iter().map(ToString::to_string).collect();
        match self {
            Attr::S(s) => AttributeValue::S(s.to_string()),
            Attr::N(n) => AttributeValue::N(n.to_string()),
            Attr::B(b) => AttributeValue::B(b.clone()),
            Attr::Bool(b) => AttributeValue::Bool(*b),
            Attr::Null => AttributeValue::Null(true),
            Attr::M(m) => {
                AttributeValue::M(m.0.iter().map(|(n, v)| (n.to_string(), v.to_attribute())).collect())
            }
            Attr::L(l) => AttributeValue::L(l.iter().map(Attr::to_attribute).collect()),
            Attr::Ss(v) => AttributeValue::Ss(strings(v)),
            Attr::Ns(v) => AttributeValue::Ns(strings(v)),
            Attr::Bs(v) => AttributeValue::Bs(v.clone()),
        }
    }

    /// A value borrowing from an owned one.
    pub fn from_attribute(value: &'a AttributeValue) -> Attr<'a> {
        let strings = |v: &'a [String]| v.iter().map(|s| Cow::Borrowed(s.as_str())).collect();
        match value {
            AttributeValue::S(s) => Attr::S(Cow::Borrowed(s)),
            AttributeValue::N(n) => Attr::N(Cow::Borrowed(n)),
            AttributeValue::B(b) => Attr::B(b.clone()),
            AttributeValue::Bool(b) => Attr::Bool(*b),
            AttributeValue::Null(_) => Attr::Null,
            AttributeValue::M(m) => Attr::M(WireImage::from_pairs(
                m.iter().map(|(n, v)| (Cow::Borrowed(n.as_str()), Attr::from_attribute(v))).collect(),
            )),
            AttributeValue::L(l) => Attr::L(l.iter().map(Attr::from_attribute).collect()),
            AttributeValue::Ss(v) => Attr::Ss(strings(v)),
            AttributeValue::Ns(v) => Attr::Ns(strings(v)),
            AttributeValue::Bs(v) => Attr::Bs(v.clone()),
        }
    }
}

/// Lambda's DynamoDB event, read in place.
#[derive(Debug)]
pub struct Batch<'a> {
    /// Its records, in the event's order.
    pub records: Vec<WireRecord<'a>>,
}

/// Why an event cannot be read: it is not Lambda's DynamoDB event.
#[derive(Debug, thiserror::Error)]
#[error("the event is not a DynamoDB stream event: {0}")]
pub struct WireError(serde_json::Error);

impl From<serde_json::Error> for WireError {
    fn from(e: serde_json::Error) -> WireError {
        WireError(e)
    }
}

impl<'a> Batch<'a> {
    /// Reads an event's JSON.
    pub fn parse(json: &'a str) -> Result<Batch<'a>, WireError> {
        #[derive(serde::Deserialize)]
        struct Outer<'a> {
            #[serde(rename = "Records", borrow)]
            records: Vec<RecordFields<'a>>,
        }
        let outer: Outer<'a> = serde_json::from_str(json)?;
        let records = outer.records.into_iter().map(WireRecord::from_fields).collect();
        Ok(Batch { records })
    }
}

/// The identity that made a change (TTL deletes are the DynamoDB service's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity<'a> {
    /// `type`.
    pub type_: Str<'a>,
    /// `principalId`.
    pub principal_id: Str<'a>,
}

/// One stream record, read in place: what a plan reads of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireRecord<'a> {
    /// `eventID`.
    pub event_id: Str<'a>,
    /// `eventName`.
    pub event_name: Str<'a>,
    /// `userIdentity`.
    pub user_identity: Option<Identity<'a>>,
    /// `dynamodb.Keys`.
    pub keys: WireImage<'a>,
    /// `dynamodb.NewImage`, empty when absent.
    pub new_image: WireImage<'a>,
    /// `dynamodb.OldImage`, empty when absent.
    pub old_image: WireImage<'a>,
    /// `dynamodb.SequenceNumber`.
    pub sequence_number: Option<Str<'a>>,
    /// `dynamodb.StreamViewType`.
    pub stream_view_type: Option<Str<'a>>,
    /// `eventSourceARN`: the stream's ARN, which names the table.
    pub event_source_arn: Option<Str<'a>>,
    /// `dynamodb.ApproximateCreationDateTime`: when the change was made (the Unix epoch when
    /// absent), read as `aws_lambda_events` reads it.
    pub approximate_creation_date_time: DateTime<Utc>,
}

impl<'a> WireRecord<'a> {
    fn from_fields(fields: RecordFields<'a>) -> WireRecord<'a> {
        let change = fields.dynamodb.unwrap_or_default();
        WireRecord {
            event_id: fields.event_id.map(|s| s.0).unwrap_or_default(),
            event_name: fields.event_name.map(|s| s.0).unwrap_or_default(),
            user_identity: fields.user_identity,
            keys: change.keys.unwrap_or_default(),
            new_image: change.new_image.unwrap_or_default(),
            old_image: change.old_image.unwrap_or_default(),
            sequence_number: change.sequence_number.map(|s| s.0),
            stream_view_type: change.stream_view_type.map(|s| s.0),
            event_source_arn: fields.event_source_arn.map(|s| s.0),
            approximate_creation_date_time: change
                .approximate_creation_date_time
                .map_or(DateTime::UNIX_EPOCH, |t| t.0),
        }
    }

    /// Records decoded already (in process, from a Kinesis event), each viewed as
    /// [`WireRecord::from_event_record`] views it.
    pub fn view_all(records: &'a [EventRecord]) -> Vec<WireRecord<'a>> {
        records.iter().map(WireRecord::from_event_record).collect()
    }

    /// The same record, borrowing from one `aws_lambda_events` decoded.
    pub fn from_event_record(raw: &'a EventRecord) -> WireRecord<'a> {
        let change = &raw.change;
        WireRecord {
            event_id: Cow::Borrowed(&raw.event_id),
            event_name: Cow::Borrowed(&raw.event_name),
            user_identity: raw.user_identity.as_ref().map(|id| Identity {
                type_: Cow::Borrowed(&id.type_),
                principal_id: Cow::Borrowed(&id.principal_id),
            }),
            keys: WireImage::from_item(&change.keys),
            new_image: WireImage::from_item(&change.new_image),
            old_image: WireImage::from_item(&change.old_image),
            sequence_number: change.sequence_number.as_deref().map(Cow::Borrowed),
            stream_view_type: change.stream_view_type.as_ref().map(|v| Cow::Owned(view_name(v))),
            event_source_arn: raw.event_source_arn.as_deref().map(Cow::Borrowed),
            approximate_creation_date_time: change.approximate_creation_date_time,
        }
    }

    /// The record's change, checked as [`crate::Record`] checks it: a known `eventName`, `Keys`,
    /// and the images the change implies.
    pub fn change(&self) -> Result<Change<'_, 'a>, RecordError> {
        let kind = ChangeKind::parse(&self.event_name)?;
        if self.keys.is_empty() {
            return Err(RecordError::MissingKeys(kind));
        }
        let image = |which: Image| {
            let image = match which {
                Image::Old => &self.old_image,
                Image::New => &self.new_image,
            };
            if image.is_empty() {
                Err(RecordError::MissingImage {
                    kind,
                    image: which,
                    view: self.stream_view_type.as_deref().unwrap_or("unstated").to_owned(),
                })
            } else {
                Ok(image)
            }
        };
        let before = match kind {
            ChangeKind::Insert => None,
            ChangeKind::Modify | ChangeKind::Remove => Some(image(Image::Old)?),
        };
        let after = match kind {
            ChangeKind::Remove => None,
            ChangeKind::Insert | ChangeKind::Modify => Some(image(Image::New)?),
        };
        Ok(Change { kind, keys: &self.keys, before, after })
    }

    /// The record's sequence number, when it has a non-empty one.
    pub fn sequence_number(&self) -> Option<&str> {
        self.sequence_number.as_deref().filter(|s| !s.is_empty())
    }

    /// Whether DynamoDB's TTL process deleted the item, as [`crate::Record::is_ttl_delete`] says.
    pub fn is_ttl_delete(&self) -> bool {
        self.event_name == ChangeKind::Remove.as_str()
            && self
                .user_identity
                .as_ref()
                .is_some_and(|id| id.type_ == "Service" && id.principal_id == crate::record::TTL_PRINCIPAL)
    }
}

/// A record's change, checked ([`WireRecord::change`]).
#[derive(Debug, Clone, Copy)]
pub struct Change<'r, 'a> {
    /// What happened to the item.
    pub kind: ChangeKind,
    /// The item's primary key, never empty.
    pub keys: &'r WireImage<'a>,
    /// The item before the change: `None` for an INSERT.
    pub before: Option<&'r WireImage<'a>>,
    /// The item after the change: `None` for a REMOVE.
    pub after: Option<&'r WireImage<'a>>,
}

/// The `StreamViewType` spelling of a view type.
pub(crate) fn view_name(view: &StreamViewType) -> String {
    match view {
        StreamViewType::KeysOnly => "KEYS_ONLY".to_owned(),
        other => other.to_string(),
    }
}

#[derive(serde::Deserialize)]
struct RecordFields<'a> {
    #[serde(rename = "eventID", borrow, default)]
    event_id: Option<S<'a>>,
    #[serde(rename = "eventName", borrow, default)]
    event_name: Option<S<'a>>,
    #[serde(rename = "userIdentity", borrow, default)]
    user_identity: Option<Identity<'a>>,
    #[serde(borrow, default)]
    dynamodb: Option<ChangeFields<'a>>,
    #[serde(rename = "eventSourceARN", borrow, default)]
    event_source_arn: Option<S<'a>>,
}

#[derive(Default, serde::Deserialize)]
struct ChangeFields<'a> {
    #[serde(rename = "Keys", borrow, default)]
    keys: Option<WireImage<'a>>,
    #[serde(rename = "NewImage", borrow, default)]
    new_image: Option<WireImage<'a>>,
    #[serde(rename = "OldImage", borrow, default)]
    old_image: Option<WireImage<'a>>,
    #[serde(rename = "SequenceNumber", borrow, default)]
    sequence_number: Option<S<'a>>,
    #[serde(rename = "StreamViewType", borrow, default)]
    stream_view_type: Option<S<'a>>,
    #[serde(rename = "ApproximateCreationDateTime", default)]
    approximate_creation_date_time: Option<EpochSeconds>,
}

/// `ApproximateCreationDateTime`: seconds since the epoch, an integer or a float, read as
/// `aws_lambda_events` reads it (its fraction times 10^6 taken as nanoseconds), so that both
/// decoders agree on every event.
struct EpochSeconds(DateTime<Utc>);

impl<'de> Deserialize<'de> for EpochSeconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_f64(EpochVisitor).map(EpochSeconds)
    }
}

struct EpochVisitor;

impl EpochVisitor {
    fn at<E: de::Error>(seconds: i64, nanos: u32, shown: &dyn fmt::Display) -> Result<DateTime<Utc>, E> {
        Utc.timestamp_opt(seconds, nanos)
            .single()
            .ok_or_else(|| E::custom(format_args!("value is not a legal timestamp: {shown}")))
    }
}

impl Visitor<'_> for EpochVisitor {
    type Value = DateTime<Utc>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a unix timestamp as a float")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        #[expect(clippy::cast_possible_wrap, reason = "as aws_lambda_events reads it")]
        EpochVisitor::at(v as i64, 0, &v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        EpochVisitor::at(v, 0, &v)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "as aws_lambda_events reads it"
        )]
        let (seconds, nanos) = (v.trunc() as i64, (v.fract() * 1_000_000.).floor() as u32);
        EpochVisitor::at(seconds, nanos, &v)
    }
}

/// A string, borrowed when it has no escapes (serde's `Cow` always copies).
struct S<'a>(Str<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for S<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrVisitor).map(S)
    }
}

struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Str<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Identity<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Fields<'a> {
            #[serde(rename = "type", borrow, default)]
            type_: Option<S<'a>>,
            #[serde(rename = "principalId", borrow, default)]
            principal_id: Option<S<'a>>,
        }
        let f = Fields::deserialize(d)?;
        Ok(Identity {
            type_: f.type_.map(|s| s.0).unwrap_or_default(),
            principal_id: f.principal_id.map(|s| s.0).unwrap_or_default(),
        })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for WireImage<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ImageVisitor)
    }
}

struct ImageVisitor;

impl<'de> Visitor<'de> for ImageVisitor {
    type Value = WireImage<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an item: a map of attribute names to DynamoDB values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(name) = map.next_key::<S<'de>>()? {
            pairs.push((name.0, map.next_value::<Attr<'de>>()?));
        }
        Ok(WireImage::from_pairs(pairs))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Attr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(AttrVisitor)
    }
}

struct AttrVisitor;

fn strings(list: Vec<S<'_>>) -> Vec<Str<'_>> {
    list.into_iter().map(|s| s.0).collect()
}

fn base64<E: de::Error>(text: &str) -> Result<Vec<u8>, E> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| E::custom(format_args!("a B value is not base64: {e}")))
}

impl<'de> Visitor<'de> for AttrVisitor {
    type Value = Attr<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a DynamoDB value: an object with one of S, N, B, BOOL, NULL, M, L, SS, NS, BS")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Some(tag) = map.next_key::<S<'de>>()? else {
            return Err(de::Error::custom("a DynamoDB value has no type"));
        };
        let value = match tag.0.as_ref() {
            "S" => Attr::S(map.next_value::<S<'de>>()?.0),
            "N" => Attr::N(map.next_value::<S<'de>>()?.0),
            "B" => Attr::B(base64(&map.next_value::<S<'de>>()?.0)?),
            "BOOL" => Attr::Bool(map.next_value()?),
            "NULL" => {
                map.next_value::<bool>()?;
                Attr::Null
            }
            "M" => Attr::M(map.next_value()?),
            "L" => Attr::L(map.next_value::<Vec<Attr<'de>>>()?),
            "SS" => Attr::Ss(strings(map.next_value()?)),
            "NS" => Attr::Ns(strings(map.next_value()?)),
            "BS" => Attr::Bs(
                map.next_value::<Vec<S<'de>>>()?.iter().map(|s| base64(&s.0)).collect::<Result<_, _>>()?,
            ),
            other => {
                return Err(de::Error::custom(format_args!(
                    "{other:?} is not a DynamoDB type (S, N, B, BOOL, NULL, M, L, SS, NS, BS)"
                )));
            }
        };
        if map.next_key::<IgnoredAny>()?.is_some() {
            return Err(de::Error::custom("a DynamoDB value has more than one type"));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests;
