//! The `ImportTable` request an archive prefix makes, checked against the API's documented shape.

use aws_sdk_dynamodb::types::{BillingMode, KeyType, ScalarAttributeType};

use super::{Import, KeyAttribute};

#[test]
fn key_attributes_parse_with_their_types() {
    let key = |name: &str, kind| KeyAttribute { name: name.to_owned(), kind };
    assert_eq!(KeyAttribute::parse("id"), Ok(key("id", ScalarAttributeType::S)));
    assert_eq!(KeyAttribute::parse("num:N"), Ok(key("num", ScalarAttributeType::N)));
    assert_eq!(KeyAttribute::parse("blob:B"), Ok(key("blob", ScalarAttributeType::B)));
    for (text, says) in [("id:X", "S, N or B"), (":S", "no name")] {
        let error = KeyAttribute::parse(text).unwrap_err();
        assert!(error.contains(says), "{text}: {error}");
    }
}

#[test]
fn an_import_reads_a_source_tables_item_objects_into_a_new_on_demand_table() {
    let key = (KeyAttribute::parse("pk").unwrap(), Some(KeyAttribute::parse("sk:N").unwrap()));
    let import = Import::of_source("archive-bucket", "archive/", "sessions", "sessions-restored", key);
    // The source table's folder: its item objects, not the metadata under archive/_meta/.
    assert_eq!(import.prefix, "archive/table=sessions/");
    let (source, table) = import.request().unwrap();
    assert_eq!(
        (source.s3_bucket(), source.s3_key_prefix()),
        ("archive-bucket", Some("archive/table=sessions/"))
    );
    assert_eq!(table.table_name(), "sessions-restored");
    assert_eq!(table.billing_mode(), Some(&BillingMode::PayPerRequest));
    let schema: Vec<(&str, &KeyType)> =
        table.key_schema().iter().map(|k| (k.attribute_name(), k.key_type())).collect();
    assert_eq!(schema, [("pk", &KeyType::Hash), ("sk", &KeyType::Range)]);
    let attributes: Vec<(&str, &ScalarAttributeType)> =
        table.attribute_definitions().iter().map(|a| (a.attribute_name(), a.attribute_type())).collect();
    assert_eq!(attributes, [("pk", &ScalarAttributeType::S), ("sk", &ScalarAttributeType::N)]);
}
