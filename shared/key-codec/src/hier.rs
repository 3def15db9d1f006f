//! Human-readable hierarchical keys in the single-table-design style: `PROJECT#35e9`,
//! `ACCOUNT#12345#ON`.
//!
//! Segments are joined with `#`. A segment containing `#` or `%` is escaped (`#` → `%23`,
//! `%` → `%25`), so every key splits back into exactly the segments it was built from. These keys
//! are for identity and `begins_with` on whole segments; they are not order-preserving. When
//! order matters, use [`TextKey`](crate::TextKey).

use crate::error::Error;
use crate::limit::KeyKind;

/// Separates segments.
pub const DELIMITER: char = '#';

/// Builds a hierarchical key.
///
/// ```
/// use key_codec::{HierKey, KeyKind, hier};
/// let key = HierKey::new("ACCOUNT").push("12345").push("ON").finish(KeyKind::Partition)?;
/// assert_eq!(key, "ACCOUNT#12345#ON");
/// assert_eq!(HierKey::new("TAG").push("C#").as_str(), "TAG#C%23");
/// assert_eq!(hier::split("TAG#C%23")?, ["TAG", "C#"]);
/// # Ok::<(), key_codec::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HierKey {
    buf: String,
}

impl HierKey {
    /// A key with one segment, usually an entity label such as `PROJECT`.
    pub fn new(first: &str) -> HierKey {
        let mut buf = String::with_capacity(first.len() + 16);
        escape_into(&mut buf, first);
        HierKey { buf }
    }

    /// Appends a segment.
    #[must_use]
    pub fn push(mut self, segment: &str) -> HierKey {
        self.buf.push(DELIMITER);
        escape_into(&mut self.buf, segment);
        self
    }

    /// The key so far.
    pub fn as_str(&self) -> &str {
        &self.buf
    }

    /// The key followed by the delimiter: `begins_with` on it selects the keys that extend this
    /// one by whole segments, and not `PROJECT#35e9x` when the key is `PROJECT#35e9`.
    pub fn children_prefix(&self) -> String {
        format!("{}{DELIMITER}", self.buf)
    }

    /// The key, checked against DynamoDB's limit for `kind`.
    pub fn finish(self, kind: KeyKind) -> Result<String, Error> {
        kind.check(self.buf.len())?;
        Ok(self.buf)
    }
}

fn escape_into(buf: &mut String, segment: &str) {
    for c in segment.chars() {
        match c {
            '#' => buf.push_str("%23"),
            '%' => buf.push_str("%25"),
            c => buf.push(c),
        }
    }
}

/// Splits a hierarchical key into its unescaped segments.
pub fn split(key: &str) -> Result<Vec<String>, Error> {
    key.split(DELIMITER)
        .map(|segment| {
            let mut out = String::with_capacity(segment.len());
            let mut rest = segment;
            while let Some(at) = rest.find('%') {
                out.push_str(&rest[..at]);
                match rest.get(at..at + 3) {
                    Some("%23") => out.push('#'),
                    Some("%25") => out.push('%'),
                    _ => {
                        return Err(Error::Hierarchical {
                            key: key.to_owned(),
                            reason: "'%' must start %23 (for '#') or %25 (for '%')",
                        });
                    }
                }
                rest = &rest[at + 3..];
            }
            out.push_str(rest);
            Ok(out)
        })
        .collect()
}
