//! DynamoDB's key-size limits, and truncation of long strings so an index on them still fits.

use std::fmt;

use crate::error::Error;
use crate::text::ESCAPE;
use crate::value::Dir;

/// Which key attribute a key is for; each has its own byte limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// A partition (hash) key: 1 to 2048 bytes.
    Partition,
    /// A sort (range) key: 1 to 1024 bytes.
    Sort,
}

impl KeyKind {
    /// The largest encoded size DynamoDB accepts, in bytes.
    pub const fn max_bytes(self) -> usize {
        match self {
            KeyKind::Partition => 2048,
            KeyKind::Sort => 1024,
        }
    }

    /// Checks an encoded size against this kind's limit.
    pub fn check(self, bytes: usize) -> Result<(), Error> {
        if bytes == 0 {
            Err(Error::Empty { kind: self })
        } else if bytes > self.max_bytes() {
            Err(Error::TooLong { kind: self, actual: bytes })
        } else {
            Ok(())
        }
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::Partition => "partition key",
            KeyKind::Sort => "sort key",
        })
    }
}

/// The longest prefix of `s`, cut at a character boundary, whose text-form string component
/// (tag, body and terminator) takes at most `budget` bytes.
///
/// The cut is made in the raw value, so it never splits an escape pair, and the truncated value
/// sorts exactly where the value's prefix sorts. Values that share the kept prefix become equal
/// in the key, so keep a unique tiebreaker component after it (and the full value elsewhere in
/// the item). Returns `s` unchanged when it fits; an empty string when even that does not.
///
/// ```
/// use key_codec::{Dir, TextKey, truncate_for_text};
/// let long = "a b".repeat(1000);
/// let kept = truncate_for_text(&long, Dir::Asc, 100);
/// let mut key = TextKey::new();
/// key.push_str(kept, Dir::Asc);
/// assert!(key.len() <= 100 && key.len() >= 99);
/// ```
pub fn truncate_for_text(s: &str, dir: Dir, budget: usize) -> &str {
    // Tag and terminator, plus '~' for descending.
    let overhead = if dir == Dir::Asc { 2 } else { 3 };
    prefix_within(s, budget.saturating_sub(overhead), |c| match dir {
        Dir::Asc if u32::from(c) <= u32::from(ESCAPE) => 2,
        Dir::Asc => c.len_utf8(),
        Dir::Desc => 2 * c.len_utf8(),
    })
}

/// The longest prefix of `s`, cut at a character boundary, whose binary-form string component
/// takes at most `budget` bytes. See [`truncate_for_text`].
pub fn truncate_for_binary(s: &str, budget: usize) -> &str {
    // Tag plus the 00 01 terminator; U+0000 is escaped to two bytes.
    prefix_within(s, budget.saturating_sub(3), |c| if c == '\0' { 2 } else { c.len_utf8() })
}

fn prefix_within(s: &str, budget: usize, cost: impl Fn(char) -> usize) -> &str {
    let mut used = 0;
    for (at, c) in s.char_indices() {
        used += cost(c);
        if used > budget {
            return &s[..at];
        }
    }
    s
}
