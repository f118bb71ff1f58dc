#!/usr/bin/env bash
# Give a running lab the node-local OVN cluster of `exposing_method = ovn`, as
# docs/exposing-method-ovn.md ("Configuration for a demo on the lab") describes.
#
#   local-ovn.sh [--no-peer]
#
# Starts, all in $LAB_DIR/local-ovn (pid files, sockets, logs):
#   - the local cluster's NB and SB ovsdb-servers (nb.sock, sb.sock) and its ovn-northd
#   - on the lab's OVS: bridge br-fab (the fabric side, br-ex's datapath type) with the internal
#     port eth-fab (the NIC: the agent's [local_ovn_cluster] external_nics), br-fab up with
#     100.64.7.1/24 in the chassis netns (the address the agent gives bgp-router-dcfabric)
#   - the chassis-suffixed keys of chassis `bgp` in the lab's Open_vSwitch row: ovn-remote-bgp
#     (the local SB), ovn-bridge-bgp=br-int-bgp, ovn-bridge-datapath-type-bgp,
#     ovn-encap-type-bgp=geneve, ovn-encap-ip-bgp=127.0.0.1,
#     ovn-bridge-mappings-bgp=dcfabric:br-fab,local:br-ex
#   - `ovn-controller -n bgp` in the chassis netns, on the lab's OVS next to the lab's own
#     ovn-controller; waits until it registered chassis `bgp` in the local SB
#   - the fabric-side peer (not with --no-peer): a veth pair from br-fab (port fab-peer) into the
#     ToR's netns (eth-chassis-fab, 100.64.7.2/24), so the agent's default route and BFD row
#     (peer_ips = 100.64.7.2) name an address that answers ARP. The ToR runs no bfdd: the BFD
#     session stays down.
# and appends LOCAL_OVN_DIR, LOCAL_OVN_CHASSIS (bgp), LOCAL_NB_SOCK, LOCAL_SB_SOCK,
# FABRIC_BRIDGE, FABRIC_NIC, FABRIC_CIDR4, FABRIC_PEER_IP4 (empty with --no-peer) to lab.env.
#
# down.sh stops the daemons with the rest of the lab (their pid files are under $LAB_DIR), and
# br-fab, br-int-bgp, the Open_vSwitch keys and the veth pair go with the lab's conf.db and
# netns. With LAB_OVN=25.03 the daemons are the chroot's OVN 25.03, like the lab's own.
set -euo pipefail

LAB_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lab/lib.sh
source "$LAB_SCRIPTS/lib.sh"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

peer=1
while (($#)); do
    case $1 in
    --no-peer) peer=0 ;;
    *) usage ;;
    esac
    shift
done

[[ $(id -u) -eq 0 ]] || die "local-ovn.sh must run as root (it starts OVN daemons in the lab's netns)"
load_lab_settings

# The local cluster's chassis name (the agent's [local_ovn_cluster] bgp_chassis_id), its files,
# and the fabric side; the names docs/exposing-method-ovn.md and tests/nb_ovn_e2e.rs use.
BGP_CHASSIS=bgp
LOCAL_OVN_DIR=$LAB_DIR/local-ovn
LOCAL_NB_SOCK=$LOCAL_OVN_DIR/nb.sock
LOCAL_SB_SOCK=$LOCAL_OVN_DIR/sb.sock
FABRIC_BRIDGE=br-fab
FABRIC_NIC=eth-fab
FABRIC_CIDR4=100.64.7.1/24
FABRIC_PEER_IP4=100.64.7.2
FABRIC_PEER_CHASSIS_IF=fab-peer     # in $NS_CHASSIS, a port of br-fab
FABRIC_PEER_TOR_IF=eth-chassis-fab  # in $NS_TOR
CLUSTER_INT_BRIDGE=br-int-bgp

[[ ! -e $LOCAL_OVN_DIR ]] ||
    die "the lab in $LAB_DIR already has a local OVN cluster ($LOCAL_OVN_DIR); run up.sh again for a fresh lab"
# The lab's processes must still be there: the bridges go into its OVS.
pid_alive "$OVS_DIR/ovs-vswitchd.pid" || die "the lab's ovs-vswitchd does not run (is the lab in $LAB_DIR up?)"

ovs_env
mkdir -p "$LOCAL_OVN_DIR"

log "local OVN cluster: NB and SB ovsdb-servers, ovn-northd in $LOCAL_OVN_DIR"
# start_local_db NAME SCHEMA: a standalone ovsdb-server for the local NB (nb) or SB (sb).
start_local_db() {
    local name=$1 schema=$2
    ovn_run ovsdb-tool create "$LOCAL_OVN_DIR/$name.db" "$schema"
    start_daemon "local $name ovsdb-server" "$LOCAL_OVN_DIR/$name.log" \
        ovn_run ovsdb-server "$LOCAL_OVN_DIR/$name.db" --detach --no-chdir \
        --pidfile="$LOCAL_OVN_DIR/$name.pid" --log-file="$LOCAL_OVN_DIR/$name.log" \
        --unixctl="$LOCAL_OVN_DIR/$name.ctl" --remote="punix:$LOCAL_OVN_DIR/$name.sock"
}
start_local_db nb /usr/share/ovn/ovn-nb.ovsschema
start_local_db sb /usr/share/ovn/ovn-sb.ovsschema
ovn-nbctl --db="unix:$LOCAL_NB_SOCK" --timeout="$LAB_TIMEOUT" --no-wait init
start_daemon "local ovn-northd" "$LOCAL_OVN_DIR/northd.log" \
    ovn_run ovn-northd --detach --no-chdir --pidfile="$LOCAL_OVN_DIR/northd.pid" \
    --log-file="$LOCAL_OVN_DIR/northd.log" --unixctl="$LOCAL_OVN_DIR/northd.ctl" \
    --ovnnb-db="unix:$LOCAL_NB_SOCK" --ovnsb-db="unix:$LOCAL_SB_SOCK"

# br-fab as a bridge of the lab's OVS datapath (netdev on the stand-in kernel, system with
# LAB_KERNEL=full): the local cluster's localnet port and the NIC must share its datapath.
datapath=$(vsctl get Bridge br-ex datapath_type)
log "$FABRIC_BRIDGE (datapath_type=$datapath) with NIC $FABRIC_NIC, the keys of chassis $BGP_CHASSIS"
vsctl -- --may-exist add-br "$FABRIC_BRIDGE" -- set Bridge "$FABRIC_BRIDGE" "datapath_type=$datapath" \
    -- --may-exist add-port "$FABRIC_BRIDGE" "$FABRIC_NIC" -- set Interface "$FABRIC_NIC" type=internal \
    -- set Open_vSwitch . \
    "external_ids:ovn-bridge-mappings-$BGP_CHASSIS=\"dcfabric:$FABRIC_BRIDGE,local:br-ex\"" \
    "external_ids:ovn-remote-$BGP_CHASSIS=\"unix:$LOCAL_SB_SOCK\"" \
    "external_ids:ovn-bridge-$BGP_CHASSIS=$CLUSTER_INT_BRIDGE" \
    "external_ids:ovn-bridge-datapath-type-$BGP_CHASSIS=$datapath" \
    "external_ids:ovn-encap-type-$BGP_CHASSIS=geneve" \
    "external_ids:ovn-encap-ip-$BGP_CHASSIS=127.0.0.1" ||
    die_with_log "ovs-vswitchd did not create $FABRIC_BRIDGE" "$OVS_DIR/ovs-vswitchd.log"
wait_until "$FABRIC_BRIDGE device in $NS_CHASSIS" "$OVS_DIR/ovs-vswitchd.log" \
    ip -n "$NS_CHASSIS" link show dev "$FABRIC_BRIDGE"
ip -n "$NS_CHASSIS" link set "$FABRIC_BRIDGE" up
ip -n "$NS_CHASSIS" addr replace "$FABRIC_CIDR4" dev "$FABRIC_BRIDGE"

peer_ip=""
if ((peer)); then
    peer_ip=$FABRIC_PEER_IP4
    log "the fabric-side peer $FABRIC_PEER_IP4: $FABRIC_PEER_CHASSIS_IF (port of $FABRIC_BRIDGE) <-> $FABRIC_PEER_TOR_IF in $NS_TOR"
    ip -n "$NS_CHASSIS" link add "$FABRIC_PEER_CHASSIS_IF" type veth peer name "$FABRIC_PEER_TOR_IF" netns "$NS_TOR"
    ip -n "$NS_CHASSIS" link set "$FABRIC_PEER_CHASSIS_IF" up
    ip -n "$NS_TOR" addr add "$FABRIC_PEER_IP4/${FABRIC_CIDR4#*/}" dev "$FABRIC_PEER_TOR_IF"
    ip -n "$NS_TOR" link set "$FABRIC_PEER_TOR_IF" up
    vsctl -- --may-exist add-port "$FABRIC_BRIDGE" "$FABRIC_PEER_CHASSIS_IF" ||
        die_with_log "ovs-vswitchd did not add $FABRIC_PEER_CHASSIS_IF to $FABRIC_BRIDGE" "$OVS_DIR/ovs-vswitchd.log"
fi

log "ovn-controller -n $BGP_CHASSIS in $NS_CHASSIS (on the lab's OVS)"
# OVS_RUNDIR: where the lab's ovs-vswitchd keeps the bridges' .mgmt sockets; OVN_RUNDIR puts
# this controller's control socket (ovn-controller.<pid>.ctl; 23.03 has no --unixctl) apart from
# the lab controller's.
start_daemon "local ovn-controller -n $BGP_CHASSIS" "$LOCAL_OVN_DIR/controller.log" \
    ip netns exec "$NS_CHASSIS" "${OVN_PREFIX[@]}" env "OVS_RUNDIR=$OVS_DIR" "OVN_RUNDIR=$LOCAL_OVN_DIR" \
    ovn-controller -n "$BGP_CHASSIS" "unix:$OVS_SOCK" --detach --no-chdir \
    --pidfile="$LOCAL_OVN_DIR/controller.pid" --log-file="$LOCAL_OVN_DIR/controller.log"
bgp_chassis_registered() {
    [[ -n $(ovn-sbctl --db="unix:$LOCAL_SB_SOCK" --timeout="$LAB_TIMEOUT" --bare --columns=_uuid \
        find Chassis "name=$BGP_CHASSIS") ]]
}
wait_until "Chassis $BGP_CHASSIS in the local SB" "$LOCAL_OVN_DIR/controller.log:$LOCAL_OVN_DIR/sb.log" \
    bgp_chassis_registered

cat >>"$LAB_ENV" <<EOF
LOCAL_OVN_DIR=$LOCAL_OVN_DIR
LOCAL_OVN_CHASSIS=$BGP_CHASSIS
LOCAL_NB_SOCK=$LOCAL_NB_SOCK
LOCAL_SB_SOCK=$LOCAL_SB_SOCK
FABRIC_BRIDGE=$FABRIC_BRIDGE
FABRIC_NIC=$FABRIC_NIC
FABRIC_CIDR4=$FABRIC_CIDR4
FABRIC_PEER_IP4=$peer_ip
EOF

cat <<EOF

The node-local OVN cluster is up in $(elapsed) s  (LAB_DIR=$LAB_DIR)

  local NB          ovn-nbctl --db=unix:$LOCAL_NB_SOCK show
  local SB          ovn-sbctl --db=unix:$LOCAL_SB_SOCK show      (chassis $BGP_CHASSIS)
  fabric            $FABRIC_BRIDGE $FABRIC_CIDR4 in $NS_CHASSIS, NIC $FABRIC_NIC${peer_ip:+, peer $peer_ip ($FABRIC_PEER_TOR_IF in $NS_TOR)}
  logs              $LOCAL_OVN_DIR/{nb,sb,northd,controller}.log
  agent config      docs/exposing-method-ovn.md: exposing_method = ovn, [local_ovn_cluster]
                    ovn_nb_connection = unix:$LOCAL_NB_SOCK
EOF
