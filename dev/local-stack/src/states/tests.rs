//! The interpreter's paths, intrinsics and states.

use serde_json::{Value, json};

use super::{choose, evaluate, fill};

#[test]
fn paths_and_intrinsics() {
    let data = json!({"total_segments": 4, "a": {"b": [1, 2]}});
    let context = json!({"Map": {"Item": {"Value": 7}}});
    let cases: [(&str, Value); 6] = [
        ("$", data.clone()),
        ("$.a.b", json!([1, 2])),
        ("$$.Map.Item.Value", json!(7)),
        ("States.ArrayRange(0, States.MathAdd($.total_segments, -1), 1)", json!([0, 1, 2, 3])),
        ("States.ArrayLength($.a.b)", json!(2)),
        ("States.MathAdd(2, 3)", json!(5)),
    ];
    for (expr, expected) in cases {
        assert_eq!(evaluate(expr, &data, &context).unwrap(), expected, "{expr}");
    }
    for bad in ["States.Format('x')", "$.missing", "nonsense"] {
        assert!(evaluate(bad, &data, &context).is_err(), "{bad}");
    }
    let filled =
        fill(&json!({"x.$": "$.total_segments", "y": {"z.$": "$$.Map.Item.Value"}, "k": 1}), &data, &context)
            .unwrap();
    assert_eq!(filled, json!({"x": 4, "y": {"z": 7}, "k": 1}));
}

#[test]
fn choices_by_boolean_and_by_number() {
    let state = json!({
        "Choices": [
            {"Variable": "$.n", "NumericGreaterThan": 1000, "Next": "TooMany"},
            {"Variable": "$.n", "NumericLessThan": 1, "Next": "TooMany"},
            {"Variable": "$.done", "BooleanEquals": true, "Next": "Finished"}
        ],
        "Default": "Again"
    });
    let cases = [
        (json!({"n": 1001, "done": true}), "TooMany"),
        (json!({"n": 0}), "TooMany"),
        (json!({"n": 1000, "done": true}), "Finished"),
        (json!({"n": 1, "done": false}), "Again"),
        (json!({"done": false}), "Again"),
    ];
    for (data, next) in cases {
        assert_eq!(choose("S", &state, &data).unwrap(), next, "{data}");
    }
    let unknown = json!({"Choices": [{"Variable": "$.n", "StringEquals": "x", "Next": "A"}]});
    assert!(choose("S", &unknown, &json!({"n": "x"})).is_err());
}
