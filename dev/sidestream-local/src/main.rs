//! `sidestream-local`: Sidestream on a local emulator, for development and proof (not shipped).
//! [`args`] parses the flags; this file resolves them into the local stack, the chaos run or the
//! bench, runs it, and renders its output.

use std::io::{self, Write};
use std::process::ExitCode;

mod args;
mod bench;
mod chaos;
mod demo;
mod table;

use crate::args::{Cli, Command};
use anyhow::Context as _;
use aws_config::SdkConfig;
use clap::Parser as _;
use local_stack::{Emulated, Stack};

/// The functions' allocator (see their `main.rs`), so that the functions run in this process
/// run as on Lambda.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs the command; an error is printed as one line (its causes after colons), never with a
/// backtrace, and exits with status 1.
fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("sidestream-local: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Serves the demo stack's grid on a loopback port until interrupted.
async fn serve_grid(sdk: &SdkConfig, stack: &Stack, port: u16, out: &mut impl Write) -> anyhow::Result<()> {
    let schema = stack.grid_schema()?;
    let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(sdk));
    // The demo's own key: its cursors are for this loopback page only.
    let signer = formats::cursor::Signer::new(b"sidestream-grid-development-key", 24 * 3600);
    let grid = operations::grid::Grid::new(client.clone(), schema, signer);
    let app = operations::grid_server::App::new(grid, client);
    operations::grid_server::serve_on_loopback(app, port, "35e9", out).await?;
    Ok(())
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    let (options, demo, until_settled, serve) = match command {
        Command::Chaos(args) => {
            // The report says what happened; logs only for what it cannot (RUST_LOG for more).
            init_logs("error");
            return crate::chaos::run(args);
        }
        Command::Bench(args) => {
            init_logs("error");
            return crate::bench::run(args);
        }
        Command::Put { table, file } => return put(&table, file.as_deref()),
        Command::Get { table, key } => return get(&table, &key),
        Command::Wait { stack, dir, timeout } => {
            let file = settled_file(&dir, &stack);
            runtime()?.block_on(local_stack::replayer::wait_settled(
                &file,
                std::time::Duration::from_secs(timeout),
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Run { options, until_settled } => (options, false, until_settled, None),
        Command::Demo { options, serve, port } => (options, true, true, serve.then_some(port)),
    };
    // The demo keeps its output readable with warnings and errors only.
    init_logs(if demo { "warn" } else { "info" });
    runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let parameters = options.parameters.iter().cloned().collect();
        let stack = Stack::create(&sdk, &options.template, &options.stack, &parameters).await?;
        // The bill starts once the stack is made (scripts/meter.py).
        let metered_before = local_stack::meter::read(&sdk).await?;
        // Not locked: in-process handlers print their EMF lines to stdout meanwhile.
        let mut out = io::stdout();
        announce(&mut out, &options, &sdk, &stack)?;
        let bin_dir = bin_dir(&options)?;
        // With --faults, the functions reach the emulator through the fault proxy; the loader,
        // the replayer and the checks go to it directly.
        let proxy = start_faults(options.faults.as_deref(), &sdk, &mut out).await?;
        // Loaded with the proxy as an explicit endpoint: one set on a copy of `sdk` would lose to
        // AWS_ENDPOINT_URL, which the SDK reads again per client.
        let functions_sdk = match &proxy {
            Some(proxy) => {
                aws_config::defaults(aws_config::BehaviorVersion::latest())
                    .endpoint_url(format!("http://{}", proxy.addr))
                    .load()
                    .await
            }
            None => sdk.clone(),
        };
        // The emulator's CloudWatch, fed as Lambda and CloudWatch Logs would feed it.
        let feed = local_stack::cloudwatch::Feed::start(&sdk);
        let mut running = Vec::new();
        let pipeline = stack
            .pipeline(
                &sdk,
                |function| {
                    let mut function = function.clone();
                    if let Some(proxy) = &proxy {
                        function
                            .environment
                            .insert("AWS_ENDPOINT_URL".to_owned(), format!("http://{}", proxy.addr));
                    }
                    let function = &function;
                    if options.in_process {
                        return local_stack::fed_invoker(function, &functions_sdk, &feed);
                    }
                    let emulated =
                        Emulated::function(&options.cargo_lambda, &bin_dir, function, &options.log_dir)?;
                    feed.follow(&emulated.log);
                    let invoker = emulated.invoker();
                    running.push(emulated);
                    Ok(invoker)
                },
                stack.failure_log(&sdk, &options.failure_log),
            )?
            .with_metrics(feed.lambda())
            .writing_settled(settled_file(
                options.failure_log.parent().unwrap_or_else(|| std::path::Path::new(".")),
                &stack.name,
            ));
        for emulated in &running {
            writeln!(out, "  function http://127.0.0.1:{} (log {})", emulated.port, emulated.log.display())?;
        }
        writeln!(out, "  failure log {}", options.failure_log.display())?;
        if !demo {
            second_shell(&mut out, &options, &sdk, &stack)?;
        }
        out.flush()?;
        if demo {
            let ok = crate::demo::run(&sdk, &stack, pipeline, &feed, &metered_before, &mut out).await?;
            report_faults(proxy.as_ref(), &mut out)?;
            if let Some(port) = serve {
                serve_grid(&sdk, &stack, port, &mut out).await?;
            }
            return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
        let mut pipeline = pipeline;
        if until_settled {
            pipeline.settle().await?;
        } else {
            pipeline.run_until(std::future::pending(), std::time::Duration::from_millis(200)).await?;
        }
        for (function, counts) in pipeline.counts() {
            writeln!(out, "  {function:<18} {counts}")?;
        }
        report_faults(proxy.as_ref(), &mut out)?;
        Ok(ExitCode::SUCCESS)
    })
}

/// `sidestream-local get`: the item with `key` (plain JSON) printed as plain JSON.
fn get(table: &str, key: &str) -> anyhow::Result<ExitCode> {
    let key: serde_json::Value =
        serde_json::from_str(key).with_context(|| format!("--key {key} is not JSON"))?;
    let key: serde_dynamo::Item =
        serde_dynamo::to_item(&key).with_context(|| format!("--key {key} is not a key"))?;
    runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let client = aws_sdk_dynamodb::Client::new(&sdk);
        let got = client
            .get_item()
            .table_name(table)
            .set_key(Some(key.into()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| io_policy::RequestFailed::sdk("GetItem", table, &e))?;
        let Some(item) = got.item else {
            eprintln!("sidestream-local: {table} has no such item");
            return Ok(ExitCode::FAILURE);
        };
        let plain: serde_json::Value = serde_dynamo::from_item(serde_dynamo::Item::from(item))?;
        writeln!(io::stdout().lock(), "{plain}")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Where `run` writes when it last caught up: `<dir>/<stack>.settled`.
fn settled_file(dir: &std::path::Path, stack: &str) -> std::path::PathBuf {
    dir.join(format!("{stack}.settled"))
}

/// `sidestream-local put`: each line of `file` (or stdin) put into `table`, or deleted from it.
fn put(table: &str, file: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let text = match file {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?
        }
        None => io::read_to_string(io::stdin())?,
    };
    runtime()?.block_on(async {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let client = aws_sdk_dynamodb::Client::new(&sdk);
        let (mut puts, mut deletes) = (0, 0);
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let at = || format!("line {}", n + 1);
            let value: serde_json::Value = serde_json::from_str(line).with_context(at)?;
            if let Some(key) = value.as_object().and_then(|o| o.get("delete").filter(|_| o.len() == 1)) {
                local_stack::delete_json(&client, table, key).await.with_context(at)?;
                deletes += 1;
            } else {
                local_stack::put_json(&client, table, &value).await.with_context(at)?;
                puts += 1;
            }
        }
        writeln!(io::stdout().lock(), "{table}: {puts} put, {deletes} deleted")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Where the functions' binaries are: `--bin-dir`, or this program's folder.
fn bin_dir(options: &crate::args::LocalOptions) -> anyhow::Result<std::path::PathBuf> {
    Ok(match &options.bin_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_exe()?.parent().context("this program's folder")?.to_owned(),
    })
}

/// JSON logs on stderr, at `RUST_LOG`'s levels or else at `default`.
fn init_logs(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt().json().with_env_filter(filter).with_writer(io::stderr).init();
}

/// The stack's resources, on `out`.
fn announce(
    out: &mut impl io::Write,
    options: &crate::args::LocalOptions,
    sdk: &aws_config::SdkConfig,
    stack: &Stack,
) -> io::Result<()> {
    writeln!(
        out,
        "The stack {} of {} on {}",
        options.stack,
        options.template.display(),
        sdk.endpoint_url().unwrap_or("AWS")
    )?;
    for table in &stack.tables {
        writeln!(out, "  table  {}", table.name)?;
    }
    for bucket in &stack.buckets {
        writeln!(out, "  bucket {}", bucket.name)?;
    }
    Ok(())
}

/// The environment another shell needs to use the stack, written to
/// `target/local/<stack>.env` and printed on `out`, ready to paste.
fn second_shell(
    out: &mut impl io::Write,
    options: &crate::args::LocalOptions,
    sdk: &aws_config::SdkConfig,
    stack: &Stack,
) -> anyhow::Result<()> {
    let endpoint =
        sdk.endpoint_url().context("the emulator's endpoint: set AWS_ENDPOINT_URL (scripts/moto does)")?;
    let region = sdk.region().map_or("us-east-1", |r| r.as_ref());
    let vars = stack.shell_environment(endpoint, region);
    // The `sidestream` CLI beside this program, first on the path.
    let bin = bin_dir(options)?.canonicalize()?;
    let exports = format!(
        "{}export PATH='{}':\"$PATH\"\n",
        local_stack::shell::exports(&vars),
        bin.display().to_string().replace('\'', r"'\''")
    );
    let file = options
        .failure_log
        .parent()
        .unwrap_or_else(|| std::path::Path::new("."))
        .join(format!("{}.env", stack.name));
    std::fs::create_dir_all(file.parent().unwrap_or_else(|| std::path::Path::new(".")))?;
    std::fs::write(&file, &exports).with_context(|| format!("cannot write {}", file.display()))?;
    writeln!(
        out,
        "\nIn another shell, to use this stack (docs/local.md, \"Your own data\"), paste these lines, or run `. {}`:",
        file.display()
    )?;
    write!(out, "{exports}")?;
    Ok(())
}

/// The faults the proxy injected, on `out`.
fn report_faults(
    proxy: Option<&local_stack::fault_proxy::Proxy>,
    out: &mut impl io::Write,
) -> io::Result<()> {
    if let Some(proxy) = proxy {
        let counts: Vec<String> =
            proxy.counts.snapshot().iter().map(|(kind, n)| format!("{kind} {n}")).collect();
        writeln!(out, "\nFaults between the functions and the emulator: {}", counts.join(", "))?;
    }
    Ok(())
}

/// With a `--faults` spec, a fault proxy in front of the emulator `sdk` points at, announced on
/// `out`.
async fn start_faults(
    spec: Option<&str>,
    sdk: &aws_config::SdkConfig,
    out: &mut impl io::Write,
) -> anyhow::Result<Option<local_stack::fault_proxy::Proxy>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let spec = local_stack::fault_proxy::Spec::parse(spec)?;
    let upstream = sdk.endpoint_url().context("--faults needs AWS_ENDPOINT_URL (the emulator)")?;
    let proxy = local_stack::fault_proxy::start(upstream, spec).await?;
    writeln!(out, "  faults {spec:?} through http://{}", proxy.addr)?;
    Ok(Some(proxy))
}

/// The async runtime.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")
}
