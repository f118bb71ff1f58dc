#!/bin/sh
# VM-tier payload: runs a Rust test binary (built on the host) inside the VM, where the kernel has the
# production device kinds. Sets OVN_BGP_AGENT_TEST_KERNEL=full: tests that honour it must create real
# VRF, dummy and VLAN devices and fail when they cannot, instead of using the fast tier's stand-ins.
#
#   BIN=$(scripts/vm-tier/test-binary.sh netlink)
#   sudo scripts/vm-tier/run.sh scripts/vm-tier/payloads/cargo-tests.sh "$BIN" [FILTER] [LIBTEST-ARG]...
#
# Run it from the crate root (run.sh keeps the current directory): CARGO_MANIFEST_DIR is set to it when
# it holds a Cargo.toml, as cargo would. Exits with the test binary's exit code.
set -u

if [ "${VM_TIER:-}" != 1 ]; then
    echo "cargo-tests: refusing to run outside the VM tier (VM_TIER is not 1)" >&2
    echo "cargo-tests: run it as: scripts/vm-tier/run.sh $0 TEST-BINARY [FILTER]" >&2
    exit 2
fi
if [ $# -lt 1 ]; then
    echo "usage: $0 TEST-BINARY [FILTER] [LIBTEST-ARG]..." >&2
    exit 2
fi
binary=$1
shift
if [ ! -x "$binary" ]; then
    echo "cargo-tests: test binary '$binary' is not an executable file inside the VM" >&2
    echo "cargo-tests: build it on the host first (cargo test --no-run) in a directory outside /tmp and /run" >&2
    exit 2
fi

export OVN_BGP_AGENT_TEST_KERNEL=full
export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"
if [ -z "${CARGO_MANIFEST_DIR:-}" ] && [ -f Cargo.toml ]; then
    CARGO_MANIFEST_DIR=$(pwd)
    export CARGO_MANIFEST_DIR
fi

echo "cargo-tests: $binary $* (kernel $(uname -r), OVN_BGP_AGENT_TEST_KERNEL=full)"
exec "$binary" "$@"
