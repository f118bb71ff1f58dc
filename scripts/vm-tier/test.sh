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
# Left out by name (run it with `cargo test --test vm_tier -- --ignored --exact NAME`): the
# hand-built EVPN realisation, the reference the agent's EVPN code was written against; the
# agent's own EVPN tests and the EVPN demos cover the same devices, FRR stanzas and ToR routes,
# and CI's time is better spent on them.
skipped=frr_evpn_type5_realisation_works_on_the_real_kernel_against_an_evpn_tor
echo "vm-tier: not run here: $skipped (the reference EVPN realisation by hand; the agent's EVPN tests and the EVPN demos cover it)"
cargo test --test vm_tier -- --ignored --nocapture --test-threads=1 --skip "$skipped"
echo "vm-tier: full-kernel tier passed in $((SECONDS - started)) s"
