//! Tests of the template model: functions with globals merged, conditions, broken templates.

use std::collections::BTreeMap;

use serde_json::json;

use crate::template::{Names, Template, TemplateError};

const TEMPLATE: &str = r#"
Parameters:
  Existing: { Type: String, Default: "" }
  Size: { Type: Number, Default: 10 }
Conditions:
  Create: !Equals [!Ref Existing, ""]
  Big: !Not [!Equals [!Ref Size, 10]]
Globals:
  Function:
    Runtime: provided.al2023
    Architectures: [arm64]
    Environment:
      Variables: { SHARED: "1" }
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Condition: Create
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildMethod: rust-cargolambda, BuildProperties: { Binary: fn } }
    Properties:
      Runtime: provided.al2
      Environment:
        Variables:
          TABLE: !If [Create, !Ref Table, !Ref Existing]
          JSON: !Sub
            - '{"table":"${T}","region":"${AWS::Region}","size":${Size}}'
            - T: !If [Create, !Ref Table, !Ref Existing]
          NAME: !Select [1, !Split ["/", "arn:x:table/named/stream/1"]]
          ARN: !Sub "${Table.Arn}"
          MAYBE: !If [Big, "yes", !Ref AWS::NoValue]
      Events:
        S:
          Type: DynamoDB
          Properties:
            Stream: !If [Create, !GetAtt Table.StreamArn, !Sub "arn:aws:dynamodb:r:1:table/${Existing}/stream/x"]
            BatchSize: !Ref Size
            FunctionResponseTypes: [ReportBatchItemFailures]
            FilterCriteria: !If [Big, { Filters: [{ Pattern: '{"a":[1]}' }] }, !Ref AWS::NoValue]
        Other: { Type: SQS, Properties: {} }
  Gone:
    Type: AWS::Serverless::Function
    Condition: Big
"#;

fn functions(parameters: &[(&str, &str)]) -> Result<Vec<crate::template::Function>, TemplateError> {
    crate::template::resolved(TEMPLATE, parameters, Template::functions)
}

#[test]
fn defaults_resolve_with_globals_merged() {
    let [f] = functions(&[]).unwrap().try_into().unwrap();
    assert_eq!(f.logical_id, "Fn");
    assert_eq!(f.binary.as_deref(), Some("fn"));
    assert_eq!(f.runtime.as_deref(), Some("provided.al2"), "a function's own value wins over Globals");
    assert_eq!(f.architectures, ["arm64"]);
    let env: Vec<(&str, &str)> = f.environment.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        env,
        [
            ("ARN", "arn:aws:dynamodb:eu-west-1:123456789012:table/stack-table"),
            ("JSON", r#"{"table":"stack-table","region":"eu-west-1","size":10}"#),
            ("NAME", "named"),
            ("SHARED", "1"),
            ("TABLE", "stack-table"),
        ]
    );
    let [s] = f.streams.try_into().unwrap();
    assert_eq!(
        s.stream,
        "arn:aws:dynamodb:eu-west-1:123456789012:table/stack-table/stream/1970-01-01T00:00:00.000"
    );
    assert_eq!(s.batch_size, Some(10));
    assert_eq!(s.filters, Vec::<String>::new());
}

#[test]
fn parameters_switch_conditions() {
    let found = functions(&[("Existing", "mine"), ("Size", "20")]).unwrap();
    assert_eq!(found.iter().map(|f| f.logical_id.as_str()).collect::<Vec<_>>(), ["Fn", "Gone"]);
    let f = &found[0];
    assert_eq!(f.environment["TABLE"], "mine");
    assert_eq!(f.environment["MAYBE"], "yes");
    assert_eq!(f.streams[0].stream, "arn:aws:dynamodb:r:1:table/mine/stream/x");
    assert_eq!(f.streams[0].filters, [r#"{"a":[1]}"#]);
    assert_eq!(serde_json::to_value(f.streams[0].batch_size).unwrap(), json!(20));
}

#[test]
fn broken_templates_name_the_place() {
    let cases = [
        ("Resources: [", "not valid YAML"),
        ("Parameters: {}", "has no Resources"),
        (
            "Resources: { F: { Type: AWS::Serverless::Function, Properties: { Runtime: !Ref Nope } } }",
            "Nope is neither a parameter nor a resource",
        ),
        (
            "Resources: { F: { Type: AWS::Serverless::Function, Properties: { Runtime: !If [Nope, a, b] } } }",
            "Conditions/Nope: no such condition",
        ),
        (
            "Resources: { F: { Type: AWS::Serverless::Function, Properties: { Runtime: !Sub '${Open' } } }",
            "unclosed",
        ),
        (
            "Resources: { F: { Type: AWS::Serverless::Function, Properties: { Runtime: !Select [3, [a]] } } }",
            "past the 1 values",
        ),
    ];
    for (text, expected) in cases {
        let error = Template::parse(text)
            .and_then(|t| {
                let name = |id: &str| id.to_owned();
                let names =
                    Names { region: "r".into(), account: "a".into(), stack: "s".into(), resource: &name };
                t.functions(&t.resolver(&BTreeMap::new(), names)).map(|_| ())
            })
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{text}: {error:?} should mention {expected:?}");
    }
}
