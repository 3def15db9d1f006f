//! What a restore does with the TTL attribute of the items it puts back: pure rules, no I/O.
//!
//! Every archived item was deleted by TTL, so its TTL attribute is in the past. Put back as it
//! is, DynamoDB deletes it again within days, and the archiver archives it a second time. A
//! restore therefore needs a choice when any item would expire again: keep the attribute
//! (knowingly), clear it, or extend it.

use serde_dynamo::{AttributeValue, Item};

/// DynamoDB ignores a TTL more than five years in the past: such items are never deleted.
pub const IGNORED_AFTER_SECONDS: i64 = 5 * 365 * 86_400;

/// What to do with the TTL attribute of every restored item that has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlChoice {
    /// Leave it: items whose TTL has passed are deleted again (and archived again).
    Keep,
    /// Remove it: the items never expire.
    Clear,
    /// Set it this many days from now.
    Extend {
        /// Days from the restore.
        days: u32,
    },
}

impl TtlChoice {
    /// Reads `keep`, `clear` or `extend=DAYS` (1 to 36,500).
    pub fn parse(text: &str) -> Result<TtlChoice, String> {
        match text {
            "keep" => Ok(TtlChoice::Keep),
            "clear" => Ok(TtlChoice::Clear),
            other => {
                let days = other
                    .strip_prefix("extend=")
                    .ok_or_else(|| format!("{other:?} is not keep, clear or extend=DAYS"))?;
                days.parse::<u32>()
                    .ok()
                    .filter(|d| (1..=36_500).contains(d))
                    .map(|days| TtlChoice::Extend { days })
                    .ok_or_else(|| format!("extend={days}: DAYS is a whole number from 1 to 36500"))
            }
        }
    }
}

/// Whether `item`'s TTL attribute `name` makes DynamoDB delete it at `now` (epoch seconds): a
/// Number in the past, but not more than five years past.
pub fn expired(item: &Item, name: &str, now: i64) -> bool {
    let Some(AttributeValue::N(n)) = item.get(name) else {
        return false;
    };
    let Ok(at) = n.parse::<f64>() else {
        return false;
    };
    #[expect(clippy::cast_precision_loss, reason = "epoch seconds fit an f64 exactly")]
    let (now, oldest) = (now as f64, (now - IGNORED_AFTER_SECONDS) as f64);
    at < now && at >= oldest
}

/// Applies `choice` to `item`'s attribute `name`; whether the item changed.
pub fn apply(item: &mut Item, name: &str, choice: TtlChoice, now: i64) -> bool {
    if item.get(name).is_none() {
        return false;
    }
    match choice {
        TtlChoice::Keep => false,
        TtlChoice::Clear => item.inner_mut().remove(name).is_some(),
        TtlChoice::Extend { days } => {
            let at = now.saturating_add(i64::from(days) * 86_400);
            item.inner_mut().insert(name.to_owned(), AttributeValue::N(at.to_string()));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_795_000_000;

    fn item(ttl: Option<AttributeValue>) -> Item {
        let mut map = std::collections::HashMap::new();
        map.insert("id".to_owned(), AttributeValue::S("a".into()));
        if let Some(ttl) = ttl {
            map.insert("expires_at".to_owned(), ttl);
        }
        Item::from(map)
    }

    #[test]
    fn choices_parse_and_bad_ones_say_what_is_allowed() {
        assert_eq!(TtlChoice::parse("keep"), Ok(TtlChoice::Keep));
        assert_eq!(TtlChoice::parse("clear"), Ok(TtlChoice::Clear));
        assert_eq!(TtlChoice::parse("extend=30"), Ok(TtlChoice::Extend { days: 30 }));
        for bad in ["", "Keep", "extend", "extend=0", "extend=-1", "extend=40000", "extend=1.5"] {
            let error = TtlChoice::parse(bad).unwrap_err();
            assert!(error.contains("extend") || error.contains("DAYS"), "{bad}: {error}");
        }
    }

    #[test]
    fn expiry_follows_dynamodb_rules() {
        let n = |v: i64| Some(AttributeValue::N(v.to_string()));
        for (ttl, want) in [
            (n(NOW - 1), true),
            (n(NOW - IGNORED_AFTER_SECONDS), true),
            (n(NOW - IGNORED_AFTER_SECONDS - 1), false),
            (n(NOW), false),
            (n(NOW + 60), false),
            (Some(AttributeValue::N("1.7e9".into())), true),
            (Some(AttributeValue::S("1700000000".into())), false),
            (None, false),
        ] {
            assert_eq!(expired(&item(ttl.clone()), "expires_at", NOW), want, "{ttl:?}");
        }
    }

    #[test]
    fn choices_change_only_items_with_the_attribute() {
        let past = || item(Some(AttributeValue::N((NOW - 10).to_string())));
        let mut kept = past();
        assert!(!apply(&mut kept, "expires_at", TtlChoice::Keep, NOW));
        assert_eq!(kept, past());
        let mut cleared = past();
        assert!(apply(&mut cleared, "expires_at", TtlChoice::Clear, NOW));
        assert_eq!(cleared, item(None));
        let mut extended = past();
        assert!(apply(&mut extended, "expires_at", TtlChoice::Extend { days: 2 }, NOW));
        assert_eq!(extended, item(Some(AttributeValue::N((NOW + 2 * 86_400).to_string()))));
        let mut without = item(None);
        assert!(!apply(&mut without, "expires_at", TtlChoice::Extend { days: 2 }, NOW));
        assert_eq!(without, item(None));
    }
}
