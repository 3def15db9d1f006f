//! local-stack: the stack of `template.yaml` on a local emulator, as `sidestream-local` and the
//! integration tests run it. Its tables and buckets are created from the template, and its
//! functions run (as their real binaries behind `cargo lambda watch`, or in process under the
//! stream runtime) with the environment the template gives them, fed by the event-source-mapping
//! replayer (`local_stack::replayer`).

pub mod bench;
pub mod chaos;
pub mod cloudwatch;
pub mod fault_proxy;
mod grid_api;
pub mod iam;
pub mod meter;
pub mod metric_math;
mod registry;
pub mod replayer;
mod restore;
pub mod shell;
pub mod sigv4;
pub mod states;
mod status;
pub mod template;

pub use grid_api::{GridApi, serve_grid_api};
pub use restore::restore_job;
pub use status::{status, verify, verify_job};

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::replayer::invoke::http;
use crate::replayer::{FailureLog, Pipeline, ReplayError, Settings, Source, Sweeper, resources};
use crate::template::{Bucket, Function, Names, Pattern, Resolver, Table, Template, TemplateError};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use multikey_indexer::Indexer;
use multikey_indexer::Indexes;
use operations::oracle::IndexCheck;
use sidestream_combined::{Built, MetricsTo, Tally};
use stream_runtime::StreamFunction as _;
use stream_runtime::delivery::Invoker;
use stream_runtime::{ConfigError, Vars};
use ttl_archiver::Archiver;

/// Why the local stack cannot be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// The template cannot be read, parsed or resolved.
    #[error("{path}: {cause}")]
    Template {
        /// The template file.
        path: String,
        /// Why.
        cause: TemplateError,
    },
    /// The template lacks something the stack needs, or holds something it cannot use.
    #[error("{0}")]
    Unusable(String),
    /// A function's configuration, from its template environment, is refused.
    #[error("{function}: {cause}")]
    Config {
        /// The function's logical id.
        function: String,
        /// Why.
        cause: ConfigError,
    },
    /// A function cannot be run in process.
    #[error(transparent)]
    Function(#[from] sidestream_combined::InvokeError),
    /// Creating a table or bucket on the emulator failed.
    #[error(transparent)]
    Emulator(#[from] ReplayError),
    /// A request to the emulator failed.
    #[error(transparent)]
    Request(#[from] io_policy::RequestFailed),
    /// The emulator's IAM check refused calls the stack's callers made under their roles: the
    /// template does not give them what they use.
    #[error("{} call(s) refused under the template's roles: {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Denied(Vec<iam::Denial>),
    /// A file or process could not be read, written or started.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        cause: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StackError {
    let what = what.into();
    move |source| StackError::Io { what, cause: source }
}

/// Where a stack's mappings give records up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// An S3 bucket (by name): Lambda writes each range with its records.
    Bucket(String),
    /// An SQS queue (by URL): Lambda sends each range's place.
    Queue(String),
}

/// The variable in which Lambda gives a function its name.
pub(crate) const FUNCTION_NAME_VAR: &str = "AWS_LAMBDA_FUNCTION_NAME";

/// The account moto reports.
const ACCOUNT: &str = "123456789012";

/// A function's timeout when the template gives none (Lambda's default is 3 s; the template
/// sets 60).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// The template's stack, created on the emulator.
#[derive(Debug)]
pub struct Stack {
    /// Functions, resolved with this stack's names.
    pub functions: Vec<Function>,
    /// The functions a combined function runs (its `COMBINED_FUNCTIONS`), each as a function of
    /// its own: the combined function's environment and streams, under the member's binary. They
    /// read no stream of their own ([`Stack::sources`] takes `functions`); [`Stack::function`]
    /// finds them, for lookups of a function's configuration and for reruns through it alone.
    pub members: Vec<Function>,
    /// Tables, as created.
    pub tables: Vec<Table>,
    /// Buckets, as created.
    pub buckets: Vec<Bucket>,
    /// Each table's stream ARN on the emulator, by table name.
    pub streams: BTreeMap<String, String>,
    /// Each state machine's definition, by logical id: resolved, and with its
    /// `DefinitionSubstitutions` made (run it with [`states::execute`]).
    pub state_machines: BTreeMap<String, serde_json::Value>,
    /// The resources the local stack has no emulator for but tests read (the archive's Glue
    /// database and table, its Athena named queries), by logical id: their properties, resolved.
    pub catalog: BTreeMap<String, serde_json::Value>,
    /// Its SQS queues' URLs on the emulator, by logical id (none in today's template: the
    /// mappings' on-failure destination is the parking bucket).
    pub queues: BTreeMap<String, String>,
    /// Its CloudWatch alarms, by logical id: each alarm's name (`<stack>-<LogicalId>-<suffix>`,
    /// as CloudFormation names an alarm without an `AlarmName`) and its properties, resolved.
    /// [`cloudwatch::create_alarms`] puts them on the emulator.
    pub alarms: BTreeMap<String, (String, serde_json::Value)>,
    /// Its IAM roles, by logical id, as registered with the emulator's IAM check
    /// ([`iam`]): every caller signs with its role's key.
    pub roles: BTreeMap<String, iam::Role>,
    /// The role of each state machine, by the state machine's logical id.
    pub state_machine_roles: BTreeMap<String, String>,
    /// The stack's name.
    pub name: String,
    /// The region its ARNs name.
    pub region: String,
    /// The template parameters it was created with (the rest took their defaults).
    pub parameters: BTreeMap<String, String>,
}

/// Each function the combined functions among `functions` run, under its own binary.
fn members(functions: &[Function]) -> Vec<Function> {
    functions
        .iter()
        .filter(|f| f.binary.as_deref() == Some(sidestream_combined::COMBINED_BINARY))
        .flat_map(|combined| {
            let names = combined
                .environment
                .get(sidestream_combined::COMBINED_FUNCTIONS)
                .cloned()
                .unwrap_or_default();
            names
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(|name| Function { binary: Some(name.to_owned()), ..combined.clone() })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A mapping's filter patterns, as patterns of change records: on a Kinesis stream each one
/// matches the change record in a record's `data` (`{"data": …}`), and is that pattern.
fn change_patterns(source: &crate::template::StreamSource) -> Result<Vec<Pattern>, String> {
    let kinesis = source.stream.contains(":kinesis:");
    source
        .filters
        .iter()
        .map(|p| {
            let change = if kinesis {
                serde_json::from_str::<serde_json::Value>(p)
                    .ok()
                    .and_then(|v| v.get("data").map(ToString::to_string))
                    .ok_or_else(|| format!("FilterCriteria: {p} does not match a Kinesis record's data"))?
            } else {
                p.clone()
            };
            Pattern::parse_dynamodb(&change).map_err(|e| format!("FilterCriteria: {e}"))
        })
        .collect()
}

/// The resolved properties of the resources tests read but no emulator serves (the archive's
/// Glue catalog entries and Athena named queries), by logical id.
fn catalog(
    resolver: &crate::template::Resolver<'_>,
) -> Result<BTreeMap<String, serde_json::Value>, crate::template::TemplateError> {
    let mut catalog = BTreeMap::new();
    for kind in ["AWS::Glue::Database", "AWS::Glue::Table", "AWS::Athena::NamedQuery"] {
        catalog.extend(resolver.resolved(kind)?.into_iter().map(|(id, p)| (id.to_owned(), p)));
    }
    Ok(catalog)
}

/// Each secret with a random string, as Secrets Manager makes one when CloudFormation creates it.
async fn create_secrets(
    sdk: &SdkConfig,
    secrets: &[(&str, serde_json::Value)],
    name: &dyn Fn(&str) -> String,
) -> Result<(), StackError> {
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    for (id, properties) in secrets {
        let length = properties["GenerateSecretString"]["PasswordLength"].as_u64().unwrap_or(32);
        resources::create_secret(&client, &name(id), usize::try_from(length).unwrap_or(32)).await?;
    }
    Ok(())
}

/// A team's own tables, which a stack reads by the stream ARNs its parameters give
/// (`IssuesTableStreamArn`, `CounterTableStreamArn`): they exist already, and their streams join
/// `streams` by table name.
fn existing_streams(parameters: &BTreeMap<String, String>, streams: &mut BTreeMap<String, String>) {
    for parameter in ["IssuesTableStreamArn", "CounterTableStreamArn"] {
        let Some(arn) = parameters.get(parameter).filter(|arn| !arn.is_empty()) else {
            continue;
        };
        if let Some(table) = arn.split_once(":table/").and_then(|(_, rest)| rest.split('/').next()) {
            streams.entry(table.to_owned()).or_insert_with(|| arn.clone());
        }
    }
}

/// The name a stack's resource is created under: `<stack>-<logicalid>`, lowercase.
pub(crate) fn resource_name(stack: &str, logical_id: &str) -> String {
    format!("{stack}-{logical_id}").to_lowercase()
}

/// The name CloudFormation generates for a resource the template does not name, as it does for
/// functions and alarms: `<stack>-<LogicalId>-<suffix>`, a suffix of 13 upper-case letters and
/// digits (here derived from the stack and the logical id, so that it stays the same).
pub(crate) fn generated_name(stack: &str, logical_id: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let suffix: String = (0..13)
        .map(|i| {
            let at = format!("{stack}/{logical_id}/{i}");
            let draw = crate::replayer::faults::hash(at.as_bytes()) % ALPHABET.len() as u64;
            char::from(ALPHABET[usize::try_from(draw).unwrap_or(0)])
        })
        .collect();
    format!("{stack}-{logical_id}-{suffix}")
}

/// A function's name: the template sets no `FunctionName`, so CloudFormation generates it
/// ([`generated_name`]). Its ARN, its `AWS_LAMBDA_FUNCTION_NAME`, its metrics' dimensions and
/// the template's `Ref`s to it all use this name.
pub fn function_name(stack: &str, logical_id: &str) -> String {
    generated_name(stack, logical_id)
}

/// The UUID of the event source mapping SAM generates for a function's stream event (logical id
/// `<Function><Event>`), as the template's `Ref`s to it and the mapping's metrics name it.
pub(crate) fn mapping_uuid(stack: &str, mapping_logical_id: &str) -> String {
    crate::replayer::failures::uuid(&[stack, mapping_logical_id])
}

/// The names the stack's resources are created under, where CloudFormation's differ from
/// [`resource_name`]: its functions' and its generated event source mappings'.
fn physical_names(template: &Template, stack: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for id in template.resources_of_type("AWS::Serverless::Function") {
        names.insert(id.to_owned(), function_name(stack, id));
        let events = template.root()["Resources"][id]["Properties"]["Events"].as_object();
        for (event, _) in events.into_iter().flatten() {
            let mapping = format!("{id}{event}");
            let uuid = mapping_uuid(stack, &mapping);
            names.insert(mapping, uuid);
        }
    }
    names
}

/// Each state machine's definition, its substitutions made, by logical id.
fn state_machines(resolver: &Resolver<'_>) -> Result<BTreeMap<String, serde_json::Value>, TemplateError> {
    let mut machines = BTreeMap::new();
    for (id, properties) in resolver.resolved("AWS::Serverless::StateMachine")? {
        let substitutions = properties["DefinitionSubstitutions"].as_object().cloned().unwrap_or_default();
        machines.insert(id.to_owned(), substitute(&properties["Definition"], &substitutions));
    }
    Ok(machines)
}

/// `parameters` as the local stack deploys them: it has nobody to page, so unless an alarm
/// destination is given it opts out of one (`AlarmOptOut`), as a test stack in AWS would.
fn local_parameters(parameters: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut parameters = parameters.clone();
    if !["AlarmTopicArn", "AlarmEmail"].iter().any(|p| parameters.get(*p).is_some_and(|v| !v.is_empty())) {
        parameters.entry("AlarmOptOut".to_owned()).or_insert_with(|| "true".to_owned());
    }
    parameters
}

impl Stack {
    /// Reads `template`, resolves it for `parameters` with resources named
    /// `<stack>-<logicalid>` (lowercase; functions and alarms as CloudFormation names them), and
    /// creates its tables, buckets, queues and alarms (keeping those that exist).
    pub async fn create(
        sdk: &SdkConfig,
        template: &Path,
        stack: &str,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Stack, StackError> {
        let path = template.display().to_string();
        let text =
            std::fs::read_to_string(template).map_err(io(format!("cannot read the template {path}")))?;
        let in_template = |source| StackError::Template { path: path.clone(), cause: source };
        // Nested stacks (each stream function's alarms) as CloudFormation creates them.
        let folder = template.parent().unwrap_or_else(|| Path::new("."));
        let parsed = Template::parse_with(&text, &mut |location| {
            std::fs::read_to_string(folder.join(location)).map_err(|e| e.to_string())
        })
        .map_err(in_template)?;
        let physical = physical_names(&parsed, stack);
        let name = |id: &str| physical.get(id).cloned().unwrap_or_else(|| resource_name(stack, id));
        let region = sdk.region().map_or("us-east-1", |r| r.as_ref()).to_owned();
        let names = Names {
            region: region.clone(),
            account: ACCOUNT.to_owned(),
            stack: stack.to_owned(),
            resource: &name,
        };
        let resolver = parsed.resolver(&local_parameters(parameters), names);
        // CloudFormation refuses parameter values their declarations do not allow, and then
        // parameters its Rules refuse, before anything is made.
        let refused = resolver.refused_parameters();
        if !refused.is_empty() {
            return Err(StackError::Unusable(format!(
                "the template's parameters refuse these values: {}",
                refused.join("; ")
            )));
        }
        let broken = resolver.broken_rules().map_err(in_template)?;
        if !broken.is_empty() {
            return Err(StackError::Unusable(format!(
                "the template's Rules refuse these parameters: {}",
                broken.join("; ")
            )));
        }
        // Every role registered with the emulator's IAM check, each caller signing as its role.
        let roles = iam::registered(sdk, &resolver, &path, (stack, &region, ACCOUNT)).await?;
        let mut functions = parsed.functions(&resolver).map_err(in_template)?;
        for function in &mut functions {
            // Lambda sets it in every function's environment.
            function
                .environment
                .insert(FUNCTION_NAME_VAR.to_owned(), function_name(stack, &function.logical_id));
            function.access_key = function.role.as_ref().and_then(|r| roles.get(r)).map(|r| r.key.clone());
        }
        let members = members(&functions);
        let tables = parsed.tables(&resolver).map_err(in_template)?;
        let buckets = parsed.buckets(&resolver).map_err(in_template)?;
        let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
        let s3 = s3_client(sdk);
        let mut streams = BTreeMap::new();
        for table in &tables {
            if let Some(arn) = resources::create_table(&dynamodb, table).await? {
                streams.insert(table.name.clone(), arn);
            }
            // Its changes go to a Kinesis data stream too: emulated over its DynamoDB stream.
            if let Some(kinesis) = &table.kinesis_stream {
                crate::replayer::kinesis::delivery::Stream::register(kinesis, &table.name);
            }
        }
        existing_streams(parameters, &mut streams);
        for bucket in &buckets {
            resources::create_bucket(&s3, bucket).await?;
        }
        let state_machines = state_machines(&resolver).map_err(in_template)?;
        let state_machine_roles = iam::roles_of(&parsed, state_machines.keys());
        let catalog = catalog(&resolver).map_err(in_template)?;
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let mut queues = BTreeMap::new();
        for id in resolver.existing("AWS::SQS::Queue").map_err(in_template)? {
            queues.insert(id.to_owned(), resources::create_queue(&sqs, &name(id)).await?);
        }
        let secrets = resolver.resolved("AWS::SecretsManager::Secret").map_err(in_template)?;
        create_secrets(sdk, &secrets, &name).await?;
        let mut alarms = BTreeMap::new();
        for (id, properties) in resolver.resolved("AWS::CloudWatch::Alarm").map_err(in_template)? {
            alarms.insert(id.to_owned(), (generated_name(stack, id), properties));
        }
        let stack = Stack {
            functions,
            members,
            tables,
            buckets,
            streams,
            state_machines,
            catalog,
            queues,
            alarms,
            roles,
            state_machine_roles,
            name: stack.to_owned(),
            region,
            parameters: parameters.clone(),
        };
        // Registered as CloudFormation and Lambda would hold it, for what reads a stack by name.
        let outputs = registry::outputs(&resolver, parsed.root(), &stack);
        registry::register(sdk, &stack, &outputs).await?;
        // CloudFormation creates the alarms with the stack; its mappings' calls are decided.
        cloudwatch::create_alarms(sdk, &stack).await?;
        iam::check_mappings(sdk, &stack).await?;
        Ok(stack)
    }

    /// A function's ARN as CloudFormation would deploy it, with its [`function_name`]. The
    /// failure records the local stack writes name functions so, as Lambda's do.
    pub fn function_arn(&self, function: &Function) -> String {
        format!(
            "arn:aws:lambda:{}:{ACCOUNT}:function:{}",
            self.region,
            function_name(&self.name, &function.logical_id)
        )
    }

    /// What the emulator's IAM check saw of this stack's roles; an error naming every call it
    /// refused, if any. A run ends with it, so that a call the template does not allow fails the
    /// run that made it.
    pub async fn ensure_permitted(&self, sdk: &SdkConfig) -> Result<iam::Report, StackError> {
        let report = iam::report(sdk, &self.roles).await?;
        if report.denials.is_empty() { Ok(report) } else { Err(StackError::Denied(report.denials)) }
    }

    /// `invoke` as `state_machine`'s tasks invoke it, under the state machine's role: each
    /// invocation authorized as `lambda:InvokeFunction` first ([`iam::invoking_as`]).
    pub fn state_machine_invoker(
        &self,
        sdk: &SdkConfig,
        state_machine: &str,
        invoke: states::TaskInvoker,
    ) -> Result<states::TaskInvoker, StackError> {
        let key = self.state_machine_key(state_machine)?;
        Ok(iam::invoking_as(sdk, key, invoke))
    }

    /// `sdk` signing as `state_machine`'s role (its `ItemReader`'s listing).
    pub fn as_state_machine(&self, sdk: &SdkConfig, state_machine: &str) -> Result<SdkConfig, StackError> {
        Ok(iam::as_role(sdk, self.state_machine_key(state_machine)?))
    }

    fn state_machine_key(&self, state_machine: &str) -> Result<&str, StackError> {
        self.state_machine_roles
            .get(state_machine)
            .and_then(|role| self.roles.get(role))
            .map(|role| role.key.as_str())
            .ok_or_else(|| {
                StackError::Unusable(format!("the state machine {state_machine} has no role of the template"))
            })
    }

    /// A state machine's definition, by logical id.
    pub fn state_machine(&self, logical_id: &str) -> Result<&serde_json::Value, StackError> {
        self.state_machines.get(logical_id).ok_or_else(|| {
            StackError::Unusable(format!(
                "the template has no state machine {logical_id} with these parameters (is EnableBackfill \"true\", \
                 or IndexVerifySchedule set?)"
            ))
        })
    }

    /// The table a template stream ARN belongs to: a DynamoDB stream's (`…:table/<name>/stream/…`),
    /// or a Kinesis data stream's that a table writes its changes to (`KinesisStreamSpecification`;
    /// the local stack reads that table's DynamoDB stream and delivers it through the emulated
    /// Kinesis stream, [`crate::replayer::kinesis::delivery`]).
    fn table_of_stream(&self, arn: &str) -> Result<&str, StackError> {
        let table = if arn.contains(":kinesis:") {
            self.tables.iter().find(|t| t.kinesis_stream.as_deref() == Some(arn)).map(|t| t.name.as_str())
        } else {
            arn.split_once(":table/").and_then(|(_, rest)| rest.split('/').next())
        };
        table.and_then(|name| self.streams.get_key_value(name)).map(|(name, _)| name.as_str()).ok_or_else(
            || {
                StackError::Unusable(format!(
                    "the stream {arn} is not one of a table this template creates with a stream"
                ))
            },
        )
    }

    /// One replayer source per function and enabled stream event, each invoked by
    /// `invoker(function)`.
    pub fn sources(
        &self,
        mut invoker: impl FnMut(&Function) -> Result<Invoker, StackError>,
    ) -> Result<Vec<Source>, StackError> {
        let mut sources = Vec::new();
        for function in &self.functions {
            if function.streams.is_empty() {
                continue;
            }
            let invoke = invoker(function)?;
            // Lambda polls nothing for a disabled mapping.
            for stream in function.streams.iter().filter(|s| s.enabled) {
                let at = format!("{}/Events/{}", function.logical_id, stream.name);
                let table = self
                    .table_of_stream(&stream.stream)
                    .map_err(|e| StackError::Unusable(format!("{at}: {e}")))?;
                // A Kinesis mapping gets every record, and filters where it writes them to the
                // emulated stream (`crate::replayer::kinesis::delivery`).
                let filters = if stream.stream.contains(":kinesis:") {
                    Vec::new()
                } else {
                    change_patterns(stream).map_err(|e| StackError::Unusable(format!("{at}: {e}")))?
                };
                sources.push(Source {
                    function: binary_of(function)?.to_owned(),
                    function_arn: self.function_arn(function),
                    stream_arn: self.streams[table].clone(),
                    settings: Settings::from_source(stream)
                        .map_err(|e| StackError::Unusable(format!("{at}: {e}")))?,
                    filters,
                    invoker: Arc::clone(&invoke),
                    timeout: timeout(function),
                    mapping_uuid: mapping_uuid(
                        &self.name,
                        &format!("{}{}", function.logical_id, stream.name),
                    ),
                    kinesis: stream.stream.contains(":kinesis:").then(|| stream.stream.clone()),
                    latest: stream.starting_position.as_deref() == Some("LATEST"),
                });
            }
        }
        Ok(sources)
    }

    /// A TTL sweeper, paired with its stream ARN, for each table with TTL and a stream: the
    /// stack's own, and a team's issues table (`IssuesTableStreamArn`), whose TTL attribute is
    /// `TtlAttribute` and whose key the index definition's `base_key` names, as DynamoDB's TTL
    /// would delete its items.
    pub fn sweepers(&self, sdk: &SdkConfig) -> Vec<(String, Sweeper)> {
        let client = aws_sdk_dynamodb::Client::new(sdk);
        let mut sweepers: Vec<(String, Sweeper)> = self
            .tables
            .iter()
            .filter_map(|table| {
                let attribute = table.ttl_attribute.as_ref()?;
                let arn = self.streams.get(&table.name)?;
                let key = table.key.iter().map(|k| k.name.clone()).collect();
                Some((arn.clone(), Sweeper::new(client.clone(), &table.name, attribute, key)))
            })
            .collect();
        let existing = self.parameters.get("IssuesTableStreamArn").filter(|arn| !arn.is_empty());
        if let (Some(arn), Ok(table), Ok(function)) =
            (existing, self.issues_table(), self.function(Indexer::NAME))
        {
            let lookup = |name: &str| function.environment.get(name).cloned();
            if let Ok(indexes) = Indexes::from_vars(&Vars::new(&lookup)) {
                let attribute = self.parameters.get("TtlAttribute").map_or("expires_at", String::as_str);
                sweepers.push((arn.clone(), Sweeper::new(client, table, attribute, indexes.base_key)));
            }
        }
        sweepers
    }

    /// The pipeline over every function's streams.
    pub fn pipeline(
        &self,
        sdk: &SdkConfig,
        invoker: impl FnMut(&Function) -> Result<Invoker, StackError>,
        failures: FailureLog,
    ) -> Result<Pipeline, StackError> {
        let streams = aws_sdk_dynamodbstreams::Client::new(sdk);
        let pipeline = Pipeline::new(&streams, self.sources(invoker)?, self.sweepers(sdk), failures);
        Ok(pipeline.watching(self.refusal_watch(sdk)))
    }

    /// A watch of the roles the stack's stream functions act under (a combined function's
    /// members too): a pipeline of the stack stops at the first call refused to one of them.
    pub fn refusal_watch(&self, sdk: &SdkConfig) -> iam::Watch {
        let mut functions: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let streaming = self.functions.iter().filter(|f| !f.streams.is_empty());
        for function in streaming.chain(&self.members) {
            if let Some(role) = &function.role {
                let name = self.function_arn(function).rsplit(':').next().unwrap_or_default().to_owned();
                let names = functions.entry(role.clone()).or_default();
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let roles = self.roles.iter().filter(|(id, _)| functions.contains_key(*id));
        iam::Watch::new(sdk, roles.map(|(id, role)| (id.clone(), role.clone())).collect(), functions)
    }

    /// A failure log at `path` that also hands each range given up to the stack's on-failure
    /// destination on the emulator, as Lambda does: the template's S3 bucket (the parking
    /// bucket) gets an object with the records themselves, an SQS queue a message with their
    /// place.
    pub fn failure_log(&self, sdk: &SdkConfig, path: impl Into<PathBuf>) -> FailureLog {
        let log = FailureLog::new(path);
        match self.failure_destination() {
            Some(Destination::Bucket(bucket)) => log.with_s3_destination(s3_client(sdk), bucket),
            Some(Destination::Queue(url)) => log.with_sqs_destination(aws_sdk_sqs::Client::new(sdk), url),
            None => log,
        }
    }

    /// Where the stack's mappings give records up (`DestinationConfig.OnFailure`), if anywhere.
    pub fn failure_destination(&self) -> Option<Destination> {
        let arn = self.functions.iter().flat_map(|f| &f.streams).find_map(|s| s.on_failure.clone())?;
        if let Some(bucket) = arn.strip_prefix("arn:aws:s3:::") {
            return Some(Destination::Bucket(bucket.to_owned()));
        }
        let queue = arn.rsplit(':').next()?;
        self.queues
            .iter()
            .find(|(id, url)| url.rsplit('/').next() == Some(queue) || id.as_str() == queue)
            .map(|(_, url)| Destination::Queue(url.clone()))
    }

    /// The function built from the cargo binary `binary`, or run by a combined function.
    pub fn function(&self, binary: &str) -> Result<&Function, StackError> {
        self.functions.iter().chain(&self.members).find(|f| f.binary.as_deref() == Some(binary)).ok_or_else(
            || {
                StackError::Unusable(format!(
                    "the template has no function with BuildProperties.Binary {binary}"
                ))
            },
        )
    }

    /// The template environment of the function built from `binary`.
    pub fn environment(&self, binary: &str) -> Result<&BTreeMap<String, String>, StackError> {
        Ok(&self.function(binary)?.environment)
    }

    /// Where the ttl-archiver writes: its `ARCHIVE_BUCKET` and `ARCHIVE_PREFIX`.
    pub fn archive_location(&self) -> Result<(String, String), StackError> {
        let env = self.environment(Archiver::NAME)?;
        let get = |name: &str| {
            env.get(name)
                .cloned()
                .ok_or_else(|| StackError::Unusable(format!("the ttl-archiver's environment has no {name}")))
        };
        Ok((get("ARCHIVE_BUCKET")?, get("ARCHIVE_PREFIX")?))
    }

    /// The table with this logical id.
    pub fn table(&self, logical_id: &str) -> Result<&Table, StackError> {
        self.tables
            .iter()
            .find(|t| t.logical_id == logical_id)
            .ok_or_else(|| StackError::Unusable(format!("the template creates no table {logical_id}")))
    }

    /// The bucket with this logical id.
    pub fn bucket(&self, logical_id: &str) -> Result<&Bucket, StackError> {
        self.buckets
            .iter()
            .find(|b| b.logical_id == logical_id)
            .ok_or_else(|| StackError::Unusable(format!("the template creates no bucket {logical_id}")))
    }
}

impl Stack {
    /// The issues table its functions read: the one it creates (`IssuesTable`), or a team's
    /// own, which `IssuesTableStreamArn` names (the indexer's `SOURCE_TABLE`).
    pub fn issues_table(&self) -> Result<String, StackError> {
        if let Ok(table) = self.table("IssuesTable") {
            return Ok(table.name.clone());
        }
        let function = self.function(Indexer::NAME)?;
        function.environment.get("SOURCE_TABLE").cloned().ok_or_else(|| {
            StackError::Unusable(format!(
                "{} names no SOURCE_TABLE: an existing issues table read from Kinesis is not one the local stack finds",
                function.logical_id
            ))
        })
    }

    /// The grid over this stack: the indexer's `MULTIKEY_INDEXES`, the issues table, and its
    /// global index by the index's scope and first tiebreaker: the one the stack creates
    /// (`project-num`), or a team's own, which `GridNullsIndex` names.
    pub fn grid_schema(&self) -> Result<operations::grid::GridSchema, StackError> {
        let function = self.function(Indexer::NAME)?;
        let lookup = |name: &str| function.environment.get(name).cloned();
        let indexes = Indexes::from_vars(&Vars::new(&lookup))
            .map_err(|source| StackError::Config { function: function.logical_id.clone(), cause: source })?;
        let index = indexes
            .indexes
            .first()
            .ok_or_else(|| StackError::Unusable("MULTIKEY_INDEXES defines no index".to_owned()))?;
        let (table, nulls_index) = match self.table("IssuesTable") {
            Ok(table) => {
                let by_scope = table.global_indexes.iter().find(|g| {
                    let names: Vec<&str> = g.key.iter().map(|k| k.name.as_str()).collect();
                    names.first() == index.scope.first().map(String::as_str).as_ref()
                        && names.get(1) == index.tiebreakers.first().map(String::as_str).as_ref()
                });
                let Some(by_scope) = by_scope else {
                    return Err(StackError::Unusable(format!(
                        "{} has no global index keyed by {:?} and {:?}, which the grid's nulls phase reads",
                        table.logical_id,
                        index.scope.first(),
                        index.tiebreakers.first()
                    )));
                };
                (table.name.clone(), by_scope.name.clone())
            }
            Err(_) => (
                self.issues_table()?,
                self.parameters.get("GridNullsIndex").cloned().unwrap_or_else(|| "project-num".to_owned()),
            ),
        };
        operations::grid::GridSchema::new(&indexes, Some(&index.name), table, nulls_index)
            .map_err(|e| StackError::Unusable(e.to_string()))
    }
}

/// Trims every record `table`'s stream holds now on the emulator, as DynamoDB Streams does 24
/// hours after each record arrived: reading them then fails with `TrimmedDataAccessException`
/// (the launcher `scripts/moto-server.py` keeps the trim horizon). The records trimmed.
pub async fn trim_stream(sdk: &SdkConfig, table: &str) -> Result<u64, StackError> {
    let region = sdk.region().map_or("us-east-1", |r| r.as_ref());
    control(sdk, "TrimStream", &serde_json::json!({"TableName": table, "Region": region}), "Trimmed").await
}

/// Ages every shard iterator the emulator has handed out by `seconds`, as if that much time had
/// passed for them: one aged past 15 minutes then fails `GetRecords` with
/// `ExpiredIteratorException`, as DynamoDB Streams' do. The iterators aged.
pub async fn age_iterators(sdk: &SdkConfig, seconds: u64) -> Result<u64, StackError> {
    control(sdk, "AgeIterators", &serde_json::json!({"Seconds": seconds}), "Aged").await
}

/// Sends the launcher's control request `operation` with `body` and reads the count `field` of
/// its answer.
async fn control(
    sdk: &SdkConfig,
    operation: &str,
    body: &serde_json::Value,
    field: &str,
) -> Result<u64, StackError> {
    let answer = control_answer(sdk, operation, body).await?;
    answer[field].as_u64().ok_or_else(|| StackError::Unusable(format!("{operation} {body}: {answer}")))
}

/// Sends the launcher's control request `operation` with `body`: its answer.
pub(crate) async fn control_answer(
    sdk: &SdkConfig,
    operation: &str,
    body: &serde_json::Value,
) -> Result<serde_json::Value, StackError> {
    let endpoint = sdk
        .endpoint_url()
        .ok_or_else(|| StackError::Unusable(format!("no emulator endpoint to send {operation} to")))?;
    control_at(endpoint, operation, body).await
}

/// Sends the launcher at `endpoint` its control request `operation` with `body`: its answer.
pub(crate) async fn control_at(
    endpoint: &str,
    operation: &str,
    body: &serde_json::Value,
) -> Result<serde_json::Value, StackError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = endpoint.strip_prefix("http://").unwrap_or(endpoint).trim_end_matches('/');
    let body = body.to_string();
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {address}\r\nX-Amz-Target: SidestreamControl.{operation}\r\n\
         Content-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let failed = |e: std::io::Error| StackError::Unusable(format!("{operation} {body} at {address}: {e}"));
    let mut stream = tokio::net::TcpStream::connect(address).await.map_err(failed)?;
    stream.write_all(request.as_bytes()).await.map_err(failed)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.map_err(failed)?;
    let (head, answered) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    serde_json::from_str::<serde_json::Value>(answered)
        .ok()
        .filter(|_| head.starts_with("HTTP/1.1 200"))
        .ok_or_else(|| StackError::Unusable(format!("{operation} {body} at {address}: {answer}")))
}

/// The I/O policy for a whole-table read from the emulator (`operations::verify::scan` and `verify`):
/// the default's, with a 300 s attempt timeout instead of 10 s. moto answers one DynamoDB request
/// at a time, and a Scan page costs it seconds (it copies and serializes a megabyte of items in
/// Python), so under a suite's load a page can wait behind other tests' pages for longer than
/// DynamoDB would ever take; CI on 2026-11-26 saw all 8 attempts of a 20,000-item scan cut off
/// at 10 s. Against DynamoDB the default stands.
pub fn scan_policy() -> io_policy::Policy {
    io_policy::Policy { attempt_timeout: Duration::from_secs(300), ..io_policy::Policy::default() }
}

/// Every item of `table` (all pages of a consistent Scan, by `operations::verify::scan` under
/// [`scan_policy`]), as DynamoDB JSON.
pub async fn scan(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<Vec<serde_json::Value>, StackError> {
    operations::verify::scan(client, scan_policy(), table, &mut |_| {}).await.map_err(|e| match e {
        operations::verify::VerifyError::Request(failed) => StackError::Request(failed),
        other => StackError::Unusable(other.to_string()),
    })
}

/// Compares `stack`'s index table with what its issues table calls for, under the indexer's
/// configuration there (see `operations::oracle`).
pub async fn check_index(client: &aws_sdk_dynamodb::Client, stack: &Stack) -> Result<IndexCheck, StackError> {
    let function = stack.function(Indexer::NAME)?;
    let lookup = |name: &str| function.environment.get(name).cloned();
    let indexes = Indexes::from_vars(&Vars::new(&lookup))
        .map_err(|source| StackError::Config { function: function.logical_id.clone(), cause: source })?;
    let base = scan(client, &stack.issues_table()?).await?;
    let index = scan(client, &stack.table("IndexTable")?.name).await?;
    operations::oracle::compare(&indexes, &base, &index).map_err(|e| StackError::Unusable(e.to_string()))
}

/// The entries of one index partition (its partition key's name and value), in sort-key order (`forward`) or the reverse,
/// read as an app reading the index directly should (docs/grid-view.md, "Reading the index
/// yourself"): one `Query` page at a time, with the filter that leaves a removed entry's
/// tombstone out. A page can come back short, or empty with more to read: DynamoDB applies
/// the filter after `Limit` and the 1 MB page, so the pages are followed to the end.
pub async fn index_entries(
    client: &aws_sdk_dynamodb::Client,
    index: &str,
    (pk_name, pk): (&str, &str),
    forward: bool,
) -> Result<Vec<HashMap<String, AttributeValue>>, StackError> {
    let mut entries = Vec::new();
    let mut start = None;
    loop {
        let page = client
            .query()
            .table_name(index)
            .key_condition_expression("#pk = :pk")
            .filter_expression("attribute_not_exists(#expires)")
            .expression_attribute_names("#pk", pk_name)
            .expression_attribute_names("#expires", formats::tombstone::EXPIRES_ATTRIBUTE)
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_owned()))
            .scan_index_forward(forward)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|e| io_policy::RequestFailed::sdk("Query", index, &e))?;
        entries.extend(page.items.unwrap_or_default());
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok(entries),
        }
    }
}

/// Puts one item given as plain JSON (numbers become N, strings S, objects M, arrays L).
pub async fn put_json(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    item: &serde_json::Value,
) -> Result<(), StackError> {
    let item = dynamo_json(item, "an item", table)?;
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .await
        .map_err(|e| io_policy::RequestFailed::sdk("PutItem", table, &e))?;
    Ok(())
}

/// Deletes the item whose key is given as plain JSON (`{"id": "x"}`).
pub async fn delete_json(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    key: &serde_json::Value,
) -> Result<(), StackError> {
    let key = dynamo_json(key, "a key", table)?;
    client
        .delete_item()
        .table_name(table)
        .set_key(Some(key))
        .send()
        .await
        .map_err(|e| io_policy::RequestFailed::sdk("DeleteItem", table, &e))?;
    Ok(())
}

/// Plain JSON (`what` for `table`) as the SDK's DynamoDB attributes.
fn dynamo_json(
    value: &serde_json::Value,
    what: &str,
    table: &str,
) -> Result<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>, StackError> {
    let item: serde_dynamo::Item = serde_dynamo::to_item(value)
        .map_err(|e| StackError::Unusable(format!("{what} for {table} is not DynamoDB JSON: {e}")))?;
    Ok(item.into())
}

/// The SDK configuration for the emulator at `endpoint` (moto, as `scripts/moto` starts it): its
/// Region (`us-east-1`) and the test credentials every caller without a role signs with.
pub fn emulator_sdk(endpoint: &str) -> SdkConfig {
    let credentials = aws_credential_types::Credentials::new("testing", "testing", None, None, "moto");
    SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::new(credentials))
        .build()
}

/// An S3 client for the emulator: path-style addressing when `S3_FORCE_PATH_STYLE` says so (read
/// as the functions read it; an invalid value is taken as false here).
pub fn s3_client(sdk: &SdkConfig) -> aws_sdk_s3::Client {
    let path_style = stream_runtime::settings::path_style(&Vars::new(&Vars::process_lookup)).unwrap_or(false);
    stream_runtime::aws::s3(sdk, path_style)
}

fn binary_of(function: &Function) -> Result<&str, StackError> {
    function.binary.as_deref().ok_or_else(|| {
        StackError::Unusable(format!(
            "{} has no Metadata.BuildProperties.Binary naming its cargo binary",
            function.logical_id
        ))
    })
}

/// A function's environment: the template's variables, with `S3_FORCE_PATH_STYLE` passed on
/// from this process for emulators that need it, and its role's credentials.
pub fn environment(function: &Function) -> BTreeMap<String, String> {
    let mut env = function.environment.clone();
    if let Ok(value) = std::env::var("S3_FORCE_PATH_STYLE") {
        env.entry("S3_FORCE_PATH_STYLE".to_owned()).or_insert(value);
    }
    // Lambda hands a function its role's credentials: its binary signs as its role.
    if let Some(key) = &function.access_key {
        env.insert("AWS_ACCESS_KEY_ID".to_owned(), key.clone());
        env.insert("AWS_SECRET_ACCESS_KEY".to_owned(), iam::ROLE_SECRET.to_owned());
    }
    env
}

fn timeout(function: &Function) -> Duration {
    function.timeout.and_then(|s| u64::try_from(s).ok()).map_or(DEFAULT_TIMEOUT, Duration::from_secs)
}

/// An invoker that runs `function`'s library handler in this process, under the stream runtime,
/// configured from its template environment as its binary would be. Its metrics go to stdout as
/// EMF lines, as on Lambda.
pub fn in_process_invoker(function: &Function, sdk: &SdkConfig) -> Result<Invoker, StackError> {
    invoker(function, sdk, MetricsTo::Stdout)
}

/// [`in_process_invoker`], with its EMF lines put into the emulator's CloudWatch by `feed`, as
/// CloudWatch Logs would from the function's log group.
pub fn fed_invoker(
    function: &Function,
    sdk: &SdkConfig,
    feed: &cloudwatch::Feed,
) -> Result<Invoker, StackError> {
    invoker(function, sdk, MetricsTo::Each(feed.metrics()))
}

/// [`in_process_invoker`], with the metrics of every invocation added up in `tally` instead of
/// written out.
pub(crate) fn tallied_invoker(
    function: &Function,
    sdk: &SdkConfig,
    tally: Arc<Tally>,
) -> Result<Invoker, StackError> {
    invoker(function, sdk, MetricsTo::Tally(tally))
}

/// An invoker that runs `function`'s library handler in this process, as
/// [`in_process_invoker`] does, its metrics sent to `metrics`.
pub fn invoker(function: &Function, sdk: &SdkConfig, metrics: MetricsTo) -> Result<Invoker, StackError> {
    let sdk = &iam::as_function(sdk, function);
    let env = environment(function);
    let lookup = |name: &str| env.get(name).cloned();
    let vars = Vars::new(&lookup);
    if env.get(stream_runtime::source::SOURCE_VAR).map(String::as_str) != Some("kinesis") {
        let built = Built::new(binary_of(function)?, &function.logical_id, &vars, sdk)?;
        return Ok(built.invoker(metrics));
    }
    // From a Kinesis data stream: the table's changes written to it once, delivered as Kinesis
    // may deliver them.
    let arn = function.streams.first().map(|s| s.stream.as_str()).unwrap_or_default();
    let stream = crate::replayer::kinesis::delivery::Stream::registered(arn).ok_or_else(|| {
        StackError::Unusable(format!(
            "{}: CHANGE_SOURCE is kinesis, but no table of the stack writes to its stream {arn:?}",
            function.logical_id
        ))
    })?;
    let filters = function
        .streams
        .first()
        .map(change_patterns)
        .transpose()
        .map_err(|e| StackError::Unusable(format!("{}: {e}", function.logical_id)))?
        .unwrap_or_default();
    let function =
        Built::new(binary_of(function)?, &function.logical_id, &vars, sdk)?.kinesis_invoker(metrics);
    Ok(crate::replayer::kinesis::delivery::delivering(stream, filters, function))
}

/// A function's template environment with `overrides` on top.
pub(crate) fn overridden(function: &Function, overrides: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut env = environment(function);
    env.extend(overrides.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    env
}

/// A [`states::TaskInvoker`] that runs the task Lambda `T` in this process as its binary does
/// ([`stream_runtime::task`]): built once by `T::init` from `function`'s template environment
/// with `overrides` on top, under its role, then each invocation's input handled with `timeout`
/// before its deadline, a failure answered with `T::ERROR_TYPE`. `invocations` counts the
/// invocations.
pub async fn task_invoker<T: stream_runtime::task::Task>(
    function: &Function,
    sdk: &SdkConfig,
    overrides: &[(&str, &str)],
    timeout: Duration,
    invocations: Arc<AtomicU64>,
) -> Result<states::TaskInvoker, StackError> {
    let sdk = iam::as_function(sdk, function);
    let env = overridden(function, overrides);
    let lookup = |name: &str| env.get(name).cloned();
    let task = T::init(&Vars::new(&lookup), &sdk)
        .await
        .map_err(|e| StackError::Unusable(format!("{}: {e}", function.logical_id)))?;
    let task = Arc::new(task);
    Ok(Arc::new(move |_function: String, payload: serde_json::Value| {
        let task = Arc::clone(&task);
        invocations.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            let input: T::Input = serde_json::from_value(payload)
                .map_err(|e| ("Runtime.UnmarshalError".to_owned(), e.to_string()))?;
            let output = task
                .handle(input, Instant::now() + timeout)
                .await
                .map_err(|e| (T::ERROR_TYPE.to_owned(), e.to_string()))?;
            serde_json::to_value(output).map_err(|e| ("Runtime.MarshalError".to_owned(), e.to_string()))
        })
    }))
}

/// What a confirmation step of the verify job answered, as the local stack keeps it: the run,
/// and its EMF line as the function prints it.
pub type Confirmed = (operations::verify::scheduled::Run, serde_json::Value);

/// One run of the verify job in process ([`verify_job`]): its confirmation, and the state
/// transitions its execution made ([`states::Execution`]).
#[derive(Debug, Clone)]
pub struct VerifyJob {
    /// The confirmation's run.
    pub run: operations::verify::scheduled::Run,
    /// The confirmation's EMF line, as the function prints it.
    pub emf: serde_json::Value,
    /// The state transitions Step Functions would bill for the execution.
    pub transitions: u64,
}

/// A [`states::TaskInvoker`] that runs the verifier function (`index-verifier`) in this
/// process, configured from its template environment with `overrides` on top, each invocation
/// given `timeout` before its deadline (a segment stops starting pages 75 s before it), as the
/// function's `main` runs a step, built as its binary builds it (`Task::init`). `invocations`
/// counts the invocations; each confirmation's run and EMF line go to `confirmed`.
pub async fn verifier_invoker(
    function: &Function,
    sdk: &SdkConfig,
    overrides: &[(&str, &str)],
    timeout: Duration,
    invocations: Arc<AtomicU64>,
    confirmed: Arc<std::sync::Mutex<Vec<Confirmed>>>,
) -> Result<states::TaskInvoker, StackError> {
    use operations::verify::job::{Answer, Job, Step};
    use stream_runtime::task::Task as _;
    let sdk = iam::as_function(sdk, function);
    let env = overridden(function, overrides);
    let lookup = |name: &str| env.get(name).cloned();
    let job = Job::init(&Vars::new(&lookup), &sdk)
        .await
        .map_err(|e| StackError::Unusable(format!("{}: {e}", function.logical_id)))?;
    let job = Arc::new(job);
    Ok(Arc::new(move |_function: String, payload: serde_json::Value| {
        let (job, confirmed) = (Arc::clone(&job), Arc::clone(&confirmed));
        invocations.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            let step: Step = serde_json::from_value(payload)
                .map_err(|e| ("Runtime.UnmarshalError".to_owned(), e.to_string()))?;
            let failed = |e: operations::verify::VerifyError| ("VerifyError".to_owned(), e.to_string());
            let answer = job.step(step, Instant::now() + timeout).await.map_err(failed)?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            let reply = answer.reply(job.config(), now).map_err(failed)?;
            if let (Answer::Confirmed(run), Some(emf)) = (answer, reply.emf) {
                confirmed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((run, emf));
            }
            Ok(reply.output)
        })
    }))
}

/// A child process, killed when dropped.
#[derive(Debug)]
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A function's real binary, warm, behind its own `cargo lambda watch` (Lambda's Runtime and
/// Invoke APIs); both stop when this is dropped.
#[derive(Debug)]
pub struct Emulated {
    /// The emulator's loopback port: the Invoke API is at `http://127.0.0.1:<port>`.
    pub port: u16,
    /// The function's stdout (its JSON logs and EMF lines).
    pub log: PathBuf,
    timeout: Duration,
    // Dropped in order: the function, then the emulator.
    _function: Process,
    _watch: Process,
}

/// The variables of this process a function binary also gets: how to reach the emulator.
const PASSED_ON: [&str; 6] = [
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "S3_FORCE_PATH_STYLE",
];

impl Emulated {
    /// Starts `cargo lambda watch --only-lambda-apis` on a free loopback port and `binary`
    /// against it, with `env` and this process's AWS endpoint and credentials; the binary's
    /// stdout goes to `log` and the emulator's output beside it (`.watch.log`).
    pub fn start(
        cargo_lambda: &Path,
        binary: &Path,
        env: &BTreeMap<String, String>,
        log: &Path,
        timeout: Duration,
    ) -> Result<Emulated, StackError> {
        if !binary.exists() {
            return Err(StackError::Unusable(format!(
                "{} is missing: build the functions first (cargo build --bins)",
                binary.display()
            )));
        }
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(io("cannot find a free loopback port"))?
            .port();
        let watch_log = log.with_extension("watch.log");
        let watch = Command::new(cargo_lambda)
            .args(["lambda", "watch", "--only-lambda-apis", "-A", "127.0.0.1", "-P"])
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(File::create(&watch_log).map_err(io(format!("cannot create {}", watch_log.display())))?)
            .spawn()
            .map_err(io(format!("cannot start {} lambda watch", cargo_lambda.display())))?;
        let watch = Process(watch);
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() >= Duration::from_secs(60) {
                return Err(StackError::Unusable(format!(
                    "cargo lambda watch did not listen on port {port}; see {}",
                    watch_log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut command = Command::new(binary);
        command.env_clear().envs(env);
        // Lambda sets the function's name (a stack's functions have theirs in `env`); the
        // emulator's Invoke API knows the function as `_` whatever its name.
        if !env.contains_key(FUNCTION_NAME_VAR) {
            command.env(FUNCTION_NAME_VAR, "_");
        }
        for name in PASSED_ON {
            // The function's own environment wins (a fault proxy's endpoint, say).
            if let Ok(value) = std::env::var(name)
                && !env.contains_key(name)
            {
                command.env(name, value);
            }
        }
        let function = command
            .env("AWS_LAMBDA_RUNTIME_API", format!("http://127.0.0.1:{port}/.rt"))
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .stdout(File::create(log).map_err(io(format!("cannot create {}", log.display())))?)
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(io(format!("cannot start {}", binary.display())))?;
        Ok(Emulated { port, log: log.to_owned(), timeout, _function: Process(function), _watch: watch })
    }

    /// Starts `function`'s binary from `bin_dir`, with its template environment.
    pub fn function(
        cargo_lambda: &Path,
        bin_dir: &Path,
        function: &Function,
        log_dir: &Path,
    ) -> Result<Emulated, StackError> {
        let binary = binary_of(function)?;
        Emulated::start(
            cargo_lambda,
            &bin_dir.join(binary),
            &environment(function),
            &log_dir.join(format!("{binary}.log")),
            timeout(function),
        )
    }

    /// An invoker over the Invoke API, with the function's timeout.
    pub fn invoker(&self) -> Invoker {
        http(&format!("http://127.0.0.1:{}", self.port), "_", self.timeout)
    }
}

/// Every `${Name}` in `value`'s strings replaced by the substitution's value.
fn substitute(
    value: &serde_json::Value,
    substitutions: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) => {
            let mut text = text.clone();
            for (name, with) in substitutions {
                let with = with.as_str().map_or_else(|| with.to_string(), str::to_owned);
                text = text.replace(&format!("${{{name}}}"), &with);
            }
            Value::String(text)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, substitutions)).collect()),
        Value::Object(fields) => {
            Value::Object(fields.iter().map(|(k, v)| (k.clone(), substitute(v, substitutions))).collect())
        }
        other => other.clone(),
    }
}
