//! Backfill touches: the marker a backfill sets on an existing item so that the stream carries it.
//!
//! `sidestream index backfill` brings items written before the indexer existed into the index
//! without racing the live stream: it does not write index entries itself. It makes one of the
//! two [`MARKERS`] appear on the item, holding the run's id (an `UpdateItem` conditioned on the
//! item still existing), and the stream delivers that change in the item's own order, after every
//! earlier change and before every later one. The functions read such a record like this:
//!
//! - the **indexer** puts every entry of the new image ([`is_touched`]), not only the entries
//!   whose attributes changed, since the old image's entries were never written;
//! - the **aggregator** and the **archiver** ignore a record that changed nothing but a marker
//!   ([`is_touch_only`]): no count and no user data changed.
//!
//! **Two markers, so that a filter can tell a touch** (touch/2). A touch sets [`TOUCH_ATTRIBUTE`]
//! and removes [`RETOUCH_ATTRIBUTE`], or, on an item that already carries [`TOUCH_ATTRIBUTE`],
//! sets [`RETOUCH_ATTRIBUTE`] and removes [`TOUCH_ATTRIBUTE`]. So every touch makes a marker
//! *appear*: absent from the old image, present in the new. The application's own writes never
//! do (an update keeps the markers as they were, a whole-item put drops them), and a Lambda
//! filter can test that one image at a time: [`KEEP_CHANGES_FILTERS`] lets another consumer of
//! the stream drop the touches.
//!
//! A touch writes nothing but the markers: it never changes user data, and never sets or moves a
//! TTL. Their names and values are part of the persisted formats (`docs/formats.md`).

use stream_record::wire::WireImage;

/// The first marker a touch sets: the run's id (S). Touch/1 had this one alone.
pub const TOUCH_ATTRIBUTE: &str = "sidestream_touch";

/// The second marker: set instead of [`TOUCH_ATTRIBUTE`] on an item that already carries it.
pub const RETOUCH_ATTRIBUTE: &str = "sidestream_retouch";

/// Both markers; an item carries at most one of them.
pub const MARKERS: [&str; 2] = [TOUCH_ATTRIBUTE, RETOUCH_ATTRIBUTE];

/// The touch's two requests (docs/formats.md, "Touch marker"): for each marker to set, an
/// `UpdateItem`'s update expression and condition, over the names `#t` ([`TOUCH_ATTRIBUTE`]),
/// `#r` ([`RETOUCH_ATTRIBUTE`]) and `#k` (a key attribute), and the value `:run` (the run's id).
/// The conditions are complementary on an existing item the run has not touched: exactly one of
/// the two writes, and neither on an item gone or touched by this run already.
pub const TOUCH_REQUESTS: [(&str, &str, &str); 2] = [
    (
        TOUCH_ATTRIBUTE,
        "SET #t = :run REMOVE #r",
        "attribute_exists(#k) AND (attribute_not_exists(#t) OR attribute_exists(#r)) \
         AND (attribute_not_exists(#t) OR #t <> :run) AND (attribute_not_exists(#r) OR #r <> :run)",
    ),
    (
        RETOUCH_ATTRIBUTE,
        "SET #r = :run REMOVE #t",
        "attribute_exists(#k) AND (attribute_exists(#t) AND attribute_not_exists(#r)) \
         AND (attribute_not_exists(#t) OR #t <> :run) AND (attribute_not_exists(#r) OR #r <> :run)",
    ),
];

/// Lambda `FilterCriteria` patterns, one filter each, that pass every record of a table's stream
/// except the touches: a record passes unless a marker appears in it. Another consumer of the
/// stream (its view `NEW_AND_OLD_IMAGES`) puts these four in its mapping's `Filters`, each
/// joined with its own pattern, if it has one. `docs/operations.md` shows them.
pub const KEEP_CHANGES_FILTERS: [&str; 4] = [
    r#"{"eventName": ["INSERT", "REMOVE"]}"#,
    r#"{"dynamodb": {"OldImage": {"sidestream_touch": {"S": [{"exists": true}]}}, "NewImage": {"sidestream_retouch": {"S": [{"exists": false}]}}}}"#,
    r#"{"dynamodb": {"OldImage": {"sidestream_retouch": {"S": [{"exists": true}]}}, "NewImage": {"sidestream_touch": {"S": [{"exists": false}]}}}}"#,
    r#"{"dynamodb": {"NewImage": {"sidestream_touch": {"S": [{"exists": false}]}, "sidestream_retouch": {"S": [{"exists": false}]}}}}"#,
];

/// Whether a change sets a marker to a value the old image did not hold there: a backfill,
/// repair or replay touched the item (perhaps together with other changes). `false` for an
/// INSERT or a REMOVE, and for a change that only removes a marker.
pub fn is_touched(before: Option<&WireImage<'_>>, after: Option<&WireImage<'_>>) -> bool {
    match (before, after) {
        (Some(old), Some(new)) => MARKERS.iter().any(|m| new.get(m).is_some() && new.get(m) != old.get(m)),
        _ => false,
    }
}

/// Whether a change is a touch and nothing else: a marker was set, and every other attribute
/// is as it was.
pub fn is_touch_only(before: Option<&WireImage<'_>>, after: Option<&WireImage<'_>>) -> bool {
    let (Some(old), Some(new)) = (before, after) else {
        return false;
    };
    let others = |image: &WireImage<'_>| image.iter().filter(|(name, _)| !MARKERS.contains(name)).count();
    is_touched(before, after)
        && others(old) == others(new)
        && new
            .iter()
            .filter(|(name, _)| !MARKERS.contains(name))
            .all(|(name, value)| old.get(name) == Some(value))
}

#[cfg(test)]
mod tests;
