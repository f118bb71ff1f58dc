#!/usr/bin/env bash
# Build the packages: .deb with cargo-deb, .rpm with cargo-generate-rpm (each installed from
# crates.io if missing):
#   scripts/package.sh                    # ovn-bgp-agent-rs .deb: every driver and backend
#   scripts/package.sh --rpm              # the same as an .rpm instead
#   scripts/package.sh --deb --rpm        # both
#   scripts/package.sh --variants [...]   # also the slim per-mode packages (-sb, -nb)
# The .deb files land in target/debian/, the .rpm files in target/generate-rpm/. Contents:
# /usr/bin/ovn-bgp-agent, the systemd unit (not enabled), a sample
# /etc/ovn-bgp-agent/bgp-agent.conf (a conffile; %config(noreplace) in the .rpm), the docs.
# The variants' features are listed once, in [package.metadata.deb.variants] of Cargo.toml.
# The OCI image: scripts/package-oci.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
variants=0 deb=0 rpm=0
for arg in "$@"; do
    case "$arg" in
        --variants) variants=1 ;;
        --deb) deb=1 ;;
        --rpm) rpm=1 ;;
        *) echo "usage: $0 [--deb] [--rpm] [--variants]" >&2; exit 2 ;;
    esac
done
[ "$deb" = 1 ] || [ "$rpm" = 1 ] || deb=1

# variant_features VARIANT: the variant's cargo features, comma-separated, from cargo-deb's table.
variant_features() {
    cargo metadata --no-deps --format-version 1 |
        jq -er --arg v "$1" '.packages[] | select(.name == "ovn-bgp-agent") | .metadata.deb.variants[$v].features | join(",")'
}

# stage_sample [VARIANT]: the sample config of this build, at target/packaging/bgp-agent.conf
# where both formats' assets take it from. packaging/bgp-agent.conf names the NB driver, which
# the -sb variant does not have, so its sample names the SB driver (check-config would reject it).
stage_sample() {
    local driver=nb_ovn_bgp_driver
    [ "${1:-}" = sb ] && driver=ovn_bgp_driver
    mkdir -p target/packaging
    sed "s/^driver = .*/driver = $driver/" packaging/bgp-agent.conf >target/packaging/bgp-agent.conf
    grep -qx "driver = $driver" target/packaging/bgp-agent.conf || {
        echo "packaging/bgp-agent.conf has no 'driver = ' line to set to $driver" >&2
        exit 1
    }
}

if [ "$deb" = 1 ]; then
    if ! cargo deb --version >/dev/null 2>&1; then
        echo "==> installing cargo-deb"
        cargo install cargo-deb --locked --quiet
    fi
    echo "==> cargo deb"
    stage_sample
    cargo deb --quiet
    if [ "$variants" = 1 ]; then
        for v in sb nb; do
            echo "==> cargo deb --variant $v"
            stage_sample "$v"
            cargo deb --quiet --variant "$v"
        done
    fi
    ls -l target/debian/*.deb
fi

if [ "$rpm" = 1 ]; then
    if ! cargo generate-rpm --version >/dev/null 2>&1; then
        echo "==> installing cargo-generate-rpm"
        cargo install cargo-generate-rpm --locked --quiet
    fi
    # build_rpm [VARIANT]: cargo-generate-rpm packages what cargo built, so each variant is built
    # with its features first (only this crate recompiles: the dependencies' features are the same).
    build_rpm() {
        local features=() variant=()
        if [ -n "${1:-}" ]; then
            features=(--no-default-features --features "$(variant_features "$1")")
            variant=(--variant "$1")
        fi
        echo "==> cargo build --release ${features[*]}; cargo generate-rpm ${variant[*]}"
        stage_sample "${1:-}"
        cargo build --quiet --release --bin ovn-bgp-agent "${features[@]}"
        cargo generate-rpm "${variant[@]}"
    }
    build_rpm
    if [ "$variants" = 1 ]; then
        for v in sb nb; do build_rpm "$v"; done
    fi
    ls -l target/generate-rpm/*.rpm
fi
