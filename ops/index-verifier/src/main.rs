//! The index-verifier Lambda: `operations::verify::scheduled` on a schedule, configured once at cold
//! start; the drift goes to stdout as one EMF line, for the template's drift alarm.

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use operations::verify::scheduled::{self, Config};
use serde_json::Value;
use stream_runtime::Vars;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::exit::report(env!("CARGO_PKG_NAME"), serve().await)
}

/// Configuration once at cold start, then every invocation.
async fn serve() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = &Config::from_vars(&Vars::new(&Vars::process_lookup))?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    // Every call goes through the I/O policy, which does the retrying.
    let client = &aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    // The indexer's lag, read once a run that found drift.
    let cloudwatch = &aws_sdk_cloudwatch::Client::new(&sdk);
    lambda_runtime::run(service_fn(move |_: LambdaEvent<Value>| async move {
        let run_id = operations::verify::run_id("verify");
        let run = scheduled::run(client, cloudwatch, config, &run_id)
            .await
            .map_err(|e| Diagnostic { error_type: "VerifyError".to_owned(), error_message: e.to_string() })?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        emit(&scheduled::emf(&run, &config.namespace, &config.function, now));
        let summary = scheduled::summary(&run);
        if run.drift.is_exact() {
            tracing::info!(%summary, "the index is exact");
        } else {
            tracing::error!(%summary, "the index has drifted");
        }
        Ok::<Value, Diagnostic>(summary)
    }))
    .await
}

/// EMF is delivered through stdout, where Lambda's log agent picks it up.
#[expect(clippy::print_stdout, reason = "EMF is delivered through stdout")]
fn emit(doc: &Value) {
    println!("{doc}");
}
