#!/usr/bin/env bash
# What one more address costs ovs-vswitchd on a busy gateway (issue 17), with no agent involved:
# in a fresh network namespace, an ovs-vswitchd with one bridge, then N /32 addresses on a device
# (the underlay's bgp-nic, as upstream's agent adds one per exposed IP), then one address more,
# three times: ovs-vswitchd's CPU seconds until it is quiet again, beyond its idle pace.
#
# ovs-vswitchd follows the namespace's routes for its own routing table (tunnels, `ovs-appctl
# ovs/route/show`); each address brings a local route, in table `local` for a device of no VRF,
# in the VRF's table for a device enslaved to one (upstream's bgp-nic is, in production). The lab
# can only have the first (this kernel has no vrf module); the full-kernel VM tier has both:
#
#   sudo scripts/bench/vswitchd_address_cost.sh 10000                    # host OVS, no VRF
#   sudo scripts/bench/vswitchd_address_cost.sh --ovs trixie 10000       # OVS 3.5 (lab chroot)
#   sudo scripts/vm-tier/run.sh -e VM_TIMEOUT=3000 -- \
#       scripts/bench/vswitchd_address_cost.sh --vrf --datapath system 5000
#
# Options: --ovs host|trixie (the host's packages, or the OVN 25.03 lab chroot's OVS 3.5, see
# scripts/lab/ovn-chroot.sh), --vrf (bgp-nic enslaved to a VRF, table 10), --datapath
# netdev|system (the bridge's datapath; system needs the openvswitch module), --quiet-timeout S
# (600: how long to wait for ovs-vswitchd to be quiet after each step), --quiet-cpu C (0.01: quiet
# is under C CPU seconds in a second; more under the VM tier's software emulation). Prints one
# JSON line. --disable-system-route starts ovs-vswitchd with that option (it then keeps no copy of
# the kernel's routes; see docs/sb-bgp-benchmark.md for what that takes away).
set -euo pipefail

ovs=host vrf=0 datapath=netdev quiet_timeout=600 quiet_cpu=0.01 vswitchd_args=() n=
while [ $# -gt 0 ]; do
    case "$1" in
        --ovs) ovs=$2; shift 2 ;;
        --vrf) vrf=1; shift ;;
        --datapath) datapath=$2; shift 2 ;;
        --quiet-timeout) quiet_timeout=$2; shift 2 ;;
        --quiet-cpu) quiet_cpu=$2; shift 2 ;;
        --disable-system-route) vswitchd_args+=(--disable-system-route); shift ;;
        [0-9]*) n=$1; shift ;;
        *) echo "unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
n=${n:-10000}
[[ $n =~ ^[0-9]+$ ]] || { echo "N must be a whole number, got '$n'" >&2; exit 2; }
case "$datapath" in netdev | system) ;; *) echo "--datapath netdev|system, got '$datapath'" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "run as root (creates a network namespace)" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd -P)
ns=vswcost-$$
dir=$(mktemp -d /tmp/vswitchd-cost.XXXXXX)
prefix=()
case "$ovs" in
    host) ;;
    trixie)
        root=$("$here/../lab/ovn-chroot.sh" prepare)
        prefix=(unshare --mount --propagation private -- "$here/../lab/ovn-chroot.sh" exec "$root" "$dir")
        ;;
    *) echo "--ovs host|trixie, got '$ovs'" >&2; exit 2 ;;
esac

cleanup() {
    local f
    for f in "$dir"/ovs-vswitchd.pid "$dir"/ovsdb-server.pid; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    sleep 0.5
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
log() { printf '[vswitchd-cost %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add bgp-nic type veth peer name bgp-peer
if [ "$vrf" = 1 ]; then
    ip -n "$ns" link add bgp_vrf type vrf table 10 ||
        { echo "this kernel cannot make a VRF (no vrf module): run it in the VM tier" >&2; exit 1; }
    ip -n "$ns" link set bgp_vrf up
    ip -n "$ns" link set bgp-nic master bgp_vrf
fi
ip -n "$ns" link set bgp-nic up
ip -n "$ns" link set bgp-peer up
[ "$datapath" = system ] && modprobe openvswitch

sock=$dir/db.sock
"${prefix[@]}" ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ip netns exec "$ns" "${prefix[@]}" ovsdb-server "$dir/conf.db" --remote="punix:$sock" --detach \
    --no-chdir --pidfile="$dir/ovsdb-server.pid" --log-file="$dir/ovsdb-server.log" \
    --unixctl="$dir/ovsdb-server.ctl"
ip netns exec "$ns" "${prefix[@]}" ovs-vswitchd "unix:$sock" --detach --no-chdir \
    --pidfile="$dir/ovs-vswitchd.pid" --log-file="$dir/ovs-vswitchd.log" --unixctl="$dir/ovs-vswitchd.ctl" "${vswitchd_args[@]}"
vsctl() { ip netns exec "$ns" "${prefix[@]}" ovs-vsctl --db="unix:$sock" --timeout=30 "$@"; }
vsctl --no-wait init
vsctl add-br br-ex -- set bridge br-ex datapath_type="$datapath"
version=$(ip netns exec "$ns" "${prefix[@]}" ovs-vswitchd --version | head -1)
pid=$(cat "$dir/ovs-vswitchd.pid")

# ovs-vswitchd's utime+stime, seconds.
cpu() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / t }' "/proc/$pid/stat"; }
# Wait until ovs-vswitchd spent under $quiet_cpu CPU seconds in a second; print the seconds waited and the
# CPU seconds spent meanwhile.
wait_quiet() {
    local t0 c0 a b waited
    t0=$(date +%s.%N)
    c0=$(cpu)
    while :; do
        a=$(cpu)
        sleep 1
        b=$(cpu)
        waited=$(echo "$(date +%s.%N) - $t0" | bc)
        if [ "$(echo "$b - $a < $quiet_cpu" | bc)" = 1 ]; then break; fi
        if [ "$(echo "$waited > $quiet_timeout" | bc)" = 1 ]; then
            log "not quiet after $quiet_timeout s"
            break
        fi
    done
    printf '%.1f %.3f\n' "$waited" "$(echo "$b - $c0" | bc)"
}
# Idle pace: CPU seconds per second over 5 s.
idle_pace() {
    local a b
    a=$(cpu)
    sleep 5
    b=$(cpu)
    printf '%.4f\n' "$(echo "scale=4; ($b - $a) / 5" | bc)"
}

python3 - "$dir" "$n" <<'PY'
import sys
d, n = sys.argv[1], int(sys.argv[2])
ip = lambda base, i: f"{base}.{(i // 65536) % 256}.{(i // 256) % 256}.{i % 256}"
with open(f"{d}/addresses", "w") as f:
    f.writelines(f"addr add {ip(10, i)}/32 dev bgp-nic\n" for i in range(n))
PY

read -r _ _ < <(wait_quiet)
log "$version, datapath $datapath, VRF $vrf: loading $n addresses"
t0=$(date +%s.%N)
ip -n "$ns" -batch "$dir/addresses"
load_s=$(echo "$(date +%s.%N) - $t0" | bc)
read -r load_quiet_s load_cpu_s < <(wait_quiet)
log "loaded in ${load_s} s; ovs-vswitchd quiet ${load_quiet_s} s later, ${load_cpu_s} CPU s meanwhile"
pace=$(idle_pace)
trials=()
for i in 1 2 3; do
    ip -n "$ns" addr add "12.0.0.$i/32" dev bgp-nic
    read -r q c < <(wait_quiet)
    # The CPU beyond the idle pace over the wait, less the last (quiet) second.
    extra=$(printf '%.4f' "$(echo "scale=4; $c - $pace * $q" | bc)")
    log "one more address ($i): quiet after ${q} s, ${c} CPU s (${extra} beyond idle)"
    trials+=("$extra")
done
routes=$(ip netns exec "$ns" "${prefix[@]}" ovs-appctl -t "$dir/ovs-vswitchd.ctl" ovs/route/show | wc -l)
printf '{"ovs": "%s", "datapath": "%s", "vrf": %s, "vswitchd_args": "%s", "addresses": %s, "load_s": %.2f, "quiet_after_load_s": %s, "cpu_after_load_s": %s, "idle_cpu_per_s": %s, "one_more_address_cpu_s": [%s], "ovs_route_entries": %s}\n' \
    "$version" "$datapath" "$vrf" "${vswitchd_args[*]}" "$n" "$load_s" "$load_quiet_s" "$load_cpu_s" "$pace" \
    "$(IFS=,; echo "${trials[*]}")" "$routes"
