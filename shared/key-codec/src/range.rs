//! Bounds for DynamoDB key conditions: a `BETWEEN` range over the component after a prefix, and
//! `begins_with` prefixes for string values.
//!
//! `begins_with(sk, prefix)` selects every key whose first components equal the prefix's; the
//! helpers here add a range on the next component, in value order, whatever its direction.

use std::ops::Bound;

use crate::binary::BinaryKey;
use crate::limit::KeyKind;
use crate::text::{ESCAPE, TERMINATOR, TextKey};
use crate::value::{Dir, Value};

/// Inclusive bounds for `sk BETWEEN :start AND :end`.
///
/// The bounds are query values, not keys: they may not decode. DynamoDB rejects `BETWEEN` with
/// `start > end`, which happens when the lower value bound is above the upper one; check
/// [`KeyRange::is_empty`] first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange<K> {
    /// The lowest key selected.
    pub start: K,
    /// The highest key selected.
    pub end: K,
}

impl<K: Ord> KeyRange<K> {
    /// True when no key can lie in the range.
    pub fn is_empty(&self) -> bool {
        self.start > self.end
    }
}

/// How a form builds bounds around an encoded key.
trait Form {
    type Key;
    fn with(prefix: &Self, value: &Value, dir: Dir) -> Self::Key;
    /// Above every key that extends `key`, below every key after them.
    fn after(key: Self::Key) -> Self::Key;
    /// Below every key that extends `key`, above every key before them.
    fn before(key: Self::Key) -> Self::Key;
    /// Below every key that extends the prefix by a component.
    fn lowest(prefix: &Self) -> Self::Key;
    /// Above every key that extends the prefix.
    fn highest(prefix: &Self) -> Self::Key;
}

impl Form for TextKey {
    type Key = String;
    fn with(prefix: &TextKey, value: &Value, dir: Dir) -> String {
        let mut key = prefix.clone();
        key.push(value, dir);
        key.into_string()
    }
    fn after(mut key: String) -> String {
        // Every component ends in '#'; '$' sorts just above it and below every continuation.
        if key.pop() == Some(char::from(TERMINATOR)) {
            key.push(char::from(ESCAPE));
        }
        key
    }
    fn before(mut key: String) -> String {
        // '"' sorts just below '#', and no encoded key contains a character below '#'.
        if key.pop() == Some(char::from(TERMINATOR)) {
            key.push('"');
        }
        key
    }
    fn lowest(prefix: &TextKey) -> String {
        format!("{}\"", prefix.as_str())
    }
    fn highest(prefix: &TextKey) -> String {
        // Every tag is at most '~'.
        format!("{}\u{7f}", prefix.as_str())
    }
}

impl Form for BinaryKey {
    type Key = Vec<u8>;
    fn with(prefix: &BinaryKey, value: &Value, dir: Dir) -> Vec<u8> {
        let mut key = prefix.clone();
        key.push(value, dir);
        key.into_bytes()
    }
    fn after(mut key: Vec<u8>) -> Vec<u8> {
        // A component is prefix-free and the next one starts with a tag, never FF.
        key.push(0xFF);
        key
    }
    fn before(mut key: Vec<u8>) -> Vec<u8> {
        // Decrement the last non-zero byte and pad with FF to the longest possible sort key:
        // every shorter key that sorts below `key` also sorts below this.
        if let Some(i) = key.iter().rposition(|&b| b != 0) {
            key.truncate(i + 1);
            key[i] -= 1;
            key.resize(KeyKind::Sort.max_bytes().max(i + 1), 0xFF);
        }
        key
    }
    fn lowest(prefix: &BinaryKey) -> Vec<u8> {
        let mut key = prefix.as_bytes().to_vec();
        key.push(0x00);
        key
    }
    fn highest(prefix: &BinaryKey) -> Vec<u8> {
        let mut key = prefix.as_bytes().to_vec();
        key.push(0xFF);
        key
    }
}

fn range<F: Form>(prefix: &F, lower: Bound<&Value>, upper: Bound<&Value>, dir: Dir) -> KeyRange<F::Key> {
    // A descending component stores the largest value first, so the value bounds swap ends.
    let (low, high) = match dir {
        Dir::Asc => (lower, upper),
        Dir::Desc => (upper, lower),
    };
    let start = match low {
        Bound::Unbounded => F::lowest(prefix),
        Bound::Included(v) => F::with(prefix, v, dir),
        Bound::Excluded(v) => F::after(F::with(prefix, v, dir)),
    };
    let end = match high {
        Bound::Unbounded => F::highest(prefix),
        Bound::Included(v) => F::after(F::with(prefix, v, dir)),
        Bound::Excluded(v) => F::before(F::with(prefix, v, dir)),
    };
    KeyRange { start, end }
}

impl TextKey {
    /// `BETWEEN` bounds for the keys that extend this prefix with a next component, encoded in
    /// direction `dir`, whose value lies between `lower` and `upper` (in value order, whatever
    /// the direction). Keys with further components after that one are included.
    ///
    /// ```
    /// use std::ops::Bound::{Excluded, Included};
    /// use key_codec::{Date, Dir, TextKey, Value};
    /// let mut project = TextKey::new();
    /// project.push_str("Open", Dir::Asc);
    /// let from = Value::Date(Date::parse("2024-01-01")?);
    /// let to = Value::Date(Date::parse("2024-02-01")?);
    /// let r = project.range(Included(&from), Excluded(&to), Dir::Asc);
    /// assert_eq!((r.start.as_str(), r.end.as_str()), ("sOpen#d2024-01-01#", "sOpen#d2024-02-01\""));
    /// # Ok::<(), key_codec::Error>(())
    /// ```
    pub fn range(&self, lower: Bound<&Value>, upper: Bound<&Value>, dir: Dir) -> KeyRange<String> {
        range(self, lower, upper, dir)
    }

    /// The `begins_with` operand selecting keys that extend this prefix with a string component
    /// starting with `prefix` (in direction `dir`).
    ///
    /// ```
    /// use key_codec::{Dir, TextKey};
    /// assert_eq!(TextKey::new().string_prefix("Open b", Dir::Asc), "sOpen$_b");
    /// ```
    pub fn string_prefix(&self, prefix: &str, dir: Dir) -> String {
        let mut key = self.clone();
        key.push_str(prefix, dir);
        let mut s = key.into_string();
        s.pop(); // the terminator
        if dir == Dir::Desc {
            s.pop(); // the '~' that ends a descending string
        }
        s
    }
}

impl BinaryKey {
    /// `BETWEEN` bounds for the keys that extend this prefix with a next component whose value
    /// lies between `lower` and `upper`. See [`TextKey::range`].
    pub fn range(&self, lower: Bound<&Value>, upper: Bound<&Value>, dir: Dir) -> KeyRange<Vec<u8>> {
        range(self, lower, upper, dir)
    }
}
