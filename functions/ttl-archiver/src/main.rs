//! The ttl-archiver Lambda: reads configuration and builds the S3 client once, then runs.

use aws_config::BehaviorVersion;
use aws_lambda_events::event::dynamodb::Event;
use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use stream_kit::Deadline;
use ttl_archiver::{Archiver, Config};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let sdk = aws_config::load_defaults(BehaviorVersion::latest()).await;
    let s3 = Archiver::s3_config(&config, &sdk);
    let archiver = Archiver::new(config, s3);
    let archiver = &archiver;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        let deadline = Deadline::from_epoch_millis(event.context.deadline);
        archiver
            .handle(event.payload, deadline)
            .await
            .map_err(Diagnostic::from)
    }))
    .await
}
