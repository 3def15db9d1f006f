//! The counter-aggregator Lambda: the aggregator under Sidestream's stream runtime.

/// mimalloc, not the system allocator: a batch's decode and plan are mostly allocation, and
/// glibc's malloc and free took about a third of their time (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    stream_runtime::main::<counter_aggregator::Aggregator>().await
}
