#!/bin/sh
# VM-tier payload: proves the stock kernel in the VM has the device kinds the agent uses in production
# (VRF, dummy, 802.1Q VLAN, the OVS kernel datapath) and that they work the way the agent uses them.
# Stops at the first failure with a message naming what failed and the tool's own error.
#
#   sudo scripts/vm-tier/run.sh scripts/vm-tier/payloads/kernel-kinds.sh
#
# Prints one "PASS: ..." line per check and "kernel-kinds: all N checks passed" at the end.
set -u

if [ "${VM_TIER:-}" != 1 ]; then
    echo "kernel-kinds: refusing to run outside the VM tier (VM_TIER is not 1): it changes the kernel's links" >&2
    echo "kernel-kinds: run it as: scripts/vm-tier/run.sh $0" >&2
    exit 2
fi

passed=0
work=$(mktemp -d /tmp/kernel-kinds.XXXXXX)
errors="$work/stderr"

fail() {
    echo "FAIL: $1" >&2
    [ -s "$errors" ] && sed 's/^/    /' "$errors" >&2
    if [ -f "$work/ovs-vswitchd.log" ]; then
        echo "    --- ovs-vswitchd.log (tail) ---" >&2
        tail -n 20 "$work/ovs-vswitchd.log" | sed 's/^/    /' >&2
    fi
    exit 1
}
pass() {
    passed=$((passed + 1))
    echo "PASS: $1"
}
# check DESCRIPTION COMMAND...: runs COMMAND, fails the payload with DESCRIPTION and its stderr.
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

echo "kernel-kinds: kernel $(uname -r)"

check "modprobe vrf" modprobe vrf
check "modprobe dummy" modprobe dummy
check "modprobe 8021q" modprobe 8021q
check "modprobe openvswitch" modprobe openvswitch

# VRF with its own table, as the agent's bgp-vrf (bgp_vrf_table_id).
check "create vrf t-vrf (table 10)" ip link add t-vrf type vrf table 10
expect "t-vrf is a vrf on table 10" 'vrf table 10' ip -d link show t-vrf
check "set t-vrf up" ip link set t-vrf up

# A dummy enslaved to the VRF, as the agent's bgp-nic: its addresses land in the VRF's table.
check "create dummy t-dummy" ip link add t-dummy type dummy
expect "t-dummy is a dummy" '^ *dummy' ip -d link show t-dummy
check "enslave t-dummy to t-vrf" ip link set t-dummy master t-vrf
check "set t-dummy up" ip link set t-dummy up
check "add 192.0.2.10/24 to t-dummy" ip addr add 192.0.2.10/24 dev t-dummy
expect "t-dummy's local address is in table 10" '^local 192\.0\.2\.10 ' ip route show table 10
expect "t-dummy's connected route is in vrf t-vrf" '^192\.0\.2\.0/24 dev t-dummy' ip route show vrf t-vrf
ip route show table main > "$work/main-routes" 2> "$errors" || fail "list the main table"
if grep -q '^192\.0\.2\.0/24' "$work/main-routes"; then
    cp "$work/main-routes" "$errors"
    fail "t-dummy's connected route leaked into the main table"
fi
pass "t-dummy's connected route is not in the main table"

# An 802.1Q sub-interface, as the agent's <bridge>.<vlan> device of a VLAN provider network.
check "create vlan t-dummy.100 (id 100)" ip link add link t-dummy name t-dummy.100 type vlan id 100
expect "t-dummy.100 is vlan 802.1Q id 100" 'vlan protocol 802\.1Q id 100' ip -d link show t-dummy.100
check "set t-dummy.100 up" ip link set t-dummy.100 up

# OVS on the kernel datapath (datapath_type=system), with its own database and sockets.
# OVS puts its bridge management sockets in OVS_RUNDIR; keep them with the rest of this payload.
export OVS_RUNDIR="$work" OVS_LOGDIR="$work" OVS_DBDIR="$work"
db="$work/conf.db"
db_sock="$work/db.sock"
check "create the OVS database" ovsdb-tool create "$db" /usr/share/openvswitch/vswitch.ovsschema
check "start ovsdb-server" ovsdb-server "$db" --remote="punix:$db_sock" --pidfile="$work/ovsdb-server.pid" \
    --unixctl="$work/ovsdb-server.ctl" --log-file="$work/ovsdb-server.log" --detach --no-chdir
vsctl() { ovs-vsctl --db="unix:$db_sock" --timeout=120 "$@"; }
check "initialise the OVS database" vsctl --no-wait init
check "start ovs-vswitchd" ovs-vswitchd "unix:$db_sock" --pidfile="$work/ovs-vswitchd.pid" \
    --unixctl="$work/ovs-vswitchd.ctl" --log-file="$work/ovs-vswitchd.log" --detach --no-chdir
check "add bridge t-br-ex (datapath_type=system)" vsctl add-br t-br-ex -- set bridge t-br-ex datapath_type=system
expect "the kernel datapath ovs-system exists" 'system@ovs-system' ovs-dpctl show
expect "t-br-ex is an openvswitch kernel link" '^ *openvswitch' ip -d link show t-br-ex
check "add vlan t-dummy.100 as a port of t-br-ex" vsctl add-port t-br-ex t-dummy.100
expect "t-dummy.100 is in the kernel datapath" 't-dummy\.100' ovs-dpctl show
expect "t-dummy.100 got an OpenFlow port number" '^[1-9][0-9]*$' vsctl get interface t-dummy.100 ofport
expect "the kernel datapath has conntrack zones" 'CT zone: *Yes' \
    ovs-appctl -t "$work/ovs-vswitchd.ctl" dpif/show-dp-features t-br-ex

ovs-appctl -t "$work/ovs-vswitchd.ctl" exit > /dev/null 2>&1
ovs-appctl -t "$work/ovsdb-server.ctl" exit > /dev/null 2>&1
echo "kernel-kinds: all $passed checks passed (vrf, dummy, vlan, openvswitch kernel datapath)"
