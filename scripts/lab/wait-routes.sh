#!/usr/bin/env bash
# wait-routes.sh PIDFILE LOGFILE [PREFIX...]: waits (60 s) until the lab's ToR has learned what
# the agent exposes for the lab's workloads (provider VM, gateway, FIP, tenant VM; the VM's and
# the gateway's IPv6), or the IPv4 PREFIXes given, then prints the ToR's tables. Fails with the last lines of LOGFILE when the
# agent (the pid in PIDFILE) exits or the time runs out. Used by scripts/demo.sh and
# scripts/test-oci.sh; reads $LAB_DIR/lab.env.
set -euo pipefail
pidfile=${1:?usage: wait-routes.sh PIDFILE LOGFILE} log=${2:?usage: wait-routes.sh PIDFILE LOGFILE}
LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-lab}
# shellcheck disable=SC1091
source "$LAB_DIR/lab.env"

tor() { vtysh --vty_socket "$VTY_TOR" --config_dir "$FRR_TOR_DIR" "$@"; }

expected4=("$VM_PROVIDER_IP4/32" "$GW_IP4/32" "$FIP_IP4/32" "$VM_TENANT_IP4/32")
expected6=("$VM_PROVIDER_IP6/128" "$GW_IP6/128")
if (($# > 2)); then
    expected4=("${@:3}")
    expected6=()
fi
printf '\n==> %s\n' "waiting for the ToR to learn: ${expected4[*]} ${expected6[*]}"
deadline=$((SECONDS + 60))
while :; do
    missing=()
    routes4=$(tor -c 'show ip bgp json')
    routes6=$(tor -c 'show bgp ipv6 unicast json')
    for p in "${expected4[@]}"; do
        grep -qF "\"$p\"" <<<"$routes4" || missing+=("$p")
    done
    for p in "${expected6[@]}"; do
        grep -qF "\"$p\"" <<<"$routes6" || missing+=("$p")
    done
    [ "${#missing[@]}" = 0 ] && break
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "the agent exited; last log lines:" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    if ((SECONDS > deadline)); then
        echo "timed out; the ToR has not learned: ${missing[*]}" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    sleep 0.5
done

printf '\n==> %s\n' "the ToR (AS $TOR_AS) learned from the chassis (AS $CHASSIS_AS):"
tor -c 'show ip bgp'
tor -c 'show bgp ipv6 unicast'
