//! Replays recorded Southbound contents through the SB BGP driver's computation and compares the
//! exposures with the snapshot next to them (`tests/fixtures/sb_bgp/<case>/expected.json`).
//!
//! Each case has `sb.json` (rows as `select` returns them), `local.json` (this chassis and its
//! options) and `expected.json`. The rows go through the OVSDB client's decoder and replica,
//! typed by the installed OVN_Southbound schema, and the driver's own row conversion
//! (`drivers/sb_bgp/feed.rs`), as a real download does. A case recorded against a newer OVN
//! adds the columns the installed schema lacks in `schema-extra.json` (`{"<table>":
//! {"<column>": <column schema>}}`), e.g. `Load_Balancer.ls_datapath_group` (OVN 23.09+). Regenerate after an intended change with
//! `UPDATE_SNAPSHOTS=1 cargo test --test sb_bgp_snapshots`, and review the diff.
#![cfg(feature = "sb_bgp")]

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ovn_bgp_agent::caps::ovsdb::DatabaseSchema;
use ovn_bgp_agent::drivers::sb_bgp::compute::{LocalChassis, TenantOptions, compute};
use ovn_bgp_agent::drivers::sb_bgp::feed::load_snapshot;
use ovn_bgp_agent::exposure::{ExposureKind, ExposureSet};
use serde_json::Value;

fn case_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sb_bgp")
        .join(name)
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run_case(name: &str) -> ExposureSet {
    let dir = case_dir(name);
    let mut schema_json = read_json(Path::new("/usr/share/ovn/ovn-sb.ovsschema"));
    let extra = dir.join("schema-extra.json");
    if extra.exists() {
        for (table, columns) in read_json(&extra).as_object().unwrap() {
            let target = schema_json["tables"][table]["columns"]
                .as_object_mut()
                .unwrap_or_else(|| panic!("{name}: schema-extra.json: no table {table}"));
            for (column, ty) in columns.as_object().unwrap() {
                target.insert(column.clone(), ty.clone());
            }
        }
    }
    let schema = DatabaseSchema::from_json(&schema_json, "ovn-sb.ovsschema")
        .expect("the installed OVN_Southbound schema (package ovn-common)");
    let feed = load_snapshot(&read_json(&dir.join("sb.json")), &schema)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let model = &feed.model;
    let local = read_json(&dir.join("local.json"));
    let chassis = LocalChassis {
        name: local["chassis"].as_str().unwrap().to_owned(),
        bridge_mappings: local["bridge_mappings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m[0].as_str().unwrap().to_owned(),
                    m[1].as_str().unwrap().to_owned(),
                )
            })
            .collect(),
    };
    let tenant = TenantOptions {
        expose_tenant_networks: local["expose_tenant_networks"].as_bool().unwrap_or(false),
        expose_ipv6_gua_tenant_networks: local["expose_ipv6_gua_tenant_networks"]
            .as_bool()
            .unwrap_or(false),
        address_scopes: local["address_scopes"]
            .as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect()),
    };
    let got = compute(model, &chassis, &tenant);
    let rendered = serde_json::to_string_pretty(&got).unwrap() + "\n";
    let expected_path = dir.join("expected.json");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&expected_path, &rendered).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_SNAPSHOTS=1 to create it)",
            expected_path.display()
        )
    });
    assert_eq!(
        rendered, expected,
        "{name}: exposures differ from the snapshot"
    );
    got
}

fn ips_of(set: &ExposureSet, kind: ExposureKind) -> BTreeSet<IpAddr> {
    set.global()
        .ips
        .values()
        .filter(|e| e.kind == kind)
        .map(|e| e.ip)
        .collect()
}

fn ips(list: &[&str]) -> BTreeSet<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn gateway_tenant_and_fips() {
    let set = run_case("gateway_tenant_fips");
    // B1: the provider VM bound here, both families, no neighbour.
    assert_eq!(
        ips_of(&set, ExposureKind::ProviderPort),
        ips(&["172.24.100.10", "2001:db8::10", "172.24.100.41"])
    );
    assert!(
        set.global().ips[&"172.24.100.10".parse().unwrap()]
            .lladdr
            .is_none()
    );
    // Virtual port: its IPv6 network is NDP-proxied.
    let virt = &set.global().ips[&"2001:db8::12".parse().unwrap()];
    assert_eq!(virt.kind, ExposureKind::VirtualPort);
    assert_eq!(
        virt.ndp_proxy
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>(),
        ["2001:db8::/64"]
    );
    // C1: the gateway port with its MAC as permanent neighbour and the v6 network proxied.
    let gw = &set.global().ips[&"172.24.100.5".parse().unwrap()];
    assert_eq!(gw.kind, ExposureKind::GatewayPort);
    assert_eq!(gw.lladdr.unwrap().to_string(), "fa:16:3e:aa:bb:cc");
    // C6 + C7: the centralized FIP and the distributed FIP of vm3 (bound here), not vm4's.
    assert_eq!(
        ips_of(&set, ExposureKind::FloatingIp),
        ips(&["172.24.100.20", "172.24.100.22"])
    );
    // C2: the tenant subnet routed via the gateway, and every bound tenant VM IP announced.
    let subnets: Vec<_> = set
        .global()
        .subnets
        .iter()
        .map(|s| (s.router_ip.to_string(), s.via.to_string()))
        .collect();
    assert_eq!(
        subnets,
        [("10.0.0.1/24".to_owned(), "172.24.100.5".to_owned())]
    );
    assert_eq!(
        ips_of(&set, ExposureKind::TenantPort),
        ips(&["10.0.0.10", "10.0.0.30", "10.0.0.40"])
    );
    // Octavia VIPs: the tenant one announced, the provider one wired (its LB sits behind R1).
    assert_eq!(
        ips_of(&set, ExposureKind::LoadBalancerVip),
        ips(&["10.0.0.100", "172.24.100.30"])
    );
    assert!(
        set.global().ips[&"172.24.100.30".parse().unwrap()]
            .provider
            .is_some()
    );
    // B4 / down / unbound ports are not exposed.
    for absent in [
        "172.24.100.11",
        "172.24.100.13",
        "10.0.0.50",
        "172.24.100.23",
    ] {
        assert!(
            !set.global().ips.contains_key(&absent.parse().unwrap()),
            "{absent} must not be exposed"
        );
    }
    // Broken rows are skipped with their reason; the rest is exposed.
    let reasons: Vec<_> = set
        .skipped
        .iter()
        .map(|s| (s.row.clone(), s.reason.clone()))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|(row, r)| row.contains("bad-mac") && r.contains("bad MAC")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(row, r)| row.contains("bad-cidrs") && r.contains("172.24.100.300/24")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(row, r)| row.contains("(R1)") && r.contains("nat_addresses")),
        "{reasons:?}"
    );
}

#[test]
fn vlan_provider_without_tenant_exposure() {
    let set = run_case("vlan_no_tenant");
    // B2: the VM's provider network carries the localnet tag.
    let vm = &set.global().ips[&"172.24.100.10".parse().unwrap()];
    assert_eq!(vm.provider.as_ref().unwrap().vlan, Some(100));
    // Both localnet tags of the physnet get a VLAN device on its bridge.
    let br = set.bridges.values().next().unwrap();
    assert_eq!(br.bridge.as_str(), "br-ex");
    assert_eq!(br.vlans.iter().copied().collect::<Vec<_>>(), [100, 200]);
    // Tenant exposure off: no subnet, no tenant IP.
    assert!(set.global().subnets.is_empty());
    assert!(ips_of(&set, ExposureKind::TenantPort).is_empty());
    // Hostile and over-long bridge names in ovn-bridge-mappings are refused, not used.
    assert_eq!(set.bridges.len(), 1);
    assert!(set.skipped.iter().any(|s| s.reason.contains("br;reboot")));
    assert!(
        set.skipped
            .iter()
            .any(|s| s.reason.contains("br-0123456789abcdef"))
    );
    // A gateway whose provider patch port is missing is skipped with the reason.
    assert!(
        set.skipped
            .iter()
            .any(|s| s.row.contains("cr-lrp-R9") && s.reason.contains("not found"))
    );
}

/// Southbound contents recorded from the lab (`scripts/lab/up.sh`, then
/// `scripts/record-sb-snapshot.sh`): what ovn-northd and ovn-controller really write for the
/// Neutron-shaped topology, not hand-written rows.
#[test]
fn recorded_lab_topology() {
    let set = run_case("lab_recorded");
    assert!(set.skipped.is_empty(), "{:?}", set.skipped);
    // The provider VM bound on the lab chassis, both families.
    assert_eq!(
        ips_of(&set, ExposureKind::ProviderPort),
        ips(&["172.24.4.20", "2001:db8::20"])
    );
    // The router gateway, with its MAC as neighbour and its IPv6 network proxied.
    assert_eq!(
        ips_of(&set, ExposureKind::GatewayPort),
        ips(&["172.24.4.10", "2001:db8::a"])
    );
    assert_eq!(
        set.global().ips[&"172.24.4.10".parse().unwrap()]
            .lladdr
            .unwrap()
            .to_string(),
        "fa:16:3e:00:00:01"
    );
    // The centralized FIP is in the gateway patch port's nat_addresses, resident on the cr-lrp.
    assert_eq!(
        ips_of(&set, ExposureKind::FloatingIp),
        ips(&["172.24.4.100"])
    );
    // The tenant subnet and the tenant VM behind the gateway.
    let subnets: Vec<_> = set
        .global()
        .subnets
        .iter()
        .map(|s| (s.router_ip.to_string(), s.via.to_string()))
        .collect();
    assert_eq!(
        subnets,
        [("10.0.0.1/24".to_owned(), "172.24.4.10".to_owned())]
    );
    assert_eq!(ips_of(&set, ExposureKind::TenantPort), ips(&["10.0.0.10"]));
}

/// C3: `expose_ipv6_gua_tenant_networks` alone exposes only global-unicast IPv6 tenant subnets and
/// their VMs: not the IPv4 subnet, not the ULA one.
#[test]
fn ipv6_gua_only_tenant_exposure() {
    let set = run_case("gua_only");
    let subnets: Vec<_> = set
        .global()
        .subnets
        .iter()
        .map(|s| (s.router_ip.to_string(), s.via.to_string()))
        .collect();
    assert_eq!(
        subnets,
        [("2001:db8:1::1/64".to_owned(), "2001:db8::5".to_owned())]
    );
    assert_eq!(
        ips_of(&set, ExposureKind::TenantPort),
        ips(&["2001:db8:1::10"])
    );
}

/// C4: with `address_scopes`, a subnet is exposed only when its router-side peer port carries an
/// allowed scope, and a VM only when its own port does.
#[test]
fn address_scopes_filter_subnets_and_vms() {
    let set = run_case("address_scopes");
    let subnets: BTreeSet<String> = set
        .global()
        .subnets
        .iter()
        .map(|s| s.router_ip.to_string())
        .collect();
    // The GUA subnet's scope (scope-other) is not allowed; the v4 and ULA ones are.
    assert_eq!(
        subnets,
        BTreeSet::from(["10.0.0.1/24".to_owned(), "fd00:1::1/64".to_owned()])
    );
    assert_eq!(
        ips_of(&set, ExposureKind::TenantPort),
        ips(&["10.0.0.10", "fd00:1::10"])
    );
}
