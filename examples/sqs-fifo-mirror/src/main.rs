//! The Lambda binary: the runtime runs the mirror.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::main::<sqs_fifo_mirror::Mirror>().await
}
