//! The page cursor: where the next page starts, in which phase, for which query — opaque to
//! callers, signed so that a changed cursor is refused rather than followed.
//!
//! # Format `g1`
//!
//! `g1.<payload>.<tag>`: the phase, DynamoDB's `LastEvaluatedKey`, the query's fingerprint and
//! the issue time, signed with HMAC-SHA256. Specified, with a vector, in `docs/formats.md` at the
//! repository's root; pinned by `the_format_is_pinned`.
//!
//! A cursor is refused when it is malformed, when its tag does not match (tampered, or made with
//! another key), when it was made for another query, or when it is older than the reader allows
//! (stale: the items have moved on since).

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The format tag, the cursor's first segment.
pub const VERSION: &str = "g1";

const TAG_BYTES: usize = 16;

/// Which phase a page comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The index table: items that have the field, in the field's order.
    Index,
    /// The items without the field, in `num` order.
    Nulls,
}

/// A decoded cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    /// The phase the next page comes from.
    pub phase: Phase,
    /// Where in that phase (`ExclusiveStartKey`, DynamoDB JSON); `None` from its start.
    pub key: Option<Value>,
}

/// Why a cursor is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not a cursor this version makes.
    #[error("the cursor is malformed ({0}); pass the cursor a page printed, unchanged")]
    Malformed(String),
    /// The signature does not match.
    #[error("the cursor has been altered (its signature does not match); start again without --cursor")]
    Tampered,
    /// Made for another scope, field, order or filter.
    #[error(
        "the cursor belongs to another query (scope, field, order or filter differ); start again without --cursor"
    )]
    OtherQuery,
    /// Too old.
    #[error("the cursor is stale: made {age} s ago, and cursors last {max} s; start again without --cursor")]
    Stale {
        /// Its age in seconds.
        age: u64,
        /// The longest allowed.
        max: u64,
    },
}

/// Signs and checks cursors with one key.
#[derive(Clone)]
pub struct Signer {
    key: Vec<u8>,
    max_age: u64,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("max_age", &self.max_age).finish_non_exhaustive()
    }
}

/// The fingerprint of a query, from its parts.
pub fn fingerprint(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update(part.len().to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().iter().take(8).fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

impl Signer {
    /// A signer with `key` whose cursors last `max_age` seconds.
    pub fn new(key: &[u8], max_age: u64) -> Signer {
        Signer { key: key.to_vec(), max_age }
    }

    fn mac(&self, signed: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(signed.as_bytes());
        mac
    }

    fn tag(&self, signed: &str) -> Vec<u8> {
        let mac = self.mac(signed);
        mac.finalize().into_bytes()[..TAG_BYTES].to_vec()
    }

    /// Encodes `cursor` for the query with `fingerprint`, issued at `now` (epoch seconds).
    pub fn encode(&self, cursor: &Cursor, fingerprint: &str, now: u64) -> String {
        let phase = match cursor.phase {
            Phase::Index => "index",
            Phase::Nulls => "nulls",
        };
        let payload = json!({"q": fingerprint, "p": phase, "k": cursor.key, "t": now});
        let signed = format!("{VERSION}.{}", B64.encode(payload.to_string()));
        let tag = B64.encode(self.tag(&signed));
        format!("{signed}.{tag}")
    }

    /// Decodes a cursor for the query with `fingerprint`, at `now`.
    pub fn decode(&self, text: &str, fingerprint: &str, now: u64) -> Result<Cursor, CursorError> {
        let malformed = |why: &str| CursorError::Malformed(why.to_owned());
        let (signed, tag) = text.trim().rsplit_once('.').ok_or_else(|| malformed("no signature"))?;
        let (version, payload) = signed.split_once('.').ok_or_else(|| malformed("no payload"))?;
        if version != VERSION {
            return Err(malformed(&format!("version {version:?}, expected {VERSION}")));
        }
        let tag = B64.decode(tag).map_err(|_| malformed("the signature is not base64url"))?;
        let mac = self.mac(signed);
        if tag.len() != TAG_BYTES || mac.verify_truncated_left(&tag).is_err() {
            return Err(CursorError::Tampered);
        }
        let payload: Value = B64
            .decode(payload)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| malformed("the payload is not base64url JSON"))?;
        if payload.get("q").and_then(Value::as_str) != Some(fingerprint) {
            return Err(CursorError::OtherQuery);
        }
        let issued = payload.get("t").and_then(Value::as_u64).ok_or_else(|| malformed("no issue time"))?;
        let age = now.saturating_sub(issued);
        if age > self.max_age {
            return Err(CursorError::Stale { age, max: self.max_age });
        }
        let phase = match payload.get("p").and_then(Value::as_str) {
            Some("index") => Phase::Index,
            Some("nulls") => Phase::Nulls,
            _ => return Err(malformed("no phase")),
        };
        let key = match payload.get("k") {
            None | Some(Value::Null) => None,
            Some(key @ Value::Object(_)) => Some(key.clone()),
            Some(_) => return Err(malformed("the key is not an object")),
        };
        Ok(Cursor { phase, key })
    }
}

#[cfg(test)]
mod tests;
