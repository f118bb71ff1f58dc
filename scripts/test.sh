#!/usr/bin/env bash
# The test command: installs what the tests need on a fresh Debian machine, then runs every check
# CI runs. Must be run as root (the tests create network namespaces and start OVS, OVN and FRR).
#
#   sudo scripts/test.sh            # everything
#   sudo scripts/test.sh --quick    # skip fmt/clippy, the slim-build check and the VM tier
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1

step() { printf '\n==> %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
    echo "scripts/test.sh must run as root: the tests create network namespaces and start OVS/OVN/FRR" >&2
    exit 1
fi

mkdir -p target
rm -f target/test-output.txt target/vm-tier-output.txt

step "system packages"
scripts/install-deps.sh

step "rust toolchain"
cargo --version
rustup component list --installed 2>/dev/null | grep -E '^(rustfmt|clippy)' || true

if [ "$quick" = 0 ]; then
    step "cargo fmt --check"
    cargo fmt --all -- --check
    step "cargo clippy -D warnings"
    cargo clippy --all-targets -- -D warnings
fi

step "cargo test (all drivers and backends)"
cargo test --all-targets 2>&1 | tee target/test-output.txt
# cargo test exits non-zero on any failure (pipefail).

if [ "$quick" = 0 ]; then
    step "slim build: only ovn_bgp_driver + underlay"
    cargo build --no-default-features --features sb_bgp,underlay --target-dir target/slim
    listing=$(target/slim/debug/ovn-bgp-agent plugins)
    echo "$listing"
    expected_names="ovn_bgp_driver underlay"
    names=$(echo "$listing" | awk '/^  /{print $1}' | sort | xargs)
    if [ "$names" != "$expected_names" ]; then
        echo "slim build lists [$names], expected [$expected_names]" >&2
        exit 1
    fi

    step "example: out-of-tree driver registered through inventory"
    listing=$(cargo run -q --example custom_driver -- plugins)
    echo "$listing"
    echo "$listing" | grep -q '^  example_static_driver ' || {
        echo "examples/custom_driver.rs did not register example_static_driver" >&2
        exit 1
    }
fi

if [ "$quick" = 0 ]; then
    step "package: the .deb built, installed, and the demo run against the installed binary"
    scripts/package.sh
    deb=$(ls target/debian/ovn-bgp-agent-rs_*_amd64.deb | head -n 1)
    dpkg -i "$deb"
    /usr/bin/ovn-bgp-agent --config-file /etc/ovn-bgp-agent/bgp-agent.conf \
        --config-dir /etc/ovn-bgp-agent/bgp-agent.conf.d check-config >/dev/null
    LAB_DIR=/tmp/ovn-bgp-demo-deb scripts/demo.sh --driver nb --agent /usr/bin/ovn-bgp-agent --stop
    dpkg -r ovn-bgp-agent-rs

    step "package: the .rpm (the same release binary) checked, installed into a scratch root and run"
    scripts/package.sh --rpm
    scripts/test-rpm.sh
    # The OCI image has its own end-to-end test, scripts/test-oci.sh, not run here: the static musl
    # release build it needs adds about 3 minutes even with a warm target directory.
fi

if [ "$quick" = 0 ]; then
    step "full-kernel tier: stock Debian kernel under qemu (real vrf, dummy, vlan, OVS kernel datapath)"
    scripts/vm-tier/test.sh 2>&1 | tee target/vm-tier-output.txt
fi

step "done"
cat target/test-output.txt target/vm-tier-output.txt 2>/dev/null | grep -E '^test result:' | awk '
    { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1) } }
    END { printf "%d passed, %d failed\n", p, f }'
