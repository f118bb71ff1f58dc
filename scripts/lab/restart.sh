#!/usr/bin/env bash
# Stop one daemon of the lab started by up.sh and start it again with exactly the command line
# up.sh used (both take it from lib.sh), to test how the agent survives restarts and crashes.
#
#   restart.sh [--kill] [--down | --up] COMPONENT
#
# COMPONENT: sb nb northd ovs-vswitchd ovn-controller frr-chassis frr-tor
#            ovs-vswitchd-2 ovn-controller-2     (second chassis only: LAB_CHASSIS2=1 up.sh)
#            sb-1 sb-2 sb-3 sb-leader      (SB RAFT cluster only: LAB_SB_CLUSTER=3 up.sh)
#   sb            the SB server (all members of the cluster, one after the other)
#   nb            the NB server (ovsdb-server-nb; its database file keeps the rows)
#   sb-N          SB cluster member N
#   sb-leader     whichever member is the RAFT leader now; prints "sb-N" on stdout, so
#                 `restart.sh --down sb-leader` followed by `restart.sh --up sb-N` brings it back
#   frr-chassis   zebra + bgpd of the chassis; they read zebra.conf/bgpd.conf at start, so they
#                 come back with the operator configuration only (not what the agent added)
#   frr-tor       the same for the ToR, plus the EVPN VRFs tor-evpn.sh gave it (LAB_EVPN=1)
#   ovs-vswitchd  also brings br-ex (and br-phy, with a second chassis) up again once
#                 ovs-vswitchd re-created it (see lib.sh)
#
# --kill   SIGKILL at once (a crash) instead of SIGTERM (SIGKILL after 5 s)
# --exit   ovn-controller, ovn-controller-2 only: stop it the way `ovn-ctl stop_controller`
#          (systemctl stop ovn-controller) does, `ovs-appctl -t ovn-controller exit`: it removes
#          its chassis from SB (Chassis, Encap, its tunnels) before it ends. SIGTERM and SIGKILL
#          leave the chassis registered.
# --down   only stop it
# --up     only start it (it must not be running)
#
# Only the pid in the component's pid file under $LAB_DIR is signalled (never by name).
set -euo pipefail

LAB_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lab/lib.sh
source "$LAB_SCRIPTS/lib.sh"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

grace=5 do_stop=1 do_start=1 unregister=0 component=""
while (($#)); do
    case $1 in
    --kill) grace=0 ;;
    --exit) unregister=1 ;;
    --down) do_start=0 ;;
    --up) do_stop=0 ;;
    -h | --help) usage ;;
    -*) echo "unknown option $1" >&2 && usage ;;
    *)
        [[ -z $component ]] || usage
        component=$1
        ;;
    esac
    shift
done
[[ -n $component ]] || usage
((do_stop || do_start)) || die "--down and --up exclude each other"
((unregister && !grace)) && die "--exit and --kill exclude each other"

[[ $(id -u) -eq 0 ]] || die "restart.sh must run as root"
load_lab_settings
ovs_env

# The pid files of the component, in stop order.
pidfiles_of() {
    case $1 in
    nb) echo "$OVN_DIR/ovsdb-server-nb.pid" ;;
    sb)
        if sb_clustered; then
            local n
            for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do sb_member_pidfile "$n"; echo; done
        else
            echo "$OVN_DIR/ovsdb-server-sb.pid"
        fi
        ;;
    sb-[0-9]) sb_member_pidfile "${1#sb-}" && echo ;;
    northd) echo "$OVN_DIR/ovn-northd.pid" ;;
    ovs-vswitchd) echo "$OVS_DIR/ovs-vswitchd.pid" ;;
    ovn-controller) echo "$OVN_DIR/ovn-controller.pid" ;;
    ovs-vswitchd-2) echo "$OVS2_DIR/ovs-vswitchd.pid" ;;
    ovn-controller-2) echo "$OVS2_DIR/ovn-controller.pid" ;;
    frr-chassis) printf '%s\n' "$VTY_CHASSIS/bgpd.pid" "$VTY_CHASSIS/zebra.pid" ;;
    frr-tor) printf '%s\n' "$VTY_TOR/bgpd.pid" "$VTY_TOR/zebra.pid" ;;
    esac
}

start_component() {
    case $1 in
    nb) start_nb_db ;;
    sb) start_sb_db ;;
    sb-[0-9]) start_sb_member "${1#sb-}" ;;
    northd) start_northd ;;
    ovs-vswitchd)
        start_ovs_vswitchd
        bring_up_br_ex
        if ((LAB_CHASSIS2)); then
            bring_up_tunnel_bridge "$NS_CHASSIS" "$CHASSIS_TUNNEL_IP4" "$OVS_DIR/ovs-vswitchd.log"
        fi
        ;;
    ovn-controller) start_ovn_controller ;;
    ovs-vswitchd-2)
        start_chassis2_vswitchd
        bring_up_tunnel_bridge "$NS_CHASSIS2" "$CHASSIS2_ENCAP_IP4" "$OVS2_DIR/ovs-vswitchd.log"
        ;;
    ovn-controller-2) start_chassis2_controller ;;
    frr-chassis) frr_start chassis "$NS_CHASSIS" "$FRR_CHASSIS_DIR" ;;
    frr-tor)
        frr_start tor "$NS_TOR" "$FRR_TOR_DIR"
        tor_apply_evpn_vrfs
        ;;
    esac
}

case $component in
sb-leader | sb-[0-9])
    sb_clustered || die "$component: this lab's SB is not a cluster (start it with LAB_SB_CLUSTER=3 up.sh)"
    ;;&
sb-leader)
    ((do_start && !do_stop)) && die "--up needs a member (sb-N): the leader is whoever leads now"
    leader=""
    for ((n = 1; n <= LAB_SB_CLUSTER; n++)); do
        [[ $(sb_member_role "$n") == leader ]] && leader=$n
    done
    [[ -n $leader ]] || die "no SB member is the leader now (ovs-appctl cluster/status OVN_Southbound)"
    log "SB leader is member $leader"
    component=sb-$leader
    echo "$component"
    ;;
sb-[0-9])
    n=${component#sb-}
    ((n >= 1 && n <= LAB_SB_CLUSTER)) || die "$component: the cluster has members 1..$LAB_SB_CLUSTER"
    ;;
ovs-vswitchd-2 | ovn-controller-2)
    ((LAB_CHASSIS2)) || die "$component: this lab has no second chassis (start it with LAB_CHASSIS2=1 up.sh)"
    ;;
sb | nb | northd | ovs-vswitchd | ovn-controller | frr-chassis | frr-tor) ;;
*) die "unknown component $component (see restart.sh --help)" ;;
esac

# unregister_ovn_controller PIDFILE RUNDIR: `exit` through its control socket (RUNDIR/
# ovn-controller.<pid>.ctl: OVN 23.03's ovn-controller has no --unixctl), then wait until it ended.
unregister_ovn_controller() {
    local pidfile=$1 rundir=$2 pid
    pid_alive "$pidfile" || { log "$(basename "$pidfile" .pid) is not running"; return 0; }
    pid=$(<"$pidfile")
    log "unregistering ovn-controller (pid $pid) from SB: ovs-appctl exit"
    ovs-appctl -t "$rundir/ovn-controller.$pid.ctl" exit ||
        die "ovn-controller (pid $pid) did not take exit on $rundir/ovn-controller.$pid.ctl"
    local deadline=$((SECONDS + LAB_TIMEOUT))
    while proc_running "$pid"; do
        ((SECONDS < deadline)) || die "ovn-controller (pid $pid) still runs ${LAB_TIMEOUT}s after exit"
        sleep 0.05
    done
}

if ((do_stop && unregister)); then
    case $component in
    ovn-controller) unregister_ovn_controller "$OVN_DIR/ovn-controller.pid" "$OVN_DIR" ;;
    ovn-controller-2) unregister_ovn_controller "$OVS2_DIR/ovn-controller.pid" "$OVS2_DIR" ;;
    *) die "--exit is for ovn-controller and ovn-controller-2, not $component" ;;
    esac
elif ((do_stop)); then
    mapfile -t pidfiles < <(pidfiles_of "$component")
    for f in "${pidfiles[@]}"; do
        if pid_alive "$f"; then
            log "$( ((grace)) && echo stopping || echo killing) $(basename "$f" .pid) (pid $(<"$f"))"
            stop_pidfile "$f" "$grace"
        else
            log "$(basename "$f" .pid) is not running"
        fi
    done
fi

if ((do_start)); then
    mapfile -t pidfiles < <(pidfiles_of "$component")
    for f in "${pidfiles[@]}"; do
        pid_alive "$f" && die "$(basename "$f" .pid) runs (pid $(<"$f")); stop it first (without --up)"
    done
    log "starting $component"
    start_component "$component"
    if [[ $component == sb* ]] && sb_clustered; then
        wait_until "an SB leader after starting $component" "" sb_cluster_has_leader
    fi
    log "$component runs again"
fi
