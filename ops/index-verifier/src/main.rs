//! The index-verifier Lambda: the steps of the verify job that the template's
//! `VerifyStateMachine` runs (`operations::verify::job`), configured once at cold start; the
//! confirmation's drift goes to stdout as one EMF line, for the template's drift alarm.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::task::main::<operations::verify::job::Job>().await
}
