//! The sidestream-combined Lambda: the functions `COMBINED_FUNCTIONS` names, behind one event
//! source mapping, under Sidestream's stream runtime (`stream_runtime::combined`).

/// mimalloc, not the system allocator, as in each function's own binary (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    stream_runtime::combined::run(sidestream_combined::combined).await
}
