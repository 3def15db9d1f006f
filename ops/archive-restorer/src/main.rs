//! The archive-restorer Lambda: the steps of the restore job that the template's
//! `RestoreStateMachine` runs (`operations::archive::job`), configured once at cold start.

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use operations::archive::job::{Config, Job, Step};
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
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    // Every DynamoDB and S3 call goes through the I/O policy, which does the retrying.
    let quiet = io_policy::without_sdk_retries(&sdk);
    let s3 = stream_runtime::aws::s3_client(&quiet, &vars)?;
    let job = &Job::new(aws_sdk_dynamodb::Client::new(&quiet), s3, config);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Step>| async move {
        let deadline =
            io_policy::Deadline::from_epoch_millis(event.context.deadline).less(std::time::Duration::ZERO);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let answer = job.step(event.payload, deadline, now).await.map_err(|e| Diagnostic {
            error_type: "RestoreError".to_owned(),
            error_message: e.to_string(),
        })?;
        serde_json::to_value(answer)
            .map_err(|e| Diagnostic { error_type: "RestoreError".to_owned(), error_message: e.to_string() })
    }))
    .await
}
