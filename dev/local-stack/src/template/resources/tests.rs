//! Tests of the template's tables and buckets, resolved for parameters, and broken ones named.

use crate::template::resources::GlobalIndex;
use crate::template::{Bucket, KeyAttribute, Table, TemplateError};

const TEMPLATE: &str = r#"
Parameters:
  Ttl: { Type: String, Default: expires_at }
  Existing: { Type: String, Default: "" }
Conditions:
  Create: !Equals [!Ref Existing, ""]
Resources:
  Items:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions:
        - { AttributeName: id, AttributeType: S }
        - { AttributeName: project, AttributeType: S }
        - { AttributeName: num, AttributeType: N }
      KeySchema: [{ AttributeName: id, KeyType: HASH }]
      GlobalSecondaryIndexes:
        - IndexName: by-num
          KeySchema:
            - { AttributeName: project, KeyType: HASH }
            - { AttributeName: num, KeyType: RANGE }
          Projection: { ProjectionType: INCLUDE, NonKeyAttributes: [name] }
      StreamSpecification: { StreamViewType: NEW_AND_OLD_IMAGES }
      KinesisStreamSpecification: { StreamArn: !GetAtt Changes.Arn }
      TimeToLiveSpecification: { AttributeName: !Ref Ttl, Enabled: true }
  Changes:
    Type: AWS::Kinesis::Stream
  Named:
    Type: AWS::DynamoDB::Table
    Condition: Create
    Properties:
      TableName: !Sub "${AWS::StackName}-given-name"
      AttributeDefinitions: [{ AttributeName: pk, AttributeType: B }, { AttributeName: sk, AttributeType: S }]
      KeySchema: [{ AttributeName: pk, KeyType: HASH }, { AttributeName: sk, KeyType: RANGE }]
      TimeToLiveSpecification: { AttributeName: gone, Enabled: false }
  Archive:
    Type: AWS::S3::Bucket
    Condition: Create
  Given:
    Type: AWS::S3::Bucket
    Properties: { BucketName: given-bucket }
"#;

fn read(template: &str, parameters: &[(&str, &str)]) -> Result<(Vec<Table>, Vec<Bucket>), TemplateError> {
    crate::template::resolved(template, parameters, |template, resolver| {
        Ok((template.tables(resolver)?, template.buckets(resolver)?))
    })
}

fn key(name: &str, key_type: &str, attribute_type: &str) -> KeyAttribute {
    KeyAttribute { name: name.into(), key_type: key_type.into(), attribute_type: attribute_type.into() }
}

#[test]
fn tables_and_buckets_resolve_for_the_parameters() {
    let (tables, buckets) = read(TEMPLATE, &[]).unwrap();
    assert_eq!(
        tables,
        vec![
            Table {
                logical_id: "Items".into(),
                name: "stack-items".into(),
                key: vec![key("id", "HASH", "S")],
                stream_view_type: Some("NEW_AND_OLD_IMAGES".into()),
                ttl_attribute: Some("expires_at".into()),
                kinesis_stream: Some("arn:aws:kinesis:eu-west-1:123456789012:stream/stack-changes".into()),
                global_indexes: vec![GlobalIndex {
                    name: "by-num".into(),
                    key: vec![key("project", "HASH", "S"), key("num", "RANGE", "N")],
                    projection: "INCLUDE".into(),
                    non_key_attributes: vec!["name".into()],
                }],
            },
            Table {
                logical_id: "Named".into(),
                name: "stack-given-name".into(),
                key: vec![key("pk", "HASH", "B"), key("sk", "RANGE", "S")],
                stream_view_type: None,
                ttl_attribute: None,
                kinesis_stream: None,
                global_indexes: vec![],
            },
        ]
    );
    let names: Vec<_> = buckets.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["stack-archive", "given-bucket"]);

    // Parameters switch conditions and feed the TTL attribute.
    let (tables, buckets) = read(TEMPLATE, &[("Existing", "x"), ("Ttl", "ttl")]).unwrap();
    let names: Vec<_> = tables.iter().map(|t| (t.name.as_str(), t.ttl_attribute.as_deref())).collect();
    assert_eq!(names, [("stack-items", Some("ttl"))]);
    assert_eq!(buckets.len(), 1);
}

#[test]
fn broken_tables_name_the_place() {
    let cases = [
        (
            "KeySchema: [{ AttributeName: id, KeyType: HASH }]",
            "Resources/T/Properties/KeySchema/0: key attribute id is not in AttributeDefinitions",
        ),
        ("KeySchema: []", "Resources/T/Properties/KeySchema: a key schema needs a HASH attribute"),
        (
            "AttributeDefinitions: [{ AttributeName: id, AttributeType: S }]\n      KeySchema: [{ AttributeName: id }]",
            "Resources/T/Properties/KeySchema/0/KeyType: a string is needed here",
        ),
    ];
    for (properties, expected) in cases {
        let template = format!(
            "Resources:\n  T:\n    Type: AWS::DynamoDB::Table\n    Properties:\n      {properties}\n"
        );
        let error = read(&template, &[]).unwrap_err();
        assert_eq!(error.to_string(), format!("template {expected}"), "{properties}");
    }
}
