//! Backfill touches: the marker a backfill sets on an existing item so that the stream carries it.
//!
//! `sidestream index backfill` brings items written before the indexer existed into the index
//! without racing the live stream: it does not write index entries itself. It sets the item's
//! [`TOUCH_ATTRIBUTE`] to the backfill's run id (an `UpdateItem` conditioned on the item still
//! existing), and the stream delivers that change in the item's own order, after every earlier
//! change and before every later one. The functions read such a record like this:
//!
//! - the **indexer** puts every entry of the new image ([`is_touched`]), not only the entries
//!   whose attributes changed, since the old image's entries were never written;
//! - the **aggregator** and the **archiver** ignore a record that changed nothing but the marker
//!   ([`is_touch_only`]): no count and no user data changed.
//!
//! The marker is the only attribute a touch writes: it never changes user data, and never sets
//! or moves a TTL. Its name and value are part of the persisted formats (`docs/formats.md`).

use stream_record::wire::WireImage;

/// The attribute a backfill sets on each item it touches: the backfill's run id (S).
pub const TOUCH_ATTRIBUTE: &str = "sidestream_touch";

/// Whether a change sets a touch marker the item did not have before: a backfill touched it
/// (perhaps together with other changes). `false` for an INSERT or a REMOVE.
pub fn is_touched(before: Option<&WireImage<'_>>, after: Option<&WireImage<'_>>) -> bool {
    match (before, after) {
        (Some(old), Some(new)) => {
            new.get(TOUCH_ATTRIBUTE).is_some() && new.get(TOUCH_ATTRIBUTE) != old.get(TOUCH_ATTRIBUTE)
        }
        _ => false,
    }
}

/// Whether a change is a touch and nothing else: the marker changed and every other attribute
/// is as it was.
pub fn is_touch_only(before: Option<&WireImage<'_>>, after: Option<&WireImage<'_>>) -> bool {
    let (Some(old), Some(new)) = (before, after) else {
        return false;
    };
    let others = |image: &WireImage<'_>| image.iter().filter(|(name, _)| *name != TOUCH_ATTRIBUTE).count();
    is_touched(before, after)
        && others(old) == others(new)
        && new
            .iter()
            .filter(|(name, _)| *name != TOUCH_ATTRIBUTE)
            .all(|(name, value)| old.get(name) == Some(value))
}

#[cfg(test)]
mod tests;
