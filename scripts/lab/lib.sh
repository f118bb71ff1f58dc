# shellcheck shell=bash
# shellcheck disable=SC2034 # the settings below are used by the scripts that source this file
# Shared settings and helpers of the lab scripts (up.sh, down.sh, status.sh).
#
# Everything the lab creates lives under $LAB_DIR (databases, sockets, pid files, logs, configs)
# or in the two network namespaces ${LAB_NS_PREFIX}chassis and ${LAB_NS_PREFIX}tor, so several
# labs (and other OVS/FRR instances) can coexist on one machine.
#
# Knobs (environment):
#   LAB_DIR           state directory                      (default /tmp/ovn-bgp-lab)
#   LAB_NS_PREFIX     prefix of the two netns names         (default lab-)
#   LAB_NB_TCP_PORT   NB ovsdb-server TCP port on 127.0.0.1 (default 16641)
#   LAB_SB_TCP_PORT   SB ovsdb-server TCP port on 127.0.0.1 (default 16642)
#   LAB_TIMEOUT       seconds each wait may take            (default 30)
#   LAB_KERNEL        stand-in (default): the agent uses a bridge for bgp-vrf and an ifb for
#                     bgp-nic, OVS the userspace datapath, FRR a bgp-nic route-map; full: the
#                     production path (kernel vrf, dummy, 8021q, openvswitch needed; the VM tier)
#   LAB_PROVIDER_VLAN empty (default): flat provider network; 1-4094: VLAN provider network
#                     (localnet port tag), so the agent creates br-ex.<id> (needs 8021q)

LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-lab}
# One spelling per lab: down.sh recognises the lab's processes by "$LAB_DIR/" in their command line.
while [[ $LAB_DIR == */ && $LAB_DIR != / ]]; do LAB_DIR=${LAB_DIR%/}; done
[[ $LAB_DIR != / ]] || { echo "[lab] ERROR: LAB_DIR must not be /" >&2; exit 1; }
LAB_NS_PREFIX=${LAB_NS_PREFIX:-lab-}
LAB_NB_TCP_PORT=${LAB_NB_TCP_PORT:-16641}
LAB_SB_TCP_PORT=${LAB_SB_TCP_PORT:-16642}
LAB_TIMEOUT=${LAB_TIMEOUT:-30}
LAB_KERNEL=${LAB_KERNEL:-stand-in}
LAB_PROVIDER_VLAN=${LAB_PROVIDER_VLAN:-}

# A file only up.sh creates: down.sh removes $LAB_DIR only if it carries this marker.
LAB_MARKER=.ovn-bgp-lab

NS_CHASSIS=${LAB_NS_PREFIX}chassis
NS_TOR=${LAB_NS_PREFIX}tor

OVN_DIR=$LAB_DIR/ovn
NB_DB=$OVN_DIR/ovnnb_db.db
SB_DB=$OVN_DIR/ovnsb_db.db
NB_SOCK=$OVN_DIR/ovnnb_db.sock
SB_SOCK=$OVN_DIR/ovnsb_db.sock

OVS_DIR=$LAB_DIR/ovs
OVS_DB=$OVS_DIR/conf.db
OVS_SOCK=$OVS_DIR/db.sock

FRR_DIR=$LAB_DIR/frr
FRR_CHASSIS_DIR=$FRR_DIR/chassis
FRR_TOR_DIR=$FRR_DIR/tor
# vtysh --vty_socket directories (also hold zserv.api and the daemons' pid files).
VTY_CHASSIS=$FRR_CHASSIS_DIR/run
VTY_TOR=$FRR_TOR_DIR/run

AGENT_CONF=$LAB_DIR/bgp-agent.conf
RT_TABLES=$LAB_DIR/rt_tables
LAB_ENV=$LAB_DIR/lab.env

FRR_BIN=/usr/lib/frr
VTYSH=/usr/bin/vtysh

# Chassis identity (Open_vSwitch external_ids): system-id is SB Chassis.name, hostname is what
# Neutron writes into requested-chassis / neutron:host_id. Kept different on purpose.
CHASSIS_NAME=lab-chassis-1
CHASSIS_HOSTNAME=lab-chassis-1.lab.example

# The chassis <-> ToR link (inside the two netns only).
LINK_CHASSIS_IF=eth-tor      # in $NS_CHASSIS
LINK_TOR_IF=eth-chassis      # in $NS_TOR
CHASSIS_IP4=100.64.0.1
TOR_IP4=100.64.0.2
LINK_PLEN4=30
CHASSIS_IP6=fd00:64::1
TOR_IP6=fd00:64::2
LINK_PLEN6=126
CHASSIS_AS=64999
TOR_AS=65000
BGP_VRF_TABLE_ID=10   # the agent's bgp_vrf_table_id

# Neutron-shaped topology: fixed ids so tests and demos can name the rows.
NET_PUBLIC_ID=5f0e3c5a-8d1b-4a55-9c1e-5b0a0c0a0001
SEG_PUBLIC_ID=5f0e3c5a-8d1b-4a55-9c1e-5b0a0c0a0002
SUBNET_PUBLIC4_ID=5f0e3c5a-8d1b-4a55-9c1e-5b0a0c0a0003
SUBNET_PUBLIC6_ID=5f0e3c5a-8d1b-4a55-9c1e-5b0a0c0a0004
NET_PRIVATE_ID=7a4d2b91-3c6e-4f08-8b2a-6e1d0c0b0001
SUBNET_PRIVATE_ID=7a4d2b91-3c6e-4f08-8b2a-6e1d0c0b0002
ROUTER_ID=9c3e1f27-5a4b-4d6c-8e0f-1a2b3c4d0001
GW_PORT_ID=9c3e1f27-5a4b-4d6c-8e0f-1a2b3c4d0002          # router gateway: lrp-/cr-lrp-<id>
RI_PORT_ID=9c3e1f27-5a4b-4d6c-8e0f-1a2b3c4d0003          # router interface on the tenant net
VM_TENANT_PORT_ID=b2d4f6a8-1c3e-4a5b-9d7f-0e1f2a3b0001   # tenant VM (has the FIP)
VM_TENANT_ID=b2d4f6a8-1c3e-4a5b-9d7f-0e1f2a3b00aa
VM_PROVIDER_PORT_ID=c3e5a7b9-2d4f-4b6c-8e0a-1f2a3b4c0001 # VM on the provider network
VM_PROVIDER_ID=c3e5a7b9-2d4f-4b6c-8e0a-1f2a3b4c00aa
FIP_ID=d4f6b8c0-3e5a-4c7d-9f1b-2a3b4c5d0001
PROJECT_ID=0123456789abcdef0123456789abcdef

PUBLIC_CIDR4=172.24.4.0/24
PUBLIC_GW4=172.24.4.1
PUBLIC_CIDR6=2001:db8::/64
PUBLIC_GW6=2001:db8::1
GW_MAC=fa:16:3e:00:00:01
GW_IP4=172.24.4.10
GW_IP6=2001:db8::a
RI_MAC=fa:16:3e:00:00:02
RI_IP4=10.0.0.1
PRIVATE_CIDR4=10.0.0.0/24
VM_TENANT_MAC=fa:16:3e:00:00:10
VM_TENANT_IP4=10.0.0.10
FIP_IP4=172.24.4.100
VM_PROVIDER_MAC=fa:16:3e:00:00:20
VM_PROVIDER_IP4=172.24.4.20
VM_PROVIDER_IP6=2001:db8::20

# Neutron names the VM's tap "tap" + the first 11 characters of the port id.
tap_name() { printf 'tap%s' "${1:0:11}"; }

LAB_T0_US=${LAB_T0_US:-${EPOCHREALTIME/./}}

# elapsed: seconds since the script started, e.g. 12.34.
elapsed() {
    local us=$((${EPOCHREALTIME/./} - LAB_T0_US))
    printf '%d.%02d' $((us / 1000000)) $((us % 1000000 / 10000))
}

log() {
    printf '[lab %6ss] %s\n' "$(elapsed)" "$*" >&2
}

die() {
    printf '[lab] ERROR: %s\n' "$*" >&2
    exit 1
}

# die_with_log MESSAGE LOGFILE...: fail, showing the tail of each daemon log.
die_with_log() {
    local msg=$1
    shift
    printf '[lab] ERROR: %s\n' "$msg" >&2
    local f
    for f in "$@"; do
        if [[ -f $f ]]; then
            printf '[lab] ---- last lines of %s ----\n' "$f" >&2
            tail -n 40 "$f" >&2
        else
            printf '[lab] (no log file %s)\n' "$f" >&2
        fi
    done
    printf '[lab] state left in %s for inspection; run scripts/lab/down.sh (same LAB_DIR/LAB_NS_PREFIX) to clean up\n' "$LAB_DIR" >&2
    exit 1
}

# wait_until DESCRIPTION LOGFILES(colon-separated, may be empty) COMMAND...
# Polls COMMAND every 0.1 s until it succeeds or LAB_TIMEOUT expires.
wait_until() {
    local what=$1 logs=$2
    shift 2
    local deadline=$((SECONDS + LAB_TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            local -a files=()
            [[ -n $logs ]] && IFS=: read -r -a files <<<"$logs"
            die_with_log "timed out after ${LAB_TIMEOUT}s waiting for: $what" "${files[@]}"
        fi
        sleep 0.1
    done
}

# pid_alive PIDFILE: the pid in PIDFILE is a live process started for this lab (its command line
# names $LAB_DIR, which every lab daemon's does), so a recycled pid is never mistaken for ours.
pid_alive() {
    local pidfile=$1 pid
    [[ -s $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$LAB_DIR/"
}

# proc_running PID: PID exists and has not exited. An exited daemon stays a zombie until PID 1
# reaps it (slowly, in some containers); it holds no resources any more, so it counts as gone.
proc_running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

nbctl() { ovn-nbctl --db="unix:$NB_SOCK" --timeout="$LAB_TIMEOUT" "$@"; }
sbctl() { ovn-sbctl --db="unix:$SB_SOCK" --timeout="$LAB_TIMEOUT" "$@"; }
vsctl() { ovs-vsctl --db="unix:$OVS_SOCK" --timeout="$LAB_TIMEOUT" "$@"; }
vtysh_chassis() { "$VTYSH" --vty_socket "$VTY_CHASSIS" --config_dir "$FRR_CHASSIS_DIR" "$@"; }
vtysh_tor() { "$VTYSH" --vty_socket "$VTY_TOR" --config_dir "$FRR_TOR_DIR" "$@"; }

# Environment for OVS/OVN daemons and tools, so nothing falls back to /var/run/openvswitch etc.
ovs_env() {
    export OVS_RUNDIR=$OVS_DIR OVS_LOGDIR=$OVS_DIR OVS_DBDIR=$OVS_DIR OVS_SYSCONFDIR=$OVS_DIR
    export OVN_RUNDIR=$OVN_DIR OVN_LOGDIR=$OVN_DIR OVN_DBDIR=$OVN_DIR OVN_SYSCONFDIR=$OVN_DIR
}

netns_exists() { ip netns list | awk '{print $1}' | grep -qxF -- "$1"; }
