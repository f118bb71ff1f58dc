//! The live NB BGP driver (`nb_ovn_bgp_driver`) against real `ovsdb-server`s: a Northbound with
//! Neutron's rows, a Southbound with this chassis' `chassisredirect` binding (OVN 23.03, whose NB
//! has no `Logical_Router_Port.status`), and a local Open_vSwitch database for the identity
//! (hostname and system-id different strings, as in real clouds). A second test runs on a
//! Northbound whose schema has LRP `status` (as OVN >= 23.09) and no Southbound at all. A third
//! runs the driver with `exposing_method = vrf`: it follows an EVPN provider network's
//! `neutron_bgpvpn:*` settings and DHCP options. Run under the daemon lock:
//! `flock /tmp/ovn-bgp-daemons.lock cargo test --test nb_bgp_live`.

// Real daemons run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod ovsdb_support;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::Capabilities;
use ovn_bgp_agent::caps::frr::values::Vni;
use ovn_bgp_agent::caps::ovsdb::*;
use ovn_bgp_agent::config::AgentConfig;
use ovn_bgp_agent::drivers::nb_bgp::compute::VRF_METHOD;
use ovn_bgp_agent::drivers::nb_bgp::live::NbBgpDriver;
use ovn_bgp_agent::exposure::{
    EvpnAttachment, EvpnParams, ExposedIp, ExposureKind, ExposureSet, ScopeId,
};
use ovn_bgp_agent::ovn::nb::session::GatewaySource;
use ovn_bgp_agent::plugin::{Driver, ExplainQuery, PluginContext};
use ovsdb_support::*;

const T: Duration = Duration::from_secs(15);

const SYS1: &str = "6f1c3d2a-9b7e-4c1d-8a5f-2e3b4c5d6e7f";
const SYS2: &str = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d";
const HOST1: &str = "compute-1.example.org";
const HOST2: &str = "compute-2.example.org";
const PUBNET: &str = "3b1f5a2e-7c4d-4e8f-9a1b-2c3d4e5f6a70";
const TENNET: &str = "8e2d6c4b-1a3f-4b5c-8d7e-9f0a1b2c3d40";
const ROUTER: &str = "c4a7e2f1-5b3d-4a6c-9e8f-1d2c3b4a5f60";
const OTHER_ROUTER: &str = "d5b8f3a2-6c4e-4b7d-8f9a-2e3d4c5b6a71";
const LRP: &str = "lrp-f0e1d2c3-b4a5-4968-8776-655443322110";
const OTHER_LRP: &str = "lrp-a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d";
const VM: &str = "5e0a1b2c-0000-4000-8000-0000000000b1";
const B2: &str = "5e0a1b2c-0000-4000-8000-0000000000b2";
const B3: &str = "5e0a1b2c-0000-4000-8000-0000000000b3";
const METADATA: &str = "5e0a1b2c-0000-4000-8000-0000000000d1";
const GW_MAC: &str = "fa:16:3e:aa:bb:01";
const VM_MAC: &str = "fa:16:3e:00:00:21";
/// A network of the cloud that is not served here (its DHCP options must not be monitored).
const OTHERNET: &str = "11111111-0000-4000-8000-0000000000c3";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

async fn transact(c: &OvsdbClient, ops: Vec<Op>) -> Vec<OpResult> {
    c.transact(ops).await.expect("transaction")
}

fn vm_port(name: &str, mac: &str, ip: &str, host: &str, net: &str) -> Op {
    Op::insert("Logical_Switch_Port")
        .set("name", name)
        .set("addresses", strings(&[&format!("{mac} {ip}")]))
        .set("options", Datum::map([("requested-chassis", host)]))
        .set("up", true)
        .set(
            "external_ids",
            Datum::map([
                ("neutron:cidrs", ip),
                ("neutron:device_owner", "compute:nova"),
                ("neutron:network_name", &format!("neutron-{net}")),
            ]),
        )
}

fn with_fip(op: Op, fip: &str, ip: &str, net: &str) -> Op {
    op.set(
        "external_ids",
        Datum::map([
            ("neutron:cidrs", ip),
            ("neutron:device_owner", "compute:nova"),
            ("neutron:network_name", &format!("neutron-{net}")),
            ("neutron:port_fip", fip),
        ]),
    )
}

fn gateway_port(name: &str, mac: &str, network: &str, router: &str) -> Op {
    Op::insert("Logical_Router_Port")
        .set("name", name)
        .set("mac", mac)
        .set("networks", strings(&[network]))
        .set(
            "external_ids",
            Datum::map([
                ("neutron:is_ext_gw", "True"),
                ("neutron:network_name", &format!("neutron-{PUBNET}")),
                ("neutron:router_name", router),
            ]),
        )
}

fn fip_nat(fip: &str, logical_ip: &str, port: &str, mac: &str) -> Op {
    Op::insert("NAT")
        .set("type", "dnat_and_snat")
        .set("external_ip", fip)
        .set("logical_ip", logical_ip)
        .set("logical_port", port)
        .set("external_mac", mac)
        .set("gateway_port", named("lrp"))
        .set(
            "external_ids",
            Datum::map([
                // Neutron writes the bare network id; the switch is `neutron-<id>`.
                ("neutron:fip_network_id", PUBNET),
                ("neutron:router_name", &format!("neutron-{ROUTER}")),
            ]),
        )
}

/// Neutron's rows: a provider network (`public`, localnet) with a VM bound to HOST1 and a
/// metadata `localport`; a tenant network with b2 (HOST1, FIP .122) and b3 (HOST2, FIP .123)
/// behind a router whose gateway is `LRP`; a second router whose gateway is hosted elsewhere.
/// `status`: the LRP `status:hosting-chassis` of each gateway, when the schema has it.
fn nb_rows(status: Option<(&str, &str)>) -> Vec<Op> {
    let mut lrp = gateway_port(LRP, GW_MAC, "172.24.4.5/24", ROUTER).uuid_name("lrp");
    let mut other = gateway_port(
        OTHER_LRP,
        "fa:16:3e:aa:bb:02",
        "172.24.4.6/24",
        OTHER_ROUTER,
    )
    .uuid_name("other_lrp");
    if let Some((here, elsewhere)) = status {
        lrp = lrp.set("status", Datum::map([("hosting-chassis", here)]));
        other = other.set("status", Datum::map([("hosting-chassis", elsewhere)]));
    }
    vec![
        Op::insert("Logical_Switch_Port")
            .uuid_name("ln")
            .set("name", "provnet-6a1c2b3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
            .set("type", "localnet")
            .set("addresses", strings(&["unknown"]))
            .set("options", Datum::map([("network_name", "public")])),
        vm_port(VM, "fa:16:3e:00:00:21", "172.24.4.21", HOST1, PUBNET).uuid_name("vm"),
        Op::insert("Logical_Switch_Port")
            .uuid_name("md")
            .set("name", METADATA)
            .set("type", "localport")
            .set("addresses", strings(&["fa:16:3e:00:00:d1 172.24.4.2"])),
        Op::insert("Logical_Switch")
            .set("name", format!("neutron-{PUBNET}").as_str())
            .set("ports", named_set(&["ln", "vm", "md"])),
        with_fip(
            vm_port(B2, "fa:16:3e:00:00:22", "10.0.0.22", HOST1, TENNET),
            "172.24.4.122",
            "10.0.0.22",
            TENNET,
        )
        .uuid_name("b2"),
        with_fip(
            vm_port(B3, "fa:16:3e:00:00:23", "10.0.0.23", HOST2, TENNET),
            "172.24.4.123",
            "10.0.0.23",
            TENNET,
        )
        .uuid_name("b3"),
        Op::insert("Logical_Switch")
            .set("name", format!("neutron-{TENNET}").as_str())
            .set("ports", named_set(&["b2", "b3"])),
        lrp,
        fip_nat("172.24.4.122", "10.0.0.22", B2, "fa:16:3e:00:01:22").uuid_name("n2"),
        fip_nat("172.24.4.123", "10.0.0.23", B3, "fa:16:3e:00:01:23").uuid_name("n3"),
        Op::insert("Logical_Router")
            .set("name", format!("neutron-{ROUTER}").as_str())
            .set("ports", named_set(&["lrp"]))
            .set("nat", named_set(&["n2", "n3"])),
        other,
        Op::insert("Logical_Router")
            .set("name", format!("neutron-{OTHER_ROUTER}").as_str())
            .set("ports", named_set(&["other_lrp"])),
        Op::insert("NB_Global"),
    ]
}

/// A local Open_vSwitch database: this chassis is SYS1, its hostname HOST1.
async fn local_ovs(tag: &str, sb_remote: &str, nb_remote: &str) -> (OvsdbServer, OvsdbClient) {
    let ovs = OvsdbServer::standalone(VSWITCH_SCHEMA, tag);
    let c = writer(&ovs.unix_remote(), "Open_vSwitch", "Open_vSwitch").await;
    transact(
        &c,
        vec![
            Op::insert("Open_vSwitch")
                .set("external_ids", identity_ids(HOST1, sb_remote, nb_remote)),
        ],
    )
    .await;
    (ovs, c)
}

fn identity_ids(hostname: &str, sb_remote: &str, nb_remote: &str) -> Datum {
    Datum::map([
        ("system-id", SYS1),
        ("hostname", hostname),
        ("ovn-bridge-mappings", "public:br-ex"),
        ("ovn-remote", sb_remote),
        ("ovn-nb-remote", nb_remote),
    ])
}

async fn start_driver(ovs: &OvsdbServer) -> NbBgpDriver {
    start_driver_with(ovs, |_| {}).await
}

/// [`start_driver`] with the configuration changed by `configure`.
async fn start_driver_with(
    ovs: &OvsdbServer,
    configure: impl FnOnce(&mut AgentConfig),
) -> NbBgpDriver {
    let mut config = AgentConfig::default();
    config.default.ovsdb_connection = ovs.unix_remote();
    configure(&mut config);
    let config = Arc::new(config);
    let ctx = PluginContext::new(config.clone(), Capabilities::new(&config));
    let mut driver = NbBgpDriver::new(&ctx);
    tokio::time::timeout(T, driver.start(&ctx))
        .await
        .expect("the driver starts within 15 s (no connection to a database that is not used)")
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
    until_driver(driver, what, |d| done(&d.desired_exposures().unwrap())).await;
    driver.desired_exposures().unwrap()
}

/// Run the driver as the host does until `done` holds for it.
async fn until_driver(driver: &mut NbBgpDriver, what: &str, done: impl Fn(&NbBgpDriver) -> bool) {
    let deadline = Instant::now() + T;
    while !done(driver) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{what}: not within 15 s; exposures: {:#?}",
            driver.desired_exposures().unwrap().scopes
        );
        if let Ok(changed) = tokio::time::timeout(left, driver.changed()).await {
            changed.expect("driver changed()");
            driver.settle().await.expect("driver settle()");
        }
    }
}

fn exposed<'a>(set: &'a ExposureSet, address: &str) -> Option<&'a ExposedIp> {
    set.global().ips.get(&ip(address)).map(|e| e.as_ref())
}

fn lladdr(set: &ExposureSet, address: &str) -> Option<String> {
    exposed(set, address).and_then(|e| e.lladdr.as_ref().map(|m| m.to_string()))
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

/// Neutron's rows for the vrf method: provider network `public` with EVPN settings (VNI 100),
/// its IPv4 subnet's DHCP options, a VM bound to HOST1; the DHCP options of another network.
fn vrf_rows() -> Vec<Op> {
    vec![
        Op::insert("Logical_Switch_Port")
            .uuid_name("ln")
            .set("name", "provnet-6a1c2b3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
            .set("type", "localnet")
            .set("addresses", strings(&["unknown"]))
            .set("options", Datum::map([("network_name", "public")])),
        vm_port(VM, VM_MAC, "172.24.4.21", HOST1, PUBNET).uuid_name("vm"),
        Op::insert("Logical_Switch")
            .set("name", format!("neutron-{PUBNET}").as_str())
            .set("ports", named_set(&["ln", "vm"]))
            .set("external_ids", evpn_ids("100")),
        dhcp_options("172.24.4.0/24", "172.24.4.1", PUBNET),
        dhcp_options("10.9.0.0/24", "10.9.0.1", OTHERNET),
        Op::insert("NB_Global"),
    ]
}

fn set_fip_distributed(value: &str) -> Op {
    Op::update("NB_Global").set(
        "external_ids",
        Datum::map([("neutron:fip-distributed", value)]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_ovn_23_03_gateways_come_from_the_southbound_and_every_change_is_followed() {
    let nb = OvsdbServer::standalone(NB_SCHEMA, "nblive-nb");
    let sb = OvsdbServer::standalone(SB_SCHEMA, "nblive-sb");
    let nbw = writer(&nb.unix_remote(), "OVN_Northbound", "NB_Global").await;
    transact(&nbw, nb_rows(None)).await;
    let sbw = writer(&sb.unix_remote(), "OVN_Southbound", "Chassis").await;
    let sb_ids = transact(
        &sbw,
        vec![
            Op::insert("Encap")
                .uuid_name("e1")
                .set("type", "geneve")
                .set("ip", "192.0.2.1")
                .set("chassis_name", SYS1),
            Op::insert("Chassis")
                .uuid_name("ch1")
                .set("name", SYS1)
                .set("hostname", HOST1)
                .set("encaps", named("e1")),
            Op::insert("Encap")
                .uuid_name("e2")
                .set("type", "geneve")
                .set("ip", "192.0.2.2")
                .set("chassis_name", SYS2),
            Op::insert("Chassis")
                .uuid_name("ch2")
                .set("name", SYS2)
                .set("hostname", HOST2)
                .set("encaps", named("e2")),
            Op::insert("Datapath_Binding")
                .uuid_name("router")
                .set("tunnel_key", 1i64),
            Op::insert("Datapath_Binding")
                .uuid_name("other_router")
                .set("tunnel_key", 2i64),
            Op::insert("Port_Binding")
                .set("logical_port", format!("cr-{LRP}").as_str())
                .set("type", "chassisredirect")
                .set("datapath", named("router"))
                .set("tunnel_key", 1i64)
                .set("chassis", named("ch1")),
            Op::insert("Port_Binding")
                .set("logical_port", format!("cr-{OTHER_LRP}").as_str())
                .set("type", "chassisredirect")
                .set("datapath", named("other_router"))
                .set("tunnel_key", 1i64)
                .set("chassis", named("ch2")),
            // A VM bound here: in the monitored rows (chassis == this chassis), not a gateway.
            Op::insert("Port_Binding")
                .set("logical_port", format!("cr-{VM}").as_str())
                .set("type", "")
                .set("datapath", named("router"))
                .set("tunnel_key", 2i64)
                .set("chassis", named("ch1")),
        ],
    )
    .await;
    let ch2 = sb_ids[3].uuid().expect("Chassis ch2 uuid");
    let (ovs, ovsw) = local_ovs("nblive-ovs", &sb.unix_remote(), &nb.unix_remote()).await;

    let mut driver = start_driver(&ovs).await;
    {
        let session = driver.session().unwrap();
        assert_eq!(session.gateway_source(), GatewaySource::Southbound);
        assert_eq!(
            session.hosted_gateways(),
            Some(&BTreeSet::from([LRP.to_owned()])),
            "only this chassis' chassisredirect binding is a hosted gateway"
        );
        let m = session.model();
        assert!(m.lrp_named(LRP).is_some());
        assert!(
            m.router_by_id(ROUTER).is_some(),
            "the local gateway's router"
        );
        assert!(
            m.router_by_id(OTHER_ROUTER).is_none(),
            "a router whose gateway is elsewhere"
        );
        assert!(
            m.lrp_named(OTHER_LRP).is_none(),
            "a gateway hosted elsewhere is not monitored"
        );
        assert!(
            m.lsp_named(METADATA).is_none(),
            "localports are not monitored"
        );
        assert_eq!(
            session.conditions()["Logical_Router_Port"].to_json(),
            serde_json::json!([["name", "==", LRP]])
        );
    }
    // Everything local is there at the first reconcile: the conditions converged in start().
    let set = driver.desired_exposures().unwrap();
    let vm = exposed(&set, "172.24.4.21").expect("provider VM bound here");
    assert_eq!(vm.kind, ExposureKind::ProviderPort);
    assert_eq!(&*vm.source, VM);
    assert_eq!(
        lladdr(&set, "172.24.4.21").as_deref(),
        Some("fa:16:3e:00:00:21"),
        "permanent neighbour with the LSP MAC"
    );
    let gw = exposed(&set, "172.24.4.5").expect("gateway hosted here");
    assert_eq!(gw.kind, ExposureKind::GatewayPort);
    assert_eq!(lladdr(&set, "172.24.4.5").as_deref(), Some(GW_MAC));
    assert!(exposed(&set, "172.24.4.6").is_none(), "other gateway");
    // Distributed (NB_Global without the key): b2's FIP here with the NAT's MAC, b3's not.
    assert_eq!(
        lladdr(&set, "172.24.4.122").as_deref(),
        Some("fa:16:3e:00:01:22")
    );
    assert!(exposed(&set, "172.24.4.123").is_none());
    assert!(
        set.bridges.keys().any(|b| b.to_string() == "br-ex"),
        "{:?}",
        set.bridges
    );

    // Centralized at run time: both FIPs on the gateway, with its MAC.
    transact(&nbw, vec![set_fip_distributed("False")]).await;
    until(&mut driver, "FIPs centralized", |s| {
        lladdr(s, "172.24.4.123").as_deref() == Some(GW_MAC)
            && lladdr(s, "172.24.4.122").as_deref() == Some(GW_MAC)
    })
    .await;
    // And back: b3's FIP leaves (its VM is on HOST2).
    transact(&nbw, vec![set_fip_distributed("True")]).await;
    let set = until(&mut driver, "FIPs distributed again", |s| {
        exposed(s, "172.24.4.123").is_none()
    })
    .await;
    assert_eq!(
        lladdr(&set, "172.24.4.122").as_deref(),
        Some("fa:16:3e:00:01:22")
    );
    assert!(exposed(&set, "172.24.4.21").is_some() && exposed(&set, "172.24.4.5").is_some());

    // The VM is bound elsewhere: withdrawn, the rest stays.
    transact(
        &nbw,
        vec![
            Op::update("Logical_Switch_Port")
                .where_eq("name", VM)
                .set("options", Datum::map([("requested-chassis", HOST2)])),
        ],
    )
    .await;
    let set = until(&mut driver, "VM withdrawn", |s| {
        exposed(s, "172.24.4.21").is_none()
    })
    .await;
    assert!(exposed(&set, "172.24.4.5").is_some());
    assert!(exposed(&set, "172.24.4.122").is_some());

    // This host is renamed HOST2 in Open_vSwitch: the identity is followed, the VM and b3 (on
    // HOST2) are local now, b2 is not.
    transact(
        &ovsw,
        vec![Op::update("Open_vSwitch").set(
            "external_ids",
            identity_ids(HOST2, &sb.unix_remote(), &nb.unix_remote()),
        )],
    )
    .await;
    let set = until(&mut driver, "identity followed", |s| {
        exposed(s, "172.24.4.21").is_some() && exposed(s, "172.24.4.123").is_some()
    })
    .await;
    assert!(exposed(&set, "172.24.4.122").is_none());
    assert_eq!(driver.session().unwrap().identity().hostname, HOST2);

    // Gateway failover: the cr-lrp binding moves to the other chassis; the gateway goes.
    transact(
        &sbw,
        vec![
            Op::update("Port_Binding")
                .where_eq("logical_port", format!("cr-{LRP}").as_str())
                .set("chassis", ch2),
        ],
    )
    .await;
    let set = until(&mut driver, "gateway withdrawn", |s| {
        exposed(s, "172.24.4.5").is_none()
    })
    .await;
    assert!(exposed(&set, "172.24.4.21").is_some(), "the VM stays");
    assert_eq!(
        driver.session().unwrap().hosted_gateways(),
        Some(&BTreeSet::new())
    );
    // The condition follows: the gateway and its router leave the monitored rows.
    until_driver(&mut driver, "gateway no longer monitored", |d| {
        let m = d.session().unwrap().model();
        m.lrp_named(LRP).is_none() && m.router_by_id(ROUTER).is_none()
    })
    .await;
    assert_eq!(
        driver.session().unwrap().conditions()["Logical_Router_Port"].to_json(),
        serde_json::json!([false])
    );
}

/// The installed (23.03) NB schema with `Logical_Router_Port.status`, as OVN >= 23.09 has it.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lrp_status_no_southbound_is_needed_and_hosting_chassis_drives_the_gateway() {
    let dir = TempDir::new("nblive-schema");
    let nb = OvsdbServer::standalone(&schema_with_lrp_status(&dir), "nblive-nb-status");
    let nbw = writer(&nb.unix_remote(), "OVN_Northbound", "NB_Global").await;
    transact(&nbw, nb_rows(Some((SYS1, SYS2)))).await;
    // No Southbound: a connection attempt would retry forever and start() would time out.
    let (ovs, _ovsw) = local_ovs(
        "nblive-ovs-status",
        "unix:/nonexistent/ovnsb_db.sock",
        &nb.unix_remote(),
    )
    .await;

    let mut driver = start_driver(&ovs).await;
    {
        let session = driver.session().unwrap();
        assert_eq!(session.gateway_source(), GatewaySource::LrpStatus);
        assert!(session.policy().lrp_status);
        assert_eq!(session.hosted_gateways(), None);
        assert!(session.model().lrp_named(OTHER_LRP).is_none());
        assert_eq!(
            session.conditions()["Logical_Router_Port"].to_json(),
            serde_json::json!([["status", "includes", ["map", [["hosting-chassis", SYS1]]]]])
        );
    }
    let set = driver.desired_exposures().unwrap();
    assert_eq!(lladdr(&set, "172.24.4.5").as_deref(), Some(GW_MAC));
    assert_eq!(
        lladdr(&set, "172.24.4.21").as_deref(),
        Some("fa:16:3e:00:00:21")
    );
    assert!(exposed(&set, "172.24.4.6").is_none());

    // Centralized FIPs follow the gateway hosted by status too.
    transact(&nbw, vec![set_fip_distributed("False")]).await;
    until(&mut driver, "FIPs centralized", |s| {
        lladdr(s, "172.24.4.123").as_deref() == Some(GW_MAC)
    })
    .await;

    // Failover by status: withdrawn here with its centralized FIPs; the other gateway arrives.
    transact(
        &nbw,
        vec![
            Op::update("Logical_Router_Port")
                .where_eq("name", LRP)
                .set("status", Datum::map([("hosting-chassis", SYS2)])),
            Op::update("Logical_Router_Port")
                .where_eq("name", OTHER_LRP)
                .set("status", Datum::map([("hosting-chassis", SYS1)])),
        ],
    )
    .await;
    let set = until(&mut driver, "gateway moved", |s| {
        exposed(s, "172.24.4.5").is_none() && exposed(s, "172.24.4.6").is_some()
    })
    .await;
    assert!(exposed(&set, "172.24.4.123").is_none());
    assert!(exposed(&set, "172.24.4.122").is_none());
    assert!(exposed(&set, "172.24.4.21").is_some(), "the VM stays");
}

/// The driver with `exposing_method = vrf`, accepted by its factory as the host selects it.
async fn start_vrf_driver(ovs: &OvsdbServer) -> NbBgpDriver {
    let configure = |config: &mut AgentConfig| {
        config.default.exposing_method = "vrf".to_owned();
        config.default.evpn_local_ip = Some(ip("10.0.0.1"));
    };
    let mut config = AgentConfig::default();
    configure(&mut config);
    let config = Arc::new(config);
    let ctx = PluginContext::new(config.clone(), Capabilities::new(&config));
    let registration = ovn_bgp_agent::plugin::drivers()
        .into_iter()
        .find(|d| d.name == "nb_ovn_bgp_driver")
        .expect("the NB driver is in this build");
    assert!(
        (registration.factory)(&ctx).is_ok(),
        "exposing_method = vrf is accepted by the NB driver's factory"
    );
    start_driver_with(ovs, configure).await
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
    transact(&nbw, vrf_rows()).await;
    let (ovs, _ovsw) = local_ovs(
        "nbvrf-ovs",
        "unix:/nonexistent/ovnsb_db.sock",
        &nb.unix_remote(),
    )
    .await;
    let mut driver = start_vrf_driver(&ovs).await;
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
