#!/usr/bin/env bash
# The main job, end to end on one machine: a real OVN + OVS + FRR lab (scripts/lab/up.sh), the
# agent started on it, and the ToR peer learning the routes the agent exposes.
#
#   sudo scripts/demo.sh            # leaves the lab and the agent running; prints how to stop
#   sudo scripts/demo.sh --stop     # tears everything down at the end
set -euo pipefail
cd "$(dirname "$0")/.."
export LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-lab}
stop=0
[ "${1:-}" = "--stop" ] && stop=1

step() { printf '\n==> %s\n' "$*"; }
[ "$(id -u)" = 0 ] || { echo "run as root (the lab creates network namespaces)" >&2; exit 1; }

step "system packages"
scripts/install-deps.sh

step "building the agent"
cargo build --quiet --bin ovn-bgp-agent
agent_bin=$PWD/target/debug/ovn-bgp-agent

step "bringing up the lab"
scripts/lab/up.sh
# shellcheck disable=SC1091
source "$LAB_DIR/lab.env"

tor() { vtysh --vty_socket "$VTY_TOR" --config_dir "$FRR_TOR_DIR" "$@"; }

step "starting the agent"
# The pid file lives in LAB_DIR and the command line names LAB_DIR, so scripts/lab/down.sh
# stops the agent together with the lab.
"$agent_bin" --config-file "$AGENT_CONF" --log-file "$LAB_DIR/agent.log" &
echo $! > "$LAB_DIR/agent.pid"
echo "agent pid $(cat "$LAB_DIR/agent.pid"), log $LAB_DIR/agent.log"

expected4=("$VM_PROVIDER_IP4/32" "$GW_IP4/32" "$FIP_IP4/32" "$VM_TENANT_IP4/32")
expected6=("$VM_PROVIDER_IP6/128" "$GW_IP6/128")
step "waiting for the ToR to learn: ${expected4[*]} ${expected6[*]}"
deadline=$((SECONDS + 60))
missing=()
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
    if ! kill -0 "$(cat "$LAB_DIR/agent.pid")" 2>/dev/null; then
        echo "the agent exited; last log lines:" >&2
        tail -n 20 "$LAB_DIR/agent.log" >&2
        exit 1
    fi
    if ((SECONDS > deadline)); then
        echo "timed out; the ToR has not learned: ${missing[*]}" >&2
        tail -n 20 "$LAB_DIR/agent.log" >&2
        exit 1
    fi
    sleep 0.5
done

step "the ToR (AS $TOR_AS) learned from the chassis (AS $CHASSIS_AS):"
tor -c 'show ip bgp'
tor -c 'show bgp ipv6 unicast'

if [ "$stop" = 1 ]; then
    step "stopping"
    scripts/lab/down.sh
else
    cat <<MSG

The lab and the agent keep running.
  agent log   $LAB_DIR/agent.log
  ToR routes  vtysh --vty_socket $VTY_TOR -c 'show ip bgp'
  status      LAB_DIR=$LAB_DIR scripts/lab/status.sh
  stop        LAB_DIR=$LAB_DIR scripts/lab/down.sh
MSG
fi
