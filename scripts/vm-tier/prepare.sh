#!/usr/bin/env bash
# Prepares the full-kernel test tier: installs qemu/busybox/kmod if missing, fetches and unpacks the
# newest stock Debian 6.1 kernel, builds the busybox initramfs and finds out whether KVM can run it.
# Idempotent: a second run with nothing changed only checks and returns.
#
#   sudo scripts/vm-tier/prepare.sh
#
# Environment: VM_CACHE (default /var/cache/ovn-bgp-agent-vm), VM_KERNEL_PACKAGE (pin a
# linux-image-6.1.0-N-amd64 package).
set -euo pipefail
# shellcheck source=scripts/vm-tier/lib.sh
. "$(dirname "$0")/lib.sh"
vm_require_root

started=$SECONDS
mkdir -p "$VM_CACHE"
# Two prepares at once (parallel CI jobs) must not build into the same directories.
exec 9>"$VM_CACHE/.lock"
flock 9

step_started=$SECONDS
step_done() { vm_log "$1 ($((SECONDS - step_started)) s)"; step_started=$SECONDS; }

apt_updated=0
apt_update_once() {
    if [ "$apt_updated" = 0 ]; then
        vm_log "apt-get update"
        apt-get update -qq >&2 || vm_die "apt-get update failed"
        apt_updated=1
    fi
}

# --- host packages -------------------------------------------------------------------------------------
missing=()
for package in qemu-system-x86 busybox-static kmod xz-utils; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    vm_log "installing ${missing[*]}"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; then
        apt_update_once
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
            vm_die "cannot install ${missing[*]}"
    fi
fi
step_done "host packages present"

# --- kernel --------------------------------------------------------------------------------------------
# The stock flavour only: not -rt, -cloud (no vrf/openvswitch guarantees), -dbg or -unsigned (the signed
# package ships the same vmlinuz and modules).
newest_kernel_package() {
    apt-cache pkgnames linux-image-6.1.0- 2>/dev/null |
        grep -E '^linux-image-6\.1\.0-[0-9]+-amd64$' | sort -V | tail -n 1
}
kernel_package=${VM_KERNEL_PACKAGE:-$(newest_kernel_package)}
if [ -z "$kernel_package" ]; then
    apt_update_once
    kernel_package=$(newest_kernel_package)
fi
[ -n "$kernel_package" ] || vm_die "no linux-image-6.1.0-N-amd64 package in the apt sources (is this Debian 12?)"
kver=${kernel_package#linux-image-}
kernel_dir="$VM_CACHE/$kver"

if [ ! -f "$kernel_dir/.complete" ]; then
    vm_log "fetching $kernel_package"
    rm -rf "$kernel_dir" "$kernel_dir.partial"
    download_dir=$(mktemp -d "$VM_CACHE/download.XXXXXX")
    # apt drops privileges to _apt for downloads; let it write here so it doesn't warn.
    chown _apt "$download_dir" 2>/dev/null || true
    if ! (cd "$download_dir" && apt-get download -q "$kernel_package" >&2); then
        apt_update_once
        (cd "$download_dir" && apt-get download -q "$kernel_package" >&2) || vm_die "apt-get download $kernel_package failed"
    fi
    dpkg -x "$download_dir"/"${kernel_package}"_*.deb "$kernel_dir.partial"
    rm -rf "$download_dir"
    # The package ships no modules.dep: modprobe in the VM needs it.
    depmod -b "$kernel_dir.partial" "$kver"
    mv "$kernel_dir.partial" "$kernel_dir"
    touch "$kernel_dir/.complete"
    step_done "kernel $kver unpacked into $kernel_dir"
fi
modules_dir="$kernel_dir/lib/modules/$kver"
[ -f "$modules_dir/modules.dep" ] || vm_die "$modules_dir/modules.dep missing: delete $kernel_dir and rerun"

# Under TCG, booting the uncompressed ELF directly (PVH entry) skips the slow in-guest decompression.
vmlinuz="$kernel_dir/boot/vmlinuz-$kver"
vmlinux="$kernel_dir/vmlinux"
if [ ! -f "$vmlinux" ]; then
    offset=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -n 1 | cut -d: -f1 || true)
    if [ -n "$offset" ] && xz -dc --single-stream < <(tail -c +"$((offset + 1))" "$vmlinuz") > "$vmlinux.partial" 2>/dev/null &&
        [ "$(head -c 4 "$vmlinux.partial" | od -An -c | tr -d ' ')" = '177ELF' ]; then
        mv "$vmlinux.partial" "$vmlinux"
        step_done "extracted the uncompressed kernel (PVH boot)"
    else
        rm -f "$vmlinux.partial"
        vm_log "could not extract an uncompressed kernel from $vmlinuz; booting the bzImage"
    fi
fi
if [ -f "$vmlinux" ]; then kernel_image=$vmlinux; else kernel_image=$vmlinuz; fi

# --- initramfs -----------------------------------------------------------------------------------------
# Only what mounting the host root needs; everything else is loaded in the VM by the payload's modprobe.
initramfs_modules=(virtio_pci 9pnet_virtio 9p overlay)

# Prints the module files (relative to the modules dir) to load, dependencies first, each once.
module_load_order() {
    local module path deps dep i
    declare -A seen=()
    for module in "$@"; do
        path=$(modinfo -b "$kernel_dir" -k "$kver" -F filename "$module" 2>/dev/null | awk 'NR == 1') ||
            vm_die "module $module not found in $kver"
        path=${path#"$modules_dir"/}
        # modules.dep lists all (transitive) dependencies, the one to load last first.
        read -r -a deps <<< "$(sed -n "s|^$path: *||p" "$modules_dir/modules.dep")"
        for ((i = ${#deps[@]} - 1; i >= 0; i--)); do
            dep=${deps[i]}
            [ -n "${seen[$dep]:-}" ] || { seen[$dep]=1; echo "$dep"; }
        done
        [ -n "${seen[$path]:-}" ] || { seen[$path]=1; echo "$path"; }
    done
}

load_order=$(module_load_order "${initramfs_modules[@]}")
initramfs="$VM_CACHE/initramfs-$kver.cpio"
initramfs_key=$( (cat "$VM_TIER_DIR/initramfs-init.sh"; echo "$kver $modules_dir"; echo "$load_order";
    # awk reads busybox's whole banner: `head` would close the pipe early, and with pipefail the
    # SIGPIPE (141) of busybox would fail the script at random.
    busybox 2>&1 | awk 'NR == 1') | sha256sum | cut -c1-16)
if [ ! -f "$initramfs" ] || [ "$(cat "$initramfs.key" 2>/dev/null)" != "$initramfs_key" ]; then
    staging=$(mktemp -d "$VM_CACHE/initramfs.XXXXXX")
    mkdir -p "$staging"/{bin,sbin,dev,proc,sys,mnt,newroot,tmp,modules}
    cp /bin/busybox "$staging/bin/busybox"
    for applet in $(busybox --list); do
        [ "$applet" = busybox ] || ln -s busybox "$staging/bin/$applet"
    done
    # The kernel opens /dev/console for PID 1 before init can mount devtmpfs.
    mknod -m 600 "$staging/dev/console" c 5 1
    mknod -m 666 "$staging/dev/null" c 1 3
    install -m 755 "$VM_TIER_DIR/initramfs-init.sh" "$staging/init"
    printf 'KVER=%s\nMODULES_HOST_DIR=%s\n' "$kver" "$modules_dir" > "$staging/vm-tier.conf"
    while read -r module; do
        cp "$modules_dir/$module" "$staging/modules/"
        basename "$module" >> "$staging/modules/load-order"
    done <<< "$load_order"
    (cd "$staging" && find . -mindepth 1 | busybox cpio -o -H newc 2>/dev/null) > "$initramfs.partial"
    mv "$initramfs.partial" "$initramfs"
    echo "$initramfs_key" > "$initramfs.key"
    rm -rf "$staging"
    step_done "initramfs $initramfs built ($(du -k "$initramfs" | cut -f1) KiB)"
fi

# --- accelerator ---------------------------------------------------------------------------------------
# A /dev/kvm may exist and still not run a stock kernel (a paravirtual variant does not), so only a real
# boot proves it. The answer is kept per host kernel and guest kernel.
host_kernel=$(uname -r)
probe_file="$VM_CACHE/accel-probe.env"
if [ -f "$probe_file" ] && grep -qx "PROBED_FOR='$host_kernel $kver'" "$probe_file"; then
    :
elif [ ! -c /dev/kvm ] || ! { exec 8<>/dev/kvm; } 2>/dev/null; then
    printf "PROBED_FOR='%s'\nACCEL='tcg'\nACCEL_REASON='no usable /dev/kvm'\n" "$host_kernel $kver" > "$probe_file"
else
    exec 8>&-
    probe_console=$(mktemp "$VM_CACHE/kvm-probe.XXXXXX")
    vm_qemu_command kvm "$kernel_image" "$initramfs" "$probe_console" "" "vmtier.mode=probe"
    # A working KVM reaches init in about a second; the subshell keeps bash's "Aborted" note off stderr
    # when this qemu asserts (as it does on a /dev/kvm that rejects the host CPU's MSRs).
    if (timeout 30 "${QEMU_CMD[@]}" > "$probe_console.out" 2>&1; probe_status=$?; exit $probe_status) 2>/dev/null && grep -q 'PROBE-OK' "$probe_console"; then
        accel=kvm
        accel_reason="a KVM boot of $kver reached init"
    else
        accel=tcg
        accel_reason="/dev/kvm present but a KVM boot of $kver did not reach init: $(tr '\n' ' ' < "$probe_console.out" | tr -d "'" | cut -c1-200)"
    fi
    rm -f "$probe_console" "$probe_console.out"
    printf "PROBED_FOR='%s'\nACCEL='%s'\nACCEL_REASON='%s'\n" "$host_kernel $kver" "$accel" "$accel_reason" > "$probe_file"
    step_done "KVM probe"
fi
# shellcheck disable=SC1090
. "$probe_file"

state=$(mktemp "$VM_CACHE/prepared.XXXXXX")
cat > "$state" <<EOF
KVER='$kver'
KERNEL_IMAGE='$kernel_image'
INITRAMFS='$initramfs'
MODULES_DIR='$modules_dir'
ACCEL='$ACCEL'
ACCEL_REASON='$ACCEL_REASON'
EOF
mv "$state" "$VM_STATE_FILE"
# Kernels superseded by a newer mirror kernel are 400 MB each: keep only the one in use.
for old in "$VM_CACHE"/6.1.0-*-amd64 "$VM_CACHE"/initramfs-6.1.0-*-amd64.cpio*; do
    case "$old" in
        "$kernel_dir" | "$initramfs" | "$initramfs.key") ;;
        *) [ -e "$old" ] && rm -rf "$old" && vm_log "removed superseded $old" ;;
    esac
done
vm_log "ready: kernel $kver, accelerator $ACCEL ($ACCEL_REASON), prepare took $((SECONDS - started)) s"
