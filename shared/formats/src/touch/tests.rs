//! Which changes are touches.

use serde_dynamo::{AttributeValue, Item};

use super::{RETOUCH_ATTRIBUTE, TOUCH_ATTRIBUTE, is_touch_only, is_touched};
use stream_record::wire::WireImage;

fn item(pairs: &[(&str, &str)]) -> Item {
    Item::from(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), AttributeValue::S((*v).to_owned())))
            .collect::<std::collections::HashMap<_, _>>(),
    )
}

#[test]
fn touches_are_told_from_other_changes() {
    let (t, r) = (TOUCH_ATTRIBUTE, RETOUCH_ATTRIBUTE);
    let plain = item(&[("id", "a"), ("name", "x")]);
    let touched = item(&[("id", "a"), ("name", "x"), (t, "run-1")]);
    let retouched = item(&[("id", "a"), ("name", "x"), (r, "run-2")]);
    // Touch/1 set the first marker to a new value.
    let touched_again_v1 = item(&[("id", "a"), ("name", "x"), (t, "run-2")]);
    let touched_and_renamed = item(&[("id", "a"), ("name", "y"), (t, "run-1")]);
    let renamed_after_touch = item(&[("id", "a"), ("name", "y"), (t, "run-1")]);
    let renamed_after_retouch = item(&[("id", "a"), ("name", "y"), (r, "run-2")]);
    let untouched_by_put = item(&[("id", "a"), ("name", "x")]);
    // (before, after, is_touched, is_touch_only)
    let cases: [(Option<&Item>, Option<&Item>, bool, bool); 12] = [
        (Some(&plain), Some(&touched), true, true),
        (Some(&touched), Some(&retouched), true, true),
        (Some(&retouched), Some(&touched), true, true),
        (Some(&touched), Some(&touched_again_v1), true, true),
        (Some(&plain), Some(&touched_and_renamed), true, false),
        // A user's change after a touch keeps the marker: not a touch.
        (Some(&touched), Some(&renamed_after_touch), false, false),
        (Some(&retouched), Some(&renamed_after_retouch), false, false),
        // A user's put that replaces the item drops the marker, as `untouch` does: not a touch.
        (Some(&touched), Some(&untouched_by_put), false, false),
        (Some(&retouched), Some(&plain), false, false),
        (Some(&plain), Some(&plain), false, false),
        (None, Some(&touched), false, false),
        (Some(&touched), None, false, false),
    ];
    for (i, (before, after, touched, only)) in cases.into_iter().enumerate() {
        let (before, after) = (before.map(WireImage::from_item), after.map(WireImage::from_item));
        let (before, after) = (before.as_ref(), after.as_ref());
        assert_eq!(is_touched(before, after), touched, "case {i}: is_touched");
        assert_eq!(is_touch_only(before, after), only, "case {i}: is_touch_only");
    }
}

/// The touch's requests, as docs/formats.md gives them: a change here is a new format.
#[test]
fn the_requests_are_pinned() {
    let [(first, first_update, first_condition), (second, second_update, second_condition)] =
        super::TOUCH_REQUESTS;
    assert_eq!((first, second), (TOUCH_ATTRIBUTE, RETOUCH_ATTRIBUTE));
    assert_eq!((first_update, second_update), ("SET #t = :run REMOVE #r", "SET #r = :run REMOVE #t"));
    let this_run =
        "AND (attribute_not_exists(#t) OR #t <> :run) AND (attribute_not_exists(#r) OR #r <> :run)";
    assert_eq!(
        first_condition,
        format!("attribute_exists(#k) AND (attribute_not_exists(#t) OR attribute_exists(#r)) {this_run}")
    );
    assert_eq!(
        second_condition,
        format!("attribute_exists(#k) AND (attribute_exists(#t) AND attribute_not_exists(#r)) {this_run}")
    );
    assert_eq!(super::MARKERS, ["sidestream_touch", "sidestream_retouch"]);
}
