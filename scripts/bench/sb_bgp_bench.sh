#!/usr/bin/env bash
# Benchmark of the SB BGP driver (ovn_bgp_driver + underlay) against the lab (issue 5):
# bind/unbind latency to bgp-nic, bursts of 50, cold start, agent RSS, at N = 1k, 10k, 100k
# Port_Binding rows in the Southbound. Figures and method: docs/sb-bgp-benchmark.md.
#
#   sudo scripts/bench/sb_bgp_bench.sh                 # N = 1000,10000,100000
#   sudo BENCH_SIZES=1000,10000 scripts/bench/sb_bgp_bench.sh
#   sudo scripts/bench/sb_bgp_bench.sh --keep          # leave the lab up afterwards
#   sudo BENCH_SIZES=100000 scripts/bench/sb_bgp_bench.sh --busy 1000,10000,30000
#                      # busy gateway (issue 17): N loaded once, then 1k, 10k, 30k exposures here
#   sudo BENCH_SIZES=100000 scripts/bench/sb_bgp_bench.sh --busy 1000,10000,30000 --evpn
#                      # the same with the EVPN driver: tenant VMs on lo-<vni>, a VRF per router
#   sudo BENCH_SIZES=100000 BENCH_FIPS_PER_ROUTER=30000 scripts/bench/sb_bgp_bench.sh --busy 30000
#                      # one router of 30k FIPs here: a FIP added to it and taken out, per event
#
# Environment: BENCH_SIZES, BENCH_EVENTS (200), BENCH_BURST (50), BENCH_COLD_PORTS (100),
# BENCH_COLD_STARTS (3), BENCH_FULL_RECONCILES (5; periodic full reconciles timed per run),
# BENCH_FIPS_PER_ROUTER (500: each busy router's centralized FIPs), BENCH_FIP_EVENTS (50: FIPs
# added to busy router 0 and taken out again, each timed), BENCH_SETTLE (0: seconds to wait after a cold start, besides the wait for the agent's tool chains),
# BENCH_LAB_QUIET (600: after a cold start, at most this many seconds waited until the lab's
# daemons are quiet, ovs-vswitchd digesting thousands of new addresses for minutes; 0: no wait),
# BENCH_QUIET_BETWEEN (set: before each single bind/unbind, wait until the lab's daemons are
# quiet, so each event is measured on an otherwise idle machine), BENCH_STOP_VSWITCHD (set: the
# lab's ovs-vswitchd stopped during the single bind/unbind events, as beside an OVS that does no
# work on the agent's addresses: OVS 3.5 with bgp-nic in a VRF; see vswitchd_address_cost.sh),
# LAB_VSWITCHD_SYSTEM_ROUTES=0 (the lab's ovs-vswitchd started with --disable-system-route),
# BENCH_OUT (JSON results, default $LAB_DIR/../sb-bgp-bench-<time>.json), CARGO_TARGET_DIR
# (where the release build goes: a profiling build, e.g. with frame pointers, apart), BENCH_AGENT
# (measure that binary instead of building one: an A/B against another commit), and the lab's own
# LAB_DIR / LAB_NS_PREFIX / LAB_NB_TCP_PORT / LAB_SB_TCP_PORT (defaults below keep it apart from
# a default lab). The lab is torn down at the end (also on failure) unless --keep.
set -euo pipefail
cd "$(dirname "$0")/../.."

export LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-bench}
export LAB_NS_PREFIX=${LAB_NS_PREFIX:-bench-}
export LAB_NB_TCP_PORT=${LAB_NB_TCP_PORT:-16760}
export LAB_SB_TCP_PORT=${LAB_SB_TCP_PORT:-16761}
sizes=${BENCH_SIZES:-1000,10000,100000}
out=${BENCH_OUT:-$(dirname "$LAB_DIR")/sb-bgp-bench-$(date -u +%Y%m%dT%H%M%SZ).json}
. scripts/bench/args.sh "$@"

[ "$(id -u)" = 0 ] || { echo "run as root (the lab creates network namespaces)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required (standard library only)" >&2; exit 1; }

. scripts/bench/agent.sh

echo "==> bringing up the lab in $LAB_DIR (netns ${LAB_NS_PREFIX}*)"
scripts/lab/up.sh >/dev/null
if [ "$keep" = 0 ]; then
    trap 'echo "==> tearing the lab down"; scripts/lab/down.sh >/dev/null 2>&1 || true' EXIT
fi

echo "==> machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 scripts/bench/sb_bgp_bench.py \
    --lab-dir "$LAB_DIR" --agent "$agent" --sizes "$sizes" \
    --events "${BENCH_EVENTS:-200}" --burst "${BENCH_BURST:-50}" \
    --cold-start-ports "${BENCH_COLD_PORTS:-100}" --cold-starts "${BENCH_COLD_STARTS:-3}" \
    --full-reconciles "${BENCH_FULL_RECONCILES:-5}" --busy "$busy" $evpn --out "$out" \
    --fips-per-router "${BENCH_FIPS_PER_ROUTER:-500}" --fip-events "${BENCH_FIP_EVENTS:-50}" \
    --lab-quiet-timeout "${BENCH_LAB_QUIET:-600}" \
    ${BENCH_QUIET_BETWEEN:+--quiet-between} ${BENCH_STOP_VSWITCHD:+--stop-vswitchd}
echo "==> JSON results: $out"
