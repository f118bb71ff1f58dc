/// The agent's allocator (feature `mimalloc`): a full download of a large Southbound database
/// allocates hundreds of MB of small objects at once, which mimalloc serves with far fewer
/// page faults than glibc malloc (docs/ovsdb-benchmark.md). The benchmarks use the same one.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: ovn_bgp_agent::alloc::AgentAllocator = ovn_bgp_agent::alloc::AgentAllocator;

fn main() -> std::process::ExitCode {
    ovn_bgp_agent::cli::main()
}
