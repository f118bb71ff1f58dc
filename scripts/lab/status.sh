#!/usr/bin/env bash
# Show the lab's state: BGP sessions and the routes the ToR learned, SB chassis and bindings.
set -euo pipefail

LAB_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lab/lib.sh
source "$LAB_SCRIPTS/lib.sh"

[[ -f $LAB_ENV ]] || die "no lab in $LAB_DIR (run scripts/lab/up.sh)"
load_lab_settings

section() { printf '\n=== %s ===\n' "$*"; }

section "ToR ($NS_TOR): BGP sessions"
vtysh_tor -c "show bgp summary" || true
section "ToR: IPv4 routes learned over BGP"
vtysh_tor -c "show ip bgp" || true
section "ToR: IPv6 routes learned over BGP"
vtysh_tor -c "show bgp ipv6 unicast" || true
if ((LAB_EVPN)); then
    section "ToR: l2vpn evpn (type-5 routes, VNIs)"
    vtysh_tor -c "show bgp l2vpn evpn route type prefix" || true
    vtysh_tor -c "show evpn vni" || true
fi
section "chassis ($NS_CHASSIS): bgp-nic / bgp-vrf"
ip -n "$NS_CHASSIS" -d addr show dev bgp-nic 2>/dev/null || echo "bgp-nic does not exist (the agent creates it)"
ip -n "$NS_CHASSIS" -br link show dev bgp-vrf 2>/dev/null || echo "bgp-vrf does not exist (the agent creates it)"
section "daemons"
for f in "$LAB_DIR"/ovn/*.pid "$LAB_DIR"/ovs/*.pid "$LAB_DIR"/ovs2/*.pid "$LAB_DIR"/local-ovn/*.pid \
    "$LAB_DIR"/frr/*/run/*.pid; do
    [[ -e $f ]] || continue
    if pid_alive "$f"; then state="running (pid $(<"$f"))"; else state="NOT running"; fi
    printf '  %-40s %s\n' "${f#"$LAB_DIR"/}" "$state"
done
if sb_clustered; then
    section "SB RAFT cluster"
    for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do
        printf '  member %s  %s\n' "$n" "$(sb_member_role "$n" || true)"
    done
fi
section "SB chassis and port bindings"
sbctl show || true
