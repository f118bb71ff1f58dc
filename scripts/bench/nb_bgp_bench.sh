#!/usr/bin/env bash
# Benchmark of the NB BGP driver (nb_ovn_bgp_driver + underlay) against the lab (issue 13, "Scale"):
# bind/unbind latency to bgp-nic, bursts of 50, cold start, agent RSS and CPU, at N = 1k, 10k, 100k
# Logical_Switch_Port rows in the Northbound (a cloud-like topology: 1 router per 10 LSPs).
# Figures and method: docs/nb-bgp-benchmark.md. The SB driver's twin: sb_bgp_bench.sh.
#
#   sudo scripts/bench/nb_bgp_bench.sh                 # N = 1000,10000,100000
#   sudo BENCH_SIZES=1000,10000 scripts/bench/nb_bgp_bench.sh
#   sudo scripts/bench/nb_bgp_bench.sh --keep          # leave the lab up afterwards
#   sudo BENCH_SIZES=10000 scripts/bench/nb_bgp_bench.sh --busy 1000,10000,30000
#                      # busy gateway (issue 17): N loaded once, then 1k, 10k, 30k exposures here
#   sudo BENCH_SIZES=10000 scripts/bench/nb_bgp_bench.sh --busy 1000,10000,30000 --ovn
#                      # the same with `exposing_method = ovn`: the lab gets its node-local OVN
#                      # cluster (scripts/lab/local-ovn.sh) and each exposure is also timed to its
#                      # Static_MAC_Binding row in the local NB
#
# Environment: BENCH_SIZES, BENCH_EVENTS (200), BENCH_BURST (50), BENCH_COLD_PORTS (100),
# BENCH_COLD_STARTS (3), BENCH_FULL_RECONCILES (5; periodic full reconciles timed per run),
# BENCH_SETTLE (0: seconds to wait after a cold start, besides the wait for the agent's tool chains),
# BENCH_LAB_QUIET (600: after a cold start, at most this many seconds waited until the lab's
# daemons are quiet, ovs-vswitchd digesting thousands of new addresses for minutes; 0: no wait),
# BENCH_STOP_VSWITCHD (set: the lab's ovs-vswitchd stopped during the single bind/unbind events,
# as with sb_bgp_bench.sh; not with --ovn),
# BENCH_OUT (JSON results, default $LAB_DIR/../nb-bgp-bench-<time>.json),
# CARGO_TARGET_DIR (where the release build goes), BENCH_AGENT (measure that binary instead of
# building one: an A/B against another commit), and the lab's own LAB_DIR / LAB_NS_PREFIX /
# LAB_NB_TCP_PORT / LAB_SB_TCP_PORT (defaults below keep it apart from a default lab). The lab is
# torn down at the end (also on failure) unless --keep.
#
# BENCH_UPSTREAM=1: at each N, after our agent, run upstream ovn-bgp-agent 7.0.0 (PyPI) with its NB
# driver on the same Northbound and measure its memory, cold start and bind latency (one after
# the other: both would write bgp-nic). Its venv is made once in BENCH_UPSTREAM_VENV (default
# /var/cache/ovn-bgp-agent/upstream-ovn-bgp-agent-7.0.0) with one line of 7.0.0 patched (below).
# BENCH_UPSTREAM_EVENTS (50), BENCH_UPSTREAM_TIMEOUT (600 s), BENCH_UPSTREAM_ONLY=1 (skip ours).
#
#   sudo BENCH_SIZES=100000 BENCH_UPSTREAM=1 scripts/bench/nb_bgp_bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

export LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-nbbench}
export LAB_NS_PREFIX=${LAB_NS_PREFIX:-nbbench-}
export LAB_NB_TCP_PORT=${LAB_NB_TCP_PORT:-16770}
export LAB_SB_TCP_PORT=${LAB_SB_TCP_PORT:-16771}
sizes=${BENCH_SIZES:-1000,10000,100000}
out=${BENCH_OUT:-$(dirname "$LAB_DIR")/nb-bgp-bench-$(date -u +%Y%m%dT%H%M%SZ).json}
. scripts/bench/args.sh "$@"
[ -z "$evpn" ] || { echo "--evpn: the EVPN busy gateway is in scripts/bench/sb_bgp_bench.sh" >&2; exit 2; }
[ -z "$ovn" ] || [ "${BENCH_UPSTREAM:-0}" != 1 ] ||
    { echo "--ovn measures our agent only (upstream's ovn method fails every sync with peer_ips set: U02)" >&2; exit 2; }

[ "$(id -u)" = 0 ] || { echo "run as root (the lab creates network namespaces)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required (standard library only)" >&2; exit 1; }

upstream_args=()
if [ "${BENCH_UPSTREAM:-0}" = 1 ]; then
    # Upstream's NB driver needs OVN >= 23.09 (LRP `status`): on the host's 23.03 its first sync
    # dies on `Row instance has no attribute 'status'` (GetLSPsForGwChassisCommand, centralized
    # FIPs) before exposing anything. So the comparison runs on the 25.03 tier unless told otherwise.
    export LAB_OVN=${LAB_OVN:-25.03}
    venv=${BENCH_UPSTREAM_VENV:-/var/cache/ovn-bgp-agent/upstream-ovn-bgp-agent-7.0.0}
    # The stamp is written last: an interrupted install is redone, never used half-made.
    if [ ! -f "$venv/.bench-ready" ]; then
        echo "==> installing upstream ovn-bgp-agent==7.0.0 from PyPI into $venv"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check ovn-bgp-agent==7.0.0
        wire=$("$venv/bin/python" -c 'import ovn_bgp_agent.drivers.openstack.utils.wire as m; print(m.__file__)')
        # 7.0.0 defect: ensure_base_wiring_config() starts with `routing_tables = routing_tables or {}`;
        # sync() passes its (empty) self.ovn_routing_tables, which `or` replaces by a new dict, so the
        # bridge's table is never recorded where the driver looks and every wiring of a provider
        # port raises KeyError('br-ex'): 7.0.0 exposes nothing in underlay mode. Keep the caller's dict.
        cp "$wire" "$wire.orig"
        sed -i 's/^    routing_tables = routing_tables or {}$/    routing_tables = {} if routing_tables is None else routing_tables/' "$wire"
        echo "==> patched $wire (the one line upstream 7.0.0 needs to expose anything in underlay mode):"
        diff -u "$wire.orig" "$wire" || true
        grep -q '^    routing_tables = {} if routing_tables is None else routing_tables$' "$wire" ||
            { echo "patch of $wire did not apply" >&2; exit 1; }
        "$venv/bin/pip" freeze --disable-pip-version-check >"$venv/pip-freeze.txt"
        touch "$venv/.bench-ready"
    fi
    echo "==> upstream venv $venv: $(grep -i '^ovn-bgp-agent==' "$venv/pip-freeze.txt"), $(grep -ci . "$venv/pip-freeze.txt") packages"
    upstream_args=(--upstream-venv "$venv" --upstream-events "${BENCH_UPSTREAM_EVENTS:-50}"
                   --upstream-timeout "${BENCH_UPSTREAM_TIMEOUT:-600}")
    if [ "${BENCH_UPSTREAM_ONLY:-0}" = 1 ]; then upstream_args+=(--skip-ours); fi
fi

. scripts/bench/agent.sh

echo "==> bringing up the lab in $LAB_DIR (netns ${LAB_NS_PREFIX}*)"
scripts/lab/up.sh >/dev/null
if [ "$keep" = 0 ]; then
    trap 'echo "==> tearing the lab down"; scripts/lab/down.sh >/dev/null 2>&1 || true' EXIT
fi
if [ -n "$ovn" ]; then
    echo "==> the node-local OVN cluster of exposing_method = ovn (scripts/lab/local-ovn.sh)"
    scripts/lab/local-ovn.sh >/dev/null
fi

echo "==> machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 scripts/bench/nb_bgp_bench.py \
    --lab-dir "$LAB_DIR" --agent "$agent" --sizes "$sizes" \
    --events "${BENCH_EVENTS:-200}" --burst "${BENCH_BURST:-50}" \
    --cold-start-ports "${BENCH_COLD_PORTS:-100}" --cold-starts "${BENCH_COLD_STARTS:-3}" \
    --full-reconciles "${BENCH_FULL_RECONCILES:-5}" --busy "$busy" $ovn \
    --lab-quiet-timeout "${BENCH_LAB_QUIET:-600}" ${BENCH_STOP_VSWITCHD:+--stop-vswitchd} \
    --out "$out" "${upstream_args[@]}"
echo "==> JSON results: $out"
