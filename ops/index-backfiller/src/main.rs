//! The index-backfiller Lambda: one scan segment per invocation (`operations::backfill::task`),
//! configured once at cold start from `MULTIKEY_INDEXES` and `BACKFILL_*`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::task::main::<operations::backfill::Backfill>().await
}
