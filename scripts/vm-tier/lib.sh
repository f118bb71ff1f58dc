# Shared settings of the full-kernel VM tier; sourced by prepare.sh, run.sh and test.sh.
# shellcheck shell=bash

# Where the extracted Debian kernel, its modules, the initramfs and the KVM probe result live.
VM_CACHE=${VM_CACHE:-/var/cache/ovn-bgp-agent-vm}
# The file prepare.sh writes last: run.sh trusts the cache only when it exists.
# shellcheck disable=SC2034 # used by the scripts that source this file
VM_STATE_FILE="$VM_CACHE/prepared.env"
# shellcheck disable=SC2034
VM_TIER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

vm_log() { printf 'vm-tier: %s\n' "$*" >&2; }
vm_die() { printf 'vm-tier: error: %s\n' "$*" >&2; exit 1; }

vm_require_root() {
    [ "$(id -u)" = 0 ] || vm_die "must run as root (installs packages, writes $VM_CACHE, exports / to the VM)"
}

# The kernel command line: serial console, few messages (each console byte is slow under TCG), reboot
# (which -no-reboot turns into qemu exiting) on a panic instead of hanging until the timeout.
VM_KERNEL_APPEND="console=ttyS0 quiet loglevel=4 panic=-1 mitigations=off no_timer_check random.trust_cpu=on"

# vm_qemu_command ACCEL KERNEL INITRAMFS CONSOLE_LOG EXCHANGE_DIR EXTRA_APPEND
# Prints nothing; fills the array QEMU_CMD. EXCHANGE_DIR may be empty (the KVM probe needs no share).
vm_qemu_command() {
    local accel=$1 kernel=$2 initramfs=$3 console_log=$4 exchange=$5 extra_append=$6
    QEMU_CMD=(qemu-system-x86_64 -nodefaults -no-user-config -no-reboot
        -machine pc -m "${VM_MEMORY:-2G}" -smp "${VM_CPUS:-2}"
        -display none -monitor none -serial "file:$console_log"
        -kernel "$kernel" -initrd "$initramfs"
        -append "$VM_KERNEL_APPEND $extra_append")
    # shellcheck disable=SC2054 # commas are qemu option syntax
    case "$accel" in
        kvm) QEMU_CMD+=(-accel kvm -cpu host) ;;
        tcg) QEMU_CMD+=(-accel tcg,thread=multi -cpu "${VM_CPU_MODEL:-max}") ;;
        *) vm_die "unknown accelerator '$accel' (kvm or tcg)" ;;
    esac
    if [ -n "$exchange" ]; then
        # The host's whole tree, read-only: the VM runs the OVS/OVN/FRR and test binaries installed here.
        QEMU_CMD+=(-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
            -device "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot"
            -fsdev "local,id=exchange,path=$exchange,security_model=none,multidevs=remap"
            -device "virtio-9p-pci,fsdev=exchange,mount_tag=exchange")
    fi
}
