//! The multikey-indexer Lambda: reads configuration and builds the DynamoDB client once, then runs.

use aws_config::BehaviorVersion;
use aws_lambda_events::event::dynamodb::Event;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use multikey_indexer::{Config, Indexer};
use stream_kit::Deadline;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let indexer = Indexer::new(config, &aws_sdk_dynamodb::Config::from(&sdk));
    let indexer = &indexer;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        let deadline = Deadline::from_epoch_millis(event.context.deadline);
        indexer
            .handle(event.payload, deadline)
            .await
            .map_err(Diagnostic::from)
    }))
    .await
}
