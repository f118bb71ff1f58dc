//! The `ovn` backend (node-local OVN cluster) rendering the NB driver's recorded exposures step
//! by step: every `NN-expected.json` of the NB replay cases (`tests/fixtures/replay/nb_bgp/`)
//! goes through `backends::ovn_cluster::render`, and the result of each step is compared with a
//! snapshot (`tests/fixtures/ovn_cluster/<case>.json`; regenerate with `UPDATE_SNAPSHOTS=1`).
//! Beside the snapshots, what acceptance row H1 says is asserted after every step: one
//! `Static_MAC_Binding` per announced IP with a MAC and none for a withdrawn one, every tenant
//! exposure reported as unsupported (never silently dropped, never failing the step), the
//! skeleton rows always there.
#![cfg(feature = "ovn_cluster")]

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ovn_bgp_agent::backends::ovn_cluster::render::{
    BridgeFacts, ClusterFacts, ClusterSettings, INTERNAL_LRP, Mappings, ROUTER, TENANT_UNSUPPORTED,
    binding_id, render,
};
use ovn_bgp_agent::exposure::{ExposureKind, ExposureSet};
use ovn_bgp_agent::types::InterfaceName;

fn br(name: &str) -> InterfaceName {
    InterfaceName::new(name).unwrap()
}

fn settings() -> ClusterSettings {
    ClusterSettings {
        peers: vec!["100.64.7.2".parse().unwrap()],
        prefixes: vec!["172.24.4.0/24".parse().unwrap()],
        external_nics: BTreeSet::from(["eth-fab".to_owned()]),
        chassis: "bgp".to_owned(),
    }
}

/// OpenStack's mappings from the case's bridges, and the local cluster's: the fabric on
/// `br-fab`, `local` on the case's first bridge.
fn mappings(exposures: &ExposureSet) -> Mappings {
    let mut m = Mappings::default();
    for (bridge, wiring) in &exposures.bridges {
        for physnet in &wiring.physnets {
            m.main.push((physnet.clone(), bridge.clone()));
        }
    }
    m.cluster.push(("dcfabric".to_owned(), br("br-fab")));
    if let Some(bridge) = exposures.bridges.keys().next() {
        m.cluster.push(("local".to_owned(), bridge.clone()));
    }
    m
}

fn facts() -> ClusterFacts {
    ClusterFacts {
        bridges: BTreeMap::from([(
            br("br-fab"),
            BridgeFacts {
                mac: Some("52:54:00:00:07:01".parse().unwrap()),
                addresses: vec!["100.64.7.1/24".parse().unwrap()],
                ports: BTreeSet::from([
                    "eth-fab".to_owned(),
                    "patch-dcfabric-localnet-to-br-int-bgp".to_owned(),
                ]),
            },
        )]),
    }
}

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay/nb_bgp")
        .join(case)
}

/// The driver's exposures after each step of a replay case, in order.
fn steps(case: &str) -> Vec<(String, ExposureSet)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(case_dir(case))
        .unwrap_or_else(|e| panic!("{case}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("-expected.json"))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let step: serde_json::Value = serde_json::from_str(&text).unwrap();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            (
                name,
                serde_json::from_value(step["exposures"].clone()).unwrap(),
            )
        })
        .collect()
}

fn is_tenant(kind: ExposureKind) -> bool {
    matches!(kind, ExposureKind::TenantPort)
}

/// Renders every step, checks the H1 invariants on each, and compares all steps with the
/// case's snapshot.
fn render_case(case: &str) {
    let settings = settings();
    let mut snapshot = serde_json::Map::new();
    let mut bindings_seen = 0;
    for (step, exposures) in steps(case) {
        let (rendered, announced) = render(&settings, &mappings(&exposures), &facts(), &exposures);
        let nb = rendered
            .system
            .local_nb
            .as_ref()
            .unwrap_or_else(|| panic!("{case} {step}: no local NB rows"));
        for (table, key) in [
            ("Logical_Router", ROUTER),
            ("Logical_Router_Port", INTERNAL_LRP),
        ] {
            assert!(
                nb.rows.keys().any(|id| id.table == table && id.key == key),
                "{case} {step}: no {table} {key}"
            );
        }
        let bindings: BTreeSet<_> = nb
            .rows
            .keys()
            .filter(|id| id.table == "Static_MAC_Binding")
            .cloned()
            .collect();
        bindings_seen += bindings.len();
        let mut expected = BTreeSet::new();
        for scope in exposures.scopes.values() {
            for (ip, exposed) in &scope.ips {
                if is_tenant(exposed.kind) {
                    // Reported, not realised, and not announced from bgp-nic either.
                    assert!(
                        rendered.skipped.iter().any(|s| *s.row == *exposed.source
                            && s.reason == format!("{ip}: {TENANT_UNSUPPORTED}")),
                        "{case} {step}: tenant {ip} not reported: {:#?}",
                        rendered.skipped
                    );
                    assert!(!announced_ip(&announced, *ip), "{case} {step}: {ip}");
                } else if exposed.lladdr.is_some() {
                    expected.insert(binding_id(*ip));
                }
            }
        }
        assert_eq!(
            bindings, expected,
            "{case} {step}: one Static_MAC_Binding per announced IP with a MAC, none else"
        );
        // The local NB rows are keyed by (table, key): a list in the snapshot (JSON keys are
        // strings); the rest of the desired system as it serializes.
        let nb_rows: Vec<_> = nb
            .rows
            .iter()
            .map(|(id, row)| serde_json::json!({"id": id, "row": row}))
            .collect();
        let mut system = rendered.system.clone();
        system.local_nb = None;
        snapshot.insert(
            step,
            serde_json::json!({
                "local_nb_rows": nb_rows,
                "system": system,
                "skipped": rendered.skipped,
                "announced": announced,
            }),
        );
    }
    assert!(bindings_seen > 0, "{case}: no step has a binding to check");
    let text = serde_json::to_string_pretty(&snapshot).unwrap() + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ovn_cluster")
        .join(format!("{case}.json"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 creates it)", path.display()));
    assert_eq!(
        text, expected,
        "{case}: rendering differs from the snapshot"
    );
}

fn announced_ip(set: &ExposureSet, ip: IpAddr) -> bool {
    set.scopes.values().any(|s| s.ips.contains_key(&ip))
}

#[test]
fn provider_ports_step_by_step() {
    render_case("provider_ports");
}

#[test]
fn fip_mode_switch_step_by_step() {
    render_case("fip_mode_switch");
}

#[test]
fn load_balancers_step_by_step() {
    render_case("load_balancers");
}

#[test]
fn hostile_rows_step_by_step() {
    render_case("hostile_rows");
}

#[test]
fn tenant_networks_are_reported_not_realised_step_by_step() {
    render_case("tenant_host_mode_snat_scopes");
}
