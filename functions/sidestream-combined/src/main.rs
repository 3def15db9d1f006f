//! The sidestream-combined Lambda: the functions `COMBINED_FUNCTIONS` names, behind one event
//! source mapping, under Sidestream's stream runtime (`stream_runtime::combined`).

/// mimalloc, not the system allocator, as in each function's own binary (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let result = stream_runtime::combined::run(sidestream_combined::combined).await;
    stream_runtime::exit::report(sidestream_combined::COMBINED_BINARY, result)
}
