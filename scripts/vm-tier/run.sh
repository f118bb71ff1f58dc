#!/usr/bin/env bash
# Runs one command as root inside a VM booted from the stock Debian kernel (prepared by prepare.sh),
# with the host's / visible read-only under a writable tmpfs overlay. Prints the command's output as it
# runs and exits with the command's exit code.
#
#   sudo scripts/vm-tier/run.sh [-e NAME=VALUE]... [--] COMMAND [ARG]...
#
# The command runs in the current directory (same path inside the VM) with VM_TIER=1, VM_EXCHANGE (a
# directory shared with the host, kept after the run when VM_KEEP=1), VM_TIER_ACCEL (kvm|tcg),
# VM_TIER_TIME_SCALE (multiply timeouts by it) and every -e variable set.
#
# Exit codes: the payload's own; 124 when it hung past VM_TIMEOUT seconds (default 600; qemu is killed);
# 125 when the VM failed before or around the payload (no exit code came back).
#
# Environment: VM_TIMEOUT, VM_ACCEL (kvm|tcg, overrides the probe), VM_MEMORY (2G), VM_CPUS (2),
# VM_CPU_MODEL (TCG -cpu, default max), VM_TIME_SCALE (default 20 under TCG, 2 under KVM),
# VM_KEEP=1 (keep the exchange directory and console log), VM_CACHE.
set -euo pipefail
# shellcheck source=scripts/vm-tier/lib.sh
. "$(dirname "$0")/lib.sh"
vm_require_root

usage() { vm_die "usage: $0 [-e NAME=VALUE]... [--] COMMAND [ARG]..."; }

payload_env=()
while [ $# -gt 0 ]; do
    case "$1" in
        -e)
            [ $# -ge 2 ] || usage
            [[ "$2" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || vm_die "-e wants NAME=VALUE, got '$2'"
            payload_env+=("$2")
            shift 2
            ;;
        --) shift; break ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || usage

[ -f "$VM_STATE_FILE" ] || vm_die "the VM tier is not prepared: run scripts/vm-tier/prepare.sh first"
# shellcheck disable=SC1090
. "$VM_STATE_FILE"
for file in "$KERNEL_IMAGE" "$INITRAMFS" "$MODULES_DIR/modules.dep"; do
    [ -f "$file" ] || vm_die "$file is missing: rerun scripts/vm-tier/prepare.sh"
done

workdir=$(pwd -P)
# The VM mounts fresh tmpfs on /tmp and /run: a working tree there (a CI clone in /tmp, say) is
# bind-mounted back from the host root share by the VM's init (listed in host-binds).
host_binds=()
case "$workdir/" in
    /tmp/* | /run/*) host_binds+=("$workdir") ;;
    /proc/* | /sys/* | /dev/*)
        vm_die "the current directory $workdir is not visible in the VM (its /proc, /sys, /dev are its own)" ;;
esac

accel=${VM_ACCEL:-$ACCEL}
timeout=${VM_TIMEOUT:-600}
[[ "$timeout" =~ ^[0-9]+$ ]] || vm_die "VM_TIMEOUT must be whole seconds, got '$timeout'"

exchange=$(mktemp -d /tmp/vm-tier.XXXXXX)
printf '%s\n' "${host_binds[@]}" > "$exchange/host-binds"
console_log="$exchange/console.log"
qemu_pid=
tail_pid=

cleanup() {
    if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
        kill -KILL "$qemu_pid" 2>/dev/null || true
        wait "$qemu_pid" 2>/dev/null || true
    fi
    if [ -n "$tail_pid" ] && kill -0 "$tail_pid" 2>/dev/null; then
        kill "$tail_pid" 2>/dev/null || true
    fi
    if [ "${VM_KEEP:-0}" = 1 ]; then
        vm_log "kept $exchange (console.log, output.log, exit-code)"
    else
        rm -rf "$exchange"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Single-quote for /bin/sh (dash) in the VM.
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
# How much slower than the host a payload should expect to be: tests multiply their timeouts (and the
# agent's timers) by it. Measured under TCG here: exec 15-20x, shell arithmetic 30x (docs/vm-tier.md).
case "$accel" in
    kvm) time_scale=${VM_TIME_SCALE:-2} ;;
    *) time_scale=${VM_TIME_SCALE:-20} ;;
esac
[[ "$time_scale" =~ ^[0-9]+$ ]] || vm_die "VM_TIME_SCALE must be a whole number, got '$time_scale'"
{
    echo "# written by scripts/vm-tier/run.sh"
    printf 'export VM_TIER_ACCEL=%s VM_TIER_TIME_SCALE=%s\n' "$accel" "$time_scale"
    for assignment in "${payload_env[@]}"; do
        printf 'export %s=%s\n' "${assignment%%=*}" "$(quote "${assignment#*=}")"
    done
    printf 'cd %s || exit 125\n' "$(quote "$workdir")"
    printf 'exec'
    for word in "$@"; do printf ' %s' "$(quote "$word")"; done
    printf '\n'
} > "$exchange/payload.sh"
: > "$exchange/output.log"

vm_qemu_command "$accel" "$KERNEL_IMAGE" "$INITRAMFS" "$console_log" "$exchange" ""
vm_log "booting $KVER ($accel, ${VM_CPUS:-2} CPUs, ${VM_MEMORY:-2G}, timeout ${timeout}s): $*"
started=$SECONDS
# The parent-death signal ends qemu even when this script is SIGKILLed and its EXIT trap cannot run.
setpriv --pdeathsig KILL -- "${QEMU_CMD[@]}" > "$exchange/qemu.log" 2>&1 < /dev/null &
qemu_pid=$!
vm_log "qemu pid $qemu_pid, exchange $exchange"
# The payload's output, live: the exchange share is a plain host directory.
tail -n +1 -F --pid="$qemu_pid" "$exchange/output.log" 2>/dev/null &
tail_pid=$!

hung=0
while kill -0 "$qemu_pid" 2>/dev/null; do
    if [ $((SECONDS - started)) -ge "$timeout" ]; then
        hung=1
        kill -KILL "$qemu_pid" 2>/dev/null || true
        break
    fi
    sleep 0.5
done
qemu_status=0
wait "$qemu_pid" 2>/dev/null || qemu_status=$?
qemu_pid=
wait "$tail_pid" 2>/dev/null || true
tail_pid=
elapsed=$((SECONDS - started))

console_tail() {
    echo "---- last console lines (VM_KEEP=1 keeps the whole log) ----"
    tail -n 40 "$console_log" 2>/dev/null || true
    if [ -s "$exchange/qemu.log" ]; then
        echo "---- qemu ----"
        cat "$exchange/qemu.log"
    fi
    echo "----"
}

if [ "$hung" = 1 ]; then
    vm_log "payload hung: no exit after ${timeout}s (VM_TIMEOUT); qemu killed"
    console_tail >&2
    exit 124
fi
if [ -f "$exchange/exit-code" ]; then
    status=$(cat "$exchange/exit-code")
    boot=$(sed -n 's/.*starting payload at uptime \([0-9.]*\).*/\1/p' "$console_log")
    vm_log "payload exited with $status; VM wall time ${elapsed}s (kernel boot to payload start: ${boot:-?}s)"
    exit "$status"
fi
if [ -f "$exchange/init-error" ]; then
    vm_log "the VM failed before the payload: $(cat "$exchange/init-error")"
else
    vm_log "the VM stopped after ${elapsed}s (qemu status $qemu_status) without the payload's exit code"
fi
console_tail >&2
exit 125
