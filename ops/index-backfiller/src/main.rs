//! The index-backfiller Lambda: one scan segment per invocation (`operations::backfill::task`),
//! configured once at cold start from `MULTIKEY_INDEXES` and `BACKFILL_*`.

use io_policy::Deadline;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use operations::backfill::{Backfill, Task};
use stream_runtime::Vars;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::exit::report(env!("CARGO_PKG_NAME"), serve().await)
}

/// Configuration once at cold start, then every invocation.
async fn serve() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (target, settings) = operations::backfill::task::target_from_vars(&Vars::new(&Vars::process_lookup))?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let client = aws_sdk_dynamodb::Client::new(&io_policy::without_sdk_retries(&sdk));
    let backfill = &Backfill::new(client, target, settings);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Task>| async move {
        let deadline = Deadline::from_epoch_millis(event.context.deadline).less(std::time::Duration::ZERO);
        backfill
            .task(event.payload, deadline)
            .await
            .map_err(|e| Diagnostic { error_type: "BackfillError".to_owned(), error_message: e.to_string() })
    }))
    .await
}
