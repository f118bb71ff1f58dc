#!/usr/bin/env bash
# Installs the Debian packages the lab and the tests need, only when something is missing.
set -euo pipefail
need=()
command -v ovsdb-server >/dev/null || need+=(openvswitch-switch)
command -v ovs-vswitchd >/dev/null || need+=(openvswitch-switch)
command -v ovn-northd >/dev/null || need+=(ovn-central)
command -v ovn-controller >/dev/null || need+=(ovn-host)
[ -x /usr/lib/frr/bgpd ] || need+=(frr)
command -v ip >/dev/null || need+=(iproute2)
# Builds the OVN 25.03 tier's chroot (scripts/lab/ovn-chroot.sh, LAB_OVN=25.03).
command -v debootstrap >/dev/null || need+=(debootstrap)
# Packages beyond the .deb (scripts/package.sh --rpm, scripts/package-oci.sh, scripts/test-oci.sh):
# rpm to inspect and install the .rpm, umoci and skopeo to build the OCI image, crun or runc to run it,
# jq to edit its runtime config, curl to scrape the containerized agent.
command -v rpm >/dev/null || need+=(rpm)
command -v umoci >/dev/null || need+=(umoci)
command -v skopeo >/dev/null || need+=(skopeo)
command -v crun >/dev/null || need+=(crun)
command -v runc >/dev/null || need+=(runc)
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
# `python3 -m venv` for upstream ovn-bgp-agent in the NB benchmark (BENCH_UPSTREAM=1).
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ "${#need[@]}" -gt 0 ]; then
    echo "installing: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
for bin in ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ovn-northd ovn-controller ovn-nbctl ovn-sbctl vtysh ip debootstrap \
    rpm umoci skopeo crun runc jq curl; do
    command -v "$bin" >/dev/null || { echo "missing $bin after install" >&2; exit 1; }
done
frr_version=$(dpkg-query -W -f '${Version}' frr 2>/dev/null || echo unknown)
echo "system packages present: $(ovs-vswitchd --version | awk 'NR == 1'); $(ovn-northd --version | awk 'NR == 1'); frr $frr_version"
