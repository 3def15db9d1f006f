//! The ttl-archiver Lambda: the archiver under Sidestream's stream runtime.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    stream_runtime::run::<ttl_archiver::Archiver>().await
}
