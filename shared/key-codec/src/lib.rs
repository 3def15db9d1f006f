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
//! # The ordering guarantee
//!
//! For tuples `a` and `b` with the same direction at each position,
//! `encode(a).cmp(&encode(b)) == tuple_cmp(a, b)`, comparing encodings as DynamoDB does: S values
//! by UTF-8 bytes, B values as unsigned bytes. Components compare by [`Value`]'s order: numbers
//! by exact decimal value, strings by code point, binary by unsigned bytes, dates and datetimes
//! chronologically. Across types, `Null < Binary < Date/DateTime < false < Number < String <
//! true` (the text form's tag letters). A shorter tuple sorts before its extensions.
//!
//! Two more properties follow from every component being self-terminating:
//! - **Prefix:** the encoding of a tuple's first `k` components is a byte prefix of the tuple's
//!   encoding, so `begins_with(sk, encode(prefix))` selects exactly the tuples that start with
//!   `prefix`. [`TextKey::range`] and [`BinaryKey::range`] add a range on the next component.
//! - **Round trip:** [`text::decode`] and [`binary::decode`] return the components and their
//!   directions. They accept only canonical encodings, so whatever decodes re-encodes to the
//!   same key, and they never panic, whatever the input.
//!
//! # Versions
//!
//! Keys are persisted, so both formats are frozen: [`TEXT_FORMAT`] is `"K1"` and
//! [`BINARY_FORMAT`] is `"B1"`. Keys do not carry the tag (it would cost bytes in every key); a
//! store that persists keys records it beside them. Any change to the layout below gets a new
//! tag and a migration, never an edit in place. The golden vectors in this crate's tests pin
//! every rule.
//!
//! # Text form K1 (S keys)
//!
//! Each component is a tag character, a body, and the terminator `#`. Every component is
//! terminated, the last one included. The output is valid UTF-8 and never contains U+0000.
//!
//! | type | tag asc / desc | ascending body | descending body |
//! |---|---|---|---|
//! | null | `%` / `~` | (none) | (none) |
//! | binary | `b` / `Y` | lowercase hex | hex of complemented bytes, then `~` |
//! | date | `d` / `W` | `YYYY-MM-DD` | digits nines-complemented, then `~` |
//! | datetime | `d` / `W` | `YYYY-MM-DDTHH:MM:SS[.f]` (UTC, no zone letter, fraction without trailing zeros) | digits nines-complemented, then `~` |
//! | false | `f` / `U` | (none) | (none) |
//! | number | `n` / `M` | see below | the ascending body of the negated number |
//! | string | `s` / `H` | the text, with U+0000–U+0024 escaped | hex of complemented UTF-8 bytes, then `~` |
//! | true | `t` / `G` | (none) | (none) |
//!
//! Descending tags mirror the ascending ones (`a`↔`Z`, `%`↔`~`), so upper case means descending.
//!
//! **Strings.** Every character from U+0000 to U+0024 (controls, space, `!`, `"`, `#`, `$`) is
//! written as `$` followed by the character plus 0x3F: space is `$_`, `#` is `$b`, `$` is `$c`,
//! U+0000 is `$?`. Everything else, all non-ASCII included, is verbatim. Why this orders
//! correctly: after a common prefix, the terminator `#` sorts below every body character, so a
//! shorter string sorts first, and an escape pair (`$`…) sorts below every verbatim character,
//! in the order of the characters it stands for.
//!
//! **Numbers**, ascending. Zero is `0`. A positive number is a class for its count `k` of
//! integer digits, then its plain decimal digits:
//! `@` for `k = 0` (body `.000ddd`), `A`…`Y` for `k = 1…25`, and `Z` plus three digits for
//! `k = 26…126`. So 7 is `nA7#`, 42.5 is `nB42.5#`, 0.05 is `n@.05#`. A negative number is `-`,
//! a mirrored class (`[` for `k = 0`, `Z`…`B` for `k = 1…25`, `A` plus `999 − k` in three digits
//! beyond), the nines' complement of the plain decimal, and `~`: -42 is `n-Y57~#`. The range is
//! all of DynamoDB's: 38 significant digits, magnitudes 1E-130 to 9.99…9E+125, up to 136 bytes
//! for the extremes.
//!
//! # Binary form B1 (B keys)
//!
//! Each component starts with a type tag. A descending component is the bitwise NOT of the
//! ascending one (valid because every component is prefix-free), so its tag is `!tag`.
//!
//! | type | ascending layout |
//! |---|---|
//! | null | `01` |
//! | binary | `10`, bytes with `00` escaped as `00 FF`, then `00 01` |
//! | date | `20`, days since 1970-01-01 as `i32` BE with the sign bit flipped, `00` |
//! | datetime | `20`, days as for a date, `01`, nanoseconds of the day as 6 bytes BE |
//! | false | `30` |
//! | number < 0 | `40`, then the NOT of the positive layout's exponent and digit bytes |
//! | zero | `41` |
//! | number > 0 | `42`, scientific exponent + 130 (one byte), base-100 digit pairs as `2x+1`, the last as `2x` |
//! | string | `50`, UTF-8 bytes escaped as for binary, then `00 01` |
//! | true | `60` |
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
