//! The index-verifier Lambda: the steps of the verify job that the template's
//! `VerifyStateMachine` runs (`operations::verify::job`), configured once at cold start; the
//! confirmation's drift goes to stdout as one EMF line, for the template's drift alarm.

use io_policy::Deadline;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use operations::verify::VerifyError;
use operations::verify::job::{Answer, Job, Results, Step};
use operations::verify::scheduled::Config;
use serde_json::Value;
use stream_runtime::Vars;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::exit::report(env!("CARGO_PKG_NAME"), serve().await)
}

/// Configuration once at cold start, then every invocation.
async fn serve() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let vars = Vars::new(&Vars::process_lookup);
    let config = Config::from_vars(&vars)?;
    let results = Results::from_vars(&vars)?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    // Every DynamoDB and S3 call goes through the I/O policy, which does the retrying.
    let quiet = io_policy::without_sdk_retries(&sdk);
    let s3 = stream_runtime::aws::s3_client(&quiet, &vars)?;
    // The indexer's lag, read once a job that found drift.
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&sdk);
    let job = &Job::new(aws_sdk_dynamodb::Client::new(&quiet), s3, cloudwatch, config, results);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Step>| async move {
        let deadline = Deadline::from_epoch_millis(event.context.deadline).less(std::time::Duration::ZERO);
        let failed = |e: VerifyError| Diagnostic {
            error_type: "VerifyError".to_owned(),
            error_message: e.to_string(),
        };
        let answer = job.step(event.payload, deadline).await.map_err(failed)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let reply = answer.reply(job.config(), now).map_err(failed)?;
        if let (Some(emf), Answer::Confirmed(run)) = (&reply.emf, &answer) {
            emit(emf);
            if run.drift.is_exact() {
                tracing::info!(summary = %reply.output, "the index is exact");
            } else {
                tracing::error!(summary = %reply.output, "the index has drifted");
            }
        }
        Ok::<Value, Diagnostic>(reply.output)
    }))
    .await
}

/// EMF is delivered through stdout, where Lambda's log agent picks it up.
#[expect(clippy::print_stdout, reason = "EMF is delivered through stdout")]
fn emit(doc: &Value) {
    println!("{doc}");
}
