#!/usr/bin/env bash
# The full-kernel tier, as CI runs it: prepares the VM (cached after the first run) and runs the
# VM-booting tests of tests/vm_tier.rs, which the default `cargo test` leaves out (#[ignore]).
#
#   sudo scripts/vm-tier/test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "scripts/vm-tier/test.sh must run as root (boots qemu, writes /var/cache)" >&2; exit 1; }

started=$SECONDS
scripts/vm-tier/prepare.sh
# One VM at a time: each one already uses both cores under TCG.
cargo test --test vm_tier -- --ignored --nocapture --test-threads=1
echo "vm-tier: full-kernel tier passed in $((SECONDS - started)) s"
