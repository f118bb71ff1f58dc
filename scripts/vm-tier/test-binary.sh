#!/usr/bin/env bash
# Builds one integration-test target on the host and prints the path of its test binary, for
# payloads/cargo-tests.sh to run in the VM.
#
#   scripts/vm-tier/test-binary.sh TEST-TARGET [CARGO-ARG]...     e.g. test-binary.sh netlink
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 TEST-TARGET [CARGO-ARG]..." >&2; exit 2; }
target=$1
shift
cd "$(dirname "$0")/../.."
# One JSON object per line; the test target's artifact line carries its "executable".
executable=$(cargo test --no-run --test "$target" --message-format=json "$@" |
    grep '"reason":"compiler-artifact"' | grep "\"name\":\"$target\"" | grep '"test":true' |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
[ -n "$executable" ] || { echo "cargo built no test executable for --test $target" >&2; exit 1; }
echo "$executable"
