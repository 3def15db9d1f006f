//! Tests of DynamoDB's item size rules, measured before a request is sent.

use serde_dynamo::Item;
use serde_json::json;

use super::{MAX_ITEM_BYTES, attr_size, item_size};
use crate::wire::Attr;

fn item(v: serde_json::Value) -> Item {
    serde_json::from_value(v).unwrap()
}

#[test]
fn sizes_follow_dynamodbs_rules() {
    let cases = [
        (json!({"pk": {"S": "abc"}}), 2 + 3),
        (json!({"n": {"N": "12345"}}), 1 + 4),
        (json!({"n": {"N": "-0.000100"}}), 1 + 2),
        // Significant digits: leading and trailing zeros of the mantissa do not count.
        (json!({"n": {"N": "0"}}), 1 + 2),
        (json!({"n": {"N": "0.000"}}), 1 + 2),
        (json!({"n": {"N": "100"}}), 1 + 2),
        (json!({"n": {"N": "1001"}}), 1 + 3),
        (json!({"n": {"N": "-12.340E-5"}}), 1 + 3),
        (json!({"n": {"N": "123456789012345678901234567890123456789"}}), 1 + 21),
        (json!({"b": {"B": "AAEC"}}), 1 + 3),
        (json!({"t": {"BOOL": true}, "z": {"NULL": true}}), 2 + 2),
        (json!({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}), 1 + 3 + (1 + 2) + (1 + 2)),
        (json!({"m": {"M": {"k": {"S": "v"}}}}), 1 + 3 + (1 + 1 + 1)),
        (json!({"s": {"SS": ["a", "bc"]}}), 1 + 3),
        (json!({"ns": {"NS": ["1", "100", "12.5"]}}), 2 + 2 + 2 + 3),
        (json!({"bs": {"BS": ["AAEC", "AA=="]}}), 2 + 3 + 1),
    ];
    for (v, size) in cases {
        let item = item(v.clone());
        assert_eq!(item_size(&item), size, "{v}");
        // A value read in place counts as its owned form does.
        let in_place: usize =
            item.iter().map(|(name, value)| name.len() + attr_size(&Attr::from_attribute(value))).sum();
        assert_eq!(in_place, size, "{v}, read in place");
    }
    assert_eq!(MAX_ITEM_BYTES, 409_600);
}
