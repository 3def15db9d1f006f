//! Typed, order-preserving DynamoDB keys.
//!
//! A key is a tuple of typed components ([`Value`]: string, number, binary, boolean, null, date,
//! datetime), each ascending or descending ([`Dir`]). It encodes to a DynamoDB S value
//! ([`TextKey`], format **K1**) or B value ([`BinaryKey`], format **B1**) whose byte order is the
//! tuple order, so a `Query` returns items in tuple order and `begins_with`/`BETWEEN` select
//! tuple prefixes and ranges.
//!
//! ```
//! use key_codec::{Dir, KeyKind, Number, TextKey, Value, text};
//! // (status, priority descending, id): the usual `#`-joined key mis-sorts all three.
//! let mut key = TextKey::new();
//! key.push_str("In progress", Dir::Asc)
//!     .push_number(&Number::parse("-1.5")?, Dir::Desc)
//!     .push_str("SRC#7", Dir::Asc);
//! assert_eq!(key.as_str(), "sIn$_progress#MA1.5#sSRC$b7#");
//! let decoded = text::decode(key.as_str())?;
//! assert_eq!(decoded[2], (Value::from("SRC#7"), Dir::Asc));
//! let sort_key = key.finish(KeyKind::Sort)?; // checked against the 1024-byte limit
//! # Ok::<(), key_codec::Error>(())
//! ```
//!
//! # The format
//!
//! Byte order equals tuple order, a tuple prefix is a byte prefix, and decoding accepts only
//! canonical keys. Both forms are frozen and versioned, [`TEXT_FORMAT`] `"K1"` and
//! [`BINARY_FORMAT`] `"B1"`: their specification, with vectors, is in `docs/formats.md` at the
//! repository's root, and the golden vectors in this crate's tests pin every rule.
//!
//! # Limits and long values
//!
//! [`TextKey::finish`] and [`BinaryKey::finish`] check the encoded size against [`KeyKind`]:
//! 1024 bytes for a sort key, 2048 for a partition key, and at least 1. Escaping can double a
//! string, and extreme numbers take up to 136 bytes, so check every key you build from data.
//! To index long text anyway, [`truncate_for_text`] and [`truncate_for_binary`] cut the raw
//! value at a character boundary so its component fits a byte budget. Follow it with a unique
//! tiebreaker.
//!
//! # Also here
//! - [`HierKey`] and [`hier::split`]: readable single-table keys such as `ACCOUNT#12345#ON`,
//!   with `#` in a segment escaped.
//! - [`SequenceNumber`]: stream sequence numbers (up to 40 digits) as fixed-width strings that
//!   sort numerically, for watermarks.

/// A key form's constructors over its `push_*` methods, the same for both forms: an empty key,
/// a whole tuple, and any typed value appended.
macro_rules! tuple_encoding {
    ($key:ident) => {
        impl $key {
            /// An empty key.
            pub fn new() -> $key {
                $key::default()
            }

            /// Encodes a whole tuple.
            pub fn from_tuple<'a>(components: impl IntoIterator<Item = (&'a Value, Dir)>) -> $key {
                let mut key = $key::new();
                for (value, dir) in components {
                    key.push(value, dir);
                }
                key
            }

            /// Appends any typed value.
            pub fn push(&mut self, value: &Value, dir: Dir) -> &mut $key {
                match value {
                    Value::Null => self.push_null(dir),
                    Value::Bool(b) => self.push_bool(*b, dir),
                    Value::Number(n) => self.push_number(n, dir),
                    Value::String(s) => self.push_str(s, dir),
                    Value::Binary(b) => self.push_bytes(b, dir),
                    Value::Date(d) => self.push_date(*d, dir),
                    Value::DateTime(t) => self.push_datetime(*t, dir),
                }
            }
        }
    };
}
pub(crate) use tuple_encoding;

/// A form's `Decoder`, the same for both forms: a `Cursor` over the key, and an iterator over its
/// components, each in turn and nothing after the first error; and the cursor's errors, naming
/// the form's `FORMAT` and the offset. `$cursor` starts the cursor at `key`, the first byte.
macro_rules! component_iterator {
    ($(#[$doc:meta])* $key:ty => $cursor:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct Decoder<'a> {
            cursor: Cursor<'a>,
            failed: bool,
        }

        impl<'a> Decoder<'a> {
            /// A decoder positioned at the first component of `key`.
            pub fn new(key: $key) -> Decoder<'a> {
                Decoder {
                    cursor: $cursor(key),
                    failed: false,
                }
            }
        }

        impl Cursor<'_> {
            /// A malformed key, at the cursor.
            fn fail<T>(&self, reason: &'static str) -> Result<T, Error> {
                Err(Error::Malformed {
                    format: FORMAT,
                    offset: self.at,
                    reason,
                })
            }
        }

        impl Iterator for Decoder<'_> {
            type Item = Result<(Value, Dir), Error>;
            fn next(&mut self) -> Option<Self::Item> {
                if self.failed || self.cursor.at >= self.cursor.key.len() {
                    return None;
                }
                let item = self.cursor.component();
                self.failed = item.is_err();
                Some(item)
            }
        }
    };
}
pub(crate) use component_iterator;

pub mod binary;
mod error;
pub mod hier;
mod limit;
mod number;
mod range;
mod seq;
pub mod text;
mod time;
mod value;

#[cfg(test)]
mod tests;

pub use binary::BinaryKey;
pub use error::{Error, NumberError};
pub use hier::HierKey;
pub use limit::{KeyKind, truncate_for_binary, truncate_for_text};
pub use number::{MAX_DIGITS, MAX_EXPONENT, MIN_EXPONENT, Number};
pub use range::KeyRange;
pub use seq::{SequenceNumber, WIDTH as SEQUENCE_NUMBER_WIDTH};
pub use text::TextKey;
pub use time::{Date, DateTime};
pub use value::{Dir, Value, tuple_cmp};

/// What a key builder reserves on its first write: one allocation covers most keys.
const TYPICAL_KEY_BYTES: usize = 64;

/// The version tag of the text form.
pub const TEXT_FORMAT: &str = "K1";
/// The version tag of the binary form.
pub const BINARY_FORMAT: &str = "B1";

/// The README's example, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
