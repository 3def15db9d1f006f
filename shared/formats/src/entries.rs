//! The index entries one item image yields for one index: members, keys and items.
//!
//! An image's *members* are what the index fans out: the entries of a map, or the distinct
//! elements of a list or set. Each member becomes one index item whose keys are
//!
//! - partition key: the scope attributes' values, then the member's id (map key or element text),
//!   joined as a hierarchical key (`35e9#3812`);
//! - sort key: the member's value (maps only), then the tiebreakers, then the item's primary key,
//!   as one order-preserving tuple.
//!
//! Keys are computed per member only when needed: diffing compares members first.

use std::borrow::Cow;

use key_codec::{BinaryKey, Dir, HierKey, KeyKind, Number, TextKey, truncate_for_binary, truncate_for_text};
use serde_dynamo::{AttributeValue, Item};
use stream_record::wire::{Attr, WireImage};
use stream_record::{Attributes, limits};

use crate::config::{ENTRY_ATTRIBUTE, Index, KeyFormat, VALUE_ATTRIBUTE, VERSION_ATTRIBUTE};

/// A value that cannot go into an index key, and why.
pub(crate) type Unkeyable = String;

/// One fanned-out member of an image's source attribute.
#[derive(Debug, PartialEq)]
pub struct Member<'a> {
    /// The map key, or the element's text; unique within an image.
    pub id: Cow<'a, str>,
    /// The `entry` attribute: the map key or the element.
    pub entry: EntryValue<'a>,
    /// The map value (maps only).
    pub value: Option<&'a Attr<'a>>,
}

/// A map key or a scalar element, as stored in the `entry` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryValue<'a> {
    /// A string (map keys, SS and S elements).
    S(&'a str),
    /// A number (NS and N elements).
    N(&'a str),
}

/// A sort key in the index's format.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SortKey {
    /// K1, for an S sort key.
    Text(String),
    /// B1, for a B sort key.
    Binary(Vec<u8>),
}

impl SortKey {
    /// The key's bytes, in DynamoDB's order.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            SortKey::Text(s) => s.as_bytes(),
            SortKey::Binary(b) => b,
        }
    }

    /// The key as a DynamoDB value (S or B).
    pub fn into_attribute(self) -> AttributeValue {
        match self {
            SortKey::Text(s) => AttributeValue::S(s),
            SortKey::Binary(b) => AttributeValue::B(b),
        }
    }
}

/// An index entry's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryKey {
    /// The partition key: scope values, then the member.
    pub pk: String,
    /// The sort key: value, tiebreakers, base key.
    pub sk: SortKey,
}

/// What one index reads of one image: its source, scope, tiebreaker and include attributes,
/// each looked up once. Two images whose views are equal have the same entries.
#[derive(Debug, Clone)]
pub struct IndexView<'a> {
    index: &'a Index,
    source: Option<&'a Attr<'a>>,
    /// The scope, tiebreaker and include attributes' values, in that order; `None` where absent.
    copied: Vec<Option<&'a Attr<'a>>>,
}

impl<'a> IndexView<'a> {
    /// Looks up what `index` reads of `image`.
    pub fn new(index: &'a Index, image: &'a WireImage<'a>) -> IndexView<'a> {
        let names = index.scope.iter().chain(&index.tiebreakers).chain(&index.include);
        IndexView {
            index,
            source: image.get(&index.source),
            copied: names.map(|name| image.get(name)).collect(),
        }
    }

    /// The source attribute, if the image has it.
    pub fn source(&self) -> Option<&'a Attr<'a>> {
        self.source
    }

    /// Whether the attributes copied into every entry are the same in both views.
    pub fn same_copied(&self, other: &IndexView<'_>) -> bool {
        self.copied == other.copied
    }

    /// Whether the attributes that key every entry (scope and tiebreakers) are the same in both
    /// views: then a member with the same id and value has the same key in both.
    pub fn same_keying(&self, other: &IndexView<'_>) -> bool {
        let keying = self.index.scope.len() + self.index.tiebreakers.len();
        self.copied.get(..keying) == other.copied.get(..keying)
    }

    fn scope(&self) -> impl Iterator<Item = (&'a str, Option<&'a Attr<'a>>)> + '_ {
        let index = self.index;
        index.scope.iter().map(String::as_str).zip(self.copied.iter().copied())
    }

    fn tiebreakers(&self) -> impl Iterator<Item = (&'a str, Option<&'a Attr<'a>>)> + '_ {
        let index = self.index;
        let values = &self.copied[index.scope.len()..];
        index.tiebreakers.iter().map(String::as_str).zip(values.iter().copied())
    }

    /// The copied attributes the image has, with their names.
    fn present(&self) -> impl Iterator<Item = (&'a str, &'a Attr<'a>)> + '_ {
        let index = self.index;
        let names = index.scope.iter().chain(&index.tiebreakers).chain(&index.include);
        names.zip(&self.copied).filter_map(|(name, value)| value.map(|v| (name.as_str(), v)))
    }
}

/// Equal when the image's source and copied attributes are (both views of one index).
impl PartialEq for IndexView<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.copied == other.copied
    }
}

/// What every entry of one image shares, and its members.
pub struct ImageEntries<'a> {
    index: &'a Index,
    view: IndexView<'a>,
    /// The scope segments of the partition key, or why they cannot be keyed.
    prefix: Result<Option<HierKey>, Unkeyable>,
    /// The encoded tiebreakers and primary key, or why they cannot be keyed.
    suffix: Result<KeyBuf, Unkeyable>,
    /// The members of the source attribute that have a value to index.
    pub members: Vec<Member<'a>>,
    /// Members left out, with the reason.
    pub unkeyable_members: Vec<(String, Unkeyable)>,
}

impl<'a> ImageEntries<'a> {
    /// The entries `image` (an item of the base table, whose key is `base_key`) yields for `index`.
    pub fn new(
        index: &'a Index,
        base_key: &[(&str, &Attr<'_>)],
        image: &'a WireImage<'a>,
    ) -> ImageEntries<'a> {
        ImageEntries::from_view(base_key, IndexView::new(index, image))
    }

    /// The entries of an image whose attributes `view` has looked up already.
    pub fn from_view(base_key: &[(&str, &Attr<'_>)], view: IndexView<'a>) -> ImageEntries<'a> {
        let index = view.index;
        let mut unkeyable_members = Vec::new();
        let members = members(index, view.source, &mut unkeyable_members);
        ImageEntries {
            index,
            prefix: if members.is_empty() { Ok(None) } else { prefix(&view) },
            suffix: if members.is_empty() {
                Ok(KeyBuf::new(index.key_format))
            } else {
                suffix(&view, base_key)
            },
            view,
            members,
            unkeyable_members,
        }
    }

    /// What the index reads of the image.
    pub fn view(&self) -> &IndexView<'a> {
        &self.view
    }

    /// The key of one member, or why it has none.
    pub fn key(&self, member: &Member<'_>) -> Result<EntryKey, Unkeyable> {
        let prefix = self.prefix.as_ref().map_err(Clone::clone)?;
        let suffix = self.suffix.as_ref().map_err(Clone::clone)?;
        let pk = match prefix {
            Some(prefix) => prefix.clone().push(&member.id),
            None => HierKey::new(&member.id),
        };
        let pk = pk.finish(KeyKind::Partition).map_err(|e| format!("its partition key does not fit: {e}"))?;
        let mut sk = KeyBuf::new(self.index.key_format);
        if let Some(value) = member.value {
            let budget = KeyKind::Sort.max_bytes().saturating_sub(suffix.len());
            sk.push_fitting(value, budget)?;
        }
        sk.push_encoded(suffix);
        let sk = sk.finish()?;
        Ok(EntryKey { pk, sk })
    }
}

/// What every entry put from one image carries besides its key and member: the item's primary
/// key, the copied attributes and the version. Gathered and measured once per image, not once
/// per entry.
#[derive(Debug, Clone)]
pub struct Carried<'a> {
    attributes: Vec<(&'a str, &'a Attr<'a>)>,
    version: Option<String>,
    /// What they count towards an item's size.
    size: usize,
}

impl<'a> Carried<'a> {
    /// The base key's attributes, the copied attributes `view` found, and the record's version.
    pub fn new(
        base_key: &[(&'a str, &'a Attr<'a>)],
        view: &IndexView<'a>,
        version: Option<String>,
    ) -> Carried<'a> {
        let attributes: Vec<_> = base_key.iter().copied().chain(view.present()).collect();
        let size =
            attributes.iter().map(|(name, value)| name.len() + limits::attr_size(value)).sum::<usize>()
                + version.as_ref().map_or(0, |v| VERSION_ATTRIBUTE.len() + v.len());
        Carried { attributes, version, size }
    }
}

/// A member's own part of its entry (the `entry` and `value` attributes), borrowed from its
/// image: with its key and the image's [`Carried`], all an entry's item is made of. A plan keeps
/// these, and builds only the items its batch finally writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntryParts<'a> {
    entry: EntryValue<'a>,
    value: Option<&'a Attr<'a>>,
}

impl<'a> Member<'a> {
    /// Its part of its entry.
    pub fn parts(&self) -> EntryParts<'a> {
        EntryParts { entry: self.entry, value: self.value }
    }
}

impl EntryParts<'_> {
    /// The size of the entry's item under `key`, by DynamoDB's rules ([`stream_record::limits`]),
    /// without building it: what [`EntryParts::item`]'s item measures.
    pub fn size(&self, index: &Index, key: &EntryKey, carried: &Carried<'_>) -> usize {
        let entry = match self.entry {
            EntryValue::S(s) => s.len(),
            EntryValue::N(n) => limits::number_size(n),
        };
        let value = self.value.map_or(0, |v| VALUE_ATTRIBUTE.len() + limits::attr_size(v));
        index.partition_key.len()
            + key.pk.len()
            + index.sort_key.len()
            + key.sk.as_bytes().len()
            + ENTRY_ATTRIBUTE.len()
            + entry
            + value
            + carried.size
    }

    /// The index item under `key`.
    pub fn item(&self, index: &Index, key: EntryKey, carried: &Carried<'_>) -> Attributes {
        let mut item = Attributes::with_capacity(5 + carried.attributes.len());
        item.push(index.partition_key.as_str(), AttributeValue::S(key.pk));
        item.push(index.sort_key.as_str(), key.sk.into_attribute());
        let entry = match self.entry {
            EntryValue::S(s) => AttributeValue::S(s.to_owned()),
            EntryValue::N(n) => AttributeValue::N(n.to_owned()),
        };
        item.push(ENTRY_ATTRIBUTE, entry);
        if let Some(value) = self.value {
            item.push(VALUE_ATTRIBUTE, value.to_attribute());
        }
        for (name, value) in &carried.attributes {
            item.push(*name, value.to_attribute());
        }
        if let Some(version) = &carried.version {
            item.push(VERSION_ATTRIBUTE, AttributeValue::S(version.clone()));
        }
        item
    }
}

/// The version attribute's value for a record's sequence number, in epoch 0: the key crate's
/// fixed-width form (40 digits, zero-padded), so that comparing versions as strings (as a
/// condition expression does) compares the numbers. `None` for anything but 1 to 40 decimal
/// digits.
pub fn version(sequence_number: &str) -> Option<String> {
    version_in(0, sequence_number)
}

/// The highest version epoch.
pub const LAST_EPOCH: u32 = 99;

/// The version attribute's value for a record's sequence number in `epoch` (docs/formats.md,
/// "Versions across a stack's life"): in epoch 0 the 40 digits alone, as every version was
/// written before epochs; in a later one `E`, the epoch in two digits, then the 40 digits. As
/// strings, every version of an epoch sorts after every version of an earlier one (`E` after
/// every digit, then the epochs' digits), and within an epoch as the sequence numbers do. `None`
/// for a sequence number that is not 1 to 40 decimal digits, or an epoch past [`LAST_EPOCH`].
pub fn version_in(epoch: u32, sequence_number: &str) -> Option<String> {
    let digits = key_codec::SequenceNumber::parse(sequence_number).ok()?.to_fixed_width();
    match epoch {
        0 => Some(digits),
        1..=LAST_EPOCH => Some(format!("E{epoch:02}{digits}")),
        _ => None,
    }
}

/// The members of the source attribute: map entries, or distinct scalar elements.
fn members<'a>(
    index: &Index,
    source: Option<&'a Attr<'a>>,
    unkeyable: &mut Vec<(String, Unkeyable)>,
) -> Vec<Member<'a>> {
    let mut out = Vec::new();
    match source {
        None | Some(Attr::Null) => {}
        Some(Attr::M(map)) => {
            out.reserve(map.len());
            for (key, value) in map.iter() {
                match value {
                    Attr::M(_) | Attr::L(_) | Attr::Ss(_) | Attr::Ns(_) | Attr::Bs(_) => unkeyable.push((
                        key.to_owned(),
                        format!("its value is {}, which cannot be part of a key", value.type_name()),
                    )),
                    _ => out.push(Member {
                        id: Cow::Borrowed(key),
                        entry: EntryValue::S(key),
                        value: Some(value),
                    }),
                }
            }
        }
        Some(Attr::Ss(items)) => {
            out.extend(items.iter().map(|s| Member {
                id: Cow::Borrowed(s),
                entry: EntryValue::S(s),
                value: None,
            }));
        }
        Some(Attr::Ns(items)) => {
            for n in items {
                push_number(&mut out, n, unkeyable);
            }
        }
        Some(Attr::L(items)) => {
            for (i, element) in items.iter().enumerate() {
                match element {
                    Attr::S(s) => {
                        out.push(Member { id: Cow::Borrowed(s), entry: EntryValue::S(s), value: None });
                    }
                    Attr::N(n) => push_number(&mut out, n, unkeyable),
                    other => unkeyable.push((
                        format!("[{i}]"),
                        format!(
                            "the element is {}; list elements are indexed when they are S or N",
                            other.type_name()
                        ),
                    )),
                }
            }
        }
        Some(other) => unkeyable.push((
            index.source.clone(),
            format!("the source attribute is {}; it must be a map, a list, SS or NS", other.type_name()),
        )),
    }
    // Sorted, so plans are deterministic; deduplicated, because list elements (and strings equal
    // to numbers' text) can repeat and each id gets one entry.
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    out
}

fn push_number<'a>(out: &mut Vec<Member<'a>>, n: &'a str, unkeyable: &mut Vec<(String, Unkeyable)>) {
    match Number::parse(n) {
        // The canonical text, so "1.50" and "1.5" are one element.
        Ok(num) => out.push(Member { id: Cow::Owned(num.to_string()), entry: EntryValue::N(n), value: None }),
        Err(e) => unkeyable.push((n.to_owned(), format!("not a DynamoDB number: {e}"))),
    }
}

/// The scope segments that start the partition key; `None` when the index has no scope.
fn prefix(view: &IndexView<'_>) -> Result<Option<HierKey>, Unkeyable> {
    let mut key: Option<HierKey> = None;
    for (name, value) in view.scope() {
        let segment = match value {
            Some(Attr::S(s) | Attr::N(s)) => s.as_ref(),
            Some(other) => {
                return Err(format!(
                    "scope attribute {name:?} is {}; scope attributes must be S or N",
                    other.type_name()
                ));
            }
            None => return Err(format!("the item has no scope attribute {name:?}")),
        };
        key = Some(match key {
            Some(k) => k.push(segment),
            None => HierKey::new(segment),
        });
    }
    Ok(key)
}

fn suffix(view: &IndexView<'_>, base_key: &[(&str, &Attr<'_>)]) -> Result<KeyBuf, Unkeyable> {
    let mut key = KeyBuf::new(view.index.key_format);
    for (name, value) in view.tiebreakers() {
        key.push(value.unwrap_or(&Attr::Null)).map_err(|e| format!("tiebreaker {name:?}: {e}"))?;
    }
    for (name, v) in base_key {
        key.push(v).map_err(|e| format!("key attribute {name:?}: {e}"))?;
    }
    if key.len() > KeyKind::Sort.max_bytes() {
        return Err(format!(
            "the tiebreakers and primary key alone take {} bytes; a sort key holds at most {}",
            key.len(),
            KeyKind::Sort.max_bytes()
        ));
    }
    Ok(key)
}

/// A text or binary key under construction.
#[derive(Clone)]
pub(crate) enum KeyBuf {
    Text(TextKey),
    Binary(BinaryKey),
}

impl KeyBuf {
    pub(crate) fn new(format: KeyFormat) -> KeyBuf {
        match format {
            KeyFormat::Text => KeyBuf::Text(TextKey::new()),
            KeyFormat::Binary => KeyBuf::Binary(BinaryKey::new()),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            KeyBuf::Text(k) => k.len(),
            KeyBuf::Binary(k) => k.len(),
        }
    }

    /// Appends a scalar attribute value as one key component.
    pub(crate) fn push(&mut self, value: &Attr<'_>) -> Result<(), Unkeyable> {
        macro_rules! push {
            ($k:expr) => {{
                match value {
                    Attr::S(s) => {
                        $k.push_str(s, Dir::Asc);
                    }
                    Attr::N(n) => {
                        let n = Number::parse(n).map_err(|e| format!("not a DynamoDB number: {e}"))?;
                        $k.push_number(&n, Dir::Asc);
                    }
                    Attr::B(b) => {
                        $k.push_bytes(b, Dir::Asc);
                    }
                    Attr::Bool(b) => {
                        $k.push_bool(*b, Dir::Asc);
                    }
                    Attr::Null => {
                        $k.push_null(Dir::Asc);
                    }
                    other => return Err(format!("{} cannot be part of a key", other.type_name())),
                }
            }};
        }
        match self {
            KeyBuf::Text(k) => push!(k),
            KeyBuf::Binary(k) => push!(k),
        }
        Ok(())
    }

    /// Appends `value`, truncating a string so the component takes at most `budget` bytes.
    fn push_fitting(&mut self, value: &Attr<'_>, budget: usize) -> Result<(), Unkeyable> {
        let start = self.len();
        self.push(value)?;
        if self.len() - start <= budget {
            return Ok(());
        }
        let Attr::S(s) = value else {
            return Err(format!(
                "its {}-byte value does not fit in the {budget} bytes of sort key left after the tiebreakers and primary key",
                self.len() - start
            ));
        };
        *self = match self {
            KeyBuf::Text(_) => {
                let mut k = TextKey::new();
                k.push_str(truncate_for_text(s, Dir::Asc, budget), Dir::Asc);
                KeyBuf::Text(k)
            }
            KeyBuf::Binary(_) => {
                let mut k = BinaryKey::new();
                k.push_str(truncate_for_binary(s, budget), Dir::Asc);
                KeyBuf::Binary(k)
            }
        };
        Ok(())
    }

    fn push_encoded(&mut self, other: &KeyBuf) {
        match (self, other) {
            (KeyBuf::Text(k), KeyBuf::Text(o)) => {
                k.push_encoded(o);
            }
            (KeyBuf::Binary(k), KeyBuf::Binary(o)) => {
                k.push_encoded(o);
            }
            // Both come from the same index's format.
            _ => unreachable!("key formats are per index"),
        }
    }

    pub(crate) fn finish(self) -> Result<SortKey, Unkeyable> {
        let e = |e: key_codec::Error| format!("its sort key does not fit: {e}");
        match self {
            KeyBuf::Text(k) => k.finish(KeyKind::Sort).map(SortKey::Text).map_err(e),
            KeyBuf::Binary(k) => k.finish(KeyKind::Sort).map(SortKey::Binary).map_err(e),
        }
    }
}

/// An item's key (its base-table key attributes, in `base_key`'s order) as the text key encoding
/// of those values: the same for every record of one item, whatever spelling of a number a
/// record carries, and distinct for distinct items. What an index entry's sort key ends with.
pub fn item_key(base_key: &[(&str, &Attr<'_>)]) -> Result<String, Unkeyable> {
    let mut key = KeyBuf::new(KeyFormat::Text);
    for (name, v) in base_key {
        key.push(v).map_err(|e| format!("key attribute {name:?}: {e}"))?;
    }
    match key {
        KeyBuf::Text(k) => Ok(k.into_string()),
        KeyBuf::Binary(_) => unreachable!("made as a text key"),
    }
}

/// Whether `item`, an item of the base table whose key attributes are `base_key`, has an entry
/// for `member` (a map key, or an element's text) in `index`: whether the indexer writes one.
/// An item that lacks the member, or whose value cannot be keyed, has none.
pub fn has_entry(index: &Index, base_key: &[String], item: &Item, member: &str) -> bool {
    let item = WireImage::from_item(item);
    let Some(key) =
        base_key.iter().map(|name| item.get(name).map(|v| (name.as_str(), v))).collect::<Option<Vec<_>>>()
    else {
        return false;
    };
    let entries = ImageEntries::new(index, &key, &item);
    entries.members.iter().any(|m| m.id == member && entries.key(m).is_ok())
}
