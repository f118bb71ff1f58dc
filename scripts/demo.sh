#!/usr/bin/env bash
# The main job, end to end on one machine: a real OVN + OVS + FRR lab (scripts/lab/up.sh), the
# agent started on it, and the ToR peer learning the routes the agent exposes.
#
#   sudo scripts/demo.sh            # leaves the lab and the agent running; prints how to stop
#   sudo scripts/demo.sh --stop     # tears everything down at the end
#   sudo scripts/demo.sh --driver nb          # the NB driver (nb_ovn_bgp_driver) instead of SB
#   sudo scripts/demo.sh --ovn 25.03          # OVN 25.03 from Debian 13's packages (a chroot)
#   sudo scripts/demo.sh --agent /usr/bin/ovn-bgp-agent   # an installed binary (the .deb), no build
set -euo pipefail
cd "$(dirname "$0")/.."
export LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-lab}
stop=0
driver=sb
agent_bin=
while [ $# -gt 0 ]; do
    case "$1" in
        --stop) stop=1 ;;
        --driver) driver=${2:?--driver sb|nb}; shift ;;
        --ovn) export LAB_OVN=${2:?--ovn 23.03|25.03}; shift ;;
        --agent) agent_bin=${2:?--agent PATH}; shift ;;
        *) echo "usage: $0 [--stop] [--driver sb|nb] [--ovn 25.03] [--agent PATH]" >&2; exit 2 ;;
    esac
    shift
done
case "$driver" in
    sb | nb) ;;
    *) echo "--driver: sb or nb, not $driver" >&2; exit 2 ;;
esac

step() { printf '\n==> %s\n' "$*"; }
[ "$(id -u)" = 0 ] || { echo "run as root (the lab creates network namespaces)" >&2; exit 1; }

step "system packages"
scripts/install-deps.sh

if [ -z "$agent_bin" ]; then
    step "building the agent"
    cargo build --quiet --bin ovn-bgp-agent
    agent_bin=$PWD/target/debug/ovn-bgp-agent
else
    [ -x "$agent_bin" ] || { echo "--agent $agent_bin: not an executable" >&2; exit 2; }
    step "using the agent at $agent_bin ($("$agent_bin" --version))"
fi

step "bringing up the lab"
scripts/lab/up.sh
# shellcheck disable=SC1091
source "$LAB_DIR/lab.env"

configs=(--config-file "$AGENT_CONF")
if [ "$driver" = nb ]; then
    # The NB driver on the same lab; its floating IP is centralized, as NB_Global says.
    printf '[DEFAULT]\ndriver = nb_ovn_bgp_driver\n' >"$LAB_DIR/demo-nb.conf"
    configs+=(--config-file "$LAB_DIR/demo-nb.conf")
    ovn-nbctl --db="unix:$NB_SOCK" set NB_Global . 'external_ids:"neutron:fip-distributed"=False'
fi

step "starting the agent ($driver driver)"
# The pid file lives in LAB_DIR and the command line names LAB_DIR, so scripts/lab/down.sh
# stops the agent together with the lab.
"$agent_bin" "${configs[@]}" --log-file "$LAB_DIR/agent.log" &
echo $! > "$LAB_DIR/agent.pid"
echo "agent pid $(cat "$LAB_DIR/agent.pid"), log $LAB_DIR/agent.log"

scripts/lab/wait-routes.sh "$LAB_DIR/agent.pid" "$LAB_DIR/agent.log"

step "what the agent says it exposes (ovn-bgp-agent status)"
"$agent_bin" status --socket "$AGENT_CONTROL_SOCKET"

if [ "$stop" = 1 ]; then
    step "stopping"
    scripts/lab/down.sh
else
    cat <<MSG

The lab and the agent keep running.
  agent log   $LAB_DIR/agent.log
  ToR routes  vtysh --vty_socket $VTY_TOR -c 'show ip bgp'
  agent       $agent_bin status --socket $AGENT_CONTROL_SOCKET
              $agent_bin explain $VM_PROVIDER_IP4 --socket $AGENT_CONTROL_SOCKET
              curl http://$AGENT_METRICS/metrics
  lab status  LAB_DIR=$LAB_DIR scripts/lab/status.sh
  stop        LAB_DIR=$LAB_DIR scripts/lab/down.sh
MSG
fi
