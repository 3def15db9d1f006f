//! A deployed stack, read by its name: its outputs (`DescribeStacks`) and the configuration of
//! its stream functions (`GetFunctionConfiguration` of each function its outputs name), so that
//! a command given a stack's name needs none of what the stack already knows: tables, buckets,
//! the index definition, the functions' names and environments.
//!
//! ```no_run
//! # async fn example(
//! #     cfn: &aws_sdk_cloudformation::Client,
//! #     lambda: &aws_sdk_lambda::Client,
//! # ) -> Result<(), operations::stack::StackError> {
//! let stack = operations::stack::Deployed::read(cfn, lambda, "sidestream").await?;
//! let parking = stack.output("ParkingBucket");
//! let indexes = stack.environment_of("multikey-indexer").and_then(|env| env.get("MULTIKEY_INDEXES"));
//! println!("{parking:?} {indexes:?} {:?}", stack.issues_table());
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;

/// The stream functions, by binary, and the stack output that names each as deployed. The
/// combined function (`Consumers=Combined`) runs the indexer and the archiver: their
/// configuration is its.
pub const FUNCTION_OUTPUTS: [(&str, &[&str]); 4] = [
    ("multikey-indexer", &["IndexerFunction", "IssuesStreamFunction"]),
    ("ttl-archiver", &["ArchiverFunction", "IssuesStreamFunction"]),
    ("sidestream-combined", &["IssuesStreamFunction"]),
    ("counter-aggregator", &["AggregatorFunction"]),
];

/// Why a stack could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// A request failed: the stack does not exist in this Region, access was denied, or AWS
    /// could not be reached.
    #[error("stack {stack}: {operation} failed ({kind}): {message}")]
    Request {
        /// The stack's name.
        stack: String,
        /// The API call.
        operation: &'static str,
        /// The failure's kind (transient, systemic).
        kind: io_policy::FailureKind,
        /// What AWS said.
        message: String,
    },
}

/// What a stack says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deployed {
    /// Its name.
    pub name: String,
    /// Its outputs, by key.
    pub outputs: BTreeMap<String, String>,
    /// Each stream function's environment, by the output that names the function.
    pub environments: BTreeMap<String, BTreeMap<String, String>>,
}

impl Deployed {
    /// Reads the stack `name`: its outputs, then the configuration of each stream function they
    /// name.
    pub async fn read(
        cfn: &aws_sdk_cloudformation::Client,
        lambda: &aws_sdk_lambda::Client,
        name: &str,
    ) -> Result<Deployed, StackError> {
        let failed = |operation: &'static str, failure: io_policy::Failure| StackError::Request {
            stack: name.to_owned(),
            operation,
            kind: failure.kind,
            message: failure.message,
        };
        let described = cfn
            .describe_stacks()
            .stack_name(name)
            .send()
            .await
            .map_err(|e| failed("DescribeStacks", io_policy::classify("DescribeStacks", &e)))?;
        let outputs: BTreeMap<String, String> = described
            .stacks()
            .iter()
            .flat_map(aws_sdk_cloudformation::types::Stack::outputs)
            .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
            .collect();
        let mut environments = BTreeMap::new();
        let named = FUNCTION_OUTPUTS.iter().flat_map(|(_, keys)| keys.iter());
        for key in named {
            let Some(function) = outputs.get(*key) else { continue };
            if environments.contains_key(*key) {
                continue;
            }
            let configuration =
                lambda.get_function_configuration().function_name(function).send().await.map_err(|e| {
                    failed("GetFunctionConfiguration", io_policy::classify("GetFunctionConfiguration", &e))
                })?;
            let variables = configuration
                .environment()
                .and_then(|e| e.variables())
                .map(|v| v.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
            environments.insert((*key).to_owned(), variables);
        }
        Ok(Deployed { name: name.to_owned(), outputs, environments })
    }

    /// The output `key`, if the stack has it.
    pub fn output(&self, key: &str) -> Option<&str> {
        self.outputs.get(key).map(String::as_str)
    }

    /// The name the stream function `binary` is deployed under, and its environment: the first
    /// of its outputs ([`FUNCTION_OUTPUTS`]) the stack has.
    pub fn function(&self, binary: &str) -> Option<(&str, &BTreeMap<String, String>)> {
        let (_, keys) = FUNCTION_OUTPUTS.iter().find(|(name, _)| *name == binary)?;
        keys.iter().find_map(|key| Some((self.output(key)?, self.environments.get(*key)?)))
    }

    /// The environment of the stream function `binary`, as deployed.
    pub fn environment_of(&self, binary: &str) -> Option<&BTreeMap<String, String>> {
        self.function(binary).map(|(_, environment)| environment)
    }

    /// The issues table: the table of the stream the stack reads (`IssuesTableStreamArn`,
    /// `arn:…:table/NAME/stream/…`).
    pub fn issues_table(&self) -> Option<String> {
        let arn = self.output("IssuesTableStreamArn")?;
        arn.split('/').nth(1).filter(|name| !name.is_empty()).map(str::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployed(outputs: &[(&str, &str)], environments: &[(&str, &[(&str, &str)])]) -> Deployed {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        Deployed {
            name: "s".into(),
            outputs: map(outputs),
            environments: environments.iter().map(|(k, pairs)| ((*k).to_owned(), map(pairs))).collect(),
        }
    }

    #[test]
    fn functions_and_tables_are_found_by_their_outputs() {
        let separate = deployed(
            &[
                ("IndexerFunction", "s-IndexerFunction-1"),
                ("IssuesTableStreamArn", "arn:aws:dynamodb:us-east-1:1:table/team/stream/2026"),
            ],
            &[("IndexerFunction", &[("MULTIKEY_INDEXES", "{}")])],
        );
        assert_eq!(separate.function("multikey-indexer").map(|(name, _)| name), Some("s-IndexerFunction-1"));
        assert_eq!(separate.issues_table().as_deref(), Some("team"));
        assert_eq!(separate.environment_of("ttl-archiver"), None);
        let combined = deployed(
            &[("IssuesStreamFunction", "s-IssuesStreamFunction-2")],
            &[("IssuesStreamFunction", &[("ARCHIVE_PREFIX", "archive/")])],
        );
        for binary in ["multikey-indexer", "ttl-archiver", "sidestream-combined"] {
            assert_eq!(
                combined.function(binary).map(|(name, _)| name),
                Some("s-IssuesStreamFunction-2"),
                "{binary}"
            );
        }
        assert_eq!(combined.issues_table(), None);
    }
}
