#!/usr/bin/env bash
# Builds the agent's OCI image with Debian's own tools (debootstrap, umoci, skopeo): Debian 12 with
# FRR's vtysh and the Open vSwitch tools (ovs-vsctl, ovs-ofctl, ovs-appctl) in one cached base
# layer, the static musl agent (scripts/build-static.sh) in a second layer.
#
#   sudo scripts/package-oci.sh                  # build the static agent, then the image
#   sudo scripts/package-oci.sh --binary PATH    # use this (static) agent binary instead
#   sudo scripts/package-oci.sh --rebuild-base   # debootstrap the base layer anew
#
# Output, in target/oci/:
#   ovn-bgp-agent/                     OCI image layout, tag <version>
#                                      (skopeo copy oci:target/oci/ovn-bgp-agent:<version> ...)
#   ovn-bgp-agent-<version>.oci.tar    the same as an oci-archive (podman load -i FILE)
# ENTRYPOINT /usr/bin/ovn-bgp-agent, CMD --config-dir /etc/ovn-bgp-agent: upstream's container
# layout (README.md, "Packages and the service", has the bind mounts to run it with).
#
# Cache: $OCI_CACHE (default /var/cache/ovn-bgp-agent)/oci-base-bookworm, the base layer as an OCI
# layout (about 80 MB compressed), counted complete only with its stamp file (written last), so an
# interrupted build is redone; concurrent builders wait on a lock. A cold build takes a debootstrap
# (2 to 6 minutes, mostly downloads); a warm one only adds the agent's layer.
set -euo pipefail
cd "$(dirname "$0")/.."

OCI_CACHE=${OCI_CACHE:-/var/cache/ovn-bgp-agent}
OCI_MIRROR=${OCI_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# frr: vtysh (Debian ships it inside frr); openvswitch-switch: ovs-vsctl (ovs-ofctl and ovs-appctl
# come with its dependency openvswitch-common); iproute2 for the operator's `ip` inside.
PACKAGES=frr,openvswitch-switch,iproute2
BASE=$OCI_CACHE/oci-base-$SUITE
STAMP=$BASE/.ovn-bgp-agent-oci-base

die() {
    printf '[package-oci] ERROR: %s\n' "$*" >&2
    exit 1
}
log() { printf '[package-oci] %s\n' "$*" >&2; }

binary=
rebuild=0
while (($#)); do
    case $1 in
    --binary) binary=${2:?--binary PATH} && shift ;;
    --rebuild-base) rebuild=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
        exit 0
        ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
done

[[ $(id -u) -eq 0 ]] || die "package-oci.sh must run as root (debootstrap, and umoci keeps file owners)"
for tool in debootstrap umoci skopeo; do
    command -v "$tool" >/dev/null || die "$tool is not installed (scripts/install-deps.sh installs it)"
done

# build_base: debootstrap Debian 12 with the tools, drop what a container never reads (downloaded
# .debs, apt lists, man pages, docs except the copyright files), and make it the image's first layer.
build_base() {
    local tmp=$BASE.building started=$SECONDS
    rm -rf --one-file-system -- "$tmp"
    mkdir -p "$tmp"
    log "building the base layer in $BASE (debootstrap $SUITE + $PACKAGES from $OCI_MIRROR, a few minutes)"
    if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp/rootfs" "$OCI_MIRROR" \
        >"$OCI_CACHE/oci-debootstrap.log" 2>&1; then
        tail -n 30 "$OCI_CACHE/oci-debootstrap.log" >&2
        die "debootstrap $SUITE failed (full log: $OCI_CACHE/oci-debootstrap.log)"
    fi
    local root=$tmp/rootfs
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/man/* \
        "$root"/var/log/*.log "$root"/var/cache/debconf/*-old
    find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    # The runtime provides these; the build host's must not leak into the image.
    : >"$root/etc/resolv.conf"
    echo localhost >"$root/etc/hostname"
    local frr ovs
    frr=$(chroot "$root" dpkg-query -W -f '${Version}' frr)
    ovs=$(chroot "$root" dpkg-query -W -f '${Version}' openvswitch-switch)
    for tool in vtysh ovs-vsctl ovs-ofctl ovs-appctl; do
        chroot "$root" sh -c "command -v $tool" >/dev/null || die "the base has no $tool"
    done
    umoci init --layout "$tmp/layout"
    umoci new --image "$tmp/layout:base"
    umoci insert --image "$tmp/layout:base" --history.created_by "debootstrap --variant=minbase --include=$PACKAGES $SUITE" \
        "$root" /
    rm -rf --one-file-system -- "$root"
    cat >"$tmp/.ovn-bgp-agent-oci-base" <<EOF
SUITE=$SUITE
FRR_VERSION=$frr
OVS_VERSION=$ovs
BUILT=$(date -u +%Y-%m-%dT%H:%M:%SZ)
EOF
    rm -rf --one-file-system -- "$BASE"
    mv -- "$tmp" "$BASE"
    log "base built in $((SECONDS - started)) s: FRR $frr, Open vSwitch $ovs ($(du -sh "$BASE/layout" | cut -f1))"
}

mkdir -p "$OCI_CACHE"
(
    # One builder at a time; the others wait and then find the cache complete.
    flock 9
    if ((rebuild)) || [[ ! -f $STAMP ]]; then
        build_base
    fi
) 9>"$OCI_CACHE/.oci-base.lock"
# shellcheck disable=SC1090
source "$STAMP"

if [[ -z $binary ]]; then
    scripts/build-static.sh >&2
    binary=target/x86_64-unknown-linux-musl/release/ovn-bgp-agent
fi
[[ -x $binary ]] || die "$binary: not an executable"
# The image has Debian's glibc, but a binary built against a newer one (or one asking for a
# loader at all) would break on the next base rebuild: only a static agent goes in.
readelf -l "$binary" | grep -q INTERP && die "$binary asks for a dynamic loader: build it with scripts/build-static.sh"
version=$("$binary" --version | awk '{print $NF}')
[[ $version =~ ^[0-9] ]] || die "cannot read a version from '$("$binary" --version)'"

out=target/oci
layout=$out/ovn-bgp-agent
archive=$out/ovn-bgp-agent-$version.oci.tar
rm -rf -- "$layout" "$out/layer" "$archive"
mkdir -p "$out"
cp -a -- "$BASE/layout" "$layout"

# The agent's layer. /etc/ovn-bgp-agent stays empty: it is where the operator's config directory
# is mounted (the sample is a doc, so an image run without a config fails instead of exposing a
# made-up AS); /run/ovn-bgp-agent holds the control socket, /var/lib/ovn-bgp-agent [frr] state_file.
layer=$out/layer
doc=$layer/usr/share/doc/ovn-bgp-agent-rs
# As cargo built it, like the .deb's and the .rpm's (the release profile keeps line tables for
# panic backtraces).
install -D -m 755 "$binary" "$layer/usr/bin/ovn-bgp-agent"
install -D -m 644 packaging/bgp-agent.conf "$doc/bgp-agent.conf.sample"
install -m 644 README.md docs/configuration.md "$doc/"
install -m 644 packaging/LICENSE "$doc/copyright"
install -d -m 755 "$layer/etc/ovn-bgp-agent" "$layer/var/lib/ovn-bgp-agent"
install -d -m 750 "$layer/run/ovn-bgp-agent"
umoci insert --image "$layout:base" --history.created_by "ovn-bgp-agent $version (static, x86_64-unknown-linux-musl)" \
    "$layer" /
rm -rf -- "$layer"

umoci config --image "$layout:base" --tag "$version" \
    --config.entrypoint /usr/bin/ovn-bgp-agent \
    --config.cmd=--config-dir --config.cmd=/etc/ovn-bgp-agent \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.workingdir / \
    --config.stopsignal SIGTERM \
    --config.label "org.opencontainers.image.title=ovn-bgp-agent" \
    --config.label "org.opencontainers.image.description=OVN BGP agent (Rust): expose OpenStack/OVN workloads over BGP/EVPN" \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.licenses=Apache-2.0" \
    --config.label "org.opencontainers.image.base.name=debian:$SUITE" \
    --config.label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    --config.label "io.github.ovn-bgp-agent.frr-version=$FRR_VERSION" \
    --config.label "io.github.ovn-bgp-agent.openvswitch-version=$OVS_VERSION" \
    --history.created_by "ovn-bgp-agent --config-dir /etc/ovn-bgp-agent"
umoci rm --image "$layout:base"
umoci gc --layout "$layout"

# The archive is written by skopeo from the layout: that is also the check that the layout reads
# as an image for the containers/image library that podman and skopeo share.
skopeo copy --quiet "oci:$layout:$version" "oci-archive:$archive:ovn-bgp-agent:$version"
skopeo inspect --config "oci-archive:$archive" | jq -c '{entrypoint: .config.Entrypoint, cmd: .config.Cmd, labels: .config.Labels}' >&2
echo "image layout: $layout (tag $version)"
echo "oci-archive:  $archive ($(du -h "$archive" | cut -f1))"
