//! Tests of Lambda's event-filter patterns: parsing, matching and the mistakes reported.

use serde_json::json;

use super::*;

#[test]
fn patterns_parse_into_matchers() {
    let cases: Vec<(&str, Pattern)> = vec![
        (
            r#"{"eventName":["REMOVE"]}"#,
            Pattern {
                fields: vec![("eventName".into(), Node::Leaf(vec![Matcher::Exact(json!("REMOVE"))]))],
                any_of: vec![],
            },
        ),
        (
            r#"{"n":[{"numeric":[">",0,"<=",5]},{"exists":false},{"anything-but":["a","b"]},{"anything-but":{"prefix":"x"}}]}"#,
            Pattern {
                fields: vec![(
                    "n".into(),
                    Node::Leaf(vec![
                        Matcher::Numeric(vec![(Comparison::Greater, 0.0), (Comparison::LessOrEqual, 5.0)]),
                        Matcher::Exists(false),
                        Matcher::AnythingBut(vec![json!("a"), json!("b")]),
                        Matcher::AnythingButPrefix("x".into()),
                    ]),
                )],
                any_of: vec![],
            },
        ),
        (
            r#"{"$or":[{"a":[1]},{"b":[{"prefix":"p"},{"suffix":"s"},{"equals-ignore-case":"E"}]}]}"#,
            Pattern {
                fields: vec![],
                any_of: vec![
                    Pattern {
                        fields: vec![("a".into(), Node::Leaf(vec![Matcher::Exact(json!(1))]))],
                        any_of: vec![],
                    },
                    Pattern {
                        fields: vec![(
                            "b".into(),
                            Node::Leaf(vec![
                                Matcher::Prefix("p".into()),
                                Matcher::Suffix("s".into()),
                                Matcher::EqualsIgnoreCase("E".into()),
                            ]),
                        )],
                        any_of: vec![],
                    },
                ],
            },
        ),
    ];
    for (json, expected) in cases {
        assert_eq!(Pattern::parse(json).unwrap(), expected, "{json}");
    }
}

#[test]
fn malformed_patterns_say_what_is_wrong() {
    let cases = [
        (r#"{"eventName":["REMOVE"]"#, "not valid JSON"),
        (r#"["REMOVE"]"#, "a pattern is a JSON object"),
        ("{}", "an empty pattern"),
        (r#"{"eventName":"REMOVE"}"#, "matchers go in a list"),
        (r#"{"eventName":[]}"#, "an empty list of matchers"),
        (r#"{"a":[{"prefx":"p"}]}"#, "unknown operator \"prefx\""),
        (r#"{"a":[{"prefix":"p","suffix":"s"}]}"#, "exactly one operator"),
        (r#"{"a":[{"prefix":1}]}"#, "prefix takes a string"),
        (r#"{"a":[{"exists":"true"}]}"#, "exists takes true or false"),
        (r#"{"a":[{"numeric":[">",0,">",5]}]}"#, "a numeric range is a lower bound"),
        (r#"{"a":[{"numeric":[">=",9,"<",5]}]}"#, "a numeric range is a lower bound"),
        (r#"{"a":[{"numeric":["~",1]}]}"#, "not a numeric operator"),
        (r#"{"a":[{"numeric":[">"]}]}"#, "numeric takes"),
        (r#"{"a":[{"anything-but":{"suffix":"s"}}]}"#, "anything-but takes"),
        (r#"{"a":[["x"]]}"#, "a list inside a list"),
        (r#"{"$or":[{"a":[1]}]}"#, "at least two patterns"),
    ];
    for (json, expected) in cases {
        let error = Pattern::parse(json).unwrap_err().to_string();
        assert!(error.contains(expected), "{json}: {error:?} should mention {expected:?}");
    }
}

#[test]
fn dynamodb_patterns_must_match_below_the_type() {
    let good = [
        r#"{"dynamodb":{"NewImage":{"tags":{"SS":[{"exists":true}]}}}}"#,
        r#"{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"COUNTER#"}]}},"OldImage":{"count":{"N":[{"exists":true}]}}}}"#,
        r#"{"dynamodb":{"NewImage":{"custom_fields":{"M":{"3812":{"S":[{"prefix":"2023"}]}}}}}}"#,
        r#"{"dynamodb":{"NewImage":{"l":{"L":{"N":[{"numeric":[">",1]}]}}}}}"#,
        r#"{"eventName":["REMOVE"],"userIdentity":{"type":["Service"],"principalId":["dynamodb.amazonaws.com"]}}"#,
        r#"{"dynamodb":{"$or":[{"NewImage":{"a":{"S":["x"]}}},{"OldImage":{"a":{"S":["x"]}}}]}}"#,
    ];
    for json in good {
        Pattern::parse_dynamodb(json).unwrap_or_else(|e| panic!("{json}: {e}"));
    }
    let bad = [
        (
            r#"{"dynamodb":{"NewImage":{"custom_fields":[{"exists":true}]}}}"#,
            "put the matchers under its type",
        ),
        (
            r#"{"dynamodb":{"NewImage":{"custom_fields":{"M":[{"exists":true}]}}}}"#,
            "Lambda matches leaves only",
        ),
        (r#"{"dynamodb":{"NewImage":{"l":{"L":[{"exists":true}]}}}}"#, "Lambda matches leaves only"),
        (r#"{"dynamodb":{"NewImage":{"a":{"STRING":["x"]}}}}"#, "not a DynamoDB type"),
        (r#"{"dynamodb":{"NewImage":{"a":{"S":{"x":["y"]}}}}}"#, "a S value is a leaf"),
        (r#"{"dynamodb":{"Keys":["x"]}}"#, "an image is an object"),
        (r#"{"dynamodb":["x"]}"#, "`dynamodb` is an object"),
        (
            r#"{"dynamodb":{"$or":[{"NewImage":{"a":["x"]}},{"OldImage":{"a":{"S":["x"]}}}]}}"#,
            "put the matchers under its type",
        ),
    ];
    for (json, expected) in bad {
        let error = Pattern::parse_dynamodb(json).unwrap_err().to_string();
        assert!(error.contains(expected), "{json}: {error:?} should mention {expected:?}");
    }
}

/// A REMOVE by TTL of an issue, as Lambda delivers it.
fn ttl_remove() -> serde_json::Value {
    json!({
        "eventName": "REMOVE",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {
            "Keys": {"pk": {"S": "COUNTER#page-views#7"}},
            "OldImage": {
                "pk": {"S": "COUNTER#page-views#7"},
                "count": {"N": "42"},
                "tags": {"SS": ["red", "blue"]},
                "fields": {"M": {"a": {"S": "x"}}},
                "gone": {"NULL": true},
                "flag": {"BOOL": false}
            }
        }
    })
}

#[test]
fn patterns_match_records_like_lambda() {
    let old =
        |attribute: &str, typed: &str| format!(r#"{{"dynamodb":{{"OldImage":{{"{attribute}":{typed}}}}}}}"#);
    let cases: Vec<(String, bool)> = vec![
        // Exact values, and the metadata fields the archiver's filter uses.
        (r#"{"eventName":["REMOVE"]}"#.into(), true),
        (r#"{"eventName":["INSERT","MODIFY"]}"#.into(), false),
        (
            r#"{"eventName":["REMOVE"],"userIdentity":{"type":["Service"],"principalId":["dynamodb.amazonaws.com"]}}"#.into(),
            true,
        ),
        (r#"{"userIdentity":{"type":["User"]}}"#.into(), false),
        // Prefix, suffix, equals-ignore-case on a key.
        (r#"{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"COUNTER#"}]}}}}"#.into(), true),
        (r#"{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"counter#"}]}}}}"#.into(), false),
        (r##"{"dynamodb":{"Keys":{"pk":{"S":[{"suffix":"#7"}]}}}}"##.into(), true),
        (r#"{"eventName":[{"equals-ignore-case":"remove"}]}"#.into(), true),
        // exists: on scalar leaves only; a map is never a leaf.
        (old("count", r#"{"N":[{"exists":true}]}"#), true),
        (old("missing", r#"{"N":[{"exists":true}]}"#), false),
        (old("missing", r#"{"N":[{"exists":false}]}"#), true),
        (old("count", r#"{"N":[{"exists":false}]}"#), false),
        (old("count", r#"{"S":[{"exists":true}]}"#), false),
        (old("fields", r#"{"M":[{"exists":true}]}"#), false),
        (old("fields", r#"{"M":{"a":{"S":["x"]}}}"#), true),
        // anything-but: a value, a list, a prefix; never a missing field.
        (r#"{"eventName":[{"anything-but":"INSERT"}]}"#.into(), true),
        (r#"{"eventName":[{"anything-but":["INSERT","REMOVE"]}]}"#.into(), false),
        (r#"{"eventName":[{"anything-but":{"prefix":"REM"}}]}"#.into(), false),
        (r#"{"eventSource":[{"anything-but":"x"}]}"#.into(), false),
        // Numbers: DynamoDB's N strings compare by value.
        (old("count", r#"{"N":[{"numeric":[">",0,"<=",42]}]}"#), true),
        (old("count", r#"{"N":[{"numeric":["<",42]}]}"#), false),
        (old("count", r#"{"N":[{"numeric":["=",42]}]}"#), true),
        (old("count", r#"{"N":[42]}"#), true),
        (old("count", r#"{"N":["42"]}"#), true),
        (old("count", r#"{"N":["42.0"]}"#), false),
        (old("pk", r#"{"S":[{"numeric":[">",0]}]}"#), false),
        // Sets match when any element does; BOOL and NULL by value.
        (old("tags", r#"{"SS":["blue"]}"#), true),
        (old("tags", r#"{"SS":["green"]}"#), false),
        (old("tags", r#"{"SS":[{"anything-but":"red"}]}"#), true),
        (old("flag", r#"{"BOOL":[false]}"#), true),
        (old("gone", r#"{"NULL":[true]}"#), true),
        // Every field (AND); any filter of a $or.
        (
            r#"{"eventName":["REMOVE"],"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"X"}]}}}}"#.into(),
            false,
        ),
        (
            r#"{"$or":[{"eventName":["INSERT"]},{"dynamodb":{"OldImage":{"count":{"N":[{"exists":true}]}}}}]}"#.into(),
            true,
        ),
        (
            r#"{"eventName":["REMOVE"],"$or":[{"eventID":["1"]},{"eventSource":["x"]}]}"#.into(),
            false,
        ),
    ];
    let record = ttl_remove();
    for (pattern, expected) in cases {
        let parsed = Pattern::parse(&pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
        assert_eq!(parsed.matches(&record), expected, "{pattern}");
    }
}
