//! A typed view of one DynamoDB stream record: change kind, keys, images, sequence number.

use std::fmt;

use io_policy::FailureKind;

use crate::wire::{WireImage, WireRecord};

/// What happened to the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// A new item was written.
    Insert,
    /// An existing item was changed.
    Modify,
    /// An item was deleted, by a user or by TTL.
    Remove,
}

impl ChangeKind {
    /// Parses a record's `eventName`.
    pub fn parse(event_name: &str) -> Result<ChangeKind, RecordError> {
        match event_name {
            "INSERT" => Ok(ChangeKind::Insert),
            "MODIFY" => Ok(ChangeKind::Modify),
            "REMOVE" => Ok(ChangeKind::Remove),
            other => Err(RecordError::UnknownEventName(other.to_owned())),
        }
    }

    /// The `eventName` spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Insert => "INSERT",
            ChangeKind::Modify => "MODIFY",
            ChangeKind::Remove => "REMOVE",
        }
    }
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One of a record's two item images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Image {
    /// The item before the change (`OldImage`).
    Old,
    /// The item after the change (`NewImage`).
    New,
}

impl fmt::Display for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Image::Old => "OldImage",
            Image::New => "NewImage",
        })
    }
}

/// Why a record cannot be read. None of these go away on retry: the record is malformed
/// (record-permanent) or the stream is misconfigured (systemic); see [`RecordError::kind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// `eventName` is not INSERT, MODIFY or REMOVE.
    #[error("eventName {0:?} is not INSERT, MODIFY or REMOVE")]
    UnknownEventName(String),
    /// The record has no `Keys`.
    #[error("{0} record has no Keys")]
    MissingKeys(ChangeKind),
    /// The stream's view type does not include an image this change needs.
    #[error(
        "{kind} record has no {image}: the stream's view type is {view}, and this function needs \
         NEW_AND_OLD_IMAGES (or one that includes {image})"
    )]
    MissingImage {
        /// The record's change kind.
        kind: ChangeKind,
        /// The image that is missing.
        image: Image,
        /// The stream's view type as the record states it, or "unstated".
        view: String,
    },
    /// No usable sequence number: the record can neither be ordered nor be a checkpoint.
    #[error("SequenceNumber {0:?} is not a stream sequence number (1-40 decimal digits)")]
    SequenceNumber(String),
}

impl RecordError {
    /// The kind of failure: a stream without the image a change needs is the stream's
    /// configuration (every record fails alike, so it is systemic); the others are this record's
    /// own content.
    pub fn kind(&self) -> FailureKind {
        match self {
            RecordError::MissingImage { .. } => FailureKind::Systemic,
            RecordError::UnknownEventName(_)
            | RecordError::MissingKeys(_)
            | RecordError::SequenceNumber(_) => FailureKind::RecordPermanent,
        }
    }
}

/// The principal that performs TTL deletes.
pub(crate) const TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

/// A stream record whose change kind has been checked; its keys and images are checked when
/// asked for, so that a function reads only what it needs (the aggregator, say, takes a record
/// without an `OldImage`).
#[derive(Debug, Clone, Copy)]
pub struct Record<'r, 'a> {
    raw: &'r WireRecord<'a>,
    kind: ChangeKind,
}

impl<'r, 'a> Record<'r, 'a> {
    /// Reads a record's change kind; everything else is checked when it is asked for.
    pub fn new(raw: &'r WireRecord<'a>) -> Result<Record<'r, 'a>, RecordError> {
        Ok(Record { raw, kind: ChangeKind::parse(&raw.event_name)? })
    }

    /// The record as read.
    pub fn raw(&self) -> &'r WireRecord<'a> {
        self.raw
    }

    /// What happened to the item.
    pub fn kind(&self) -> ChangeKind {
        self.kind
    }

    /// The record's sequence number, when it has a non-empty one.
    pub fn sequence_number(&self) -> Option<&'r str> {
        self.raw.sequence_number()
    }

    /// The record's sequence number, read: its order in the item's history.
    pub fn sequence(&self) -> Result<key_codec::SequenceNumber, RecordError> {
        let seq = self.sequence_number().unwrap_or_default();
        key_codec::SequenceNumber::parse(seq).map_err(|_| RecordError::SequenceNumber(seq.to_owned()))
    }

    /// The item's primary key. Every view type carries it.
    pub fn keys(&self) -> Result<&'r WireImage<'a>, RecordError> {
        let keys = &self.raw.keys;
        if keys.is_empty() { Err(RecordError::MissingKeys(self.kind)) } else { Ok(keys) }
    }

    /// The item as it was before the change: `None` for an INSERT, the old image otherwise.
    pub fn before(&self) -> Result<Option<&'r WireImage<'a>>, RecordError> {
        match self.kind {
            ChangeKind::Insert => Ok(None),
            ChangeKind::Modify | ChangeKind::Remove => self.image(Image::Old).map(Some),
        }
    }

    /// The item as it is after the change: `None` for a REMOVE, the new image otherwise.
    pub fn after(&self) -> Result<Option<&'r WireImage<'a>>, RecordError> {
        match self.kind {
            ChangeKind::Remove => Ok(None),
            ChangeKind::Insert | ChangeKind::Modify => self.image(Image::New).map(Some),
        }
    }

    /// One image, required. An item always has its key attributes, so an empty image means the
    /// stream's view type left it out.
    pub fn image(&self, image: Image) -> Result<&'r WireImage<'a>, RecordError> {
        let item = match image {
            Image::Old => &self.raw.old_image,
            Image::New => &self.raw.new_image,
        };
        if item.is_empty() {
            Err(RecordError::MissingImage {
                kind: self.kind,
                image,
                view: self.raw.stream_view_type.as_deref().unwrap_or("unstated").to_owned(),
            })
        } else {
            Ok(item)
        }
    }

    /// Whether DynamoDB's TTL process deleted the item (rather than a user or application).
    pub fn is_ttl_delete(&self) -> bool {
        self.raw.is_ttl_delete()
    }
}

#[cfg(test)]
mod tests;
