//! The live NB driver with `exposing_method = vrf` against real `ovsdb-server`s: a Northbound
//! (with `Logical_Router_Port.status`, as OVN >= 23.09, so no Southbound) holding an EVPN
//! provider network, its subnets' DHCP_Options and a VM bound here, and a local Open_vSwitch
//! database for the identity. The driver follows the switch's `neutron_bgpvpn:*` settings and
//! the network's DHCP options without a restart, and monitors only the DHCP_Options of the EVPN
//! networks served here. Run under the daemon lock:
//! `flock /tmp/ovn-bgp-daemons.lock cargo test --test nb_vrf_live`.

// Real daemons run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod ovsdb_support;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::Capabilities;
use ovn_bgp_agent::caps::frr::values::Vni;
use ovn_bgp_agent::caps::ovsdb::*;
use ovn_bgp_agent::config::AgentConfig;
use ovn_bgp_agent::drivers::nb_bgp::compute::VRF_METHOD;
use ovn_bgp_agent::drivers::nb_bgp::live::NbBgpDriver;
use ovn_bgp_agent::exposure::{EvpnAttachment, EvpnParams, ExposureSet, ScopeId};
use ovn_bgp_agent::plugin::{Driver, ExplainQuery, PluginContext};
use ovsdb_support::*;

const T: Duration = Duration::from_secs(15);

const SYS1: &str = "6f1c3d2a-9b7e-4c1d-8a5f-2e3b4c5d6e7f";
const HOST1: &str = "compute-1.example.org";
const PUBNET: &str = "3b1f5a2e-7c4d-4e8f-9a1b-2c3d4e5f6a70";
const OTHERNET: &str = "11111111-0000-4000-8000-0000000000c3";
const VM: &str = "5e0a1b2c-0000-4000-8000-0000000000b1";
const VM_MAC: &str = "fa:16:3e:00:00:21";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn named_set(names: &[&str]) -> Datum {
    Datum::set(names.iter().map(|n| Atom::NamedUuid((*n).into())).collect())
}

fn strings(values: &[&str]) -> Datum {
    Datum::set(values.iter().map(Atom::string).collect())
}

async fn writer(remote: &str, db: &str, table: &str) -> OvsdbClient {
    OvsdbClient::connect(
        ClientConfig::new(remote, db).unwrap(),
        MonitorSpec::default().table(TableSpec::new(table, &[])),
    )
    .await
    .unwrap()
}

async fn transact(c: &OvsdbClient, ops: Vec<Op>) -> Vec<OpResult> {
    c.transact(ops).await.expect("transaction")
}

fn evpn_ids(vni: &str) -> Datum {
    Datum::map([
        ("neutron_bgpvpn:type", "l3"),
        ("neutron_bgpvpn:vni", vni),
        ("neutron_bgpvpn:rt", "['64999:1']"),
    ])
}

fn dhcp_options(cidr: &str, router: &str, network: &str) -> Op {
    Op::insert("DHCP_Options")
        .set("cidr", cidr)
        .set("options", Datum::map([("router", router)]))
        .set(
            "external_ids",
            Datum::map([
                ("subnet_id", "5a5a5a5a-0000-4000-8000-000000000001"),
                ("neutron:network_id", network),
            ]),
        )
}

/// Neutron's rows: provider network `public` with EVPN settings (VNI 100), its IPv4 subnet's
/// DHCP options, a VM bound to HOST1; the DHCP options of another network.
fn nb_rows() -> Vec<Op> {
    vec![
        Op::insert("Logical_Switch_Port")
            .uuid_name("ln")
            .set("name", "provnet-6a1c2b3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
            .set("type", "localnet")
            .set("addresses", strings(&["unknown"]))
            .set("options", Datum::map([("network_name", "public")])),
        Op::insert("Logical_Switch_Port")
            .uuid_name("vm")
            .set("name", VM)
            .set("addresses", strings(&[&format!("{VM_MAC} 172.24.4.21")]))
            .set("options", Datum::map([("requested-chassis", HOST1)]))
            .set("up", true)
            .set(
                "external_ids",
                Datum::map([("neutron:network_name", format!("neutron-{PUBNET}").as_str())]),
            ),
        Op::insert("Logical_Switch")
            .set("name", format!("neutron-{PUBNET}").as_str())
            .set("ports", named_set(&["ln", "vm"]))
            .set("external_ids", evpn_ids("100")),
        dhcp_options("172.24.4.0/24", "172.24.4.1", PUBNET),
        dhcp_options("10.9.0.0/24", "10.9.0.1", OTHERNET),
        Op::insert("NB_Global"),
    ]
}

fn identity_ids(nb_remote: &str) -> Datum {
    Datum::map([
        ("system-id", SYS1),
        ("hostname", HOST1),
        ("ovn-bridge-mappings", "public:br-ex"),
        ("ovn-remote", "unix:/nonexistent/ovnsb_db.sock"),
        ("ovn-nb-remote", nb_remote),
    ])
}

/// The installed NB schema with `Logical_Router_Port.status`, as OVN >= 23.09 has it.
fn schema_with_lrp_status(dir: &TempDir) -> String {
    let text = std::fs::read_to_string(NB_SCHEMA).expect("OVN is installed");
    let mut schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    schema["tables"]["Logical_Router_Port"]["columns"]["status"] = serde_json::json!({
        "type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"},
        "ephemeral": true
    });
    let path = dir.path().join("ovn-nb-with-lrp-status.ovsschema");
    std::fs::write(&path, serde_json::to_string_pretty(&schema).unwrap()).unwrap();
    path.to_str().unwrap().to_owned()
}

async fn start_driver(ovs: &OvsdbServer) -> NbBgpDriver {
    let mut config = AgentConfig::default();
    config.default.ovsdb_connection = ovs.unix_remote();
    config.default.exposing_method = "vrf".to_owned();
    config.default.evpn_local_ip = Some(ip("10.0.0.1"));
    let config = Arc::new(config);
    let ctx = PluginContext::new(config.clone(), Capabilities::new(&config));
    // Through the registry, as the host selects it: vrf is built for this driver.
    let registration = ovn_bgp_agent::plugin::drivers()
        .into_iter()
        .find(|d| d.name == "nb_ovn_bgp_driver")
        .expect("the NB driver is in this build");
    assert!(
        (registration.factory)(&ctx).is_ok(),
        "exposing_method = vrf is accepted by the NB driver's factory"
    );
    let mut driver = NbBgpDriver::new(&ctx);
    tokio::time::timeout(T, driver.start(&ctx))
        .await
        .expect("the driver starts within 15 s")
        .expect("driver start");
    driver
}

/// Run the driver as the host does (`changed`, then `settle`) until `done` holds for its
/// exposures.
async fn until(
    driver: &mut NbBgpDriver,
    what: &str,
    done: impl Fn(&ExposureSet) -> bool,
) -> ExposureSet {
    let deadline = Instant::now() + T;
    loop {
        let set = driver.desired_exposures().unwrap();
        if done(&set) {
            return set;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{what}: not within 15 s; exposures: {set:#?}"
        );
        if let Ok(changed) = tokio::time::timeout(left, driver.changed()).await {
            changed.expect("driver changed()");
            driver.settle().await.expect("driver settle()");
        }
    }
}

fn evpn(n: u32) -> ScopeId {
    ScopeId::Evpn(Vni::new(n).unwrap())
}

fn params(set: &ExposureSet, vni: u32) -> Option<&EvpnParams> {
    set.scopes.get(&evpn(vni)).and_then(|s| s.evpn.as_ref())
}

fn gateways(set: &ExposureSet, vni: u32) -> Vec<String> {
    params(set, vni)
        .into_iter()
        .flat_map(|p| &p.attachments)
        .flat_map(|a| match a {
            EvpnAttachment::Localnet(l) => l.gateway_addresses.iter().map(|g| g.to_string()),
            EvpnAttachment::RouterGateway { .. } => panic!("no router-gateway attachment here"),
        })
        .collect()
}

fn vm_in(set: &ExposureSet, vni: u32) -> bool {
    set.scopes
        .get(&evpn(vni))
        .and_then(|s| s.ips.get(&ip("172.24.4.21")))
        .is_some_and(|e| e.lladdr.map(|m| m.to_string()).as_deref() == Some(VM_MAC))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vrf_method_follows_the_switch_evpn_settings_and_dhcp_options() {
    let dir = TempDir::new("nbvrf-schema");
    let nb = OvsdbServer::standalone(&schema_with_lrp_status(&dir), "nbvrf-nb");
    let nbw = writer(&nb.unix_remote(), "OVN_Northbound", "NB_Global").await;
    transact(&nbw, nb_rows()).await;
    let ovs = OvsdbServer::standalone(VSWITCH_SCHEMA, "nbvrf-ovs");
    let ovsw = writer(&ovs.unix_remote(), "Open_vSwitch", "Open_vSwitch").await;
    transact(
        &ovsw,
        vec![Op::insert("Open_vSwitch").set("external_ids", identity_ids(&nb.unix_remote()))],
    )
    .await;

    let mut driver = start_driver(&ovs).await;
    // E1/E2 at the first reconcile: the scope, its attachment with the subnet's gateway, the VM
    // as a route in it with its MAC; nothing in the global scope.
    let set = driver.desired_exposures().unwrap();
    let p = params(&set, 100).expect("scope evpn:100");
    assert_eq!(p.bgp_as.get(), 64999);
    assert_eq!(
        p.import_targets
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["64999:1"]
    );
    assert_eq!(
        p.import_targets, p.export_targets,
        "rt is import and export"
    );
    assert_eq!(gateways(&set, 100), ["172.24.4.1/24"]);
    assert!(vm_in(&set, 100), "{set:#?}");
    assert!(set.global().is_empty(), "{:#?}", set.global());
    {
        let session = driver.session().unwrap();
        assert!(session.policy().evpn);
        assert_eq!(
            session.conditions()["DHCP_Options"].to_json(),
            serde_json::json!([[
                "external_ids",
                "includes",
                ["map", [["neutron:network_id", PUBNET]]]
            ]]),
            "only the DHCP options of the EVPN network served here"
        );
        assert_eq!(session.model().dhcp_options_of_network(OTHERNET).len(), 0);
    }
    let why = driver.explain(&ExplainQuery::new("172.24.4.21"));
    assert!(
        why.iter().any(|l| l.contains("evpn:100")),
        "explain names the EVPN scope: {why:#?}"
    );

    // The subnet's gateway moves: the VRF side follows.
    transact(
        &nbw,
        vec![
            Op::update("DHCP_Options")
                .where_eq("cidr", "172.24.4.0/24")
                .set("options", Datum::map([("router", "172.24.4.254")])),
        ],
    )
    .await;
    until(&mut driver, "gateway address followed", |s| {
        gateways(s, 100) == ["172.24.4.254/24"]
    })
    .await;

    // The VNI changes: everything moves to evpn:200, VNI 100 is gone.
    let ls = format!("neutron-{PUBNET}");
    transact(
        &nbw,
        vec![
            Op::update("Logical_Switch")
                .where_eq("name", ls.as_str())
                .set("external_ids", evpn_ids("200")),
        ],
    )
    .await;
    let set = until(&mut driver, "VNI 100 -> 200", |s| vm_in(s, 200)).await;
    assert!(params(&set, 100).is_none(), "{set:#?}");
    assert_eq!(gateways(&set, 200), ["172.24.4.254/24"]);

    // A hostile route target: the network's scope goes, the switch is reported.
    transact(
        &nbw,
        vec![
            Op::update("Logical_Switch")
                .where_eq("name", ls.as_str())
                .set(
                    "external_ids",
                    Datum::map([
                        ("neutron_bgpvpn:type", "l3"),
                        ("neutron_bgpvpn:vni", "200"),
                        ("neutron_bgpvpn:rt", "['64999:1\nexit']"),
                    ]),
                ),
        ],
    )
    .await;
    let set = until(&mut driver, "hostile rt refused", |s| {
        params(s, 200).is_none()
    })
    .await;
    assert!(
        set.skipped
            .iter()
            .any(|r| r.table == "Logical_Switch" && r.reason.contains("neutron_bgpvpn:rt")),
        "{:#?}",
        set.skipped
    );

    // The settings are removed: no scope, the VM is reported, the DHCP options unmonitored.
    transact(
        &nbw,
        vec![
            Op::update("Logical_Switch")
                .where_eq("name", ls.as_str())
                .set("external_ids", Datum::map::<&str, &str>([])),
        ],
    )
    .await;
    let set = until(&mut driver, "settings removed", |s| {
        s.skipped.iter().any(|r| r.table == VRF_METHOD)
    })
    .await;
    assert!(set.scopes.keys().all(|s| *s == ScopeId::Global), "{set:#?}");
    assert!(set.global().is_empty());
    let deadline = Instant::now() + T;
    while driver.session().unwrap().conditions()["DHCP_Options"].to_json()
        != serde_json::json!([false])
    {
        assert!(
            Instant::now() < deadline,
            "DHCP_Options condition not dropped"
        );
        if let Ok(changed) =
            tokio::time::timeout(Duration::from_millis(200), driver.changed()).await
        {
            changed.unwrap();
        }
        driver.settle().await.unwrap();
    }
    // And back: the settings are added again, the VM returns to its VRF.
    transact(
        &nbw,
        vec![
            Op::update("Logical_Switch")
                .where_eq("name", ls.as_str())
                .set("external_ids", evpn_ids("300")),
        ],
    )
    .await;
    let set = until(&mut driver, "settings added again", |s| {
        vm_in(s, 300) && gateways(s, 300) == ["172.24.4.254/24"]
    })
    .await;
    assert!(set.global().is_empty());
}
