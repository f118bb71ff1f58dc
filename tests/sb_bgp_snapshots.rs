//! The SB BGP driver's replay cases (`tests/fixtures/replay/sb_bgp/<case>/`), asserted
//! explicitly: what each case proves about the driver, on the exposures and monitor conditions
//! the replay engine (`src/replay.rs`) records after each step. The rows go through the OVSDB
//! client's decoder and replica, typed by the vendored OVN_Southbound schema, filtered by the
//! driver's own monitor conditions, and converted by the shared feed, as a real download is.
//! `tests/replay.rs` compares every step with its `NN-expected.json` (regenerate with
//! `UPDATE_SNAPSHOTS=1 cargo test --test replay`, and review the diff).
#![cfg(feature = "sb_bgp")]

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;

use ovn_bgp_agent::exposure::{ExposureKind, ExposureSet};
use ovn_bgp_agent::replay::{self, ReplayCase, StepOutput};

/// Every step's output of a case, 00 first.
fn replay_steps(name: &str) -> Vec<StepOutput> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay/sb_bgp")
        .join(name);
    let case = ReplayCase::load(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
    replay::run(&case)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_iter()
        .map(|s| s.output)
        .collect()
}

/// The exposures of a one-step case (its initial database).
fn run_case(name: &str) -> ExposureSet {
    let mut steps = replay_steps(name);
    assert_eq!(steps.len(), 1, "{name} is a one-step case");
    steps.remove(0).exposures
}

/// The Port_Binding clauses of a step, as `column function value` strings.
fn pb_clauses(step: &StepOutput) -> BTreeSet<String> {
    step.conditions["Port_Binding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{} {} {}",
                c[0].as_str().unwrap(),
                c[1].as_str().unwrap(),
                c[2]
            )
        })
        .collect()
}

fn all_ips(set: &ExposureSet) -> BTreeSet<IpAddr> {
    set.global().ips.keys().copied().collect()
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
        set.global().ips[&"172.24.100.10".parse::<std::net::IpAddr>().unwrap()]
            .lladdr
            .is_none()
    );
    // Virtual port: its IPv6 network is NDP-proxied.
    let virt = &set.global().ips[&"2001:db8::12".parse::<std::net::IpAddr>().unwrap()];
    assert_eq!(virt.kind, ExposureKind::VirtualPort);
    assert_eq!(
        virt.ndp_proxy
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>(),
        ["2001:db8::/64"]
    );
    // C1: the gateway port with its MAC as permanent neighbour and the v6 network proxied.
    let gw = &set.global().ips[&"172.24.100.5".parse::<std::net::IpAddr>().unwrap()];
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
        set.global().ips[&"172.24.100.30".parse::<std::net::IpAddr>().unwrap()]
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
            !set.global()
                .ips
                .contains_key(&absent.parse::<std::net::IpAddr>().unwrap()),
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
    let vm = &set.global().ips[&"172.24.100.10".parse::<std::net::IpAddr>().unwrap()];
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
        set.global().ips[&"172.24.4.10".parse::<std::net::IpAddr>().unwrap()]
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
    let mut steps = replay_steps("address_scopes");
    let set = steps.remove(0).exposures;
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
    // Step 01: the peer row of lrp-S4 (where its subnet's scope is) is gone: the subnet and its
    // VM are refused with a reason, not exposed unchecked.
    let set = steps.remove(0).exposures;
    let subnets: BTreeSet<String> = set
        .global()
        .subnets
        .iter()
        .map(|s| s.router_ip.to_string())
        .collect();
    assert_eq!(subnets, BTreeSet::from(["fd00:1::1/64".to_owned()]));
    assert_eq!(ips_of(&set, ExposureKind::TenantPort), ips(&["fd00:1::10"]));
    assert!(
        set.skipped
            .iter()
            .any(|s| s.row.contains("lrp-S4") && s.reason.contains("peer port \"S4\"")),
        "{:?}",
        set.skipped
    );
}

const CH1: &str = "c0000000-0000-0000-0000-000000000001";
const PROVIDER_DP: &str = "d0000000-0000-0000-0000-000000000010";
const ROUTER_DP: &str = "d0000000-0000-0000-0000-000000000011";
const TENANT_DP: &str = "d0000000-0000-0000-0000-000000000012";

fn clause(column: &str, function: &str, value: &str) -> String {
    format!("{column} {function} {value}")
}

fn uuid_value(u: &str) -> String {
    format!("[\"uuid\",\"{u}\"]")
}

/// The clauses every step of a local-chassis case has: this chassis, localnets, FIP carriers,
/// Octavia VIPs.
fn base_clauses() -> BTreeSet<String> {
    BTreeSet::from([
        clause("chassis", "==", &uuid_value(CH1)),
        clause("type", "==", "\"localnet\""),
        clause("nat_addresses", "!=", "[\"set\",[]]"),
        clause("mac", "==", "[\"set\",[]]"),
    ])
}

/// A gateway bound here makes the condition follow its router to the tenant subnets; the
/// tenant exposures exist only because the re-filtered rows arrived, and leave with them.
#[test]
fn a_gateway_bound_here_pulls_its_router_in_and_leaving_withdraws_it() {
    let steps = replay_steps("gateway_moves");
    assert_eq!(steps.len(), 3);
    // 00: the gateway is elsewhere: only the local clauses, only the provider VM.
    assert_eq!(pb_clauses(&steps[0]), base_clauses());
    assert_eq!(steps[0].rows["Port_Binding"], 2);
    assert_eq!(all_ips(&steps[0].exposures), ips(&["172.24.100.10"]));
    assert!(steps[0].exposures.global().subnets.is_empty());

    // 01: bound here: the provider patch port and the subnet's patch port by name, the router,
    // provider and tenant datapaths.
    let mut grown = base_clauses();
    grown.extend([
        clause("logical_port", "==", "\"R1\""),
        clause("logical_port", "==", "\"S1\""),
        clause("datapath", "==", &uuid_value(PROVIDER_DP)),
        clause("datapath", "==", &uuid_value(ROUTER_DP)),
        clause("datapath", "==", &uuid_value(TENANT_DP)),
    ]);
    assert_eq!(pb_clauses(&steps[1]), grown);
    let set = &steps[1].exposures;
    assert_eq!(
        ips_of(set, ExposureKind::GatewayPort),
        ips(&["172.24.100.5"])
    );
    assert_eq!(
        ips_of(set, ExposureKind::TenantPort),
        ips(&["10.0.0.10", "10.0.0.30"])
    );
    let subnets: Vec<String> = set
        .global()
        .subnets
        .iter()
        .map(|s| s.router_ip.to_string())
        .collect();
    assert_eq!(subnets, ["10.0.0.1/24"]);
    // The other router (gateway on ch-2) is not followed: its subnet never arrives.
    assert!(!subnets.iter().any(|s| s.starts_with("10.1.")));

    // 02: moved to ch-3: back to the local clauses and rows, everything of R1 withdrawn.
    assert_eq!(pb_clauses(&steps[2]), base_clauses());
    assert_eq!(steps[2].rows["Port_Binding"], 2);
    assert_eq!(steps[2].exposures, steps[0].exposures);
}

/// A VM port arrives when bound here, is withdrawn when down, and leaves when deleted.
#[test]
fn a_provider_vm_is_exposed_while_bound_here_and_up() {
    let steps = replay_steps("provider_vm_lifecycle");
    let rows: Vec<usize> = steps.iter().map(|s| s.rows["Port_Binding"]).collect();
    // The unbound port matches no clause; bound here it does, until deleted.
    assert_eq!(rows, [2, 3, 3, 2]);
    let vm5 = ips(&["172.24.100.50", "2001:db8::50"]);
    assert!(all_ips(&steps[0].exposures).is_disjoint(&vm5));
    assert_eq!(ips_of(&steps[1].exposures, ExposureKind::ProviderPort), {
        let mut all = vm5.clone();
        all.insert("172.24.100.10".parse().unwrap());
        all
    });
    assert!(all_ips(&steps[2].exposures).is_disjoint(&vm5));
    assert_eq!(steps[3].exposures, steps[0].exposures);
}

/// FIPs follow `nat_addresses` edits: a centralized one on the local gateway's patch port, a
/// distributed one on another router's patch port that is monitored only while it carries FIPs.
#[test]
fn floating_ips_follow_nat_addresses() {
    let steps = replay_steps("fip_nat_addresses");
    assert!(ips_of(&steps[0].exposures, ExposureKind::FloatingIp).is_empty());
    // R2 arrives with its FIPs (nat_addresses != []); vm6's FIP is resident on ch-2.
    assert_eq!(
        steps[1].rows["Port_Binding"],
        steps[0].rows["Port_Binding"] + 1
    );
    assert_eq!(
        ips_of(&steps[1].exposures, ExposureKind::FloatingIp),
        ips(&["172.24.100.20", "172.24.100.22"])
    );
    assert_eq!(steps[2].rows["Port_Binding"], steps[0].rows["Port_Binding"]);
    assert_eq!(steps[2].exposures, steps[0].exposures);
}

/// A malformed row is reported in `skipped` while everything else stays exposed; once
/// corrected, it is exposed too.
#[test]
fn a_malformed_row_is_skipped_and_the_rest_stays() {
    let steps = replay_steps("malformed_row");
    assert!(steps[0].exposures.skipped.is_empty());
    let bad = &steps[1].exposures;
    assert_eq!(all_ips(bad), ips(&["172.24.100.10"]));
    assert!(
        bad.skipped
            .iter()
            .any(|s| s.row.contains("(vm7)") && s.reason.contains("not-a-mac")),
        "{:?}",
        bad.skipped
    );
    let fixed = &steps[2].exposures;
    assert!(fixed.skipped.is_empty(), "{:?}", fixed.skipped);
    assert_eq!(all_ips(fixed), ips(&["172.24.100.10", "172.24.100.70"]));
}
