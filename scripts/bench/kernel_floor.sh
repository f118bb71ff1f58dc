#!/usr/bin/env bash
# What the kernel itself takes to add one exposure's objects on a busy gateway (issue 17), with
# no agent involved: in a fresh network namespace, N /32 addresses on one device (the underlay's
# bgp-nic) and N `to <ip> table 200` rules (one each per exposed IP, as upstream's underlay
# method has them), then the time of each further address and rule add, against the same on an
# empty device. Both lists are linear in the kernel (`__inet_insert_ifa` walks the device's
# addresses, `fib_newrule` the rules), so this is the floor under the agent's per-event cost at N
# local exposures, before any listener (ovs-vswitchd re-dumps every address of the namespace on
# each address notification) adds its share.
#
#   sudo scripts/bench/kernel_floor.sh            # N = 30000
#   sudo scripts/bench/kernel_floor.sh 10000
set -euo pipefail

n=${1:-30000}
extra=200
ns=kfloor-$$
dir=$(mktemp -d)
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "run as root (creates a network namespace)" >&2; exit 1; }
ip netns add "$ns"
ip -n "$ns" link add bgp-nic type veth peer name other-nic
ip -n "$ns" link set bgp-nic up
ip -n "$ns" link set other-nic up

python3 - "$dir" "$n" "$extra" <<'PY'
import sys
d, n, extra = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ip = lambda base, i: f"{base}.{(i // 65536) % 256}.{(i // 256) % 256}.{i % 256}"
def write(name, lines):
    with open(f"{d}/{name}", "w") as f:
        f.writelines(l + "\n" for l in lines)
write("empty", [f"addr add {ip(11, i)}/32 dev other-nic" for i in range(extra)])
write("addresses", [f"addr add {ip(10, i)}/32 dev bgp-nic" for i in range(n)])
write("more-addresses", [f"addr add {ip(12, i)}/32 dev bgp-nic" for i in range(extra)])
write("rules", [f"rule add to {ip(10, i)}/32 table 200 priority 1000" for i in range(n)])
write("more-rules", [f"rule add to {ip(12, i)}/32 table 200 priority 1000" for i in range(extra)])
PY

# Milliseconds per line of a batch file, run in one `ip` process (no process start per object).
per_line() {
    local start end lines
    lines=$(wc -l < "$dir/$1")
    start=$(date +%s%N)
    ip -n "$ns" -batch "$dir/$1"
    end=$(date +%s%N)
    echo "scale=3; ($end - $start) / 1000000 / $lines" | bc
}

echo "address add on an empty device:      $(per_line empty) ms"
echo "loading $n addresses and $n rules..."
per_line addresses > /dev/null
per_line rules > /dev/null
echo "address add next to $n addresses:  $(per_line more-addresses) ms"
echo "rule add next to $n rules:         $(per_line more-rules) ms"
