#!/usr/bin/env bash
# The main job, end to end on one machine: a real OVN + OVS + FRR lab (scripts/lab/up.sh), the
# agent started on it, and the ToR peer learning the routes the agent exposes.
#
#   sudo scripts/demo.sh            # leaves the lab and the agent running; prints how to stop
#   sudo scripts/demo.sh --stop     # tears everything down at the end
#   sudo scripts/demo.sh --driver nb          # the NB driver (nb_ovn_bgp_driver) instead of SB
#   sudo scripts/demo.sh --driver evpn        # ovn_evpn_driver: the ToR learns EVPN type-5 routes
#   sudo scripts/demo.sh --driver nb-vrf      # nb_ovn_bgp_driver with exposing_method = vrf (EVPN)
#   sudo scripts/demo.sh --driver nb-ovn      # nb_ovn_bgp_driver with exposing_method = ovn: a
#        node-local OVN cluster (scripts/lab/local-ovn.sh) whose bgp-router the agent wires
#   sudo scripts/demo.sh --driver stretched   # ovn_stretched_l2_bgp_driver: routes, not addresses
#        (both EVPN modes need real VRFs: on a kernel without the vrf module, this machine's, the
#         demo runs inside the full-kernel VM of scripts/vm-tier, ~3 min under TCG, and stops there)
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
        --driver) driver=${2:?--driver sb|nb|nb-ovn|evpn|nb-vrf|stretched}; shift ;;
        --ovn) export LAB_OVN=${2:?--ovn 23.03|25.03}; shift ;;
        --agent) agent_bin=${2:?--agent PATH}; shift ;;
        *) echo "usage: $0 [--stop] [--driver sb|nb|nb-ovn|evpn|nb-vrf|stretched] [--ovn 25.03] [--agent PATH]" >&2; exit 2 ;;
    esac
    shift
done
evpn=0
case "$driver" in
    sb | nb | nb-ovn | stretched) ;;
    evpn | nb-vrf) evpn=1 ;;
    *) echo "--driver: sb, nb, nb-ovn, evpn, nb-vrf or stretched, not $driver" >&2; exit 2 ;;
esac

step() { printf '\n==> %s\n' "$*"; }
[ "$(id -u)" = 0 ] || { echo "run as root (the lab creates network namespaces)" >&2; exit 1; }

# Whether this kernel can make a VRF (the EVPN modes need real ones), tried in a scratch netns.
kernel_has_vrf() {
    local ns=ovn-bgp-demo-probe-$$ ok=1
    modprobe -q vrf 2>/dev/null || true
    ip netns add "$ns" || return 1
    ip -n "$ns" link add probe-vrf type vrf table 4242 2>/dev/null || ok=0
    ip netns del "$ns"
    [ "$ok" = 1 ]
}

in_vm=0
[ "${VM_TIER:-}" = 1 ] && in_vm=1
if [ "$in_vm" = 0 ]; then
    step "system packages"
    scripts/install-deps.sh
fi

if [ -z "$agent_bin" ]; then
    step "building the agent"
    cargo build --quiet --bin ovn-bgp-agent
    agent_bin=$PWD/target/debug/ovn-bgp-agent
else
    [ -x "$agent_bin" ] || { echo "--agent $agent_bin: not an executable" >&2; exit 2; }
    step "using the agent at $agent_bin ($("$agent_bin" --version))"
fi

if [ "$evpn" = 1 ] && [ "$in_vm" = 0 ] && ! kernel_has_vrf; then
    # The lab lives as long as the VM: the demo stops with it.
    step "this kernel ($(uname -r)) has no VRFs: running the $driver demo in the full-kernel VM (scripts/vm-tier)"
    scripts/vm-tier/prepare.sh
    vm_env=()
    [ -n "${LAB_OVN:-}" ] && vm_env+=(-e "LAB_OVN=$LAB_OVN")
    exec scripts/vm-tier/run.sh "${vm_env[@]}" scripts/demo.sh --driver "$driver" --agent "$agent_bin" --stop
fi

# Under TCG the VM is many times slower: its time scale stretches the lab's timeouts.
scale=${VM_TIER_TIME_SCALE:-1}
if [ "$evpn" = 1 ] || [ "$in_vm" = 1 ]; then
    # Real VRFs (and in the VM, the OVS kernel datapath): the production device kinds.
    export LAB_KERNEL=full LAB_TIMEOUT=$((15 * scale))
fi
[ "$evpn" = 1 ] && export LAB_EVPN=1

step "bringing up the lab"
scripts/lab/up.sh
# shellcheck disable=SC1091
source "$LAB_DIR/lab.env"

configs=(--config-file "$AGENT_CONF")
if [ "$driver" = nb ] || [ "$driver" = nb-ovn ]; then
    # The NB driver on the same lab; its floating IP is centralized, as NB_Global says.
    printf '[DEFAULT]\ndriver = nb_ovn_bgp_driver\n' >"$LAB_DIR/demo-nb.conf"
    configs+=(--config-file "$LAB_DIR/demo-nb.conf")
    ovn-nbctl --db="unix:$NB_SOCK" set NB_Global . 'external_ids:"neutron:fip-distributed"=False'
fi

nbctl() { ovn-nbctl --db="unix:$NB_SOCK" "$@"; }
case "$driver" in
    evpn)
        # networking-bgpvpn's keys on the router gateway and the router's tenant subnet: the
        # SB EVPN driver wires the gateway into VRF vrf-1001 and puts the tenant VM on lo-1001,
        # which FRR announces as a type-5 route (it redistributes connected routes, as
        # upstream); the ToR gets a VRF for the same VNI.
        vni=1001 expected=("$VM_TENANT_IP4/32")
        printf '[DEFAULT]\ndriver = ovn_evpn_driver\n' >"$LAB_DIR/demo-evpn.conf"
        configs+=(--config-file "$LAB_DIR/demo-evpn.conf")
        for port in "$GW_PORT_ID" "$RI_PORT_ID"; do
            nbctl set Logical_Switch_Port "$port" \
                "external_ids:\"neutron_bgpvpn:vni\"=$vni" 'external_ids:"neutron_bgpvpn:as"=64999'
        done
        ;;
    nb-vrf)
        # The provider network as an EVPN l3 network (VNI 100), and its subnet's DHCP options:
        # the NB driver puts its VMs in VRF vrf-100 and the gateway address on the VRF side.
        vni=100 expected=("$VM_PROVIDER_IP4/32")
        printf '[DEFAULT]\ndriver = nb_ovn_bgp_driver\nexposing_method = vrf\n' >"$LAB_DIR/demo-nb-vrf.conf"
        configs+=(--config-file "$LAB_DIR/demo-nb-vrf.conf")
        nbctl create DHCP_Options cidr='"172.24.4.0/24"' options:router='"172.24.4.254"' \
            "external_ids:\"neutron:network_id\"=\"$NET_PUBLIC_ID\"" >/dev/null
        nbctl set Logical_Switch "neutron-$NET_PUBLIC_ID" 'external_ids:"neutron_bgpvpn:type"=l3' \
            "external_ids:\"neutron_bgpvpn:vni\"=$vni" "external_ids:\"neutron_bgpvpn:rt\"=\"['64999:$vni']\""
        ;;
    nb-ovn)
        # The node-local OVN cluster (NB, SB, northd, br-fab, ovn-controller -n bgp on the lab's
        # OVS) as docs/exposing-method-ovn.md describes; the agent wires its bgp-router there.
        step "the node-local OVN cluster (scripts/lab/local-ovn.sh)"
        scripts/lab/local-ovn.sh
        # shellcheck disable=SC1091
        source "$LAB_DIR/lab.env"
        cat >"$LAB_DIR/demo-nb-ovn.conf" <<CONF
[DEFAULT]
exposing_method = ovn

[local_ovn_cluster]
ovn_nb_connection = unix:$LOCAL_NB_SOCK
peer_ips = $FABRIC_PEER_IP4
provider_networks_pool_prefixes = $PUBLIC_CIDR4
external_nics = $FABRIC_NIC
bgp_chassis_id = $LOCAL_OVN_CHASSIS
CONF
        configs+=(--config-file "$LAB_DIR/demo-nb-ovn.conf")
        ;;
    stretched)
        # Routes, not addresses, in bgp-vrf's table: the gateway network on-link and each router
        # subnet via the gateway, for every gateway of the cloud; FRR redistributes kernel routes.
        printf '[DEFAULT]\ndriver = ovn_stretched_l2_bgp_driver\n' >"$LAB_DIR/demo-stretched.conf"
        configs+=(--config-file "$LAB_DIR/demo-stretched.conf")
        ;;
esac
if [ "$evpn" = 1 ]; then
    step "the ToR gets vrf-$vni with L3VNI $vni (scripts/lab/tor-evpn.sh)"
    scripts/lab/tor-evpn.sh add "$vni" --address 192.168.200.1/32
fi

step "starting the agent ($driver driver)"
# The pid file lives in LAB_DIR and the command line names LAB_DIR, so scripts/lab/down.sh
# stops the agent together with the lab.
"$agent_bin" "${configs[@]}" --log-file "$LAB_DIR/agent.log" &
echo $! > "$LAB_DIR/agent.pid"
echo "agent pid $(cat "$LAB_DIR/agent.pid"), log $LAB_DIR/agent.log"

if [ "$evpn" = 1 ]; then
    scripts/lab/wait-type5.sh "$LAB_DIR/agent.pid" "$LAB_DIR/agent.log" "$CHASSIS_VTEP_IP4:$vni" \
        $((20 * scale)) "${expected[@]}"
elif [ "$driver" = stretched ]; then
    # With a real VRF the ToR also learns the tenant subnet (10.0.0.0/24) via the gateway; on
    # the lab's stand-in VRF (FRR's import-table of table 10) only on-link routes reach FRR.
    expected=("$PUBLIC_CIDR4")
    [ "$LAB_KERNEL" = full ] && expected+=("$PRIVATE_CIDR4")
    scripts/lab/wait-routes.sh "$LAB_DIR/agent.pid" "$LAB_DIR/agent.log" "${expected[@]}"
    step "the chassis' table 10: the gateway network on-link, the tenant subnet via the gateway"
    ip -n "$NS_CHASSIS" route show table 10
elif [ "$driver" = nb-ovn ]; then
    # This method exposes no tenant IPs: the lab's tenant VM is reported as skipped.
    scripts/lab/wait-routes.sh "$LAB_DIR/agent.pid" "$LAB_DIR/agent.log" \
        "$VM_PROVIDER_IP4/32" "$GW_IP4/32" "$FIP_IP4/32"
    local_nbctl() { ovn-nbctl --db="unix:$LOCAL_NB_SOCK" "$@"; }
    ofctl_flows() { ovs-ofctl dump-flows "unix:$OVS_RUNDIR/$1.mgmt" cookie=999/-1; }
    # poll COMMAND...: up to 30 s until COMMAND succeeds (what follows the routes by a sync or two).
    poll() { local _; for _ in $(seq 150); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done; return 1; }
    step "the node-local cluster's NB: bgp-router and its ports (ovn-nbctl --db=unix:$LOCAL_NB_SOCK show)"
    local_nbctl show
    step "its Static_MAC_Bindings: one per exposed IP with a MAC, on bgp-router-openstack"
    # Written in the same sync as the addresses on bgp-nic, but the ToR may learn those first.
    has_vm_binding() { local_nbctl static-mac-binding-list | grep -qF "$VM_PROVIDER_IP4"; }
    poll has_vm_binding || echo "(no binding of $VM_PROVIDER_IP4 after 30 s; see $LAB_DIR/agent.log)"
    local_nbctl static-mac-binding-list
    # The ingress flow needs the patch port ovn-controller -n $LOCAL_OVN_CHASSIS creates once it
    # claimed bgp-router-dcfabric; the agent re-reads the bridges every 5 s.
    step "the flows (cookie 999): $FABRIC_BRIDGE's ingress into the local cluster, br-ex's egress to bgp-router"
    has_ingress() { ofctl_flows "$FABRIC_BRIDGE" | grep -qF "nw_dst=$PUBLIC_CIDR4"; }
    poll has_ingress || echo "(no ingress flow on $FABRIC_BRIDGE after 30 s; see refused in the status below)"
    ofctl_flows "$FABRIC_BRIDGE"
    ofctl_flows br-ex
else
    scripts/lab/wait-routes.sh "$LAB_DIR/agent.pid" "$LAB_DIR/agent.log"
fi

step "what the agent says it exposes (ovn-bgp-agent status)"
"$agent_bin" status --socket "$AGENT_CONTROL_SOCKET"

if [ "$stop" = 1 ]; then
    step "stopping"
    scripts/lab/down.sh
else
    tor_show='show ip bgp'
    [ "$evpn" = 1 ] && tor_show='show bgp l2vpn evpn route type prefix'
    cat <<MSG

The lab and the agent keep running.
  agent log   $LAB_DIR/agent.log
  ToR routes  vtysh --vty_socket $VTY_TOR -c '$tor_show'
  agent       $agent_bin status --socket $AGENT_CONTROL_SOCKET
              $agent_bin explain $VM_PROVIDER_IP4 --socket $AGENT_CONTROL_SOCKET
              curl http://$AGENT_METRICS/metrics
  lab status  LAB_DIR=$LAB_DIR scripts/lab/status.sh
  stop        LAB_DIR=$LAB_DIR scripts/lab/down.sh
MSG
fi
