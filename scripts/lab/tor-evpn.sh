#!/usr/bin/env bash
# Give the lab's ToR a VRF for an EVPN L3VNI, or take it away (a lab started with LAB_EVPN=1).
#
#   tor-evpn.sh add VNI [--rt RT]... [--import RT]... [--export RT]... [--address CIDR]...
#   tor-evpn.sh del VNI
#
# add   creates in the ToR's netns vrf-VNI (table VNI), br-VNI (bridge, master vrf-VNI),
#       vxlan-VNI (id VNI, local TOR_VTEP_IP4, dstport EVPN_UDP_PORT, nolearning, master br-VNI,
#       bridge port learning off + neigh_suppress on) and lo-VNI (dummy in the VRF, carrying each
#       --address, e.g. 192.168.200.1/32 as a ping source); configures FRR with `vrf vrf-VNI / vni
#       VNI` and `router bgp TOR_AS vrf vrf-VNI` (redistribute connected, l2vpn evpn advertise ipv4
#       and ipv6 unicast, rd TOR_VTEP_IP4:VNI and the route targets), and waits until zebra has the
#       L3VNI up. The ToR then imports the chassis' type-5 routes whose RT it imports into the VRF
#       (`show bgp vrf vrf-VNI ipv4 unicast`) and installs them in table VNI.
#       --rt RT       import and export RT (repeatable)
#       --import RT / --export RT   one direction only (repeatable)
#       Without any RT: --rt CHASSIS_AS:VNI (64999:VNI), the RT FRR derives on the chassis when the
#       agent's VRF stanza names none (the SB EVPN driver) — the ToR's own auto RT would be 65000:VNI.
# del   removes the FRR stanzas and the devices.
#
# The stanza is kept in $LAB_DIR/frr/tor/evpn/vrf-VNI.conf; restart.sh frr-tor applies it again.
# Needs real VRFs (LAB_KERNEL=full, the VM tier): this machine's kernel has no vrf module.
set -euo pipefail

LAB_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lab/lib.sh
source "$LAB_SCRIPTS/lib.sh"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

[[ $(id -u) -eq 0 ]] || die "tor-evpn.sh must run as root (it changes the ToR's netns)"
(($# >= 2)) || usage
action=$1 vni=$2
shift 2
[[ $action = add || $action = del ]] || usage
# A VNI is 24 bits; it is also the routing table number here (0 and 253-255 are reserved tables).
if ! [[ $vni =~ ^[1-9][0-9]{0,7}$ ]] || ((vni > 16777215)) || ((vni >= 253 && vni <= 255)); then
    die "VNI must be 1-16777215 (not 253-255, the kernel's reserved tables), got '$vni'"
fi
imports=() exports=() addresses=()
rt_ok() { [[ $1 =~ ^[0-9]+(\.[0-9]+){0,3}:[0-9]+$ ]] || die "route target must be ASN:NN or A.B.C.D:NN, got '$1'"; }
while (($#)); do
    (($# >= 2)) || usage
    case $1 in
    --rt) rt_ok "$2" && imports+=("$2") && exports+=("$2") ;;
    --import) rt_ok "$2" && imports+=("$2") ;;
    --export) rt_ok "$2" && exports+=("$2") ;;
    --address)
        [[ $2 =~ ^[0-9a-fA-F.:]+/[0-9]{1,3}$ ]] || die "--address must be ADDRESS/PREFIXLEN, got '$2'"
        addresses+=("$2")
        ;;
    *) usage ;;
    esac
    shift 2
done
[[ $action = add ]] || ((${#imports[@]} + ${#exports[@]} + ${#addresses[@]} == 0)) || usage

load_lab_settings
((LAB_EVPN)) || die "the lab in $LAB_DIR was not started with LAB_EVPN=1 (no l2vpn evpn, no VTEP)"
vrf=vrf-$vni br=br-$vni vxlan=vxlan-$vni lo=lo-$vni
conf=$TOR_EVPN_DIR/$vrf.conf

if [[ $action = del ]]; then
    [[ -e $conf ]] || die "the ToR has no VRF for VNI $vni (no $conf)"
    # Devices first, then the (now inactive) VRF and its BGP instance, the agent's order (F3): FRR
    # refuses `no router bgp .. vrf` while the VRF is an active L3VNI.
    for dev in "$lo" "$vxlan" "$br" "$vrf"; do
        ip -n "$NS_TOR" link del "$dev"
    done
    out=$(vtysh_tor -c "configure terminal" -c "no vrf $vrf" -c "no router bgp $TOR_AS vrf $vrf" 2>&1) ||
        die "the ToR's FRR did not remove vrf $vrf / router bgp $TOR_AS vrf $vrf: $out"
    rm -f "$conf"
    log "the ToR has no VRF for VNI $vni any more"
    exit 0
fi

[[ ! -e $conf ]] || die "the ToR already has a VRF for VNI $vni ($conf); tor-evpn.sh del $vni first"
if ((${#imports[@]} + ${#exports[@]} == 0)); then
    imports=("$CHASSIS_AS:$vni") exports=("$CHASSIS_AS:$vni")
fi
{
    echo "link add $vrf type vrf table $vni"
    echo "link add $br master $vrf type bridge stp_state 0"
    echo "link add $vxlan master $br type vxlan id $vni local $TOR_VTEP_IP4 dstport $EVPN_UDP_PORT nolearning"
    echo "link add $lo master $vrf type dummy"
    for a in "${addresses[@]}"; do echo "addr add $a dev $lo"; done
    for dev in "$vrf" "$br" "$vxlan" "$lo"; do echo "link set $dev up"; done
} | ip -n "$NS_TOR" -batch - || die "cannot create $vrf/$br/$vxlan/$lo in $NS_TOR (LAB_KERNEL=full needed: vrf module)"
bridge -n "$NS_TOR" link set dev "$vxlan" learning off neigh_suppress on

mkdir -p "$TOR_EVPN_DIR"
{
    printf 'vrf %s\n vni %s\nexit-vrf\n!\n' "$vrf" "$vni"
    printf 'router bgp %s vrf %s\n' "$TOR_AS" "$vrf"
    for af in ipv4 ipv6; do
        printf ' address-family %s unicast\n  redistribute connected\n exit-address-family\n' "$af"
    done
    printf ' address-family l2vpn evpn\n  advertise ipv4 unicast\n  advertise ipv6 unicast\n'
    printf '  rd %s:%s\n' "$TOR_VTEP_IP4" "$vni"
    for rt in "${imports[@]}"; do printf '  route-target import %s\n' "$rt"; done
    for rt in "${exports[@]}"; do printf '  route-target export %s\n' "$rt"; done
    printf ' exit-address-family\nexit\n'
} >"$conf"
out=$(vtysh_tor -f "$conf" 2>&1) || die "the ToR's FRR rejected $conf: $out"
l3vni_up() { vtysh_tor -c "show evpn vni $vni" | grep -q "State: Up"; }
wait_until "the ToR's L3VNI $vni up ($vrf, $br, $vxlan)" "$FRR_TOR_DIR/zebra.log" l3vni_up
log "the ToR has $vrf for VNI $vni (rd $TOR_VTEP_IP4:$vni, import ${imports[*]:-none}, export ${exports[*]:-none})"
