#!/usr/bin/env bash
# Build the Debian packages with cargo-deb (installed from crates.io if missing):
#   scripts/package.sh              # ovn-bgp-agent-rs: every driver and backend
#   scripts/package.sh --variants   # also the slim per-mode packages (-sb, -nb)
# The .deb files land in target/debian/. Contents: /usr/bin/ovn-bgp-agent, the systemd unit
# (not enabled), a sample /etc/ovn-bgp-agent/bgp-agent.conf (a conffile), the docs.
set -euo pipefail
cd "$(dirname "$0")/.."
variants=0
[ "${1:-}" = "--variants" ] && variants=1

if ! cargo deb --version >/dev/null 2>&1; then
    echo "==> installing cargo-deb"
    cargo install cargo-deb --locked --quiet
fi
echo "==> cargo deb"
cargo deb --quiet
if [ "$variants" = 1 ]; then
    for v in sb nb; do
        echo "==> cargo deb --variant $v"
        cargo deb --quiet --variant "$v"
    done
fi
ls -l target/debian/*.deb
