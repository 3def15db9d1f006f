//! The multikey-indexer Lambda: the indexer under Sidestream's stream runtime.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    stream_runtime::run::<multikey_indexer::Indexer>().await
}
