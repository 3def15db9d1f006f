//! Tests of the template checks cfn-lint does not make, each mistake reported where it is.

use std::collections::BTreeMap;

use crate::template::{Names, Template, check};

/// A one-function template; `edit` replaces text in it to make each broken variant.
const TEMPLATE: &str = r#"
Transform: AWS::Serverless-2016-10-31
Globals:
  Function:
    Runtime: provided.al2023
    Handler: bootstrap
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Fn:
    Type: AWS::Serverless::Function
    Metadata:
      BuildMethod: rust-cargolambda
      BuildProperties: { Binary: f }
    Properties:
      Events:
        S:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt Table.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: 100
            FunctionResponseTypes: [ReportBatchItemFailures]
            FilterCriteria:
              Filters:
                - Pattern: '{"dynamodb":{"NewImage":{"tags":{"SS":[{"exists":true}]}}}}'
"#;

fn problems(template: &str) -> Vec<String> {
    let template = Template::parse(template).unwrap();
    let name = |id: &str| id.to_lowercase();
    let names = Names {
        region: "us-east-1".into(),
        account: "123456789012".into(),
        stack: "s".into(),
        resource: &name,
    };
    let resolver = template.resolver(&BTreeMap::new(), names);
    check(&template.functions(&resolver).unwrap()).iter().map(ToString::to_string).collect()
}

#[test]
fn a_correct_function_has_no_problems() {
    assert_eq!(problems(TEMPLATE), Vec::<String>::new());
}

#[test]
fn each_mistake_is_reported_where_it_is() {
    let cases = [
        (
            "[ReportBatchItemFailures]",
            "[ReportBatchItemFailure]",
            "Fn/Events/S/FunctionResponseTypes: [\"ReportBatchItemFailure\"] must be",
        ),
        (
            "FunctionResponseTypes: [ReportBatchItemFailures]",
            "",
            "Fn/Events/S/FunctionResponseTypes: [] must be",
        ),
        ("TRIM_HORIZON", "LATESTX", "Fn/Events/S/StartingPosition: \"LATESTX\" is not one of"),
        ("provided.al2023", "provided.al2099", "Fn/Runtime: \"provided.al2099\" is not one of"),
        ("Handler: bootstrap", "Handler: main", "Fn/Handler: \"main\""),
        ("rust-cargolambda", "rust-cargo", "Fn/Metadata/BuildMethod"),
        ("{ Binary: f }", "{ }", "Fn/Metadata/BuildProperties/Binary: missing"),
        ("BatchSize: 100", "BatchSize: 0", "Fn/Events/S/BatchSize: 0 is not from 1 to 10000"),
        ("!GetAtt Table.StreamArn", "!GetAtt Table.Arn", "Fn/Events/S/Stream: "),
        (
            r#"[{"exists":true}]}}}}'"#,
            r#"[{"exists":true}]}}}'"#,
            "Fn/Events/S/FilterCriteria/Filters/0/Pattern: not valid JSON",
        ),
        (r#"{"SS":[{"exists":true}]}"#, r#"{"M":[{"exists":true}]}"#, "Lambda matches leaves only"),
    ];
    for (from, to, expected) in cases {
        assert!(TEMPLATE.contains(from), "{from}");
        let found = problems(&TEMPLATE.replacen(from, to, 1));
        assert_eq!(found.len(), 1, "{from} -> {to}: {found:?}");
        assert!(
            found[0].starts_with(expected) || found[0].contains(expected),
            "{from} -> {to}: {found:?} should say {expected:?}"
        );
    }
}
