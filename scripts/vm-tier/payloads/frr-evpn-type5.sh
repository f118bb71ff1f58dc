#!/bin/sh
# VM-tier payload: the EVPN type-5 realisation the agent creates (SB ovn_evpn_driver, NB `vrf`
# exposing method), built by hand with iproute2 and vtysh on the real kernel, against a ToR that
# speaks l2vpn evpn. It proves that
#   - the devices exist as the agent makes them: vrf-1001 (table 1001), br-1001 (bridge, master
#     vrf-1001), vxlan-1001 (VNI 1001, local VTEP, dstport 4789, nolearning, master br-1001, bridge
#     port learning off + neigh_suppress on), lo-1001 (dummy in the VRF, the tenant /32 without its
#     kernel local route), veth-vrf-1001 <-> veth-ovs-1001 with the gateway's route and neighbour,
#     the tenant subnet via the gateway and the unreachable default in table 1001;
#   - FRR accepts the agent's ADD_VRF_TEMPLATE (vrf/vni, router bgp ... vrf with redistribute
#     connected + kernel, l2vpn evpn advertise ipv4/ipv6 unicast, rd <vtep>:1001, route targets)
#     applied with `vtysh -f`, and zebra turns it into an L3VNI with the bridge's MAC as router MAC;
#   - the ToR (its own VRF + VNI 1001, same RTs) learns the type-5 routes with that RD, RT, router
#     MAC and the chassis VTEP as nexthop, installs them in its VRF, and a ping from the ToR's VRF
#     reaches the tenant address through the VXLAN tunnel, the chassis VRF and the veth (to a netns
#     standing in for OVN's router, which owns the tenant address);
#   - withdrawal: the route gone from table 1001, the address gone from lo-1001, then the agent's
#     teardown (devices deleted, DEL_VRF_TEMPLATE) each remove the type-5 routes from the ToR.
# ping is busybox's (prepare.sh installs busybox-static; iputils-ping is not a dependency).
# The fast tier's kernel has no vrf module, and FRR's EVPN needs a real VRF, so only the VM tier can run it.
#
#   sudo scripts/vm-tier/run.sh scripts/vm-tier/payloads/frr-evpn-type5.sh
set -u

if [ "${VM_TIER:-}" != 1 ]; then
    echo "frr-evpn-type5: refusing to run outside the VM tier (VM_TIER is not 1): it changes the kernel's links" >&2
    exit 2
fi

passed=0
work=$(mktemp -d /tmp/frr-evpn-type5.XXXXXX)
errors="$work/stderr"
scale=${VM_TIER_TIME_SCALE:-1}

# The lab's names and addresses (scripts/lab/lib.sh, LAB_EVPN=1), so what is proven here is what
# the lab's EVPN tests build on.
C=evpn-chassis # the chassis: FRR AS 64999, the agent's devices
T=evpn-tor     # the ToR: FRR AS 65000, its own VRF for VNI 1001
O=evpn-ovn     # stands in for OVN's router behind veth-ovs-1001 (the gateway and the tenant VM)
CHASSIS_IP=100.64.0.1
TOR_IP=100.64.0.2
CHASSIS_VTEP=100.65.0.1
TOR_VTEP=100.65.0.2
VNI=1001
RT=64999:1001
GW_IP=172.24.100.5 # the router gateway (cr-lrp) on the provider network
SUBNET=10.0.0.0/24 # the router's tenant subnet
TENANT=10.0.0.10   # a tenant VM
TOR_HOST=192.168.200.1 # an address in the ToR's VRF (the ping's source)

fail() {
    echo "FAIL: $1" >&2
    [ -s "$errors" ] && sed 's/^/    /' "$errors" >&2
    for log in "$work"/*/*.log; do
        [ -s "$log" ] || continue
        echo "    --- $log (tail) ---" >&2
        tail -n 15 "$log" | sed 's/^/    /' >&2
    done
    exit 1
}
pass() {
    passed=$((passed + 1))
    echo "PASS: $1"
}
check() {
    description=$1
    shift
    "$@" > "$work/stdout" 2> "$errors" || fail "$description (command: $*)"
    pass "$description"
}
# expect DESCRIPTION PATTERN COMMAND...: COMMAND must succeed and print a line matching PATTERN.
expect() {
    description=$1
    pattern=$2
    shift 2
    "$@" > "$work/stdout" 2> "$errors" || fail "$description (command: $*)"
    if ! grep -Eq -- "$pattern" "$work/stdout"; then
        {
            echo "'$*' printed no line matching /$pattern/:"
            cat "$work/stdout"
        } > "$errors"
        fail "$description"
    fi
    pass "$description"
}
vtysh_c() { vtysh --vty_socket "$work/chassis" "$@"; }
vtysh_t() { vtysh --vty_socket "$work/tor" "$@"; }
# eventually DESCRIPTION SECONDS PREDICATE [ARG]...: polls PREDICATE until it succeeds.
eventually() {
    description=$1
    deadline=$(($(date +%s) + $2 * scale))
    shift 2
    while :; do
        if "$@" > "$work/stdout" 2> "$errors"; then
            pass "$description"
            return
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            {
                cat "$work/stdout"
                echo "(gave up after $(($2 * scale)) s)"
            } >> "$errors"
            fail "$description"
        fi
        sleep 1
    done
}
# The ToR's EVPN type-5 routes, one line each: RD PREFIX NEXTHOP EXTCOMMUNITIES (from the text of
# `show bgp l2vpn evpn route type prefix`: a "Route Distinguisher:" line, then per path a line
# with the prefix (status codes first; the nexthop follows on it when the prefix is short, else on
# the next line), then the extended-community line). Text, not JSON: no jq needed.
tor_type5() {
    vtysh_t -c "show bgp l2vpn evpn route type prefix" | awk '
        /^EVPN type/ { next }
        /^Route Distinguisher: / { rd = $3; next }
        /\[5\]:/ {
            # A short prefix has its nexthop on the same line ("*> [5]:[0]:[0]:[::] 100.65.0.1 ...").
            nh = ""
            for (i = 1; i <= NF; i++) if ($i ~ /^\[5\]:/) { prefix = $i; if (i < NF) nh = $(i + 1) }
            next
        }
        prefix != "" && nh == "" && $1 ~ /^[0-9a-f.:]+$/ { nh = $1; next }
        prefix != "" && nh != "" && /RT:/ { sub(/^ +/, ""); print rd, prefix, nh, $0; prefix = "" }'
}
# tor_has PATTERN: a type-5 route line of the ToR matches PATTERN (prints them all for the log).
tor_has() { tor_type5 > "$work/type5" && cat "$work/type5" && grep -Eq -- "$1" "$work/type5"; }
# tor_lacks PATTERN: no line matches, while the ToR's own route (192.168.200.1, RD of its VTEP) is
# there, so an empty or unparsed listing never passes for a withdrawal.
tor_lacks() {
    tor_type5 > "$work/type5" && cat "$work/type5" && grep -q "^$TOR_VTEP:$VNI .*\\[$TOR_HOST\\]" "$work/type5" &&
        ! grep -Eq -- "$1" "$work/type5"
}
started=$(date +%s)
phase() { echo "frr-evpn-type5: $1 at $(($(date +%s) - started)) s"; }

echo "frr-evpn-type5: kernel $(uname -r), $(/usr/lib/frr/zebra --version | awk 'NR == 1')"

# --- the underlay: chassis <-> ToR over a veth, each VTEP a /32 on lo routed over the link ------
for ns in $C $T $O; do ip netns add $ns && ip -n $ns link set lo up || fail "create netns $ns"; done
ip netns exec $C sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward; echo 1 > /proc/sys/net/ipv6/conf/all/forwarding'
ip -n $C -batch - > /dev/null 2> "$errors" << EOF || fail "build the underlay"
link add eth-tor type veth peer name eth-chassis netns $T
addr add $CHASSIS_IP/30 dev eth-tor
link set eth-tor up
addr add $CHASSIS_VTEP/32 dev lo
route add $TOR_VTEP/32 via $TOR_IP
EOF
ip -n $T -batch - > /dev/null 2> "$errors" << EOF || fail "build the underlay (ToR)"
addr add $TOR_IP/30 dev eth-chassis
link set eth-chassis up
addr add $TOR_VTEP/32 dev lo
route add $CHASSIS_VTEP/32 via $CHASSIS_IP
EOF
expect "underlay: the chassis reaches the ToR's VTEP $TOR_VTEP from its own" ' 0% packet loss' \
    ip netns exec $C busybox ping -c 1 -w 10 -I $CHASSIS_VTEP $TOR_VTEP

phase "underlay up"
# --- the chassis: what the agent creates for VNI 1001 -----------------------------------------
ipc() { ip -n $C "$@"; }
# One batch (each exec costs ~65 ms under TCG); the checks below read back what the kernel made.
ipc -batch - > /dev/null 2> "$errors" << EOF || fail "create vrf-$VNI, br-$VNI, vxlan-$VNI, lo-$VNI, veth-vrf-$VNI"
link add vrf-$VNI type vrf table $VNI
link add br-$VNI master vrf-$VNI type bridge stp_state 0
link add vxlan-$VNI master br-$VNI type vxlan id $VNI local $CHASSIS_VTEP dstport 4789 nolearning
link add lo-$VNI master vrf-$VNI type dummy
link add veth-vrf-$VNI master vrf-$VNI type veth peer name veth-ovs-$VNI netns $O
link set vrf-$VNI up
link set br-$VNI up
link set vxlan-$VNI up
link set lo-$VNI up
link set veth-vrf-$VNI up
EOF
check "vxlan-$VNI bridge port: set learning off, neigh_suppress on (the NB flavour)" \
    bridge -n $C link set dev vxlan-$VNI learning off neigh_suppress on
ipc -d link show > "$work/links" 2> "$errors" || fail "ip -d link show"
bridge -n $C -d link show dev vxlan-$VNI > "$work/port" 2> "$errors" || fail "bridge -d link show dev vxlan-$VNI"
# has FILE DESCRIPTION PATTERN: FILE (as printed by one command above) has a line matching PATTERN.
has() {
    grep -Eq -- "$3" "$1" || { { echo "no line matching /$3/ in:"; cat "$1"; } > "$errors"; fail "$2"; }
    pass "$2"
}
has "$work/links" "vrf-$VNI is a vrf on table $VNI" "^ +vrf table $VNI "
has "$work/links" "br-$VNI is a bridge in vrf-$VNI, up" "br-$VNI: <.*UP.*> .* master vrf-$VNI state UP"
has "$work/links" "vxlan-$VNI: vxlan id $VNI local $CHASSIS_VTEP dstport 4789 nolearning" \
    "^ +vxlan id $VNI local $CHASSIS_VTEP .*dstport 4789 nolearning"
has "$work/links" "lo-$VNI is a dummy in vrf-$VNI, up" "lo-$VNI: <.*UP.*> .* master vrf-$VNI state UNKNOWN"
has "$work/links" "veth-vrf-$VNI is a veth in vrf-$VNI, up" "veth-vrf-$VNI@if[0-9]+: <.*UP.*> .* master vrf-$VNI "
has "$work/port" "vxlan-$VNI is a forwarding port of br-$VNI" "master br-$VNI state forwarding"
has "$work/port" "vxlan-$VNI's bridge port has learning off and neigh_suppress on" "learning off .*neigh_suppress on"

# The OVN stand-in: owns the gateway address and the tenant VM's, answers through veth-ovs-1001
# with the veth-vrf end as its next hop (in the real path OVN's router does both).
ovs_mac=$(ip netns exec $O cat /sys/class/net/veth-ovs-$VNI/address)
vrf_mac=$(ip netns exec $C cat /sys/class/net/veth-vrf-$VNI/address)
ip -n $O -batch - > /dev/null 2> "$errors" << EOF || fail "set up the OVN stand-in netns"
link set veth-ovs-$VNI up
addr add $GW_IP/24 dev veth-ovs-$VNI
addr add $TENANT/32 dev lo
route add default via 169.254.0.1 dev veth-ovs-$VNI onlink
neigh replace 169.254.0.1 lladdr $vrf_mac dev veth-ovs-$VNI nud permanent
EOF

# F1/F2: the gateway's route and neighbour, the subnet via the gateway, the unreachable defaults,
# the tenant /32 on lo-1001 without the kernel's local route (so the VRF forwards it to OVN).
ipc -batch - > /dev/null 2> "$errors" << EOF || fail "routes and neighbour in table $VNI"
route replace $GW_IP/32 dev veth-vrf-$VNI table $VNI scope link proto boot
neigh replace $GW_IP lladdr $ovs_mac dev veth-vrf-$VNI nud permanent
route replace $SUBNET via $GW_IP dev veth-vrf-$VNI table $VNI proto boot
route replace unreachable default table $VNI proto boot metric 4278198272
route replace unreachable ::/0 table $VNI proto boot metric 4278198272
addr add $TENANT/32 dev lo-$VNI
EOF
check "delete the kernel's local route of $TENANT (table $VNI)" \
    ipc route del $TENANT table $VNI proto kernel scope host dev lo-$VNI
ipc route show table $VNI > "$work/table" 2> "$errors" || fail "ip route show table $VNI"
# (iproute2 prints no "proto boot": it is the default protocol.)
for want in "^$GW_IP dev veth-vrf-$VNI scope link" "^$SUBNET via $GW_IP dev veth-vrf-$VNI" \
    "^unreachable default metric 4278198272"; do
    grep -Eq "$want" "$work/table" || { cp "$work/table" "$errors"; fail "table $VNI has no /$want/"; }
done
if grep -q "local $TENANT " "$work/table"; then cp "$work/table" "$errors"; fail "table $VNI still has local $TENANT"; fi
pass "table $VNI: gateway scope link, subnet via the gateway, unreachable default, no local $TENANT"

phase "devices and routes done"
# --- FRR on both sides -------------------------------------------------------------------------
# frr_start NAME NETNS: zebra + bgpd of one side, reading $work/NAME/{zebra,bgpd}.conf.
frr_start() {
    d=$work/$1
    chown -R frr:frr "$d"
    check "start zebra ($1)" ip netns exec "$2" /usr/lib/frr/zebra -d -u frr -g frr -z "$d/zserv.api" \
        -i "$d/zebra.pid" --vty_socket "$d" -f "$d/zebra.conf" --log "file:$d/zebra.log"
    check "start bgpd ($1)" ip netns exec "$2" /usr/lib/frr/bgpd -d -u frr -g frr -z "$d/zserv.api" \
        -i "$d/bgpd.pid" --vty_socket "$d" -f "$d/bgpd.conf" --log "file:$d/bgpd.log"
}
mkdir -p "$work/chassis" "$work/tor"
chmod 755 "$work" # the daemons run as frr
# The chassis' operator configuration with what LAB_EVPN=1 adds: l2vpn evpn to the ToR and
# advertise-all-vni in the default instance (zebra then tells bgpd about its VNIs).
cat > "$work/chassis/zebra.conf" << EOF
frr defaults traditional
hostname $C
EOF
cat > "$work/chassis/bgpd.conf" << EOF
frr defaults traditional
hostname $C
router bgp 64999
 bgp router-id $CHASSIS_IP
 no bgp default ipv4-unicast
 no bgp ebgp-requires-policy
 neighbor $TOR_IP remote-as 65000
 neighbor $TOR_IP timers 3 10
 neighbor $TOR_IP timers connect 1
 neighbor $TOR_IP advertisement-interval 0
 address-family l2vpn evpn
  neighbor $TOR_IP activate
  advertise-all-vni
 exit-address-family
exit
EOF
# The ToR: its own VRF for VNI 1001 (importing and exporting the same RT), with an address to ping from.
ip -n $T -batch - > /dev/null 2> "$errors" << EOF || fail "the ToR's VRF, bridge and VXLAN for VNI $VNI"
link add vrf-$VNI type vrf table $VNI
link add br-$VNI master vrf-$VNI type bridge stp_state 0
link add vxlan-$VNI master br-$VNI type vxlan id $VNI local $TOR_VTEP dstport 4789 nolearning
link add lo-$VNI master vrf-$VNI type dummy
addr add $TOR_HOST/32 dev lo-$VNI
link set vrf-$VNI up
link set br-$VNI up
link set vxlan-$VNI up
link set lo-$VNI up
EOF
bridge -n $T link set dev vxlan-$VNI learning off neigh_suppress on 2> "$errors" || fail "ToR vxlan-$VNI port flags"
cat > "$work/tor/zebra.conf" << EOF
frr defaults traditional
hostname $T
vrf vrf-$VNI
 vni $VNI
exit-vrf
EOF
cat > "$work/tor/bgpd.conf" << EOF
frr defaults traditional
hostname $T
router bgp 65000
 bgp router-id $TOR_IP
 no bgp default ipv4-unicast
 no bgp ebgp-requires-policy
 neighbor $CHASSIS_IP remote-as 64999
 neighbor $CHASSIS_IP timers 3 10
 neighbor $CHASSIS_IP timers connect 1
 neighbor $CHASSIS_IP advertisement-interval 0
 address-family l2vpn evpn
  neighbor $CHASSIS_IP activate
  advertise-all-vni
 exit-address-family
exit
router bgp 65000 vrf vrf-$VNI
 address-family ipv4 unicast
  redistribute connected
 exit-address-family
 address-family l2vpn evpn
  advertise ipv4 unicast
  rd $TOR_VTEP:$VNI
  route-target import $RT
  route-target export $RT
 exit-address-family
exit
EOF
frr_start tor $T
frr_start chassis $C

session_up() { vtysh_t -c "show bgp neighbors $CHASSIS_IP" | grep "BGP state = Established"; }
eventually "the ToR's l2vpn evpn session with the chassis is Established" 60 session_up

phase "BGP session up"
# The agent's ADD_VRF_TEMPLATE (upstream frr.py, with the NB flavour's redistribute connected +
# kernel, rd <vtep>:<vni> and one route target for import and export), applied as the agent does.
cat > "$work/add-vrf.conf" << EOF
vrf vrf-$VNI
  vni $VNI
exit-vrf

router bgp 64999 vrf vrf-$VNI
  address-family ipv4 unicast
    redistribute connected
    redistribute kernel
  exit-address-family
  address-family ipv6 unicast
    redistribute connected
    redistribute kernel
  exit-address-family
  address-family l2vpn evpn
    advertise ipv4 unicast
    advertise ipv6 unicast
    rd $CHASSIS_VTEP:$VNI
    route-target import $RT
    route-target export $RT
  exit-address-family

EOF
chmod a+r "$work/add-vrf.conf"
check "vtysh -f ADD_VRF_TEMPLATE (vrf-$VNI, vni $VNI, rd $CHASSIS_VTEP:$VNI, rt $RT)" vtysh_c -f "$work/add-vrf.conf"
expect "the chassis running-config has vrf vrf-$VNI / vni $VNI" "^ vni $VNI\$" vtysh_c -c "show running-config"

l3vni_up() { vtysh_c -c "show evpn vni $VNI" | grep -E "Type: L3" && vtysh_c -c "show evpn vni $VNI" | grep -E "State: Up"; }
eventually "zebra on the chassis has L3VNI $VNI up (vxlan-$VNI, br-$VNI, vrf-$VNI)" 30 l3vni_up
br_mac=$(ip netns exec $C cat /sys/class/net/br-$VNI/address)
expect "the chassis' router MAC for VNI $VNI is br-$VNI's MAC ($br_mac)" "Router MAC: $br_mac" \
    vtysh_c -c "show evpn vni $VNI"

phase "L3VNI up"
# --- what the ToR learns ----------------------------------------------------------------------
rd="$CHASSIS_VTEP:$VNI"
route5() { printf '^%s \\[5\\]:\\[0\\]:\\[%s\\]:\\[%s\\] %s .*RT:%s .*Rmac:%s' "$rd" "$2" "$1" "$CHASSIS_VTEP" "$RT" "$br_mac"; }
eventually "the ToR learns $TENANT/32 (type 5, RD $rd, RT $RT, Rmac $br_mac, nexthop $CHASSIS_VTEP)" 30 \
    tor_has "$(route5 $TENANT 32)"
eventually "the ToR learns $SUBNET (the kernel route of table $VNI)" 10 tor_has "$(route5 ${SUBNET%/*} 24)"
eventually "the ToR learns $GW_IP/32 (the gateway's scope link route)" 10 tor_has "$(route5 $GW_IP 32)"
tor_type5 > "$work/type5"
echo "frr-evpn-type5: the ToR's type-5 routes (RD, prefix, nexthop, extended communities):"
sed 's/^/    /' "$work/type5"
# Worth knowing for the agent: with `redistribute kernel` (the NB flavour) the unreachable defaults
# of table 1001 (the SB flavour) are kernel routes too, and FRR advertises them.
for default in 0.0.0.0 ::; do
    if grep -qF "[0]:[$default]" "$work/type5"; then
        echo "frr-evpn-type5: note: redistribute kernel advertises table $VNI's unreachable default ($default/0) as type 5"
    else
        echo "frr-evpn-type5: note: table $VNI's unreachable default ($default/0) is not advertised"
    fi
done
expect "the ToR installs $TENANT in its vrf-$VNI via $CHASSIS_VTEP on br-$VNI" \
    "^$TENANT .*via $CHASSIS_VTEP dev br-$VNI proto bgp .*onlink" \
    ip -n $T route show vrf vrf-$VNI
expect "the ToR's neighbour $CHASSIS_VTEP on br-$VNI is the chassis router MAC" \
    "^$CHASSIS_VTEP lladdr $br_mac" ip -n $T neigh show dev br-$VNI
expect "the ToR's FDB sends the chassis router MAC over vxlan-$VNI to $CHASSIS_VTEP" \
    "^$br_mac dst $CHASSIS_VTEP" bridge -n $T fdb show dev vxlan-$VNI
chassis_learned() { ip -n $C route show vrf vrf-$VNI | grep -E "^$TOR_HOST .*via $TOR_VTEP dev br-$VNI"; }
eventually "the chassis installs the ToR's $TOR_HOST in vrf-$VNI via $TOR_VTEP" 10 chassis_learned

phase "type-5 routes learned"
# --- the data plane: ToR VRF -> VXLAN -> chassis vrf-1001 -> veth -> the OVN stand-in and back --
expect "ping from the ToR's vrf-$VNI to $TENANT through VXLAN and veth-vrf-$VNI" ' 0% packet loss' \
    ip netns exec $T busybox ping -c 2 -w 15 -I vrf-$VNI $TENANT

phase "ping done"
# --- withdrawal ---------------------------------------------------------------------------------
check "delete $SUBNET from table $VNI" ipc route del $SUBNET table $VNI
eventually "the ToR loses $SUBNET" 10 tor_lacks "\\[24\\]:\\[${SUBNET%/*}\\]"
check "delete $TENANT/32 from lo-$VNI" ipc addr del $TENANT/32 dev lo-$VNI
eventually "the ToR loses $TENANT/32" 10 tor_lacks "\\[32\\]:\\[$TENANT\\]"
# Worth knowing for the agent: may the BGP VRF instance go while its VRF is still an active L3VNI?
if vtysh_c -c "configure terminal" -c "no router bgp 64999 vrf vrf-$VNI" > "$work/no-router" 2>&1; then
    echo "frr-evpn-type5: note: 'no router bgp 64999 vrf vrf-$VNI' accepted while vrf-$VNI is an active L3VNI"
else
    echo "frr-evpn-type5: note: 'no router bgp 64999 vrf vrf-$VNI' refused while vrf-$VNI is an active L3VNI: $(tr '\n' ' ' < "$work/no-router")"
fi
# The agent's teardown (F3): devices first, then DEL_VRF_TEMPLATE.
for dev in lo-$VNI vxlan-$VNI br-$VNI veth-vrf-$VNI vrf-$VNI; do
    ipc link del $dev 2> "$errors" || fail "delete $dev"
done
pass "delete lo-$VNI, vxlan-$VNI, br-$VNI, veth-vrf-$VNI, vrf-$VNI"
cat > "$work/del-vrf.conf" << EOF
no vrf vrf-$VNI
no interface veth-vrf-$VNI
no router bgp 64999 vrf vrf-$VNI

EOF
chmod a+r "$work/del-vrf.conf"
# vtysh -f stops at nothing; its exit code says whether every line was accepted.
if vtysh_c -f "$work/del-vrf.conf" > "$work/del-vrf.out" 2>&1; then
    echo "frr-evpn-type5: note: DEL_VRF_TEMPLATE accepted as is"
else
    echo "frr-evpn-type5: note: DEL_VRF_TEMPLATE reported: $(tr '\n' ' ' < "$work/del-vrf.out")"
fi
no_vrf_config() {
    vtysh_c -c "show running-config" > "$work/running" || return 1
    cat "$work/running"
    ! grep -Eq "^vrf vrf-$VNI|router bgp 64999 vrf vrf-$VNI|^ vni $VNI" "$work/running"
}
eventually "the chassis running-config has no vrf-$VNI stanza and no router bgp 64999 vrf vrf-$VNI" 10 no_vrf_config
eventually "the ToR has no type-5 route with RD $rd left" 15 tor_lacks "^$rd "

phase "withdrawal done"
kill "$(cat "$work/chassis/bgpd.pid")" "$(cat "$work/chassis/zebra.pid")" \
    "$(cat "$work/tor/bgpd.pid")" "$(cat "$work/tor/zebra.pid")" 2> /dev/null
echo "frr-evpn-type5: all $passed checks passed (vrf/bridge/vxlan/dummy, ADD_VRF_TEMPLATE, type-5 at the ToR, ping over VXLAN, withdrawal)"
