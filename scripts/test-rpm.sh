#!/usr/bin/env bash
# Checks an .rpm from scripts/package.sh --rpm: its header and file list (rpm -qip/-qlp), the
# sample config flagged %config(noreplace), then installs it into a scratch root (rpm --root, no
# dependencies or scriptlets: the root is empty) and runs the installed binary's --version and
# check-config on the installed sample configuration; rpm -V then finds every file as packaged.
#
#   scripts/test-rpm.sh [target/generate-rpm/ovn-bgp-agent-rs-<version>-1.x86_64.rpm]
#   scripts/test-rpm.sh target/generate-rpm/ovn-bgp-agent-rs-sb-<version>-1.x86_64.rpm   # a variant
#                                  (its binary must list only its driver and underlay)
set -euo pipefail
cd "$(dirname "$0")/.."
fail() {
    printf 'test-rpm: FAILED: %s\n' "$*" >&2
    exit 1
}
version=$(cargo metadata --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "ovn-bgp-agent") | .version')
rpm_file=${1:-target/generate-rpm/ovn-bgp-agent-rs-$version-1.x86_64.rpm}
[ -f "$rpm_file" ] || fail "$rpm_file does not exist (scripts/package.sh --rpm builds it)"
command -v rpm >/dev/null || fail "rpm is not installed (scripts/install-deps.sh installs it)"

rpm -qip "$rpm_file"
name=$(rpm -qp --qf '%{NAME}' "$rpm_file")
# Every driver and backend in the full package; one driver and the underlay backend in a slim one.
case $name in
    ovn-bgp-agent-rs) plugins="nb_ovn_bgp_driver ovn ovn_bgp_driver ovn_evpn_driver ovn_stretched_l2_bgp_driver underlay vrf" ;;
    ovn-bgp-agent-rs-sb) plugins="ovn_bgp_driver underlay" ;;
    ovn-bgp-agent-rs-nb) plugins="nb_ovn_bgp_driver underlay" ;;
    *) fail "package name $name" ;;
esac
[ "$(rpm -qp --qf '%{VERSION}' "$rpm_file")" = "$version" ] || fail "package version is not $version"

expected="/etc/ovn-bgp-agent/bgp-agent.conf
/etc/ovn-bgp-agent/bgp-agent.conf.d/README
/usr/bin/ovn-bgp-agent
/usr/lib/systemd/system/ovn-bgp-agent-nonroot.service
/usr/lib/systemd/system/ovn-bgp-agent.service
/usr/lib/sysusers.d/ovn-bgp-agent.conf
/usr/share/doc/ovn-bgp-agent-rs/README.md
/usr/share/doc/ovn-bgp-agent-rs/configuration.md
/usr/share/doc/ovn-bgp-agent-rs/operations.md
/usr/share/licenses/ovn-bgp-agent-rs/LICENSE"
files=$(rpm -qlp "$rpm_file" | sort)
echo "$files"
[ "$files" = "$expected" ] || fail "file list differs from the .deb's contents: $(diff <(echo "$expected") <(echo "$files") || true)"
# fflags: c = %config, n = noreplace, d = %doc.
flags=$(rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags} %{FILEMODES:perms}\n]' "$rpm_file")
grep -qx '/etc/ovn-bgp-agent/bgp-agent.conf cn -rw-r-----' <<<"$flags" ||
    fail "the sample config is not %config(noreplace) mode 0640: $(grep bgp-agent.conf <<<"$flags")"
grep -qx '/usr/bin/ovn-bgp-agent  -rwxr-xr-x' <<<"$flags" || fail "the binary: $(grep usr/bin <<<"$flags")"
grep -qx '/usr/share/doc/ovn-bgp-agent-rs/README.md d -rw-r--r--' <<<"$flags" || fail "README.md is not %doc"
scripts=$(rpm -qp --scripts "$rpm_file")
grep -q 'systemctl daemon-reload' <<<"$scripts" || fail "no daemon-reload scriptlet: $scripts"
grep -q 'disable --now ovn-bgp-agent.service' <<<"$scripts" || fail "no scriptlet stopping the agent on erase: $scripts"
# The glibc build's symbol versions become Requires, so rpm refuses a host whose glibc is older.
echo "needs glibc >= $(rpm -qpR "$rpm_file" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -n 1 | cut -d_ -f2)"

root=$(mktemp -d /tmp/ovn-bgp-agent-rpm-root.XXXXXX)
trap 'rm -rf --one-file-system -- "$root"' EXIT
rpm -i --nodeps --noscripts --root "$root" "$rpm_file"
rpm --root "$root" -V --nodeps --noscripts "$name" || fail "rpm -V: the installed files differ from the package"
"$root/usr/bin/ovn-bgp-agent" --version
listed=$("$root/usr/bin/ovn-bgp-agent" plugins | awk '/^  /{print $1}' | sort | xargs)
[ "$listed" = "$plugins" ] || fail "$name's binary has [$listed], expected [$plugins]"
"$root/usr/bin/ovn-bgp-agent" --config-file "$root/etc/ovn-bgp-agent/bgp-agent.conf" \
    --config-dir "$root/etc/ovn-bgp-agent/bgp-agent.conf.d" check-config >/dev/null ||
    fail "check-config rejects the installed sample configuration"
rpm -e --nodeps --noscripts --root "$root" "$name"
[ ! -e "$root/usr/bin/ovn-bgp-agent" ] || fail "rpm -e left /usr/bin/ovn-bgp-agent"
echo "test-rpm: $rpm_file installs, runs and checks its sample configuration"
