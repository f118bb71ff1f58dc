#!/usr/bin/env bash
# The OCI image, end to end: built (scripts/package-oci.sh), unpacked with umoci, and run with
# crun, or runc where crun cannot run (scripts/oci-run.sh), the way upstream's containers run the
# agent, against the lab with the NB driver, until the ToR has learned every route the demo expects.
#
#   sudo scripts/test-oci.sh                 # build the image, then run it
#   sudo scripts/test-oci.sh --no-build      # run the image already in target/oci/
#
# The container gets only the upstream layout: the configuration directory at /etc/ovn-bgp-agent
# (the image's default CMD `--config-dir /etc/ovn-bgp-agent`, no arguments), the chassis FRR's vty
# socket directory at /run/frr, the OVS run directory at /run/openvswitch, rt_tables as a single
# bind-mounted file, /run/netns (the lab's chassis is a netns: [linux] netns), /run/ovn-bgp-agent
# for the control socket, the OVN databases over TCP on the host network. The configuration is the
# lab's with every path rewritten to those, and the test fails if one still names the lab's
# directory. So vtysh and the OVS tools that configure the chassis are the image's own.
# LAB_DIR defaults to /tmp/ovn-bgp-oci; run it under the lab lock like the other lab users:
#   flock /tmp/ovn-bgp-daemons.lock scripts/test-oci.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export LAB_DIR=${LAB_DIR:-/tmp/ovn-bgp-oci}
build=1
[ "${1:-}" = "--no-build" ] && build=0

step() { printf '\n==> %s\n' "$*"; }
fail() {
    printf 'test-oci: FAILED: %s\n' "$*" >&2
    exit 1
}
[ "$(id -u)" = 0 ] || fail "run as root (the lab creates network namespaces, an OCI runtime runs the image)"
started=$SECONDS

if [ "$build" = 1 ]; then
    step "building the image"
    scripts/package-oci.sh
fi
layout=target/oci/ovn-bgp-agent
version=$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"]' "$layout/index.json")
[ -n "$version" ] && [ "$version" != null ] || fail "$layout has no tagged image (run scripts/package-oci.sh)"

step "checking the image config (skopeo) and unpacking it (umoci)"
config=$(skopeo inspect --config "oci:$layout:$version")
entrypoint=$(jq -c .config.Entrypoint <<<"$config")
cmd=$(jq -c .config.Cmd <<<"$config")
label=$(jq -r '.config.Labels["org.opencontainers.image.version"]' <<<"$config")
echo "entrypoint $entrypoint, cmd $cmd, version label $label"
[ "$entrypoint" = '["/usr/bin/ovn-bgp-agent"]' ] || fail "entrypoint is $entrypoint"
[ "$cmd" = '["--config-dir","/etc/ovn-bgp-agent"]' ] || fail "cmd is $cmd"
[ "$label" = "$version" ] || fail "version label $label, tag $version"
bundle=target/oci/bundle
rm -rf -- "$bundle"
umoci unpack --image "$layout:$version" "$bundle" >/dev/null
for tool in usr/bin/vtysh usr/bin/ovs-vsctl usr/bin/ovs-ofctl usr/bin/ovs-appctl usr/bin/ovn-bgp-agent; do
    [ -x "$bundle/rootfs/$tool" ] || fail "the image has no /$tool"
done

# The OCI runtime: crun where it runs (OCI_RUNTIME=crun|runc forces one), else runc; the probe
# runs the image's agent with --version in a container with the same mounts as the test's.
probe_dir=$(mktemp -d)
probe() {
    timeout 60 scripts/oci-run.sh --runtime "$1" --bundle "$bundle" --name "ovn-bgp-agent-probe-$$" \
        --state-dir "$probe_dir" --config-dir "$probe_dir" --frr-run "$probe_dir" --ovs-run "$probe_dir" -- --version
}
runtime=${OCI_RUNTIME:-}
if [ -z "$runtime" ]; then
    if out=$(probe crun 2>&1); then
        runtime=crun
    else
        echo "crun cannot run containers here: $out"
        runtime=runc
    fi
fi
out=$(probe "$runtime" 2>&1) || fail "$runtime cannot run the image: $out"
rm -rf -- "$probe_dir"
echo "runtime $runtime: the image's agent says: $out"

cleanup() {
    local rc=$?
    if [ "$rc" != 0 ]; then
        echo "--- last lines of $LAB_DIR/agent.log" >&2
        tail -n 30 "$LAB_DIR/agent.log" >&2 || true
    fi
    scripts/lab/down.sh >/dev/null 2>&1 || echo "scripts/lab/down.sh failed; LAB_DIR=$LAB_DIR scripts/lab/down.sh" >&2
    if [ -n "${name:-}" ] && "$runtime" state "$name" >/dev/null 2>&1; then
        echo "test-oci: container $name survived the lab's teardown" >&2
        rc=1
    fi
    exit "$rc"
}
trap cleanup EXIT

step "bringing up the lab in $LAB_DIR"
scripts/lab/up.sh >/dev/null
# shellcheck disable=SC1091
source "$LAB_DIR/lab.env"
ovn-nbctl --db="unix:$NB_SOCK" set NB_Global . 'external_ids:"neutron:fip-distributed"=False'

step "writing the container's /etc/ovn-bgp-agent"
etc=$LAB_DIR/oci/etc
run=$LAB_DIR/oci/run
mkdir -p "$etc" "$run"
sed -e '/^#/d' -e "s|^ovn_nb_connection = .*|ovn_nb_connection = $NB_TCP|" \
    -e "s|^ovn_sb_connection = .*|ovn_sb_connection = $SB_TCP|" \
    -e "s|^ovsdb_connection = .*|ovsdb_connection = unix:/run/openvswitch/db.sock|" \
    -e "s|^vtysh_path = .*|vtysh_path = /usr/bin/vtysh|" \
    -e "s|^vty_socket_dir = .*|vty_socket_dir = /run/frr|" \
    -e "s|^ovs_rundir = .*|ovs_rundir = /run/openvswitch|" \
    -e "s|^rt_tables_path = .*|rt_tables_path = /etc/iproute2/rt_tables|" \
    -e "s|^control_socket = .*|control_socket = /run/ovn-bgp-agent/control.sock|" \
    "$AGENT_CONF" >"$etc/bgp-agent.conf"
# A second file in the directory, as deployments split theirs: --config-dir reads every *.conf.
printf '[DEFAULT]\ndriver = nb_ovn_bgp_driver\n' >"$etc/zz-driver.conf"
if grep -nF "$LAB_DIR" "$etc"/*.conf; then
    fail "the container's configuration still names $LAB_DIR (above): the layout is not what is tested"
fi

step "running the image with $runtime: default CMD, host network, the upstream bind mounts"
name=ovn-bgp-agent-oci-test
# The pid file and the state directory are under LAB_DIR, so scripts/lab/down.sh stops the
# runtime with the lab (it passes SIGTERM on to the agent).
scripts/oci-run.sh --runtime "$runtime" --bundle "$bundle" --name "$name" --state-dir "$LAB_DIR/oci" \
    --config-dir "$etc" --frr-run "$VTY_CHASSIS" --ovs-run "$OVS_RUNDIR" --rt-tables "$RT_TABLES" \
    --run-dir "$run" --netns-dir /run/netns >"$LAB_DIR/agent.log" 2>&1 &
echo $! >"$LAB_DIR/agent.pid"

scripts/lab/wait-routes.sh "$LAB_DIR/agent.pid" "$LAB_DIR/agent.log"

step "the agent runs inside the container: own mount namespace, the host's network namespace"
agent_pid=$("$runtime" state "$name" | jq -r .pid)
cmdline=$(tr '\0' ' ' <"/proc/$agent_pid/cmdline")
echo "container pid $agent_pid: $cmdline"
[ "$cmdline" = '/usr/bin/ovn-bgp-agent --config-dir /etc/ovn-bgp-agent ' ] || fail "pid $agent_pid is not the image's default command"
[ "$(readlink "/proc/$agent_pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] || fail "the agent shares the host's mount namespace"
[ "$(readlink "/proc/$agent_pid/ns/net")" = "$(readlink /proc/self/ns/net)" ] || fail "the agent is not in the host's network namespace"

step "the image's OVS tools and vtysh did the work (the agent's tool metrics)"
metrics=$(curl -fsS "http://$AGENT_METRICS/metrics")
for tool in vtysh ovs-vsctl ovs-ofctl; do
    runs=$(awk -v t="$tool" 'index($0, "ovn_bgp_agent_subprocess_runs_total{") == 1 && index($0, "tool=\"" t "\"") && index($0, "result=\"ok\"") { s += $NF } END { print s + 0 }' <<<"$metrics")
    echo "$tool: $runs successful runs"
    [ "$runs" -gt 0 ] || fail "no successful $tool run in the container"
done
curl -fsS "http://$AGENT_METRICS/readyz" >/dev/null || fail "/readyz is not 200"

step "rt_tables, a single bind-mounted file, got the agent's table for br-ex"
# up.sh wrote only the reserved tables; the agent appends one per provider bridge (br-ex).
grep -E '^[0-9]+[[:space:]]+br-ex$' "$RT_TABLES" || fail "$RT_TABLES has no table for br-ex"

step "ovn-bgp-agent status in a second container, over the control socket in /run/ovn-bgp-agent"
status=$(scripts/oci-run.sh --runtime "$runtime" --bundle "$bundle" --name "$name-status" --state-dir "$LAB_DIR/oci" \
    --config-dir "$etc" --frr-run "$VTY_CHASSIS" --ovs-run "$OVS_RUNDIR" --run-dir "$run" \
    -- status --socket /run/ovn-bgp-agent/control.sock)
echo "$status"
grep -qF "$FIP_IP4" <<<"$status" || fail "status does not list the FIP $FIP_IP4"

step "done in $((SECONDS - started)) s"
