//! The archive-restorer Lambda: the steps of the restore job that the template's
//! `RestoreStateMachine` runs (`operations::archive::job`), configured once at cold start.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::task::main::<operations::archive::job::Job>().await
}
