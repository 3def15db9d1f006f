//! The key schema check, table-driven.

use aws_sdk_dynamodb::types::{KeySchemaElement, KeyType};

use super::{PrimeError, key_schema, stream_view};

/// The table's key as `"hash range"`, `"hash"` or `""`.
fn schema(keys: &str) -> Vec<KeySchemaElement> {
    keys.split_whitespace()
        .zip([KeyType::Hash, KeyType::Range])
        .map(|(name, t)| KeySchemaElement::builder().attribute_name(name).key_type(t).build().unwrap())
        .collect()
}

#[test]
fn a_table_passes_only_with_the_key_the_function_writes() {
    #[rustfmt::skip]
    let cases = [
        ("pk sk", "pk", Some("sk"), None),
        ("pk", "pk", None, None),
        ("pk", "pk", Some("sk"),
         Some("INDEX_TABLE: table t is keyed (partition key pk, no sort key), but the function writes (partition key pk, sort key sk)")),
        ("pk sk", "pk", None,
         Some("keyed (partition key pk, sort key sk), but the function writes (partition key pk, no sort key)")),
        ("id sk", "pk", Some("sk"), Some("keyed (partition key id, sort key sk)")),
        ("", "pk", Some("sk"), Some("keyed (partition key ?, no sort key)")),
    ];
    for (keys, pk, sk, error) in cases {
        let got = key_schema("INDEX_TABLE", "t", pk, sk, &schema(keys));
        match error {
            None => assert_eq!(got, Ok(()), "{keys:?}"),
            Some(error) => {
                let got = got.unwrap_err();
                assert!(matches!(got, PrimeError::KeySchema { .. }), "{got:?}");
                assert!(got.to_string().contains(error), "{got}");
            }
        }
    }
}

#[test]
fn a_source_stream_passes_only_with_the_images_the_function_reads() {
    const BOTH: &[&str] = &["NEW_AND_OLD_IMAGES"];
    const OLD: &[&str] = &["NEW_AND_OLD_IMAGES", "OLD_IMAGE"];
    #[rustfmt::skip]
    let cases: [(Option<&str>, &'static [&'static str], Option<&str>); 7] = [
        (Some("NEW_AND_OLD_IMAGES"), BOTH, None),
        (Some("NEW_AND_OLD_IMAGES"), OLD, None),
        (Some("OLD_IMAGE"), OLD, None),
        (Some("KEYS_ONLY"), BOTH,
         Some("SOURCE_TABLE: table issues's stream is KEYS_ONLY, but the function reads NEW_AND_OLD_IMAGES; set the table's StreamSpecification to NEW_AND_OLD_IMAGES")),
        (Some("NEW_IMAGE"), OLD,
         Some("stream is NEW_IMAGE, but the function reads NEW_AND_OLD_IMAGES or OLD_IMAGE")),
        (Some("OLD_IMAGE"), BOTH, Some("stream is OLD_IMAGE")),
        (None, BOTH, Some("stream is not enabled")),
    ];
    for (found, views, expected) in cases {
        let got = stream_view("SOURCE_TABLE", "issues", found, views);
        match (expected, got) {
            (None, Ok(())) => {}
            (Some(text), Err(e @ PrimeError::StreamView { .. })) => {
                assert!(e.to_string().contains(text), "{found:?}: {e}");
            }
            (expected, got) => panic!("{found:?} for {views:?}: expected {expected:?}, got {got:?}"),
        }
    }
}
