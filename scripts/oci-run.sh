#!/usr/bin/env bash
# Runs the agent's OCI image (scripts/package-oci.sh) with crun, the way upstream's kolla/tripleo
# containers run ovn-bgp-agent: privileged, in the host's network (and UTS) namespace, with the
# configuration directory at /etc/ovn-bgp-agent and the host's FRR and OVS run directories bind
# mounted. For a machine without podman; with podman the same layout is the README's
# `podman run` line. The image must be unpacked first:
#
#   umoci unpack --image target/oci/ovn-bgp-agent:VERSION BUNDLE
#   scripts/oci-run.sh --bundle BUNDLE [OPTIONS] [-- AGENT ARGUMENTS...]
#
# Without agent arguments the image's own CMD runs (`--config-dir /etc/ovn-bgp-agent`); with them
# they replace the CMD (e.g. `-- status --socket /run/ovn-bgp-agent/control.sock`). The runtime
# stays in the foreground and passes signals on, so SIGTERM to this script's pid (crun's, after
# exec) stops the agent.
#
# Options (host path -> path in the container):
#   --config-dir DIR   -> /etc/ovn-bgp-agent, read-only (default /etc/ovn-bgp-agent)
#   --frr-run DIR      -> /run/frr, FRR's vty sockets (default /run/frr)
#   --ovs-run DIR      -> /run/openvswitch (default /run/openvswitch)
#   --rt-tables FILE   -> /etc/iproute2/rt_tables, a single-file bind mount (default: not mounted)
#   --run-dir DIR      -> /run/ovn-bgp-agent, the control socket (default: the container's own)
#   --netns-dir DIR    -> /run/netns, for [linux] netns (default: not mounted)
#   --name NAME        the container's name (default ovn-bgp-agent-<pid>)
#   --state-dir DIR    where the per-run bundle (config.json) is written (default /run/ovn-bgp-agent-oci)
#   --no-cgroups       crun --cgroup-manager=disabled, for hosts where crun cannot create cgroups
set -euo pipefail

die() {
    printf '[oci-run] ERROR: %s\n' "$*" >&2
    exit 1
}

bundle= name=ovn-bgp-agent-$$ state_dir=/run/ovn-bgp-agent-oci
config_dir=/etc/ovn-bgp-agent frr_run=/run/frr ovs_run=/run/openvswitch
rt_tables= run_dir= netns_dir= cgroups=(--cgroup-manager=cgroupfs)
while (($#)); do
    case $1 in
    --bundle) bundle=${2:?} && shift ;;
    --config-dir) config_dir=${2:?} && shift ;;
    --frr-run) frr_run=${2:?} && shift ;;
    --ovs-run) ovs_run=${2:?} && shift ;;
    --rt-tables) rt_tables=${2:?} && shift ;;
    --run-dir) run_dir=${2:?} && shift ;;
    --netns-dir) netns_dir=${2:?} && shift ;;
    --name) name=${2:?} && shift ;;
    --state-dir) state_dir=${2:?} && shift ;;
    --no-cgroups) cgroups=(--cgroup-manager=disabled) ;;
    --) shift && break ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
        exit 0
        ;;
    *) die "unknown option $1 (agent arguments go after --)" ;;
    esac
    shift
done

[[ $(id -u) -eq 0 ]] || die "must run as root (a privileged container, as upstream's)"
command -v crun >/dev/null || die "crun is not installed (scripts/install-deps.sh installs it)"
[[ -n $bundle && -f $bundle/config.json && -d $bundle/rootfs ]] ||
    die "--bundle: a directory from 'umoci unpack' (config.json and rootfs/), got '$bundle'"
bundle=$(realpath "$bundle")

# bind HOST CONTAINER [ro]: one bind mount; a missing host path is an error, never skipped.
mounts='[]'
bind() {
    [[ -e $1 ]] || die "$1 does not exist (bind mount to $2)"
    local opts='["rbind","rslave"]'
    [[ ${3:-} == ro ]] && opts='["rbind","rslave","ro"]'
    mounts=$(jq -c --arg s "$(realpath "$1")" --arg d "$2" --argjson o "$opts" \
        '. + [{destination: $d, type: "bind", source: $s, options: $o}]' <<<"$mounts")
}
bind "$config_dir" /etc/ovn-bgp-agent ro
bind "$frr_run" /run/frr
bind "$ovs_run" /run/openvswitch
[[ -z $rt_tables ]] || bind "$rt_tables" /etc/iproute2/rt_tables
[[ -z $run_dir ]] || bind "$run_dir" /run/ovn-bgp-agent
[[ -z $netns_dir ]] || bind "$netns_dir" /run/netns

args=$(jq -c '$ARGS.positional' --args -- "$@")
# Every capability this kernel knows: what `privileged: true` gives upstream's container.
caps=$(jq -c -n --argjson last "$(cat /proc/sys/kernel/cap_last_cap)" '[
    "CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_DAC_READ_SEARCH","CAP_FOWNER","CAP_FSETID","CAP_KILL",
    "CAP_SETGID","CAP_SETUID","CAP_SETPCAP","CAP_LINUX_IMMUTABLE","CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST","CAP_NET_ADMIN","CAP_NET_RAW","CAP_IPC_LOCK","CAP_IPC_OWNER",
    "CAP_SYS_MODULE","CAP_SYS_RAWIO","CAP_SYS_CHROOT","CAP_SYS_PTRACE","CAP_SYS_PACCT",
    "CAP_SYS_ADMIN","CAP_SYS_BOOT","CAP_SYS_NICE","CAP_SYS_RESOURCE","CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG","CAP_MKNOD","CAP_LEASE","CAP_AUDIT_WRITE","CAP_AUDIT_CONTROL",
    "CAP_SETFCAP","CAP_MAC_OVERRIDE","CAP_MAC_ADMIN","CAP_SYSLOG","CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND","CAP_AUDIT_READ","CAP_PERFMON","CAP_BPF","CAP_CHECKPOINT_RESTORE"][0:$last + 1]')

# The per-run bundle: the image's runtime config (umoci wrote it from the image's ENTRYPOINT, CMD
# and ENV) made privileged with the host's network, pointing at the unpacked rootfs.
run_bundle=$state_dir/$name
mkdir -p "$run_bundle"
jq --arg root "$bundle/rootfs" --argjson args "$args" --argjson caps "$caps" --argjson mounts "$mounts" '
    .root = {path: $root, readonly: false}
    | .process.terminal = false
    | (if ($args | length) > 0 then .process.args = [.process.args[0]] + $args else . end)
    | .process.capabilities = {bounding: $caps, effective: $caps, permitted: $caps, inheritable: $caps, ambient: $caps}
    | .process.noNewPrivileges = false
    | del(.process.apparmorProfile, .process.selinuxLabel, .linux.seccomp)
    | .linux.namespaces |= map(select(.type != "network" and .type != "uts" and .type != "user" and .type != "cgroup"))
    | .linux.maskedPaths = [] | .linux.readonlyPaths = []
    | del(.linux.uidMappings, .linux.gidMappings)
    | .hostname = null | del(.hostname)
    | .mounts |= map(if .destination == "/sys" then .options -= ["ro"] else . end)
    | .mounts += $mounts
' "$bundle/config.json" >"$run_bundle/config.json"

exec crun "${cgroups[@]}" run --bundle "$run_bundle" "$name"
