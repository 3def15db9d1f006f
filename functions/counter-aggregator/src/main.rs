//! The counter-aggregator Lambda: the aggregator under Sidestream's stream runtime.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    stream_runtime::run::<counter_aggregator::Aggregator>().await
}
