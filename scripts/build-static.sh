#!/usr/bin/env bash
# Builds the static agent for any container image: the default features for
# x86_64-unknown-linux-musl, at target/x86_64-unknown-linux-musl/release/ovn-bgp-agent.
# Extra arguments go to cargo (e.g. --no-default-features --features mimalloc,sb_bgp,underlay).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-musl

rustup target list --installed | grep -qx "$target" || rustup target add "$target"
# mimalloc's and ring's C parts are compiled for musl with musl-gcc.
if ! command -v musl-gcc >/dev/null; then
    echo "installing musl-tools (musl-gcc)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends musl-tools >/dev/null
fi

cargo build --release --target "$target" "$@"
bin="target/$target/release/ovn-bgp-agent"
if readelf -l "$bin" | grep -q 'INTERP'; then
    echo "$bin asks for a dynamic loader: not a static binary" >&2
    exit 1
fi
"$bin" --version
"$bin" plugins
echo "static binary: $bin ($(du -h "$bin" | cut -f1))"
