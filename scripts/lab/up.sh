#!/usr/bin/env bash
# Bring up a complete ovn-bgp-agent lab on this machine, from nothing:
#   OVN NB+SB ovsdb-servers, ovn-northd, a local OVS (br-int + br-ex; userspace datapath, or the
#   kernel datapath with LAB_KERNEL=full),
#   ovn-controller, two FRR instances (chassis AS 64999, ToR AS 65000) in two network namespaces
#   peering over a veth pair, and a Neutron-shaped topology bound on the chassis.
# Writes $LAB_DIR/bgp-agent.conf for the agent and $LAB_DIR/lab.env (KEY=VALUE) for tests.
# Re-running tears the previous lab (same LAB_DIR) down first. Stop with scripts/lab/down.sh.
set -euo pipefail

LAB_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lab/lib.sh
source "$LAB_SCRIPTS/lib.sh"

STEP="start"
trap 'printf "[lab] ERROR: step \"%s\" failed at line %s: %s\n" "$STEP" "$LINENO" "$BASH_COMMAND" >&2' ERR

step() {
    STEP=$*
    log "$*"
}

[[ $(id -u) -eq 0 ]] || die "up.sh must run as root (it creates network namespaces and starts OVS/FRR)"
# Unix socket paths are limited to 107 bytes; the longest is $VTY_CHASSIS/zserv.api.
((${#LAB_DIR} <= 64)) || die "LAB_DIR is too long for unix socket paths (${#LAB_DIR} > 64 chars): $LAB_DIR"
[[ $LAB_DIR = /* ]] || die "LAB_DIR must be an absolute path: $LAB_DIR"
[[ $LAB_NS_PREFIX =~ ^[a-zA-Z0-9_.-]{1,16}$ ]] || die "LAB_NS_PREFIX must be 1-16 of [a-zA-Z0-9_.-]: $LAB_NS_PREFIX"
case $LAB_KERNEL in
    # The default: what this CI machine's kernel can do (no vrf, dummy, 8021q, openvswitch).
    stand-in) OVS_DATAPATH=netdev ;;
    # The production path: OVS kernel datapath, the agent's defaults (vrf + dummy), FRR without
    # the stand-in route-maps (the agent's leak-VRF configuration carries the routes).
    full) OVS_DATAPATH=system ;;
    *) die "LAB_KERNEL must be stand-in or full, got '$LAB_KERNEL'" ;;
esac
if [[ -n $LAB_PROVIDER_VLAN ]] && ! { [[ $LAB_PROVIDER_VLAN =~ ^[1-9][0-9]{0,3}$ ]] && ((LAB_PROVIDER_VLAN <= 4094)); }; then
    die "LAB_PROVIDER_VLAN must be a VLAN id 1-4094 (or empty for a flat network), got '$LAB_PROVIDER_VLAN'"
fi

case $LAB_OVN in
system | 25.03) ;;
*) die "LAB_OVN must be system (the host's OVN packages) or 25.03 (Debian 13's, in a chroot), got '$LAB_OVN'" ;;
esac

[[ $LAB_CHASSIS2 =~ ^[01]$ ]] || die "LAB_CHASSIS2 must be 0 or 1 (a second chassis), got '$LAB_CHASSIS2'"
[[ $LAB_EVPN =~ ^[01]$ ]] || die "LAB_EVPN must be 0 or 1 (an l2vpn evpn ToR), got '$LAB_EVPN'"
[[ $LAB_VSWITCHD_SYSTEM_ROUTES =~ ^[01]$ ]] ||
    die "LAB_VSWITCHD_SYSTEM_ROUTES must be 1 (ovs-vswitchd's default) or 0 (--disable-system-route), got '$LAB_VSWITCHD_SYSTEM_ROUTES'"
if ((LAB_CHASSIS2 && !LAB_VSWITCHD_SYSTEM_ROUTES)); then
    die "LAB_VSWITCHD_SYSTEM_ROUTES=0 leaves the userspace datapath no route for the geneve tunnel of LAB_CHASSIS2=1"
fi

if ! [[ $LAB_SB_CLUSTER =~ ^[013]$ ]]; then
    die "LAB_SB_CLUSTER must be 0 (one SB server) or 3 (a 3-member RAFT cluster): $LAB_SB_CLUSTER"
fi
if ! [[ $LAB_SB_CLUSTER_PORT_BASE =~ ^[0-9]{1,5}$ ]] || ((LAB_SB_CLUSTER_PORT_BASE < 1 || LAB_SB_CLUSTER_PORT_BASE > 65529)); then
    die "LAB_SB_CLUSTER_PORT_BASE must be a TCP port below 65530: $LAB_SB_CLUSTER_PORT_BASE"
fi

# ---------------------------------------------------------------------------------------------
step "checking packages"
need_install=0
for bin in ovsdb-server ovs-vswitchd ovs-vsctl ovsdb-tool ovn-northd ovn-controller ovn-nbctl ovn-sbctl \
    "$FRR_BIN/zebra" "$FRR_BIN/bgpd" "$VTYSH" ip; do
    if ! command -v "$bin" >/dev/null 2>&1; then
        log "missing $bin"
        need_install=1
    fi
done
extra_packages=()
if [[ $LAB_OVN = 25.03 ]] && ! command -v debootstrap >/dev/null 2>&1; then
    log "missing debootstrap (builds the OVN 25.03 chroot)"
    need_install=1 extra_packages+=(debootstrap)
fi
if ((need_install)); then
    step "installing Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y openvswitch-switch ovn-central ovn-host frr iproute2 "${extra_packages[@]}"
fi
if [[ $LAB_OVN = 25.03 ]]; then
    # Built once (about 2 minutes), then taken from the cache. No fallback to the host's OVN: a
    # lab that claims 25.03 runs 25.03 or does not come up.
    step "preparing the OVN 25.03 chroot (scripts/lab/ovn-chroot.sh)"
    ovn_root=$("$LAB_SCRIPTS/ovn-chroot.sh") || die "cannot prepare the OVN 25.03 chroot (see above)"
    use_ovn_root "$ovn_root"
    log "OVN/OVS daemons from $OVN_ROOT: $(tr '\n' ' ' <"$OVN_ROOT/.ovn-bgp-agent-chroot")"
fi
if [[ $LAB_KERNEL = full ]]; then
    # What the openvswitch-switch service does before ovs-vswitchd starts. vrf, dummy and 8021q are
    # left to the kernel's on-demand loading: the agent must cope with that as in production.
    modprobe openvswitch || die "LAB_KERNEL=full needs the openvswitch kernel module (modprobe openvswitch failed)"
else
    modprobe ifb 2>/dev/null || true
fi

# ---------------------------------------------------------------------------------------------
if [[ -e $LAB_DIR ]]; then
    step "tearing down the previous lab in $LAB_DIR"
    "$LAB_SCRIPTS/down.sh"
fi
if [[ -e $LAB_DIR ]] && [[ -n $(ls -A "$LAB_DIR") ]]; then
    die "$LAB_DIR exists, is not empty and was not created by up.sh; choose another LAB_DIR"
fi
for ns in "$NS_CHASSIS" "$NS_TOR" "$NS_CHASSIS2"; do
    netns_exists "$ns" && die "network namespace $ns already exists but no lab owns it in $LAB_DIR;" \
        "delete it (ip netns del $ns) or choose another LAB_NS_PREFIX"
done

# ovsdb-server keeps running when it cannot listen (it only logs and retries), so a taken port
# would go unnoticed: refuse it up front.
lab_ports=("$LAB_NB_TCP_PORT" "$LAB_SB_TCP_PORT")
if sb_clustered; then
    # The standalone SB port stays unused; the members listen on their own ports.
    lab_ports=("$LAB_NB_TCP_PORT")
    for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do
        lab_ports+=("$(sb_member_client_port "$n")" "$(sb_member_raft_port "$n")")
    done
fi
for port in "${lab_ports[@]}"; do
    [[ -z $(ss -Htln "sport = :$port") ]] ||
        die "TCP port $port is already in use; choose free ports with LAB_NB_TCP_PORT/LAB_SB_TCP_PORT/LAB_SB_CLUSTER_PORT_BASE"
done

step "creating $LAB_DIR"
mkdir -p "$LAB_DIR"
touch "$LAB_DIR/$LAB_MARKER"
mkdir -p "$OVN_DIR" "$OVS_DIR" "$VTY_CHASSIS" "$VTY_TOR"
cat >"$LAB_ENV" <<EOF
LAB_DIR=$LAB_DIR
LAB_NS_PREFIX=$LAB_NS_PREFIX
LAB_NB_TCP_PORT=$LAB_NB_TCP_PORT
LAB_SB_TCP_PORT=$LAB_SB_TCP_PORT
LAB_SB_CLUSTER=$LAB_SB_CLUSTER
LAB_SB_CLUSTER_PORT_BASE=$LAB_SB_CLUSTER_PORT_BASE
LAB_KERNEL=$LAB_KERNEL
LAB_PROVIDER_VLAN=$LAB_PROVIDER_VLAN
LAB_OVN=$LAB_OVN
OVN_ROOT=$OVN_ROOT
LAB_CHASSIS2=$LAB_CHASSIS2
LAB_EVPN=$LAB_EVPN
LAB_VSWITCHD_SYSTEM_ROUTES=$LAB_VSWITCHD_SYSTEM_ROUTES
EOF

# ---------------------------------------------------------------------------------------------
step "creating netns $NS_CHASSIS and $NS_TOR with a veth link"
# Each namespace is recorded right after it was created, so down.sh deletes exactly these (also
# after a failed up.sh) and never one somebody else created.
ip netns add "$NS_CHASSIS"
echo "NS_CHASSIS=$NS_CHASSIS" >>"$LAB_ENV"
ip netns add "$NS_TOR"
echo "NS_TOR=$NS_TOR" >>"$LAB_ENV"
for ns in "$NS_CHASSIS" "$NS_TOR"; do
    # Both are routers: forward like the hosts they stand for.
    # (through /proc: procps' sysctl is not on every fresh machine)
    ip netns exec "$ns" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward && echo 1 >/proc/sys/net/ipv6/conf/all/forwarding'
done
ip -n "$NS_CHASSIS" link set lo up
ip -n "$NS_TOR" link set lo up
# Both ends are created directly inside the namespaces: the host netns is never touched.
ip -n "$NS_CHASSIS" link add "$LINK_CHASSIS_IF" type veth peer name "$LINK_TOR_IF" netns "$NS_TOR"
ip -n "$NS_CHASSIS" addr add "$CHASSIS_IP4/$LINK_PLEN4" dev "$LINK_CHASSIS_IF"
ip -n "$NS_CHASSIS" addr add "$CHASSIS_IP6/$LINK_PLEN6" dev "$LINK_CHASSIS_IF" nodad
ip -n "$NS_TOR" addr add "$TOR_IP4/$LINK_PLEN4" dev "$LINK_TOR_IF"
ip -n "$NS_TOR" addr add "$TOR_IP6/$LINK_PLEN6" dev "$LINK_TOR_IF" nodad
ip -n "$NS_CHASSIS" link set "$LINK_CHASSIS_IF" up
ip -n "$NS_TOR" link set "$LINK_TOR_IF" up
if ((LAB_EVPN)); then
    step "EVPN: VTEPs $CHASSIS_VTEP_IP4 (chassis lo) and $TOR_VTEP_IP4 (ToR lo), routed over the link"
    # Static routes, not BGP: the VXLAN underlay must not depend on the sessions the tests disturb,
    # and the ToR's IPv4 table (tor_prefixes) keeps only what the agent exposes.
    ip -n "$NS_CHASSIS" addr add "$CHASSIS_VTEP_IP4/32" dev lo
    ip -n "$NS_CHASSIS" route add "$TOR_VTEP_IP4/32" via "$TOR_IP4"
    ip -n "$NS_TOR" addr add "$TOR_VTEP_IP4/32" dev lo
    ip -n "$NS_TOR" route add "$CHASSIS_VTEP_IP4/32" via "$CHASSIS_IP4"
fi

ovs_env

# ---------------------------------------------------------------------------------------------
step "starting OVN NB and SB ovsdb-servers"
ovn_run ovsdb-tool create "$NB_DB" /usr/share/ovn/ovn-nb.ovsschema
if sb_clustered; then
    # Member 1 creates the cluster, the others join it through member 1's RAFT address.
    log "SB is a $LAB_SB_CLUSTER-member RAFT cluster (ports $LAB_SB_CLUSTER_PORT_BASE..$((LAB_SB_CLUSTER_PORT_BASE + 2 * LAB_SB_CLUSTER - 1)))"
    ovn_run ovsdb-tool create-cluster "$(sb_member_db 1)" /usr/share/ovn/ovn-sb.ovsschema \
        "tcp:127.0.0.1:$(sb_member_raft_port 1)"
    for ((n = 2; n <= LAB_SB_CLUSTER; n++)); do
        ovn_run ovsdb-tool join-cluster "$(sb_member_db "$n")" OVN_Southbound \
            "tcp:127.0.0.1:$(sb_member_raft_port "$n")" "tcp:127.0.0.1:$(sb_member_raft_port 1)"
    done
else
    ovn_run ovsdb-tool create "$SB_DB" /usr/share/ovn/ovn-sb.ovsschema
fi
start_nb_db
start_sb_db
if sb_clustered; then
    sb_members_joined() {
        local n
        for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do
            ovs-appctl -t "$(sb_member_ctl "$n")" cluster/status OVN_Southbound | grep -qx 'Status: cluster member' ||
                return 1
        done
        sb_cluster_has_leader
    }
    sb_logs=$(for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do printf '%s/%s.log:' "$OVN_DIR" "$(sb_member_name "$n")"; done)
    wait_until "all $LAB_SB_CLUSTER SB members joined and a leader elected" "${sb_logs%:}" sb_members_joined
fi
nbctl --no-wait init

step "starting ovn-northd"
start_northd

# ---------------------------------------------------------------------------------------------
# Chassis 1 tunnels from its br-phy when there is a chassis to tunnel to (see lib.sh).
if ((LAB_CHASSIS2)); then CHASSIS_ENCAP_IP4=$CHASSIS_TUNNEL_IP4; else CHASSIS_ENCAP_IP4=$CHASSIS_IP4; fi
step "starting the local OVS (ovsdb-server for conf.db, ovs-vswitchd in $NS_CHASSIS, datapath $OVS_DATAPATH)"
ovn_run ovsdb-tool create "$OVS_DB" /usr/share/openvswitch/vswitch.ovsschema
start_daemon "ovsdb-server (conf.db)" "$OVS_DIR/ovsdb-server.log" \
    ovn_run ovsdb-server "$OVS_DB" --detach --no-chdir \
    --pidfile="$OVS_DIR/ovsdb-server.pid" --log-file="$OVS_DIR/ovsdb-server.log" \
    --unixctl="$OVS_DIR/ovsdb-server.ctl" --remote="punix:$OVS_SOCK"
vsctl --no-wait init
# ovs_version as ovs-ctl writes it when it starts ovs-vswitchd (the agent's doctor reads it).
vsctl --no-wait set Open_vSwitch . \
    "ovs_version=$(ovn_run ovs-vswitchd --version | sed -n 's/^ovs-vswitchd (Open vSwitch) //p' | head -1)" \
    "external_ids:system-id=$CHASSIS_NAME" \
    "external_ids:hostname=$CHASSIS_HOSTNAME" \
    "external_ids:ovn-remote=$(sb_unix_remotes)" \
    external_ids:ovn-encap-type=geneve \
    "external_ids:ovn-encap-ip=$CHASSIS_ENCAP_IP4" \
    external_ids:ovn-bridge-mappings=public:br-ex \
    "external_ids:ovn-bridge-datapath-type=$OVS_DATAPATH"
start_ovs_vswitchd

step "creating br-int and br-ex (datapath_type=$OVS_DATAPATH)"
# Without --no-wait, ovs-vsctl returns once ovs-vswitchd has created the bridges. With the kernel
# datapath (system) the bridges and internal ports are openvswitch netdevs of the datapath
# ovs-system in $NS_CHASSIS (the netns ovs-vswitchd runs in); with netdev they are tap devices there.
vsctl -- --may-exist add-br br-int \
    -- set Bridge br-int "datapath_type=$OVS_DATAPATH" fail_mode=secure other_config:disable-in-band=true \
    -- --may-exist add-br br-ex -- set Bridge br-ex "datapath_type=$OVS_DATAPATH" ||
    die_with_log "ovs-vswitchd did not create the bridges" "$OVS_DIR/ovs-vswitchd.log"
bring_up_br_ex

# ---------------------------------------------------------------------------------------------
step "starting ovn-controller in $NS_CHASSIS"
start_ovn_controller
chassis_registered() { [[ -n $(sbctl --bare --columns=_uuid find Chassis "name=$CHASSIS_NAME") ]]; }
wait_until "SB Chassis $CHASSIS_NAME" "$OVN_DIR/ovn-controller.log:$OVN_DIR/ovsdb-server-sb.log" chassis_registered

if ((LAB_CHASSIS2)); then
    step "starting the second chassis ($CHASSIS2_NAME: OVS + ovn-controller in $NS_CHASSIS2)"
    ip netns add "$NS_CHASSIS2"
    echo "NS_CHASSIS2=$NS_CHASSIS2" >>"$LAB_ENV"
    ip -n "$NS_CHASSIS2" link set lo up
    mkdir -p "$OVS2_DIR"
    ovn_run ovsdb-tool create "$OVS2_DB" /usr/share/openvswitch/vswitch.ovsschema
    start_chassis2_ovsdb
    vsctl2 --no-wait init
    vsctl2 --no-wait set Open_vSwitch . \
        "external_ids:system-id=$CHASSIS2_NAME" \
        "external_ids:hostname=$CHASSIS2_HOSTNAME" \
        "external_ids:ovn-remote=$(sb_unix_remotes)" \
        external_ids:ovn-encap-type=geneve \
        "external_ids:ovn-encap-ip=$CHASSIS2_ENCAP_IP4" \
        external_ids:ovn-bridge-mappings=public:br-ex \
        "external_ids:ovn-bridge-datapath-type=$OVS_DATAPATH"
    start_chassis2_vswitchd
    vsctl2 -- --may-exist add-br br-int \
        -- set Bridge br-int "datapath_type=$OVS_DATAPATH" fail_mode=secure other_config:disable-in-band=true \
        -- --may-exist add-br br-ex -- set Bridge br-ex "datapath_type=$OVS_DATAPATH" ||
        die_with_log "ovs-vswitchd of chassis 2 did not create the bridges" "$OVS2_DIR/ovs-vswitchd.log"
    step "joining the chassis' $TUNNEL_BRIDGE bridges for geneve ($CHASSIS_ENCAP_IP4 <-> $CHASSIS2_ENCAP_IP4)"
    ip -n "$NS_CHASSIS" link add "$TUNNEL_CHASSIS_IF" type veth peer name "$TUNNEL_CHASSIS2_IF" netns "$NS_CHASSIS2"
    ip -n "$NS_CHASSIS" link set "$TUNNEL_CHASSIS_IF" up
    ip -n "$NS_CHASSIS2" link set "$TUNNEL_CHASSIS2_IF" up
    vsctl -- --may-exist add-br "$TUNNEL_BRIDGE" -- set Bridge "$TUNNEL_BRIDGE" "datapath_type=$OVS_DATAPATH" \
        -- --may-exist add-port "$TUNNEL_BRIDGE" "$TUNNEL_CHASSIS_IF" ||
        die_with_log "ovs-vswitchd did not create $TUNNEL_BRIDGE" "$OVS_DIR/ovs-vswitchd.log"
    vsctl2 -- --may-exist add-br "$TUNNEL_BRIDGE" -- set Bridge "$TUNNEL_BRIDGE" "datapath_type=$OVS_DATAPATH" \
        -- --may-exist add-port "$TUNNEL_BRIDGE" "$TUNNEL_CHASSIS2_IF" ||
        die_with_log "ovs-vswitchd of chassis 2 did not create $TUNNEL_BRIDGE" "$OVS2_DIR/ovs-vswitchd.log"
    bring_up_tunnel_bridge "$NS_CHASSIS" "$CHASSIS_ENCAP_IP4" "$OVS_DIR/ovs-vswitchd.log"
    bring_up_tunnel_bridge "$NS_CHASSIS2" "$CHASSIS2_ENCAP_IP4" "$OVS2_DIR/ovs-vswitchd.log"
    start_chassis2_controller
    chassis2_registered() { [[ -n $(sbctl --bare --columns=_uuid find Chassis "name=$CHASSIS2_NAME") ]]; }
    wait_until "SB Chassis $CHASSIS2_NAME" "$OVS2_DIR/ovn-controller.log" chassis2_registered
fi

# ---------------------------------------------------------------------------------------------
# Each FRR daemon reads its own part of the configuration at start (-f), like a production FRR
# reads /etc/frr/frr.conf at boot: no vtysh apply step (bgpd holds peers for seconds after a
# vtysh -f), and a restarted daemon comes back with the operator configuration and without what
# the agent added at run time, exactly as in production.
write_frr_configs() {
    local chassis=$FRR_CHASSIS_DIR tor=$FRR_TOR_DIR

    # The chassis: what an operator provides (upstream etc/frr/frr.conf style). The agent only
    # adds the leak configuration (router bgp 64999 vrf bgp-vrf + import vrf bgp-vrf).
    #
    # Stand-in for the VRF leak (this kernel has no VRF module): the agent's bgp-vrf is a bridge
    # and bgp-nic an ifb in the default VRF, so the addresses the agent puts on bgp-nic are
    # connected routes of the default VRF, and its routes "dev bgp-nic table $BGP_VRF_TABLE_ID"
    # (subnet mode) are kernel routes of that table, imported into zebra. lab-bgp-nic-only
    # redistributes exactly what sits on bgp-nic, nothing else. With a real VRF these match
    # nothing and the agent's leak configuration does the work.
    local bgp_nic_only='route-map lab-bgp-nic-only permit 10
 match interface bgp-nic
exit'
    # The stand-in's extra operator lines (LAB_KERNEL=stand-in only); none with a real VRF.
    local zebra_stand_in="" redistribute4="" redistribute6=""
    if [[ $LAB_KERNEL = stand-in ]]; then
        zebra_stand_in="$bgp_nic_only
!
! Table $BGP_VRF_TABLE_ID is imported without its default route: the agent puts an \"unreachable
! default\" there, which would otherwise beat the default route learned from the ToR. (Imported
! routes are also installed in the main table; they only ever point at bgp-nic.)
ip prefix-list lab-default-route seq 5 permit 0.0.0.0/0
route-map lab-table-import deny 5
 match ip address prefix-list lab-default-route
exit
route-map lab-table-import permit 10
exit
ip import-table $BGP_VRF_TABLE_ID route-map lab-table-import
!"
        redistribute4="
  redistribute connected route-map lab-bgp-nic-only
  redistribute table ${BGP_VRF_TABLE_ID} route-map lab-bgp-nic-only"
        redistribute6="
  redistribute connected route-map lab-bgp-nic-only"
    fi
    # LAB_EVPN=1: l2vpn evpn with the peer, and advertise-all-vni so that zebra hands bgpd the
    # VNIs (the agent's vrf-<vni> stanzas; the ToR's from tor-evpn.sh).
    local evpn_chassis="" evpn_tor=""
    if ((LAB_EVPN)); then
        evpn_chassis="
 !
 address-family l2vpn evpn
  neighbor uplink activate
  advertise-all-vni
 exit-address-family"
        evpn_tor="
 !
 address-family l2vpn evpn
  neighbor chassis activate
  advertise-all-vni
 exit-address-family"
    fi
    cat >"$chassis/zebra.conf" <<EOF
frr defaults traditional
hostname ${NS_CHASSIS}
log timestamp precision 3
!
$zebra_stand_in
ip nht resolve-via-default
EOF
    cat >"$chassis/bgpd.conf" <<EOF
frr defaults traditional
hostname ${NS_CHASSIS}
log timestamp precision 3
!
${zebra_stand_in:+$bgp_nic_only
!}
router bgp ${CHASSIS_AS}
 bgp router-id ${CHASSIS_IP4}
 bgp log-neighbor-changes
 no bgp default ipv4-unicast
 no bgp ebgp-requires-policy
 neighbor uplink peer-group
 neighbor uplink remote-as ${TOR_AS}
 neighbor uplink timers 3 10
 neighbor uplink timers connect 1
 neighbor uplink advertisement-interval 0
 neighbor ${TOR_IP4} peer-group uplink
 !
 address-family ipv4 unicast${redistribute4}
  neighbor uplink activate
 exit-address-family
 !
 address-family ipv6 unicast${redistribute6}
  neighbor uplink activate
 exit-address-family${evpn_chassis}
exit
EOF

    cat >"$tor/zebra.conf" <<EOF
frr defaults traditional
hostname ${NS_TOR}
log timestamp precision 3
EOF
    cat >"$tor/bgpd.conf" <<EOF
frr defaults traditional
hostname ${NS_TOR}
log timestamp precision 3
!
router bgp ${TOR_AS}
 bgp router-id ${TOR_IP4}
 bgp log-neighbor-changes
 no bgp default ipv4-unicast
 no bgp ebgp-requires-policy
 neighbor chassis peer-group
 neighbor chassis remote-as ${CHASSIS_AS}
 neighbor chassis timers 3 10
 neighbor chassis timers connect 1
 neighbor chassis advertisement-interval 0
 neighbor ${CHASSIS_IP4} peer-group chassis
 !
 address-family ipv4 unicast
  neighbor chassis activate
  neighbor chassis default-originate
 exit-address-family
 !
 address-family ipv6 unicast
  neighbor chassis activate
  neighbor chassis default-originate
 exit-address-family${evpn_tor}
exit
EOF
    local dir
    for dir in "$chassis" "$tor"; do
        # vtysh (run with --config_dir DIR) reads this; "write memory" would write DIR/frr.conf.
        echo "service integrated-vtysh-config" >"$dir/vtysh.conf"
    done
}

step "starting FRR of the ToR ($NS_TOR, AS $TOR_AS) and of the chassis ($NS_CHASSIS, AS $CHASSIS_AS)"
write_frr_configs
frr_start tor "$NS_TOR" "$FRR_TOR_DIR"
frr_start chassis "$NS_CHASSIS" "$FRR_CHASSIS_DIR"

# ---------------------------------------------------------------------------------------------
step "writing the Neutron-shaped topology to NB"
ext() { printf 'external_ids:"%s"="%s"' "$1" "$2"; } # ext KEY VALUE -> external_ids:"KEY"="VALUE"
PUBLIC_LS=neutron-$NET_PUBLIC_ID
PRIVATE_LS=neutron-$NET_PRIVATE_ID
ROUTER=neutron-$ROUTER_ID
nbctl \
    -- set NB_Global . "$(ext neutron:fip-distributed False)" \
    -- ls-add "$PUBLIC_LS" \
    -- set Logical_Switch "$PUBLIC_LS" "$(ext neutron:network_name public)" "$(ext neutron:mtu 1500)" \
    "$(ext neutron:revision_number 1)" "$(ext neutron:availability_zone_hints '')" \
    -- lsp-add "$PUBLIC_LS" "provnet-$SEG_PUBLIC_ID" \
    -- lsp-set-type "provnet-$SEG_PUBLIC_ID" localnet \
    -- lsp-set-addresses "provnet-$SEG_PUBLIC_ID" unknown \
    -- lsp-set-options "provnet-$SEG_PUBLIC_ID" network_name=public mcast_flood=false mcast_flood_reports=true \
    ${LAB_PROVIDER_VLAN:+-- set Logical_Switch_Port "provnet-$SEG_PUBLIC_ID" "tag=$LAB_PROVIDER_VLAN"} \
    -- ls-add "$PRIVATE_LS" \
    -- set Logical_Switch "$PRIVATE_LS" "$(ext neutron:network_name private)" "$(ext neutron:mtu 1442)" \
    "$(ext neutron:revision_number 1)" \
    -- lr-add "$ROUTER" \
    -- set Logical_Router "$ROUTER" "$(ext neutron:router_name router1)" "$(ext neutron:gw_port_id "$GW_PORT_ID")" \
    "$(ext neutron:revision_number 3)" "$(ext neutron:availability_zone_hints '')" \
    options:always_learn_from_arp_request=false options:dynamic_neigh_routers=true \
    -- lrp-add "$ROUTER" "lrp-$GW_PORT_ID" "$GW_MAC" "$GW_IP4/24" "$GW_IP6/64" \
    -- set Logical_Router_Port "lrp-$GW_PORT_ID" "$(ext neutron:network_name "$PUBLIC_LS")" \
    "$(ext neutron:router_name "$ROUTER_ID")" "$(ext neutron:is_ext_gw True)" \
    "$(ext neutron:subnet_ids "$SUBNET_PUBLIC4_ID $SUBNET_PUBLIC6_ID")" "$(ext neutron:revision_number 3)" \
    -- lrp-set-gateway-chassis "lrp-$GW_PORT_ID" "$CHASSIS_NAME" 1 \
    -- lsp-add "$PUBLIC_LS" "$GW_PORT_ID" \
    -- lsp-set-type "$GW_PORT_ID" router \
    -- lsp-set-addresses "$GW_PORT_ID" router \
    -- lsp-set-options "$GW_PORT_ID" "router-port=lrp-$GW_PORT_ID" nat-addresses=router exclude-lb-vips-from-garp=true \
    -- set Logical_Switch_Port "$GW_PORT_ID" "$(ext neutron:cidrs "$GW_IP4/24 $GW_IP6/64")" \
    "$(ext neutron:device_owner network:router_gateway)" "$(ext neutron:device_id "$ROUTER_ID")" \
    "$(ext neutron:network_name "$PUBLIC_LS")" "$(ext neutron:port_name '')" \
    "$(ext neutron:project_id '')" "$(ext neutron:revision_number 3)" \
    -- lr-route-add "$ROUTER" 0.0.0.0/0 "$PUBLIC_GW4" \
    -- lr-route-add "$ROUTER" ::/0 "$PUBLIC_GW6" \
    -- lrp-add "$ROUTER" "lrp-$RI_PORT_ID" "$RI_MAC" "$RI_IP4/24" \
    -- set Logical_Router_Port "lrp-$RI_PORT_ID" "$(ext neutron:network_name "$PRIVATE_LS")" \
    "$(ext neutron:router_name "$ROUTER_ID")" "$(ext neutron:subnet_ids "$SUBNET_PRIVATE_ID")" \
    "$(ext neutron:revision_number 2)" \
    -- lsp-add "$PRIVATE_LS" "$RI_PORT_ID" \
    -- lsp-set-type "$RI_PORT_ID" router \
    -- lsp-set-addresses "$RI_PORT_ID" router \
    -- lsp-set-options "$RI_PORT_ID" "router-port=lrp-$RI_PORT_ID" \
    -- set Logical_Switch_Port "$RI_PORT_ID" "$(ext neutron:cidrs "$RI_IP4/24")" \
    "$(ext neutron:device_owner network:router_interface)" "$(ext neutron:device_id "$ROUTER_ID")" \
    "$(ext neutron:network_name "$PRIVATE_LS")" "$(ext neutron:project_id "$PROJECT_ID")" \
    "$(ext neutron:revision_number 2)" \
    -- lsp-add "$PRIVATE_LS" "$VM_TENANT_PORT_ID" \
    -- lsp-set-addresses "$VM_TENANT_PORT_ID" "$VM_TENANT_MAC $VM_TENANT_IP4" \
    -- lsp-set-port-security "$VM_TENANT_PORT_ID" "$VM_TENANT_MAC $VM_TENANT_IP4" \
    -- lsp-set-options "$VM_TENANT_PORT_ID" "requested-chassis=$CHASSIS_HOSTNAME" \
    -- set Logical_Switch_Port "$VM_TENANT_PORT_ID" "$(ext neutron:cidrs "$VM_TENANT_IP4/24")" \
    "$(ext neutron:device_owner compute:nova)" "$(ext neutron:device_id "$VM_TENANT_ID")" \
    "$(ext neutron:network_name "$PRIVATE_LS")" "$(ext neutron:port_name vm-tenant-port)" \
    "$(ext neutron:port_fip "$FIP_IP4")" "$(ext neutron:host_id "$CHASSIS_HOSTNAME")" \
    "$(ext neutron:project_id "$PROJECT_ID")" "$(ext neutron:revision_number 4)" \
    -- lsp-add "$PUBLIC_LS" "$VM_PROVIDER_PORT_ID" \
    -- lsp-set-addresses "$VM_PROVIDER_PORT_ID" "$VM_PROVIDER_MAC $VM_PROVIDER_IP4 $VM_PROVIDER_IP6" \
    -- lsp-set-port-security "$VM_PROVIDER_PORT_ID" "$VM_PROVIDER_MAC $VM_PROVIDER_IP4 $VM_PROVIDER_IP6" \
    -- lsp-set-options "$VM_PROVIDER_PORT_ID" "requested-chassis=$CHASSIS_HOSTNAME" \
    -- set Logical_Switch_Port "$VM_PROVIDER_PORT_ID" \
    "$(ext neutron:cidrs "$VM_PROVIDER_IP4/24 $VM_PROVIDER_IP6/64")" \
    "$(ext neutron:device_owner compute:nova)" "$(ext neutron:device_id "$VM_PROVIDER_ID")" \
    "$(ext neutron:network_name "$PUBLIC_LS")" "$(ext neutron:port_name vm-provider-port)" \
    "$(ext neutron:host_id "$CHASSIS_HOSTNAME")" "$(ext neutron:project_id "$PROJECT_ID")" \
    "$(ext neutron:revision_number 2)"
# NAT rows reference the gateway LRP by uuid (Neutron sets gateway_port). The FIP is centralized
# (no external_mac): its traffic goes through the gateway chassis, so SB lists it in the
# nat_addresses of the gateway's patch Port_Binding, next to the router gateway IP.
gw_lrp_uuid=$(nbctl get Logical_Router_Port "lrp-$GW_PORT_ID" _uuid)
nbctl \
    -- --id=@snat create NAT type=snat external_ip="$GW_IP4" logical_ip="$PRIVATE_CIDR4" \
    gateway_port="$gw_lrp_uuid" "$(ext neutron:router_name "$ROUTER")" \
    -- add Logical_Router "$ROUTER" nat @snat \
    -- --id=@fip create NAT type=dnat_and_snat external_ip="$FIP_IP4" logical_ip="$VM_TENANT_IP4" \
    logical_port="$VM_TENANT_PORT_ID" gateway_port="$gw_lrp_uuid" \
    "$(ext neutron:fip_id "$FIP_ID")" "$(ext neutron:fip_port_id "$VM_TENANT_PORT_ID")" \
    "$(ext neutron:fip_external_mac "$VM_TENANT_MAC")" "$(ext neutron:fip_network_id "$NET_PUBLIC_ID")" \
    "$(ext neutron:router_name "$ROUTER")" "$(ext neutron:revision_number 1)" \
    -- add Logical_Router "$ROUTER" nat @fip >/dev/null

step "plugging the VMs into br-int (internal ports in $NS_CHASSIS)"
plug_vm() { # port-id mac vm-id
    local tap
    tap=$(tap_name "$1")
    vsctl -- --may-exist add-port br-int "$tap" -- set Interface "$tap" type=internal \
        "external_ids:iface-id=$1" "external_ids:attached-mac=$2" external_ids:iface-status=active \
        "external_ids:vm-id=$3"
}
plug_vm "$VM_TENANT_PORT_ID" "$VM_TENANT_MAC" "$VM_TENANT_ID"
plug_vm "$VM_PROVIDER_PORT_ID" "$VM_PROVIDER_MAC" "$VM_PROVIDER_ID"

# ---------------------------------------------------------------------------------------------
step "waiting for the port bindings in SB and for the BGP session"
chassis_uuid=$(sbctl --bare --columns=_uuid find Chassis "name=$CHASSIS_NAME")
port_bound() { # logical_port: bound here and up
    local row
    row=$(sbctl --bare --columns=chassis,up find Port_Binding "logical_port=$1" | tr '\n' ' ')
    [[ $row == "$chassis_uuid true"* ]]
}
for lp in "$VM_TENANT_PORT_ID" "$VM_PROVIDER_PORT_ID" "cr-lrp-$GW_PORT_ID"; do
    log "waiting for Port_Binding $lp"
    wait_until "Port_Binding $lp bound to $CHASSIS_NAME and up" \
        "$OVN_DIR/ovn-controller.log:$OVN_DIR/ovn-northd.log" port_bound "$lp"
done
# OVN >= 23.09 (NB schema with Logical_Router_Port.status): northd says where the gateway is
# hosted, which the NB driver reads; the lab is ready once it did. ovsdb-client takes the schema
# from the server, so the host's client reads the newer column.
if ovsdb-client list-columns "unix:$NB_SOCK" OVN_Northbound Logical_Router_Port | awk '{print $1}' | grep -qx status; then
    gw_hosted_here() {
        ovsdb-client -f csv --no-headings dump "unix:$NB_SOCK" OVN_Northbound Logical_Router_Port name status |
            grep -qF "lrp-$GW_PORT_ID,{hosting-chassis=$CHASSIS_NAME}"
    }
    log "waiting for status:hosting-chassis of lrp-$GW_PORT_ID"
    wait_until "NB Logical_Router_Port lrp-$GW_PORT_ID status:hosting-chassis=$CHASSIS_NAME" \
        "$OVN_DIR/ovn-northd.log" gw_hosted_here
fi
bgp_established() { vtysh_tor -c "show bgp neighbors $CHASSIS_IP4" | grep -q "BGP state = Established"; }
log "waiting for the eBGP session"
wait_until "eBGP session ToR $TOR_IP4 <-> chassis $CHASSIS_IP4 Established" \
    "$FRR_TOR_DIR/bgpd.log:$FRR_CHASSIS_DIR/bgpd.log" bgp_established
if ((LAB_EVPN)); then
    # Both sides advertised the AF, so the session carries it once Established.
    evpn_negotiated() {
        vtysh_tor -c "show bgp neighbors $CHASSIS_IP4" |
            grep -q "L2VPN EVPN: advertised and received"
    }
    wait_until "l2vpn evpn negotiated with the chassis" "$FRR_TOR_DIR/bgpd.log" evpn_negotiated
fi

# ---------------------------------------------------------------------------------------------
step "writing $AGENT_CONF"
cat >"$RT_TABLES" <<'EOF'
#
# reserved values
#
255	local
254	main
253	default
0	unspec
#
# local
#
EOF
if [[ $LAB_KERNEL = stand-in ]]; then
    linux_device_kinds='# This kernel has no vrf/dummy modules: bgp-vrf is a bridge, bgp-nic an ifb (see scripts/lab/README.md).
vrf_device_kind = bridge
nic_device_kind = ifb'
else
    linux_device_kinds='# LAB_KERNEL=full: the defaults, bgp-vrf a real VRF and bgp-nic a dummy.'
fi
# The agent's Prometheus/probe listener: beside the lab's NB port, so labs never share it.
AGENT_METRICS_PORT=$((LAB_NB_TCP_PORT + 100))
cat >"$AGENT_CONF" <<EOF
# ovn-bgp-agent configuration for the lab in $LAB_DIR (upstream bgp-agent.conf format).
[DEFAULT]
debug = True
driver = ovn_bgp_driver
exposing_method = underlay
expose_tenant_networks = True
ovsdb_connection = unix:$OVS_SOCK
bgp_AS = $CHASSIS_AS
bgp_router_id = $CHASSIS_IP4
bgp_nic = bgp-nic
bgp_vrf = bgp-vrf
bgp_vrf_table_id = $BGP_VRF_TABLE_ID

[ovn]
ovn_sb_connection = $(if sb_clustered; then sb_tcp_remotes; else printf 'unix:%s' "$SB_SOCK"; fi)
ovn_nb_connection = unix:$NB_SOCK

[frr]
vtysh_path = $VTYSH
vty_socket_dir = $VTY_CHASSIS

[ovs]
ovs_rundir = $OVS_DIR

[linux]
$linux_device_kinds
netns = $NS_CHASSIS
rt_tables_path = $RT_TABLES

[telemetry]
control_socket = $LAB_DIR/agent.sock
metrics_address = 127.0.0.1:$AGENT_METRICS_PORT
EOF

cat >>"$LAB_ENV" <<EOF
NB_SOCK=$NB_SOCK
SB_SOCK=$(if sb_clustered; then sb_member_sock 1; else printf '%s' "$SB_SOCK"; fi)
SB_REMOTE=$(sb_unix_remotes)
NB_TCP=tcp:127.0.0.1:$LAB_NB_TCP_PORT
AGENT_CONTROL_SOCKET=$LAB_DIR/agent.sock
AGENT_METRICS=127.0.0.1:$AGENT_METRICS_PORT
SB_TCP=$(sb_tcp_remotes)
OVS_SOCK=$OVS_SOCK
OVS_RUNDIR=$OVS_DIR
OVN_RUNDIR=$OVN_DIR
VTY_CHASSIS=$VTY_CHASSIS
VTY_TOR=$VTY_TOR
FRR_CHASSIS_DIR=$FRR_CHASSIS_DIR
FRR_TOR_DIR=$FRR_TOR_DIR
AGENT_CONF=$AGENT_CONF
RT_TABLES=$RT_TABLES
CHASSIS_NAME=$CHASSIS_NAME
CHASSIS_HOSTNAME=$CHASSIS_HOSTNAME
CHASSIS2_NAME=$CHASSIS2_NAME
CHASSIS2_HOSTNAME=$CHASSIS2_HOSTNAME
OVS2_SOCK=$OVS2_SOCK
OVS2_RUNDIR=$OVS2_DIR
CHASSIS_ENCAP_IP4=$CHASSIS_ENCAP_IP4
CHASSIS2_ENCAP_IP4=$CHASSIS2_ENCAP_IP4
CHASSIS_IP4=$CHASSIS_IP4
TOR_IP4=$TOR_IP4
CHASSIS_IP6=$CHASSIS_IP6
TOR_IP6=$TOR_IP6
CHASSIS_AS=$CHASSIS_AS
TOR_AS=$TOR_AS
NET_PUBLIC_ID=$NET_PUBLIC_ID
NET_PRIVATE_ID=$NET_PRIVATE_ID
ROUTER_ID=$ROUTER_ID
GW_PORT_ID=$GW_PORT_ID
RI_PORT_ID=$RI_PORT_ID
VM_TENANT_PORT_ID=$VM_TENANT_PORT_ID
VM_PROVIDER_PORT_ID=$VM_PROVIDER_PORT_ID
GW_IP4=$GW_IP4
GW_IP6=$GW_IP6
GW_MAC=$GW_MAC
FIP_IP4=$FIP_IP4
VM_TENANT_IP4=$VM_TENANT_IP4
VM_PROVIDER_IP4=$VM_PROVIDER_IP4
VM_PROVIDER_IP6=$VM_PROVIDER_IP6
VM_PROVIDER_MAC=$VM_PROVIDER_MAC
PUBLIC_CIDR4=$PUBLIC_CIDR4
PRIVATE_CIDR4=$PRIVATE_CIDR4
EOF

if ((LAB_EVPN)); then
    cat >>"$LAB_ENV" <<EOF
CHASSIS_VTEP_IP4=$CHASSIS_VTEP_IP4
TOR_VTEP_IP4=$TOR_VTEP_IP4
EVPN_UDP_PORT=$EVPN_UDP_PORT
TOR_EVPN_DIR=$TOR_EVPN_DIR
EOF
fi

STEP="summary"
cat <<EOF

OVN BGP lab is up in $(elapsed) s  (LAB_DIR=$LAB_DIR)

  OVN NB        unix:$NB_SOCK   tcp:127.0.0.1:$LAB_NB_TCP_PORT
  OVN SB        $(sb_unix_remotes)   $(sb_tcp_remotes)
  local OVS     unix:$OVS_SOCK  (OVS_RUNDIR=$OVS_DIR; ovs-vswitchd + ovn-controller in netns $NS_CHASSIS)
  chassis       system-id $CHASSIS_NAME, hostname $CHASSIS_HOSTNAME
$( ((LAB_CHASSIS2)) && printf '  chassis 2     system-id %s, hostname %s: unix:%s, netns %s\n  geneve        %s (chassis 1, br-phy) <-> %s (chassis 2, br-phy); ovs-appctl -t %s/ovs-vswitchd.ctl bfd/show\n' "$CHASSIS2_NAME" "$CHASSIS2_HOSTNAME" "$OVS2_SOCK" "$NS_CHASSIS2" "$CHASSIS_ENCAP_IP4" "$CHASSIS2_ENCAP_IP4" "$OVS_DIR")
$( ((LAB_EVPN)) && printf '  EVPN          l2vpn evpn on the session; VTEPs %s (chassis lo) and %s (ToR lo), VXLAN port %s\n                ToR VRF per VNI: LAB_DIR=%s scripts/lab/tor-evpn.sh add VNI [--rt RT] (--help)\n' "$CHASSIS_VTEP_IP4" "$TOR_VTEP_IP4" "$EVPN_UDP_PORT" "$LAB_DIR")
  netns         $NS_CHASSIS ($LINK_CHASSIS_IF $CHASSIS_IP4/$LINK_PLEN4, AS $CHASSIS_AS)  <->  $NS_TOR ($LINK_TOR_IF $TOR_IP4/$LINK_PLEN4, AS $TOR_AS)

  vtysh (chassis)   vtysh --vty_socket $VTY_CHASSIS --config_dir $FRR_CHASSIS_DIR
  vtysh (ToR)       vtysh --vty_socket $VTY_TOR --config_dir $FRR_TOR_DIR
  ovn-nbctl         ovn-nbctl --db=unix:$NB_SOCK show
  ovn-sbctl         ovn-sbctl --db=$(sb_unix_remotes) show
  ovs-vsctl         ovs-vsctl --db=unix:$OVS_SOCK show
  kernel (chassis)  ip netns exec $NS_CHASSIS ip addr

  agent config      $AGENT_CONF
  run the agent     ovn-bgp-agent --config-file $AGENT_CONF
  status            LAB_DIR=$LAB_DIR scripts/lab/status.sh
  restart a daemon  LAB_DIR=$LAB_DIR scripts/lab/restart.sh [--kill] COMPONENT   (--help)
  stop              LAB_DIR=$LAB_DIR scripts/lab/down.sh
EOF
