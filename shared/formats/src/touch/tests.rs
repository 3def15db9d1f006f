//! Which changes are touches.

use serde_dynamo::{AttributeValue, Item};

use super::{TOUCH_ATTRIBUTE, is_touch_only, is_touched};
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
    let t = TOUCH_ATTRIBUTE;
    let plain = item(&[("id", "a"), ("name", "x")]);
    let touched = item(&[("id", "a"), ("name", "x"), (t, "run-1")]);
    let retouched = item(&[("id", "a"), ("name", "x"), (t, "run-2")]);
    let touched_and_renamed = item(&[("id", "a"), ("name", "y"), (t, "run-1")]);
    let renamed_after_touch = item(&[("id", "a"), ("name", "y"), (t, "run-1")]);
    let untouched_by_put = item(&[("id", "a"), ("name", "x")]);
    // (before, after, is_touched, is_touch_only)
    let cases: [(Option<&Item>, Option<&Item>, bool, bool); 8] = [
        (Some(&plain), Some(&touched), true, true),
        (Some(&touched), Some(&retouched), true, true),
        (Some(&plain), Some(&touched_and_renamed), true, false),
        // A user's change after a touch keeps the marker: not a touch.
        (Some(&touched), Some(&renamed_after_touch), false, false),
        // A user's put that replaces the item drops the marker: not a touch.
        (Some(&touched), Some(&untouched_by_put), false, false),
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
