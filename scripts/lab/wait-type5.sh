#!/usr/bin/env bash
# wait-type5.sh PIDFILE LOGFILE RD TIMEOUT PREFIX...: waits (TIMEOUT seconds) until the lab's
# ToR (LAB_EVPN=1) has an EVPN type-5 route for each PREFIX (10.0.0.10/32) with route
# distinguisher RD (the chassis' <VTEP>:<VNI>), then prints the ToR's type-5 routes of that RD
# and the routes it installed in its vrf-<VNI>. Fails with the last lines of LOGFILE when the
# agent (the pid in PIDFILE) exits or the time runs out. Used by scripts/demo.sh for the EVPN
# modes; reads $LAB_DIR/lab.env.
set -euo pipefail
usage="usage: wait-type5.sh PIDFILE LOGFILE RD TIMEOUT PREFIX..."
pidfile=${1:?$usage} log=${2:?$usage} rd=${3:?$usage} timeout=${4:?$usage}
shift 4
(($# > 0)) || { echo "$usage" >&2; exit 2; }
LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-lab}
# shellcheck disable=SC1091
source "$LAB_DIR/lab.env"

tor() { vtysh --vty_socket "$VTY_TOR" --config_dir "$FRR_TOR_DIR" "$@"; }

printf '\n==> %s\n' "waiting for the ToR to learn type-5 routes with RD $rd: $*"
deadline=$((SECONDS + timeout))
while :; do
    missing=()
    routes=$(tor -c "show bgp l2vpn evpn route rd $rd type prefix")
    for p in "$@"; do
        # A type-5 NLRI reads [5]:[<ethernet tag>]:[<prefix length>]:[<address>].
        grep -qF "]:[${p#*/}]:[${p%/*}]" <<<"$routes" || missing+=("$p")
    done
    [ "${#missing[@]}" = 0 ] && break
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "the agent exited; last log lines:" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    if ((SECONDS > deadline)); then
        {
            echo "timed out; the ToR has not learned: ${missing[*]}"
            echo "--- the ToR's type-5 routes:"
            tor -c "show bgp l2vpn evpn route type prefix"
            echo "--- the chassis' EVPN sessions and VNIs:"
            vtysh --vty_socket "$VTY_CHASSIS" --config_dir "$FRR_CHASSIS_DIR" \
                -c "show bgp l2vpn evpn summary" -c "show evpn vni" -c "show running-config"
            echo "--- the chassis' table ${rd##*:}:"
            ip -n "$NS_CHASSIS" route show table "${rd##*:}"
            echo "--- the agent's log:"
            tail -n 40 "$log"
        } >&2
        exit 1
    fi
    sleep 1
done

vni=${rd##*:}
printf '\n==> %s\n' "the ToR (AS $TOR_AS) learned from the chassis (AS $CHASSIS_AS), RD $rd:"
tor -c "show bgp l2vpn evpn route rd $rd type prefix"
printf '\n==> %s\n' "and installed in its vrf-$vni through the VXLAN tunnel:"
ip -n "$NS_TOR" route show vrf "vrf-$vni"
