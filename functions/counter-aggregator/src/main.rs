//! The counter-aggregator Lambda: reads configuration and builds the DynamoDB client once, then runs.

use aws_config::BehaviorVersion;
use aws_lambda_events::event::dynamodb::Event;
use counter_aggregator::{Aggregator, Config};
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use stream_kit::Deadline;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let aggregator = Aggregator::new(config, &aws_sdk_dynamodb::Config::from(&sdk));
    let aggregator = &aggregator;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        let deadline = Deadline::from_epoch_millis(event.context.deadline);
        aggregator
            .handle(event.payload, deadline)
            .await
            .map_err(Diagnostic::from)
    }))
    .await
}
