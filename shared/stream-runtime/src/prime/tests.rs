//! The key schema check, table-driven.

use aws_sdk_dynamodb::types::{KeySchemaElement, KeyType};

use super::{PrimeError, key_schema};

/// The table's key as `"hash range"`, `"hash"` or `""`.
fn schema(keys: &str) -> Vec<KeySchemaElement> {
    keys.split_whitespace()
        .zip([KeyType::Hash, KeyType::Range])
        .map(|(name, t)| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(t)
                .build()
                .unwrap()
        })
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
