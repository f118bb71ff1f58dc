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
#   LAB_SB_CLUSTER    0: one SB ovsdb-server; 3: SB as a 3-member RAFT cluster (default 0)
#   LAB_SB_CLUSTER_PORT_BASE  first of the 6 TCP ports (127.0.0.1) of the cluster (default 16720):
#                     member N listens for clients on BASE+2(N-1) and for RAFT on BASE+2(N-1)+1
#   LAB_KERNEL        stand-in (default): the agent uses a bridge for bgp-vrf and an ifb for
#                     bgp-nic, OVS the userspace datapath, FRR a bgp-nic route-map; full: the
#                     production path (kernel vrf, dummy, 8021q, openvswitch needed; the VM tier)
#   LAB_PROVIDER_VLAN empty (default): flat provider network; 1-4094: VLAN provider network
#                     (localnet port tag), so the agent creates br-ex.<id> (needs 8021q)
#   LAB_CHASSIS2      0 (default); 1: a second chassis (its own OVS and ovn-controller, system-id
#                     lab-chassis-2) in netns ${LAB_NS_PREFIX}chassis2, registered in SB, hosting
#                     nothing yet, with a geneve tunnel to chassis 1 (for gateway failover tests)
#   LAB_EVPN          0 (default); 1: the ToR speaks l2vpn evpn to the chassis (both FRRs activate
#                     the AF for the peer, advertise-all-vni), each side has a VXLAN tunnel endpoint
#                     (a /32 on lo routed over the ToR link), and tor-evpn.sh gives the ToR a VRF per
#                     VNI (real VRFs: LAB_KERNEL=full, the VM tier)
#   LAB_OVN           system (default): the host's OVN/OVS packages (Debian 12: OVN 23.03, OVS 3.1);
#                     25.03: OVN central, northd, ovn-controller and its OVS from Debian 13's
#                     packages (OVN 25.03, OVS 3.5) in a cached chroot (see ovn-chroot.sh); FRR,
#                     the ToR, the agent and the clients (ovn-nbctl, ovs-vsctl...) stay the host's
#   LAB_VSWITCHD_SYSTEM_ROUTES
#                     1 (default): the chassis' ovs-vswitchd keeps its copy of the kernel's routes,
#                     as it does by default; 0: started with --disable-system-route (it then does no
#                     work per route or address change: on a busy gateway, each address among N
#                     costs it O(N^2), see docs/sb-bgp-benchmark.md "The rest of the machine"). No
#                     tunnel can then be routed by the userspace datapath: not with LAB_CHASSIS2=1

LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-lab}
# One spelling per lab: down.sh recognises the lab's processes by "$LAB_DIR/" in their command line.
while [[ $LAB_DIR == */ && $LAB_DIR != / ]]; do LAB_DIR=${LAB_DIR%/}; done
[[ $LAB_DIR != / ]] || { echo "[lab] ERROR: LAB_DIR must not be /" >&2; exit 1; }
LAB_NS_PREFIX=${LAB_NS_PREFIX:-lab-}
LAB_NB_TCP_PORT=${LAB_NB_TCP_PORT:-16641}
LAB_SB_TCP_PORT=${LAB_SB_TCP_PORT:-16642}
LAB_TIMEOUT=${LAB_TIMEOUT:-30}
LAB_SB_CLUSTER=${LAB_SB_CLUSTER:-0}
LAB_SB_CLUSTER_PORT_BASE=${LAB_SB_CLUSTER_PORT_BASE:-16720}
LAB_KERNEL=${LAB_KERNEL:-stand-in}
LAB_PROVIDER_VLAN=${LAB_PROVIDER_VLAN:-}
LAB_OVN=${LAB_OVN:-system}
LAB_CHASSIS2=${LAB_CHASSIS2:-0}
LAB_EVPN=${LAB_EVPN:-0}
LAB_VSWITCHD_SYSTEM_ROUTES=${LAB_VSWITCHD_SYSTEM_ROUTES:-1}
# The chroot the OVN/OVS daemons run in (LAB_OVN=25.03), empty for the host's packages.
OVN_ROOT=""

# A file only up.sh creates: down.sh removes $LAB_DIR only if it carries this marker.
LAB_MARKER=.ovn-bgp-lab

NS_CHASSIS=${LAB_NS_PREFIX}chassis
NS_CHASSIS2=${LAB_NS_PREFIX}chassis2
NS_TOR=${LAB_NS_PREFIX}tor

OVN_DIR=$LAB_DIR/ovn
NB_DB=$OVN_DIR/ovnnb_db.db
SB_DB=$OVN_DIR/ovnsb_db.db
NB_SOCK=$OVN_DIR/ovnnb_db.sock
SB_SOCK=$OVN_DIR/ovnsb_db.sock

OVS_DIR=$LAB_DIR/ovs
OVS_DB=$OVS_DIR/conf.db
OVS_SOCK=$OVS_DIR/db.sock

# The second chassis (LAB_CHASSIS2=1): its own OVS database, sockets and run directory.
OVS2_DIR=$LAB_DIR/ovs2
OVS2_DB=$OVS2_DIR/conf.db
OVS2_SOCK=$OVS2_DIR/db.sock

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
CHASSIS2_NAME=lab-chassis-2
CHASSIS2_HOSTNAME=lab-chassis-2.lab.example
# Geneve between the two chassis (LAB_CHASSIS2=1). With the userspace datapath, OVS routes tunnel
# packets itself (its route table caches the kernel routes of its netns) and sends them out of the
# OVS bridge whose internal port owns the route, so each chassis' ovn-encap-ip sits on the internal
# port of its own bridge br-phy, and the two br-phy are joined by a veth pair (one end a port of
# each). ARP for the tunnel peers goes through br-phy too (OVS snoops the replies). Without a
# second chassis, chassis 1's encap IP is its ToR address: nothing to tunnel to.
TUNNEL_BRIDGE=br-phy
TUNNEL_CHASSIS_IF=eth-chassis2   # in $NS_CHASSIS, a port of its br-phy
TUNNEL_CHASSIS2_IF=eth-chassis1  # in $NS_CHASSIS2, a port of its br-phy
CHASSIS_TUNNEL_IP4=100.64.1.1
CHASSIS2_ENCAP_IP4=100.64.1.2
TUNNEL_PLEN4=24

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
# EVPN (LAB_EVPN=1): the VXLAN tunnel endpoints, a /32 on lo of each side with a static route to
# the other's over the ToR link (the SB EVPN driver takes the first /32 of lo when evpn_local_ip is
# unset). 100.64.1.0/24 is the geneve network of LAB_CHASSIS2.
CHASSIS_VTEP_IP4=100.65.0.1
TOR_VTEP_IP4=100.65.0.2
EVPN_UDP_PORT=4789    # the agent's default evpn_udp_dstport
# One vtysh file per VRF tor-evpn.sh gave the ToR; restart.sh frr-tor applies them again.
TOR_EVPN_DIR=$FRR_TOR_DIR/evpn

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
sbctl() { ovn-sbctl --db="$(sb_unix_remotes)" --timeout="$LAB_TIMEOUT" "$@"; }
vsctl() { ovs-vsctl --db="unix:$OVS_SOCK" --timeout="$LAB_TIMEOUT" "$@"; }
vsctl2() { ovs-vsctl --db="unix:$OVS2_SOCK" --timeout="$LAB_TIMEOUT" "$@"; }
vtysh_chassis() { "$VTYSH" --vty_socket "$VTY_CHASSIS" --config_dir "$FRR_CHASSIS_DIR" "$@"; }
vtysh_tor() { "$VTYSH" --vty_socket "$VTY_TOR" --config_dir "$FRR_TOR_DIR" "$@"; }

# Environment for OVS/OVN daemons and tools, so nothing falls back to /var/run/openvswitch etc.
ovs_env() {
    export OVS_RUNDIR=$OVS_DIR OVS_LOGDIR=$OVS_DIR OVS_DBDIR=$OVS_DIR OVS_SYSCONFDIR=$OVS_DIR
    export OVN_RUNDIR=$OVN_DIR OVN_LOGDIR=$OVN_DIR OVN_DBDIR=$OVN_DIR OVN_SYSCONFDIR=$OVN_DIR
}

netns_exists() { ip netns list | awk '{print $1}' | grep -qxF -- "$1"; }

# ---------------------------------------------------------------------------------------------
# Which OVN runs the lab's OVN/OVS daemons. With LAB_OVN=25.03 every OVN/OVS daemon (and the
# ovsdb-tool that creates their databases) runs in the chroot, in a private mount namespace where
# LAB_DIR is bind-mounted at its own path: the command lines, sockets and pid files are the same
# as with the host's packages, the host's clients and the agent reach the sockets in LAB_DIR, and
# the mounts end with the daemon (down.sh has nothing to unmount).
OVN_PREFIX=()

# use_ovn_root ROOT: run the OVN/OVS daemons from the chroot ROOT (empty: the host's packages).
use_ovn_root() {
    OVN_ROOT=$1
    if [[ -n $OVN_ROOT ]]; then
        [[ -f $OVN_ROOT/.ovn-bgp-agent-chroot ]] ||
            die "the OVN chroot $OVN_ROOT is missing or incomplete (scripts/lab/ovn-chroot.sh rebuilds it)"
        OVN_PREFIX=(unshare --mount --propagation private -- "$LAB_SCRIPTS/ovn-chroot.sh" exec "$OVN_ROOT" "$LAB_DIR")
    else
        OVN_PREFIX=()
    fi
}

# ovn_run COMMAND...: COMMAND from the lab's OVN (the chroot's with LAB_OVN=25.03).
ovn_run() { "${OVN_PREFIX[@]}" "$@"; }

# lab_mount_holders: pids of processes that still have a mount of this lab's chroot (none once
# every daemon ended: the mounts live in the daemons' private mount namespaces).
lab_mount_holders() {
    [[ -n $OVN_ROOT ]] || return 0
    local f
    for f in /proc/[0-9]*/mountinfo; do
        grep -qF " $OVN_ROOT$LAB_DIR " "$f" 2>/dev/null && { f=${f#/proc/}; echo "${f%%/*}"; }
    done
    return 0
}

# ---------------------------------------------------------------------------------------------
# Settings a running lab recorded in lab.env (restart.sh and status.sh must use the ports, the
# namespaces and the SB mode the lab was started with, whatever the caller's environment says).
load_lab_settings() {
    [[ -f $LAB_ENV ]] || die "no lab in $LAB_DIR (no $LAB_ENV; run scripts/lab/up.sh)"
    local key value
    while IFS='=' read -r key value; do
        case $key in
        LAB_NB_TCP_PORT | LAB_SB_TCP_PORT | LAB_SB_CLUSTER | LAB_SB_CLUSTER_PORT_BASE)
            [[ $value =~ ^[0-9]+$ ]] || die "bad $key=$value in $LAB_ENV"
            printf -v "$key" '%s' "$value"
            ;;
        LAB_CHASSIS2 | LAB_EVPN | LAB_VSWITCHD_SYSTEM_ROUTES)
            [[ $value =~ ^[01]$ ]] || die "bad $key=$value in $LAB_ENV"
            printf -v "$key" '%s' "$value"
            ;;
        NS_CHASSIS | NS_TOR | NS_CHASSIS2)
            [[ $value =~ ^[a-zA-Z0-9_.-]+$ ]] || die "bad $key=$value in $LAB_ENV"
            printf -v "$key" '%s' "$value"
            ;;
        LAB_OVN) LAB_OVN=$value ;;
        OVN_ROOT)
            [[ -z $value || $value == /* ]] || die "bad $key=$value in $LAB_ENV"
            use_ovn_root "$value"
            ;;
        esac
    done <"$LAB_ENV"
}

sb_clustered() { ((LAB_SB_CLUSTER > 1)); }

# The SB RAFT cluster: member N (1-based) has its own database file, unix socket, control socket,
# client port and RAFT port.
sb_member_db() { printf '%s/ovnsb_db-%s.db' "$OVN_DIR" "$1"; }
sb_member_sock() { printf '%s/ovnsb_db-%s.sock' "$OVN_DIR" "$1"; }
sb_member_name() { printf 'ovsdb-server-sb-%s' "$1"; }
sb_member_ctl() { printf '%s/%s.ctl' "$OVN_DIR" "$(sb_member_name "$1")"; }
sb_member_pidfile() { printf '%s/%s.pid' "$OVN_DIR" "$(sb_member_name "$1")"; }
sb_member_client_port() { echo $((LAB_SB_CLUSTER_PORT_BASE + 2 * ($1 - 1))); }
sb_member_raft_port() { echo $((LAB_SB_CLUSTER_PORT_BASE + 2 * ($1 - 1) + 1)); }

# sb_unix_remotes / sb_tcp_remotes: how clients reach SB (every member, comma-separated, when
# clustered: OVN tools and daemons then follow the leader or any live member).
sb_unix_remotes() {
    if sb_clustered; then
        local n out=""
        for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do out+="${out:+,}unix:$(sb_member_sock "$n")"; done
        printf '%s' "$out"
    else
        printf 'unix:%s' "$SB_SOCK"
    fi
}
sb_tcp_remotes() {
    if sb_clustered; then
        local n out=""
        for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do out+="${out:+,}tcp:127.0.0.1:$(sb_member_client_port "$n")"; done
        printf '%s' "$out"
    else
        printf 'tcp:127.0.0.1:%s' "$LAB_SB_TCP_PORT"
    fi
}

# ---------------------------------------------------------------------------------------------
# Starting the daemons. up.sh and restart.sh both use these, so a restarted daemon runs with
# exactly the command line it had.

# start_daemon NAME LOGFILE COMMAND...: run a self-daemonizing COMMAND; its output before it
# detaches goes to <LOGFILE without .log>.startup.log; on failure show both logs and stop.
# The daemon inherits no descriptor beyond 0-2: a lock the caller holds (e.g. `flock LOCK up.sh`)
# would otherwise be held by the daemons until down.sh.
start_daemon() {
    local name=$1 logfile=$2
    shift 2
    (
        close_inherited_fds
        "$@"
    ) >"${logfile%.log}.startup.log" 2>&1 ||
        die_with_log "$name did not start ($*)" "${logfile%.log}.startup.log" "$logfile"
}

# close_inherited_fds: close every descriptor above 2 of this (sub)shell.
close_inherited_fds() {
    local fd fds=()
    for fd in /proc/$BASHPID/fd/*; do fds+=("${fd##*/}"); done
    for fd in "${fds[@]}"; do
        ((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
    done
    return 0
}

# start_ovn_db NAME DB SOCK PORT: a standalone OVN database server (NB, or SB when not clustered).
start_ovn_db() {
    local name=$1 db=$2 sock=$3 port=$4
    start_daemon "$name" "$OVN_DIR/$name.log" ovn_run ovsdb-server "$db" --detach --no-chdir \
        --pidfile="$OVN_DIR/$name.pid" --log-file="$OVN_DIR/$name.log" \
        --unixctl="$OVN_DIR/$name.ctl" \
        --remote="punix:$sock" --remote="ptcp:$port:127.0.0.1"
}
start_nb_db() { start_ovn_db ovsdb-server-nb "$NB_DB" "$NB_SOCK" "$LAB_NB_TCP_PORT"; }

# start_sb_member N: member N of the SB RAFT cluster (its database file says which cluster).
start_sb_member() {
    local n=$1 name
    name=$(sb_member_name "$n")
    start_daemon "$name" "$OVN_DIR/$name.log" ovn_run ovsdb-server "$(sb_member_db "$n")" --detach --no-chdir \
        --pidfile="$(sb_member_pidfile "$n")" --log-file="$OVN_DIR/$name.log" \
        --unixctl="$(sb_member_ctl "$n")" \
        --remote="punix:$(sb_member_sock "$n")" --remote="ptcp:$(sb_member_client_port "$n"):127.0.0.1"
}

# start_sb_db: the SB server, or every member of the SB cluster.
start_sb_db() {
    if sb_clustered; then
        local n
        for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do start_sb_member "$n"; done
    else
        start_ovn_db ovsdb-server-sb "$SB_DB" "$SB_SOCK" "$LAB_SB_TCP_PORT"
    fi
}

# sb_member_role N: "leader", "follower", "candidate" (empty if member N does not answer).
sb_member_role() {
    ovs-appctl -t "$(sb_member_ctl "$1")" cluster/status OVN_Southbound 2>/dev/null |
        sed -n 's/^Role: //p'
}

# sb_cluster_has_leader: some running member is the leader and the cluster is writable.
sb_cluster_has_leader() {
    local n
    for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do
        [[ $(sb_member_role "$n") == leader ]] && return 0
    done
    return 1
}

start_northd() {
    start_daemon ovn-northd "$OVN_DIR/ovn-northd.log" \
        ovn_run ovn-northd --detach --no-chdir --pidfile="$OVN_DIR/ovn-northd.pid" --log-file="$OVN_DIR/ovn-northd.log" \
        --unixctl="$OVN_DIR/ovn-northd.ctl" --ovnnb-db="unix:$NB_SOCK" --ovnsb-db="$(sb_unix_remotes)"
}

start_ovs_vswitchd() {
    local opts=()
    ((LAB_VSWITCHD_SYSTEM_ROUTES)) || opts+=(--disable-system-route)
    start_daemon ovs-vswitchd "$OVS_DIR/ovs-vswitchd.log" \
        ip netns exec "$NS_CHASSIS" "${OVN_PREFIX[@]}" ovs-vswitchd "unix:$OVS_SOCK" --detach --no-chdir \
        --pidfile="$OVS_DIR/ovs-vswitchd.pid" --log-file="$OVS_DIR/ovs-vswitchd.log" \
        --unixctl="$OVS_DIR/ovs-vswitchd.ctl" "${opts[@]}"
}

# bring_up_br_ex: the provider bridge's link is up, as the host's network configuration keeps it.
# (With the userspace datapath, br-ex is a tap device that ovs-vswitchd re-creates, down, when it
# restarts; a kernel datapath keeps its port. Waits for the device first.)
bring_up_br_ex() {
    wait_until "br-ex device in $NS_CHASSIS" "$OVS_DIR/ovs-vswitchd.log" ip -n "$NS_CHASSIS" link show dev br-ex
    ip -n "$NS_CHASSIS" link set br-ex up
}

# bring_up_tunnel_bridge NETNS IP LOG: br-phy of a chassis has its encap IP and is up. (With the
# userspace datapath the internal port is a tap device of ovs-vswitchd, which a restarted
# ovs-vswitchd re-creates down; a kill may leave the old one, address and all: hence replace.)
bring_up_tunnel_bridge() {
    local ns=$1 ip=$2 log=$3
    wait_until "$TUNNEL_BRIDGE device in $ns" "$log" ip -n "$ns" link show dev "$TUNNEL_BRIDGE"
    ip -n "$ns" addr replace "$ip/$TUNNEL_PLEN4" dev "$TUNNEL_BRIDGE"
    ip -n "$ns" link set "$TUNNEL_BRIDGE" up
}

start_ovn_controller() {
    start_daemon ovn-controller "$OVN_DIR/ovn-controller.log" \
        ip netns exec "$NS_CHASSIS" "${OVN_PREFIX[@]}" ovn-controller "unix:$OVS_SOCK" --detach --no-chdir \
        --pidfile="$OVN_DIR/ovn-controller.pid" --log-file="$OVN_DIR/ovn-controller.log"
}

# The second chassis' daemons: the same binaries and options as the first's, with the OVS
# directories of ovs2/ (OVS_RUNDIR also tells ovn-controller where br-int.mgmt is; OVN_RUNDIR puts
# its control socket, ovn-controller.<pid>.ctl, there too: 23.03's has no --unixctl).
chassis2_env=(env "OVS_RUNDIR=$OVS2_DIR" "OVS_LOGDIR=$OVS2_DIR" "OVS_DBDIR=$OVS2_DIR" "OVS_SYSCONFDIR=$OVS2_DIR"
    "OVN_RUNDIR=$OVS2_DIR")
start_chassis2_ovsdb() {
    start_daemon "ovsdb-server (chassis 2 conf.db)" "$OVS2_DIR/ovsdb-server.log" \
        ovn_run "${chassis2_env[@]}" ovsdb-server "$OVS2_DB" --detach --no-chdir \
        --pidfile="$OVS2_DIR/ovsdb-server.pid" --log-file="$OVS2_DIR/ovsdb-server.log" \
        --unixctl="$OVS2_DIR/ovsdb-server.ctl" --remote="punix:$OVS2_SOCK"
}
start_chassis2_vswitchd() {
    start_daemon "ovs-vswitchd (chassis 2)" "$OVS2_DIR/ovs-vswitchd.log" \
        ip netns exec "$NS_CHASSIS2" "${OVN_PREFIX[@]}" "${chassis2_env[@]}" ovs-vswitchd "unix:$OVS2_SOCK" \
        --detach --no-chdir --pidfile="$OVS2_DIR/ovs-vswitchd.pid" --log-file="$OVS2_DIR/ovs-vswitchd.log" \
        --unixctl="$OVS2_DIR/ovs-vswitchd.ctl"
}
start_chassis2_controller() {
    start_daemon "ovn-controller (chassis 2)" "$OVS2_DIR/ovn-controller.log" \
        ip netns exec "$NS_CHASSIS2" "${OVN_PREFIX[@]}" "${chassis2_env[@]}" ovn-controller "unix:$OVS2_SOCK" \
        --detach --no-chdir --pidfile="$OVS2_DIR/ovn-controller.pid" --log-file="$OVS2_DIR/ovn-controller.log"
}

# frr_start NAME NETNS DIR: zebra + bgpd of one FRR instance, run as user frr inside NETNS, with
# their configuration, sockets, pid files and logs in DIR. They read DIR/zebra.conf and
# DIR/bgpd.conf at start: a restarted FRR has the operator configuration only.
frr_start() {
    local name=$1 ns=$2 dir=$3 run=$3/run daemon
    chown -R frr:frr "$dir"
    runuser -u frr -- test -w "$run" ||
        die "user frr cannot write $run: every parent of LAB_DIR must be searchable by others"
    for daemon in zebra bgpd; do
        local -a extra=()
        [[ $daemon = zebra ]] && extra=(-s 8388608)
        # -P 0: no TCP vty; -z: private zserv socket; --vty_socket: private vty socket dir.
        start_daemon "$name $daemon" "$dir/$daemon.log" \
            ip netns exec "$ns" "$FRR_BIN/$daemon" -d -u frr -g frr -P 0 "${extra[@]}" \
            --vty_socket "$run" -z "$run/zserv.api" -i "$run/$daemon.pid" \
            -f "$dir/$daemon.conf" --log "file:$dir/$daemon.log"
        wait_until "$name $daemon vty" "$dir/$daemon.log" \
            "$VTYSH" --vty_socket "$run" --config_dir "$dir" -d "$daemon" -c "show version"
    done
}

# tor_apply_evpn_vrfs: applies every VRF stanza tor-evpn.sh wrote for the ToR (after the ToR's
# FRR started: its zebra.conf/bgpd.conf hold only the lab's base configuration).
tor_apply_evpn_vrfs() {
    local file
    for file in "$TOR_EVPN_DIR"/vrf-*.conf; do
        [[ -e $file ]] || continue
        vtysh_tor -f "$file" >/dev/null || die "the ToR's FRR rejected $file"
    done
}

# stop_pidfile PIDFILE [GRACE]: end the lab daemon in PIDFILE: SIGTERM, SIGKILL after GRACE
# seconds (default 5; 0 = SIGKILL at once, a crash). Returns once it is gone. Nothing to do if
# it does not run; a pid that is not a lab process (recycled) is never signalled.
stop_pidfile() {
    local pidfile=$1 grace=${2:-5} pid deadline
    pid_alive "$pidfile" || return 0
    pid=$(<"$pidfile")
    if ((grace > 0)); then
        kill -TERM "$pid" 2>/dev/null || true
        deadline=$((SECONDS + grace))
        while proc_running "$pid" && ((SECONDS < deadline)); do sleep 0.05; done
        proc_running "$pid" && log "pid $pid ($(basename "$pidfile" .pid)) ignored SIGTERM for ${grace}s, sending SIGKILL"
    fi
    proc_running "$pid" && kill -KILL "$pid" 2>/dev/null
    local _
    for _ in $(seq 100); do proc_running "$pid" || return 0; sleep 0.05; done
    die "pid $pid ($pidfile) survived SIGKILL"
}
