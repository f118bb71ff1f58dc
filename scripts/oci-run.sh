#!/usr/bin/env bash
# Runs the agent's OCI image (scripts/package-oci.sh) with crun or runc, the way upstream's
# kolla/tripleo containers run ovn-bgp-agent: privileged, in the host's network (and UTS) namespace, with the
# configuration directory at /etc/ovn-bgp-agent and the host's FRR and OVS run directories bind
# mounted. For a machine without podman; with podman the same layout is the README's
# `podman run` line. The image must be unpacked first:
#
#   umoci unpack --image target/oci/ovn-bgp-agent:VERSION BUNDLE
#   scripts/oci-run.sh --bundle BUNDLE [OPTIONS] [-- AGENT ARGUMENTS...]
#
# Without agent arguments the image's own CMD runs (`--config-dir /etc/ovn-bgp-agent`); with them
# they replace the CMD (e.g. `-- status --socket /run/ovn-bgp-agent/control.sock`). The runtime
# stays in the foreground and passes signals on, so SIGTERM to this script's pid (the runtime's,
# after exec) stops the agent.
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
#   --runtime NAME     crun (default) or runc. Debian 12's crun 1.8 refuses hosts with cgroups in
#                      hybrid mode when the cgroup v2 tree has a controller ("cgroups in hybrid
#                      mode not supported"); runc runs there.
set -euo pipefail

die() {
    printf '[oci-run] ERROR: %s\n' "$*" >&2
    exit 1
}

bundle= name=ovn-bgp-agent-$$ state_dir=/run/ovn-bgp-agent-oci
config_dir=/etc/ovn-bgp-agent frr_run=/run/frr ovs_run=/run/openvswitch
rt_tables= run_dir= netns_dir= runtime=crun
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
    --runtime) runtime=${2:?} && shift ;;
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
case $runtime in
crun | runc) command -v "$runtime" >/dev/null || die "$runtime is not installed (scripts/install-deps.sh installs crun and runc)" ;;
*) die "--runtime: crun or runc, not $runtime" ;;
esac
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

# The agent arguments as a JSON array, one --arg each, so any argument survives as it is.
args='[]'
for arg in "$@"; do
    args=$(jq -c --arg a "$arg" '. + [$a]' <<<"$args")
done
# Every capability this process may pass on (its bounding set): what `privileged: true` gives
# upstream's container (a runtime refuses a capability outside its own bounding set).
all_caps=(CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_FSETID CAP_KILL CAP_SETGID
    CAP_SETUID CAP_SETPCAP CAP_LINUX_IMMUTABLE CAP_NET_BIND_SERVICE CAP_NET_BROADCAST CAP_NET_ADMIN
    CAP_NET_RAW CAP_IPC_LOCK CAP_IPC_OWNER CAP_SYS_MODULE CAP_SYS_RAWIO CAP_SYS_CHROOT CAP_SYS_PTRACE
    CAP_SYS_PACCT CAP_SYS_ADMIN CAP_SYS_BOOT CAP_SYS_NICE CAP_SYS_RESOURCE CAP_SYS_TIME
    CAP_SYS_TTY_CONFIG CAP_MKNOD CAP_LEASE CAP_AUDIT_WRITE CAP_AUDIT_CONTROL CAP_SETFCAP
    CAP_MAC_OVERRIDE CAP_MAC_ADMIN CAP_SYSLOG CAP_WAKE_ALARM CAP_BLOCK_SUSPEND CAP_AUDIT_READ
    CAP_PERFMON CAP_BPF CAP_CHECKPOINT_RESTORE)
bounding=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
caps=()
for i in "${!all_caps[@]}"; do
    (((bounding >> i) & 1)) && caps+=("${all_caps[$i]}")
done
caps=$(printf '%s\n' "${caps[@]}" | jq -Rsc 'split("\n")[:-1]')

# The per-run bundle: the image's runtime config (umoci wrote it from the image's ENTRYPOINT, CMD
# and ENV) made privileged, pointing at the unpacked rootfs, with only its own mount and IPC
# namespaces: the host's network (the agent configures it), UTS (the hostname names the chassis)
# and PID namespace (the agent tells a running FRR daemon from a dead one's leftover socket by
# the pid in its pid file; in a PID namespace of its own every daemon would look dead and every
# reconcile would re-apply all of FRR's configuration).
run_bundle=$state_dir/$name
mkdir -p "$run_bundle"
jq --arg root "$bundle/rootfs" --argjson args "$args" --argjson caps "$caps" --argjson mounts "$mounts" '
    .root = {path: $root, readonly: false}
    | .process.terminal = false
    | (if ($args | length) > 0 then .process.args = [.process.args[0]] + $args else . end)
    | .process.capabilities = {bounding: $caps, effective: $caps, permitted: $caps, inheritable: $caps, ambient: $caps}
    | .process.noNewPrivileges = false
    | del(.process.apparmorProfile, .process.selinuxLabel, .linux.seccomp)
    | .linux.namespaces |= map(select(.type == "mount" or .type == "ipc"))
    | .linux.maskedPaths = [] | .linux.readonlyPaths = []
    | del(.linux.uidMappings, .linux.gidMappings)
    | .hostname = null | del(.hostname)
    | .mounts |= map(if .destination == "/sys" then .options -= ["ro"] else . end)
    | .mounts += $mounts
' "$bundle/config.json" >"$run_bundle/config.json"

exec "$runtime" run --bundle "$run_bundle" "$name"
