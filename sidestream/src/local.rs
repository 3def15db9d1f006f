//! `sidestream local`: the stack of `template.yaml` on a local emulator. Its tables and buckets
//! are created from the template, and its functions run (as their real binaries behind
//! `cargo lambda watch`, or in process) with the environment the template gives them, fed by the
//! event-source-mapping replayer (`stream-replayer`).

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use aws_config::SdkConfig;
use sam_template::{Bucket, Function, Names, Pattern, Table, Template};
use stream_kit::{Deadline, Vars};
use stream_replayer::invoke::{Invoker, http, in_process};
use stream_replayer::{FailureLog, Invocation, Pipeline, Settings, Source, Sweeper, resources};
use stream_runtime::{Runtime, StreamFunction};

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
    /// Tables, as created.
    pub tables: Vec<Table>,
    /// Buckets, as created.
    pub buckets: Vec<Bucket>,
    /// Each table's stream ARN on the emulator, by table name.
    pub streams: BTreeMap<String, String>,
}

impl Stack {
    /// Reads `template`, resolves it for `parameters` with resources named
    /// `<stack>-<logicalid>` (lowercase), and creates its tables and buckets (keeping those that
    /// exist).
    pub async fn create(
        sdk: &SdkConfig,
        template: &Path,
        stack: &str,
        parameters: &BTreeMap<String, String>,
    ) -> anyhow::Result<Stack> {
        let text = std::fs::read_to_string(template)
            .with_context(|| format!("cannot read the template {}", template.display()))?;
        let parsed = Template::parse(&text).with_context(|| template.display().to_string())?;
        let name = |id: &str| format!("{stack}-{id}").to_lowercase();
        let names = Names {
            region: sdk.region().map_or("us-east-1", |r| r.as_ref()).to_owned(),
            account: ACCOUNT.to_owned(),
            stack: stack.to_owned(),
            resource: &name,
        };
        let resolver = parsed.resolver(parameters, names);
        let functions = parsed.functions(&resolver)?;
        let tables = parsed.tables(&resolver)?;
        let buckets = parsed.buckets(&resolver)?;
        let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
        let s3 = s3_client(sdk);
        let mut streams = BTreeMap::new();
        for table in &tables {
            if let Some(arn) = resources::create_table(&dynamodb, table).await? {
                streams.insert(table.name.clone(), arn);
            }
        }
        for bucket in &buckets {
            resources::create_bucket(&s3, bucket).await?;
        }
        Ok(Stack {
            functions,
            tables,
            buckets,
            streams,
        })
    }

    /// The table a template stream ARN (`…:table/<name>/stream/…`) belongs to.
    fn table_of_stream<'a>(&self, arn: &'a str) -> anyhow::Result<&'a str> {
        arn.split_once(":table/")
            .and_then(|(_, rest)| rest.split('/').next())
            .filter(|name| self.streams.contains_key(*name))
            .with_context(|| {
                format!("the stream {arn} is not one of a table this template creates with a stream")
            })
    }

    /// One replayer source per function and stream event, each invoked by `invoker(function)`.
    pub fn sources(
        &self,
        mut invoker: impl FnMut(&Function) -> anyhow::Result<Invoker>,
    ) -> anyhow::Result<Vec<Source>> {
        let mut sources = Vec::new();
        for function in &self.functions {
            if function.streams.is_empty() {
                continue;
            }
            let invoke = invoker(function)?;
            for stream in &function.streams {
                let at = format!("{}/Events/{}", function.logical_id, stream.name);
                let table = self.table_of_stream(&stream.stream).with_context(|| at.clone())?;
                let filters = stream
                    .filters
                    .iter()
                    .map(|p| Pattern::parse_dynamodb(p))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| anyhow::anyhow!("{at}: FilterCriteria: {e}"))?;
                sources.push(Source {
                    function: binary_of(function)?.to_owned(),
                    stream_arn: self.streams[table].clone(),
                    settings: Settings::from_source(stream).map_err(|e| anyhow::anyhow!("{at}: {e}"))?,
                    filters,
                    invoker: Arc::clone(&invoke),
                });
            }
        }
        Ok(sources)
    }

    /// A TTL sweeper, paired with its stream ARN, for each table with TTL and a stream.
    pub fn sweepers(&self, sdk: &SdkConfig) -> Vec<(String, Sweeper)> {
        let client = aws_sdk_dynamodb::Client::new(sdk);
        self.tables
            .iter()
            .filter_map(|table| {
                let attribute = table.ttl_attribute.as_ref()?;
                let arn = self.streams.get(&table.name)?;
                let key = table.key.iter().map(|k| k.name.clone()).collect();
                Some((
                    arn.clone(),
                    Sweeper::new(client.clone(), &table.name, attribute, key),
                ))
            })
            .collect()
    }

    /// The pipeline over every function's streams.
    pub fn pipeline(
        &self,
        sdk: &SdkConfig,
        invoker: impl FnMut(&Function) -> anyhow::Result<Invoker>,
        failures: FailureLog,
    ) -> anyhow::Result<Pipeline> {
        let streams = aws_sdk_dynamodbstreams::Client::new(sdk);
        Ok(Pipeline::new(
            &streams,
            self.sources(invoker)?,
            self.sweepers(sdk),
            failures,
        ))
    }

    /// The function built from the cargo binary `binary`.
    pub fn function(&self, binary: &str) -> anyhow::Result<&Function> {
        self.functions
            .iter()
            .find(|f| f.binary.as_deref() == Some(binary))
            .with_context(|| format!("the template has no function with BuildProperties.Binary {binary}"))
    }

    /// The template environment of the function built from `binary`.
    pub fn environment(&self, binary: &str) -> anyhow::Result<&BTreeMap<String, String>> {
        Ok(&self.function(binary)?.environment)
    }

    /// Where the ttl-archiver writes: its `ARCHIVE_BUCKET` and `ARCHIVE_PREFIX`.
    pub fn archive_location(&self) -> anyhow::Result<(String, String)> {
        let env = self.environment("ttl-archiver")?;
        let get = |name: &str| {
            env.get(name)
                .cloned()
                .with_context(|| format!("the ttl-archiver's environment has no {name}"))
        };
        Ok((get("ARCHIVE_BUCKET")?, get("ARCHIVE_PREFIX")?))
    }

    /// The table with this logical id.
    pub fn table(&self, logical_id: &str) -> anyhow::Result<&Table> {
        self.tables
            .iter()
            .find(|t| t.logical_id == logical_id)
            .with_context(|| format!("the template creates no table {logical_id}"))
    }
}

/// Puts one item given as plain JSON (numbers become N, strings S, objects M, arrays L).
pub async fn put_json(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    item: &serde_json::Value,
) -> anyhow::Result<()> {
    let item: serde_dynamo::Item = serde_dynamo::to_item(item)?;
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item.into()))
        .send()
        .await
        .with_context(|| format!("PutItem {table}"))?;
    Ok(())
}

/// An S3 client for the emulator: path-style addressing when `S3_FORCE_PATH_STYLE` says so (read
/// as the functions read it; an invalid value is taken as false here).
pub fn s3_client(sdk: &SdkConfig) -> aws_sdk_s3::Client {
    let path_style = stream_runtime::settings::path_style(&Vars::new(&Vars::process_lookup)).unwrap_or(false);
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(path_style)
            .build(),
    )
}

fn binary_of(function: &Function) -> anyhow::Result<&str> {
    function.binary.as_deref().with_context(|| {
        format!(
            "{} has no Metadata.BuildProperties.Binary naming its cargo binary",
            function.logical_id
        )
    })
}

/// A function's environment: the template's variables, with `S3_FORCE_PATH_STYLE` passed on
/// from this process for emulators that need it.
pub fn environment(function: &Function) -> BTreeMap<String, String> {
    let mut env = function.environment.clone();
    if let Ok(value) = std::env::var("S3_FORCE_PATH_STYLE") {
        env.entry("S3_FORCE_PATH_STYLE".to_owned()).or_insert(value);
    }
    env
}

fn timeout(function: &Function) -> Duration {
    function
        .timeout
        .and_then(|s| u64::try_from(s).ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs)
}

/// An invoker that runs `function`'s library handler in this process, under the stream runtime,
/// configured from its template environment as its binary would be.
pub fn in_process_invoker(function: &Function, sdk: &SdkConfig) -> anyhow::Result<Invoker> {
    let env = environment(function);
    let lookup = |name: &str| env.get(name).cloned();
    let vars = Vars::new(&lookup);
    let limit = timeout(function);
    match binary_of(function)? {
        "multikey-indexer" => runtime_invoker::<multikey_indexer::Indexer>(&vars, sdk, limit),
        "ttl-archiver" => runtime_invoker::<ttl_archiver::Archiver>(&vars, sdk, limit),
        "counter-aggregator" => runtime_invoker::<counter_aggregator::Aggregator>(&vars, sdk, limit),
        other => bail!(
            "{}: no in-process handler for the binary {other}",
            function.logical_id
        ),
    }
}

/// An in-process invoker of the function `F` under the stream runtime, each invocation with
/// `limit` to its deadline.
fn runtime_invoker<F: StreamFunction>(
    vars: &Vars<'_>,
    sdk: &SdkConfig,
    limit: Duration,
) -> anyhow::Result<Invoker> {
    let runtime = Arc::new(Runtime::<F>::from_vars(vars, sdk)?);
    Ok(in_process(move |event| {
        let runtime = Arc::clone(&runtime);
        async move { answer(runtime.handle(event, Deadline::after(limit)).await) }
    }))
}

/// A handler's result as an invocation's: the response, or an error as Lambda reports it.
fn answer<T: serde::Serialize, E: std::fmt::Display>(result: Result<T, E>) -> Invocation {
    match result {
        Ok(response) => Invocation::Returned(serde_json::to_value(response).unwrap_or_default()),
        Err(error) => Invocation::Failed {
            error_type: std::any::type_name::<E>().to_owned(),
            message: error.to_string(),
        },
    }
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
    ) -> anyhow::Result<Emulated> {
        ensure!(
            binary.exists(),
            "{} is missing: build the functions first (cargo build --bins)",
            binary.display()
        );
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let watch = Command::new(cargo_lambda)
            .args(["lambda", "watch", "--only-lambda-apis", "-A", "127.0.0.1", "-P"])
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(File::create(log.with_extension("watch.log"))?)
            .spawn()
            .with_context(|| format!("cannot start {} lambda watch", cargo_lambda.display()))?;
        let watch = Process(watch);
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            ensure!(
                started.elapsed() < Duration::from_secs(60),
                "cargo lambda watch did not listen on port {port}; see {}",
                log.with_extension("watch.log").display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut command = Command::new(binary);
        command.env_clear().envs(env);
        for name in PASSED_ON {
            if let Ok(value) = std::env::var(name) {
                command.env(name, value);
            }
        }
        let function = command
            .env("AWS_LAMBDA_RUNTIME_API", format!("http://127.0.0.1:{port}/.rt"))
            .env("AWS_LAMBDA_FUNCTION_NAME", "_")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .stdout(File::create(log)?)
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        Ok(Emulated {
            port,
            log: log.to_owned(),
            timeout,
            _function: Process(function),
            _watch: watch,
        })
    }

    /// Starts `function`'s binary from `bin_dir`, with its template environment.
    pub fn function(
        cargo_lambda: &Path,
        bin_dir: &Path,
        function: &Function,
        log_dir: &Path,
    ) -> anyhow::Result<Emulated> {
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
