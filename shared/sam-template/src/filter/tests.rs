use serde_json::json;

use super::*;

#[test]
fn patterns_parse_into_matchers() {
    let cases: Vec<(&str, Pattern)> = vec![
        (
            r#"{"eventName":["REMOVE"]}"#,
            Pattern {
                fields: vec![(
                    "eventName".into(),
                    Node::Leaf(vec![Matcher::Exact(json!("REMOVE"))]),
                )],
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
        (
            r#"{"a":[{"numeric":[">",0,">",5]}]}"#,
            "a numeric range is a lower bound",
        ),
        (
            r#"{"a":[{"numeric":[">=",9,"<",5]}]}"#,
            "a numeric range is a lower bound",
        ),
        (r#"{"a":[{"numeric":["~",1]}]}"#, "not a numeric operator"),
        (r#"{"a":[{"numeric":[">"]}]}"#, "numeric takes"),
        (r#"{"a":[{"anything-but":{"suffix":"s"}}]}"#, "anything-but takes"),
        (r#"{"a":[["x"]]}"#, "a list inside a list"),
        (r#"{"$or":[{"a":[1]}]}"#, "at least two patterns"),
    ];
    for (json, expected) in cases {
        let error = Pattern::parse(json).unwrap_err();
        assert!(
            error.contains(expected),
            "{json}: {error:?} should mention {expected:?}"
        );
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
        (
            r#"{"dynamodb":{"NewImage":{"l":{"L":[{"exists":true}]}}}}"#,
            "Lambda matches leaves only",
        ),
        (
            r#"{"dynamodb":{"NewImage":{"a":{"STRING":["x"]}}}}"#,
            "not a DynamoDB type",
        ),
        (
            r#"{"dynamodb":{"NewImage":{"a":{"S":{"x":["y"]}}}}}"#,
            "a S value is a leaf",
        ),
        (r#"{"dynamodb":{"Keys":["x"]}}"#, "an image is an object"),
        (r#"{"dynamodb":["x"]}"#, "`dynamodb` is an object"),
        (
            r#"{"dynamodb":{"$or":[{"NewImage":{"a":["x"]}},{"OldImage":{"a":{"S":["x"]}}}]}}"#,
            "put the matchers under its type",
        ),
    ];
    for (json, expected) in bad {
        let error = Pattern::parse_dynamodb(json).unwrap_err();
        assert!(
            error.contains(expected),
            "{json}: {error:?} should mention {expected:?}"
        );
    }
}
