//! The grid-api Lambda: a function URL's requests answered with the web grid's JSON pages
//! (`operations::grid_api`), configured once at cold start, the cursor key read from its secret.

use lambda_runtime::{LambdaEvent, service_fn};
use operations::grid_api::{Config, UrlRequest, UrlResponse};
use stream_runtime::Vars;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::exit::report(env!("CARGO_PKG_NAME"), serve().await)
}

/// Configuration once at cold start, then every request.
async fn serve() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_vars(&Vars::new(&Vars::process_lookup))?;
    let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let api = &operations::grid_api::start(&config, &sdk).await?;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<UrlRequest>| async move {
        let response = api.handle(&event.payload).await;
        tracing::info!(path = event.payload.raw_path, status = response.status, "answered");
        Ok::<UrlResponse, lambda_runtime::Error>(response)
    }))
    .await
}
