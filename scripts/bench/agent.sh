# Sourced by sb_bgp_bench.sh and nb_bgp_bench.sh: the agent binary they measure, into $agent.
# BENCH_AGENT names another build (an A/B against an earlier commit), not built here; otherwise
# the release build of this tree (into CARGO_TARGET_DIR when set).
if [ -n "${BENCH_AGENT:-}" ]; then
    agent=$(realpath "$BENCH_AGENT")
    echo "==> the agent: $agent (BENCH_AGENT, not built here)"
else
    echo "==> building the agent (release)"
    cargo build --release --quiet --bin ovn-bgp-agent
    agent=${CARGO_TARGET_DIR:-$PWD/target}/release/ovn-bgp-agent
fi
