#!/usr/bin/env bash
# The OVN 25.03 tier of the lab: Debian 13 (trixie)'s OVN 25.03 and OVS 3.5 packages, unchanged,
# in a chroot that is built once and cached on this machine.
#
#   ovn-chroot.sh [prepare]        build the chroot unless the cache has a complete one; print its path
#   ovn-chroot.sh --rebuild        build it anew (replaces the cached one)
#   ovn-chroot.sh exec ROOT LAB_DIR COMMAND...
#                                  run COMMAND inside ROOT with LAB_DIR bind-mounted at the same path
#                                  (used by lib.sh; must run in a private mount namespace:
#                                  unshare --mount ... ovn-chroot.sh exec ...)
#
# Cache: $OVN_CHROOT_CACHE (default /var/cache/ovn-bgp-agent)/ovn-25.03-trixie, about 350 MB. It
# counts as complete only with its stamp file (written last, after the versions were checked), so
# an interrupted build is rebuilt, never used. Building needs debootstrap (scripts/install-deps.sh)
# and access to $OVN_CHROOT_MIRROR (default http://deb.debian.org/debian). Any failure is an
# error: the lab never falls back to the host's OVN when 25.03 was asked for.
set -euo pipefail

OVN_CHROOT_CACHE=${OVN_CHROOT_CACHE:-/var/cache/ovn-bgp-agent}
OVN_CHROOT_MIRROR=${OVN_CHROOT_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
WANT_OVN=25.03
ROOT=$OVN_CHROOT_CACHE/ovn-$WANT_OVN-$SUITE
STAMP=$ROOT/.ovn-bgp-agent-chroot
PACKAGES=ovn-central,ovn-host,openvswitch-switch

die() {
    printf '[ovn-chroot] ERROR: %s\n' "$*" >&2
    exit 1
}
log() { printf '[ovn-chroot] %s\n' "$*" >&2; }

# remove_tree DIR: delete a (partial) chroot, but never through a mount point inside it (a failed
# debootstrap can leave /proc, /sys or a /dev bind mounted there).
remove_tree() {
    [[ -e $1 ]] || return 0
    if awk -v d="$1" '$5 == d || index($5, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
        die "$1 has mount points inside (see /proc/self/mountinfo); unmount them, then delete it"
    fi
    rm -rf --one-file-system -- "$1"
}

# exec: the mounts a daemon needs inside ROOT, visible only in this (private) mount namespace, so
# they disappear with the last process using them: nothing to unmount, nothing left behind.
if [[ ${1:-} == exec ]]; then
    (($# >= 4)) || die "usage: ovn-chroot.sh exec ROOT LAB_DIR COMMAND..."
    root=$2 lab_dir=$3
    shift 3
    [[ -f $root/.ovn-bgp-agent-chroot ]] || die "$root is not a complete OVN chroot (run scripts/lab/ovn-chroot.sh)"
    # Refuse to mount into the machine's own mount namespace (the caller forgot unshare --mount).
    [[ $(readlink /proc/self/ns/mnt) != "$(readlink /proc/1/ns/mnt)" ]] ||
        die "exec must run in a private mount namespace (unshare --mount --propagation private)"
    mount -t proc proc "$root/proc"
    # /dev/net/tun for the userspace datapath's taps; sysfs mounted here shows the devices of the
    # network namespace this runs in (ip netns exec ... before unshare).
    mount --rbind /dev "$root/dev"
    mount -t sysfs sysfs "$root/sys"
    mkdir -p "$root$lab_dir"
    mount --bind "$lab_dir" "$root$lab_dir"
    exec chroot "$root" "$@"
fi

rebuild=0
case ${1:-prepare} in
prepare) ;;
--rebuild) rebuild=1 ;;
-h | --help)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 0
    ;;
*) die "unknown argument $1 (see --help)" ;;
esac

[[ $(id -u) -eq 0 ]] || die "ovn-chroot.sh must run as root (debootstrap, chroot)"
mkdir -p "$OVN_CHROOT_CACHE"
# One builder at a time; the others wait and then find the cache complete.
exec 9>"$OVN_CHROOT_CACHE/.lock"
flock 9

if ((rebuild == 0)) && [[ -f $STAMP ]]; then
    printf '%s\n' "$ROOT"
    exit 0
fi

command -v debootstrap >/dev/null ||
    die "debootstrap is not installed (scripts/install-deps.sh installs it); it builds the OVN $WANT_OVN chroot"

tmp=$ROOT.building
remove_tree "$tmp"
log "building the OVN $WANT_OVN chroot in $ROOT (debootstrap $SUITE from $OVN_CHROOT_MIRROR, about 2 minutes, 350 MB)"
started=$SECONDS
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp" "$OVN_CHROOT_MIRROR" \
    >"$OVN_CHROOT_CACHE/debootstrap.log" 2>&1; then
    tail -n 30 "$OVN_CHROOT_CACHE/debootstrap.log" >&2
    remove_tree "$tmp"
    die "debootstrap $SUITE failed (full log: $OVN_CHROOT_CACHE/debootstrap.log)"
fi
# The downloaded .debs are installed already; 80 MB less in the cache.
rm -f "$tmp"/var/cache/apt/archives/*.deb

ovn_version=$(chroot "$tmp" ovn-northd --version | sed -n 's/^ovn-northd (Open vSwitch) //p;s/^ovn-northd //p' | head -1)
ovs_version=$(chroot "$tmp" ovs-vswitchd --version | sed -n 's/^ovs-vswitchd (Open vSwitch) //p' | head -1)
nb_schema=$(chroot "$tmp" ovsdb-tool schema-version /usr/share/ovn/ovn-nb.ovsschema)
sb_schema=$(chroot "$tmp" ovsdb-tool schema-version /usr/share/ovn/ovn-sb.ovsschema)
[[ $ovn_version == "$WANT_OVN".* ]] || {
    remove_tree "$tmp"
    die "debootstrap $SUITE gave OVN '$ovn_version', not $WANT_OVN.x"
}
cat >"$tmp/.ovn-bgp-agent-chroot" <<EOF
SUITE=$SUITE
OVN_VERSION=$ovn_version
OVS_VERSION=$ovs_version
NB_SCHEMA=$nb_schema
SB_SCHEMA=$sb_schema
BUILT=$(date -u +%Y-%m-%dT%H:%M:%SZ)
EOF
remove_tree "$ROOT"
mv -- "$tmp" "$ROOT"
log "built in $((SECONDS - started)) s: OVN $ovn_version, OVS $ovs_version, NB schema $nb_schema, SB schema $sb_schema ($(du -sh "$ROOT" | cut -f1))"
printf '%s\n' "$ROOT"
