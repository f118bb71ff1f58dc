#!/usr/bin/env bash
# Stop the lab started by up.sh in $LAB_DIR: end exactly the processes whose pid files are under
# $LAB_DIR (never by name), delete the lab's two network namespaces (and with them the veth pair
# and every device inside), remove $LAB_DIR. Safe to run twice, and after a failed up.sh.
set -euo pipefail

LAB_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lab/lib.sh
source "$LAB_SCRIPTS/lib.sh"

[[ $(id -u) -eq 0 ]] || die "down.sh must run as root"

# Only the namespaces up.sh recorded as created by it are deleted, whatever LAB_NS_PREFIX says.
lab_namespaces=()
OVN_ROOT=""
if [[ -f $LAB_ENV ]]; then
    mapfile -t lab_namespaces < <(sed -n 's/^NS_\(CHASSIS\|CHASSIS2\|TOR\)=//p' "$LAB_ENV")
    # LAB_OVN=25.03: the chroot whose mounts (private to the daemons) must be gone at the end.
    OVN_ROOT=$(sed -n 's/^OVN_ROOT=//p' "$LAB_ENV" | tail -n 1)
elif netns_exists "$NS_CHASSIS" || netns_exists "$NS_TOR"; then
    log "no $LAB_ENV: not deleting $NS_CHASSIS/$NS_TOR, this LAB_DIR did not record creating them"
fi

if [[ -d $LAB_DIR ]]; then
    mapfile -t pidfiles < <(find "$LAB_DIR" -name '*.pid' -type f 2>/dev/null | sort)
    declare -a pids=()
    for f in "${pidfiles[@]}"; do
        if pid_alive "$f"; then
            pid=$(<"$f")
            log "stopping $(basename "$f" .pid) (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    deadline=$((SECONDS + 5))
    for pid in "${pids[@]}"; do
        while proc_running "$pid" && ((SECONDS < deadline)); do
            sleep 0.05
        done
        if proc_running "$pid"; then
            log "pid $pid ignored SIGTERM for 5 s, sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    for pid in "${pids[@]}"; do
        # Wait for SIGKILLed processes too, so the namespaces are free when we delete them.
        for _ in $(seq 50); do proc_running "$pid" || break; sleep 0.05; done
        proc_running "$pid" && die "pid $pid survived SIGKILL"
    done
fi

for ns in "${lab_namespaces[@]}"; do
    if netns_exists "$ns"; then
        log "deleting netns $ns"
        ip netns del "$ns"
    fi
done

if [[ -d $LAB_DIR ]]; then
    if [[ -f $LAB_DIR/$LAB_MARKER ]]; then
        log "removing $LAB_DIR"
        rm -rf -- "$LAB_DIR"
    else
        log "not removing $LAB_DIR: it has no $LAB_MARKER marker, so up.sh did not create it"
    fi
fi
# The chroot's mounts live in the daemons' own mount namespaces and end with them; a process
# still holding one is something this lab started and could not stop.
holders=$(lab_mount_holders | tr '\n' ' ')
[[ -z $holders ]] || die "processes $holders still hold mounts of $OVN_ROOT$LAB_DIR"
# The (empty) mount point ovn-chroot.sh made for LAB_DIR inside the chroot.
[[ -z $OVN_ROOT ]] || rmdir -- "$OVN_ROOT$LAB_DIR" 2>/dev/null || true

log "lab down"
