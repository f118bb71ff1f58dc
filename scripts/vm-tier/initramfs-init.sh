#!/bin/sh
# PID 1 of the full-kernel test VM (busybox sh inside the initramfs built by prepare.sh).
#
# It turns the host's root, shared read-only over virtio-9p, into a writable root for the VM by laying a
# tmpfs over it with overlayfs, puts the Debian kernel's modules at /lib/modules/<version>, runs the
# payload that run.sh left in the exchange share as root, writes the payload's exit code back into the
# share and powers the VM off. Everything that goes wrong here is reported on the console and in
# the share's init-error file, so run.sh can tell a broken VM from a failing payload.
export PATH=/bin:/sbin

# Written by prepare.sh: KVER (kernel release) and MODULES_HOST_DIR (the extracted modules, a path on the host).
# shellcheck disable=SC1091
. /vm-tier.conf

say() { echo "vm-tier-init: $*"; }

power_off() {
    sync
    poweroff -f
    # poweroff needs ACPI; qemu runs with -no-reboot, so a reboot ends it too.
    reboot -f
}

fail() {
    say "FATAL: $*"
    if grep -q ' /newroot/vm-exchange ' /proc/mounts 2>/dev/null; then
        echo "$*" > /newroot/vm-exchange/init-error
    fi
    power_off
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

mode=run
for word in $(cat /proc/cmdline); do
    case "$word" in
        vmtier.mode=*) mode=${word#vmtier.mode=} ;;
    esac
done

if [ "$mode" = probe ]; then
    # Used by the KVM probe: reaching this line proves the accelerator can run this kernel.
    say "PROBE-OK"
    power_off
fi

# Order resolved on the host from modules.dep (dependencies first).
while read -r module; do
    insmod "/modules/$module" || fail "insmod $module failed"
done < /modules/load-order

# The host's root filesystem, read-only. cache=loose: the host tree does not change while a payload runs,
# and caching its metadata makes exec and library loads far cheaper under TCG.
mkdir -p /mnt/host /mnt/rw /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /mnt/host ||
    fail "cannot mount the host root (9p tag hostroot)"
mount -t tmpfs -o mode=0755 rw /mnt/rw
mkdir -p /mnt/rw/upper /mnt/rw/work
mount -t overlay -o lowerdir=/mnt/host,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work overlay /newroot ||
    fail "cannot lay the tmpfs overlay over the host root"

mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 shm /newroot/dev/shm
# What udev/systemd would create: bash process substitution (`< <(...)`, used by the lab's
# scripts) opens /dev/fd/N.
ln -sfn /proc/self/fd /newroot/dev/fd
ln -sfn /proc/self/fd/0 /newroot/dev/stdin
ln -sfn /proc/self/fd/1 /newroot/dev/stdout
ln -sfn /proc/self/fd/2 /newroot/dev/stderr
mount -t tmpfs -o mode=1777 tmp /newroot/tmp
mount -t tmpfs -o mode=0755 run /newroot/run
mount -t tmpfs -o mode=0755 cgroup /newroot/sys/fs/cgroup 2>/dev/null &&
    mkdir -p /newroot/sys/fs/cgroup/unified &&
    mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup/unified 2>/dev/null
mkdir -p /newroot/run/netns
# The host's own /lib/modules belongs to the host's kernel: give the VM the Debian kernel's tree.
mkdir -p "/newroot/lib/modules/$KVER"
mount -o bind "/mnt/host$MODULES_HOST_DIR" "/newroot/lib/modules/$KVER" ||
    fail "cannot bind the kernel modules from $MODULES_HOST_DIR"

mkdir -p /newroot/vm-exchange
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=none exchange /newroot/vm-exchange ||
    fail "cannot mount the exchange share (9p tag exchange)"
[ -f /newroot/vm-exchange/payload.sh ] || fail "the exchange share holds no payload.sh"
# Host directories under /tmp or /run (run.sh lists them: e.g. a CI clone in /tmp) are hidden by
# the VM's own tmpfs there: bind them back from the host root share.
if [ -f /newroot/vm-exchange/host-binds ]; then
    while read -r dir; do
        [ -n "$dir" ] || continue
        mkdir -p "/newroot$dir"
        mount -o bind "/mnt/host$dir" "/newroot$dir" || fail "cannot bind the host directory $dir"
    done < /newroot/vm-exchange/host-binds
fi

hostname vm-tier
ip link set lo up
echo "vm-tier" > /newroot/etc/hostname

# Make the overlay the system's real root (not a chroot): the kernel runs its helpers, /sbin/modprobe for
# module autoloading above all, in the root of PID 1 as it is mounted at "/", and the agent relies on the
# kernel loading vrf, dummy and 8021q on demand. Stage 2 then runs from a tmpfs copy of busybox.
stage2=/newroot/run/vm-tier-init
mkdir -p "$stage2"
cp /bin/busybox "$stage2/busybox"
cat > "$stage2/stage2" <<'STAGE2'
bb=/run/vm-tier-init/busybox
echo "vm-tier-init: starting payload at uptime $($bb cut -d' ' -f1 /proc/uptime)"
# The payload's environment is set by payload.sh itself (run.sh writes the exports there); start clean.
/usr/bin/env -i \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root TERM=dumb LANG=C.UTF-8 VM_TIER=1 VM_EXCHANGE=/vm-exchange \
    /bin/sh /vm-exchange/payload.sh > /vm-exchange/output.log 2>&1 < /dev/null
status=$?
echo "$status" > /vm-exchange/exit-code.tmp
$bb mv /vm-exchange/exit-code.tmp /vm-exchange/exit-code
echo "vm-tier-init: payload exited with $status"
$bb sync
$bb poweroff -f
$bb reboot -f
STAGE2
# shellcheck disable=SC2093 # reached only when switch_root itself fails
exec switch_root /newroot /run/vm-tier-init/busybox sh /run/vm-tier-init/stage2
fail "switch_root into the overlay failed"
