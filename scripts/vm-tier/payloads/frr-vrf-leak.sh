#!/bin/sh
# VM-tier payload: the upstream agent's FRR leak-VRF arrangement on real kernel devices. A dummy
# (bgp-nic) enslaved to a VRF (bgp-vrf, table 10) carries an exposed address; FRR's VRF instance
# redistributes it as connected and the default instance imports it with `import vrf bgp-vrf`, so the
# route must show up in both BGP tables (in the default one with the VRF's nexthop). The fast tier's
# kernel has no VRF, so it cannot run this.
#
#   sudo scripts/vm-tier/run.sh scripts/vm-tier/payloads/frr-vrf-leak.sh
set -u

if [ "${VM_TIER:-}" != 1 ]; then
    echo "frr-vrf-leak: refusing to run outside the VM tier (VM_TIER is not 1): it changes the kernel's links" >&2
    exit 2
fi

passed=0
work=$(mktemp -d /tmp/frr-vrf-leak.XXXXXX)
errors="$work/stderr"
prefix=203.0.113.5/32
scale=${VM_TIER_TIME_SCALE:-1}

fail() {
    echo "FAIL: $1" >&2
    [ -s "$errors" ] && sed 's/^/    /' "$errors" >&2
    for log in "$work"/*.log; do
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
vtysh_() { vtysh --vty_socket "$work" "$@"; }
# eventually DESCRIPTION PATTERN SECONDS VTYSH-COMMAND: polls until the command prints PATTERN.
eventually() {
    description=$1
    pattern=$2
    deadline=$(($(date +%s) + $3 * scale))
    shift 3
    while :; do
        if vtysh_ -c "$1" > "$work/stdout" 2> "$errors" && grep -Eq -- "$pattern" "$work/stdout"; then
            pass "$description"
            return
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            cp "$work/stdout" "$errors"
            fail "$description: '$1' never printed /$pattern/"
        fi
        sleep 1
    done
}

echo "frr-vrf-leak: kernel $(uname -r), $(/usr/lib/frr/zebra --version | awk 'NR == 1')"

check "create vrf bgp-vrf (table 10)" ip link add bgp-vrf type vrf table 10
check "set bgp-vrf up" ip link set bgp-vrf up
check "create dummy bgp-nic" ip link add bgp-nic type dummy
check "enslave bgp-nic to bgp-vrf" ip link set bgp-nic master bgp-vrf
check "set bgp-nic up" ip link set bgp-nic up
check "expose $prefix on bgp-nic" ip addr add "$prefix" dev bgp-nic

chown frr:frr "$work"
check "start zebra" /usr/lib/frr/zebra -d -z "$work/zserv.api" -i "$work/zebra.pid" --vty_socket "$work" \
    --log "file:$work/zebra.log"
check "start bgpd" /usr/lib/frr/bgpd -d -z "$work/zserv.api" -i "$work/bgpd.pid" --vty_socket "$work" -p 0 \
    --log "file:$work/bgpd.log"
eventually "zebra knows bgp-vrf with table 10" 'bgp-vrf.*table 10' 30 "show vrf"

check "configure the leak-VRF instances" vtysh_ \
    -c 'configure terminal' \
    -c 'router bgp 64999 vrf bgp-vrf' -c 'address-family ipv4 unicast' -c 'redistribute connected' \
    -c 'exit-address-family' -c 'exit' \
    -c 'router bgp 64999' -c 'address-family ipv4 unicast' -c 'import vrf bgp-vrf' \
    -c 'exit-address-family' -c 'end'

eventually "$prefix is in the VRF instance's BGP table" "^\*> +${prefix%/*}/32" 5 \
    "show bgp vrf bgp-vrf ipv4 unicast"
eventually "$prefix is leaked into the default instance (nexthop in the VRF)" "^\*> +${prefix%/*}/32 +[0-9.]+@[0-9]+<" 5 \
    "show bgp ipv4 unicast"

kill "$(cat "$work/bgpd.pid")" "$(cat "$work/zebra.pid")" 2> /dev/null
echo "frr-vrf-leak: all $passed checks passed (vrf, dummy, FRR redistribute connected + import vrf)"
