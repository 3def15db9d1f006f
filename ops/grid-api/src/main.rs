//! The grid-api Lambda: a function URL's requests answered with the web grid's JSON pages
//! (`operations::grid_api`), configured once at cold start, the cursor key read from its secret.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::task::main::<operations::grid_api::Api>().await
}
