//! The live SB EVPN driver (`ovn_evpn_driver`) against a real `ovsdb-server` with the OVN
//! Southbound schema and a local Open_vSwitch database for the identity: it starts, syncs a
//! gateway bound here with networking-bgpvpn settings into its `evpn:<vni>` scope (gateway IPs,
//! the attached subnet, the VM behind it) while monitoring nothing of the rest of the cloud,
//! and follows the gateway moving away and back, and its settings turning hostile. Run under the
//! daemon lock: `flock /tmp/ovn-bgp-daemons.lock cargo test --test evpn_live`.

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
use ovn_bgp_agent::drivers::evpn::live::{self, EvpnDriver};
use ovn_bgp_agent::exposure::{ExposureKind, ExposureScope, ExposureSet, ScopeId};
use ovn_bgp_agent::ovn::sb::condition::ConditionClause;
use ovn_bgp_agent::plugin::{Driver, ExplainQuery, PluginContext};
use ovsdb_support::*;

const T: Duration = Duration::from_secs(15);
const GW_MAC: &str = "fa:16:3e:aa:bb:cc";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn port(name: &str, ty: &str, dp: &str, key: i64, mac: &str) -> Op {
    Op::insert("Port_Binding")
        .set("logical_port", name)
        .set("type", ty)
        .set("datapath", named(dp))
        .set("tunnel_key", key)
        .set("mac", strings(&[mac]))
}

fn vpn(vni: &str, asn: &str) -> Datum {
    Datum::map([("neutron_bgpvpn:vni", vni), ("neutron_bgpvpn:as", asn)])
}

/// Two chassis (node1 is this one); a flat provider network `public`; router R1 whose gateway
/// (dual-stack) is bound on node1 and whose gateway patch port R1 and subnet patch port S1 carry
/// VNI 1001 / AS 64999, with vm1 (on node2) behind S1; a provider VM on node2; router R2 (VNI
/// 2002) bound on node2 with a subnet and a VM.
fn sb_rows() -> Vec<Op> {
    let mut ops = Vec::new();
    for (n, ip) in [("node1", "192.0.2.1"), ("node2", "192.0.2.2")] {
        ops.push(
            Op::insert("Encap")
                .uuid_name(&format!("e_{n}"))
                .set("type", "geneve")
                .set("ip", ip)
                .set("chassis_name", n),
        );
        ops.push(
            Op::insert("Chassis")
                .uuid_name(&format!("ch_{n}"))
                .set("name", n)
                .set("hostname", n)
                .set("encaps", named(&format!("e_{n}"))),
        );
    }
    for (i, dp) in ["provider", "router", "tenant", "router2", "tenant2"]
        .iter()
        .enumerate()
    {
        ops.push(
            Op::insert("Datapath_Binding")
                .uuid_name(dp)
                .set("tunnel_key", i64::try_from(i).unwrap() + 1),
        );
    }
    ops.extend([
        port("provnet-1", "localnet", "provider", 1, "unknown")
            .set("options", Datum::map([("network_name", "public")])),
        port(
            "cr-lrp-R1",
            "chassisredirect",
            "router",
            1,
            &format!("{GW_MAC} 172.24.100.5/24 2001:db8:100::5/64"),
        )
        .set("chassis", named("ch_node1")),
        port("lrp-R1", "patch", "router", 2, GW_MAC).set(
            "options",
            Datum::map([("peer", "R1"), ("chassis-redirect-port", "cr-lrp-R1")]),
        ),
        port("R1", "patch", "provider", 2, "router")
            .set("options", Datum::map([("peer", "lrp-R1")]))
            .set("external_ids", vpn("1001", "64999")),
        port(
            "lrp-S1",
            "patch",
            "router",
            3,
            "fa:16:3e:dd:ee:01 10.0.0.1/24",
        )
        .set("options", Datum::map([("peer", "S1")])),
        port("S1", "patch", "tenant", 1, "router")
            .set("options", Datum::map([("peer", "lrp-S1")]))
            .set("external_ids", vpn("1001", "64999")),
        port("vm1", "", "tenant", 2, "fa:16:3e:00:00:10 10.0.0.10")
            .set("chassis", named("ch_node2")),
        port(
            "provider-vm",
            "",
            "provider",
            3,
            "fa:16:3e:00:00:41 172.24.100.41",
        )
        .set("chassis", named("ch_node2")),
        port(
            "cr-lrp-R2",
            "chassisredirect",
            "router2",
            1,
            "fa:16:3e:aa:bb:dd 172.24.100.6/24",
        )
        .set("chassis", named("ch_node2")),
        port(
            "lrp-S2",
            "patch",
            "router2",
            2,
            "fa:16:3e:dd:ee:02 10.2.0.1/24",
        )
        .set("options", Datum::map([("peer", "S2")])),
        port("S2", "patch", "tenant2", 1, "router")
            .set("options", Datum::map([("peer", "lrp-S2")]))
            .set("external_ids", vpn("2002", "64999")),
        port("vm2", "", "tenant2", 2, "fa:16:3e:00:00:20 10.2.0.20")
            .set("chassis", named("ch_node2")),
    ]);
    ops
}

fn scope(set: &ExposureSet) -> Option<&ExposureScope> {
    set.scopes.get(&ScopeId::Evpn(Vni::new(1001).unwrap()))
}

fn exposed_ips(set: &ExposureSet) -> Vec<(IpAddr, ExposureKind)> {
    scope(set)
        .map(|s| s.ips.values().map(|e| (e.ip, e.kind)).collect())
        .unwrap_or_default()
}

/// Run the driver as the host does (`changed`, then `settle`) until `done` holds for it.
async fn until(driver: &mut EvpnDriver, what: &str, done: impl Fn(&EvpnDriver) -> bool) {
    let deadline = Instant::now() + T;
    while !done(driver) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{what}: not within 15 s; exposures: {:#?}",
            driver.desired_exposures().unwrap()
        );
        if let Ok(changed) = tokio::time::timeout(left, driver.changed()).await {
            changed.expect("driver changed()");
            driver.settle().await.expect("driver settle()");
        }
    }
}

fn fully_exposed(d: &EvpnDriver) -> bool {
    let set = d.desired_exposures().unwrap();
    exposed_ips(&set)
        == [
            (ip("10.0.0.10"), ExposureKind::TenantPort),
            (ip("172.24.100.5"), ExposureKind::GatewayPort),
            (ip("2001:db8:100::5"), ExposureKind::GatewayPort),
        ]
        && scope(&set).is_some_and(|s| s.subnets.len() == 1)
}

fn model_has(d: &EvpnDriver, port: &str) -> bool {
    d.session().unwrap().model().port_named(port).is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evpn_driver_syncs_a_local_gateway_and_follows_it_moving() {
    let sb = OvsdbServer::standalone(SB_SCHEMA, "evpnlive-sb");
    let sbw = writer(&sb.unix_remote(), "OVN_Southbound", "Chassis").await;
    let ids = sbw.transact(sb_rows()).await.expect("SB rows");
    // Results follow the ops: Encap, Chassis per node, then the datapaths and ports.
    let node1 = ids[1].uuid().expect("Chassis node1 uuid");
    let node2 = ids[3].uuid().expect("Chassis node2 uuid");

    let ovs = OvsdbServer::standalone(VSWITCH_SCHEMA, "evpnlive-ovs");
    let ovsw = writer(&ovs.unix_remote(), "Open_vSwitch", "Open_vSwitch").await;
    ovsw.transact(vec![Op::insert("Open_vSwitch").set(
        "external_ids",
        Datum::map([
            ("system-id", "node1"),
            ("hostname", "node1.example.org"),
            ("ovn-bridge-mappings", "public:br-ex"),
            ("ovn-remote", sb.unix_remote().as_str()),
        ]),
    )])
    .await
    .expect("Open_vSwitch row");

    let mut config = AgentConfig::default();
    config.default.ovsdb_connection = ovs.unix_remote();
    let config = Arc::new(config);
    let ctx = PluginContext::new(config.clone(), Capabilities::new(&config));
    let mut driver = live::driver(&ctx);
    tokio::time::timeout(T, driver.start(&ctx))
        .await
        .expect("the driver starts within 15 s")
        .expect("driver start");

    // The start converged the condition (gateway → router → subnet → tenant datapath) before
    // returning: the first reconcile exposes everything.
    assert!(
        fully_exposed(&driver),
        "{:#?}",
        driver.desired_exposures().unwrap()
    );
    let set = driver.desired_exposures().unwrap();
    assert!(set.global().is_empty(), "no provider VMs or FIPs");
    assert!(set.skipped.is_empty(), "{:?}", set.skipped);
    let s = scope(&set).unwrap();
    let evpn = s.evpn.as_ref().unwrap();
    assert_eq!((evpn.vni.get(), evpn.bgp_as.get()), (1001, 64999));
    assert_eq!(
        s.ips[&ip("172.24.100.5")]
            .lladdr
            .as_ref()
            .map(ToString::to_string),
        Some(GW_MAC.to_owned())
    );
    let subnet = s.subnets.iter().next().unwrap();
    assert_eq!(
        (subnet.router_ip.to_string(), subnet.via),
        ("10.0.0.1/24".to_owned(), ip("172.24.100.5"))
    );
    // Nothing cloud-wide: not the provider network's VMs, not the router bound elsewhere.
    {
        let session = driver.session().unwrap();
        let condition = session.condition();
        assert!(!condition.contains(&ConditionClause::HasNatAddresses));
        assert!(!condition.contains(&ConditionClause::ChassisRedirect));
        for absent in ["provider-vm", "cr-lrp-R2", "lrp-S2", "S2", "vm2"] {
            assert!(!model_has(&driver, absent), "{absent} monitored");
        }
        assert!(model_has(&driver, "vm1"), "the VM behind the gateway");
    }
    let why = driver.explain(&ExplainQuery::new("10.0.0.10")).join("\n");
    assert!(
        why.contains("exposed: 10.0.0.10 in scope evpn:1001 as TenantPort from vm1"),
        "{why}"
    );

    let bind = |chassis: Uuid| {
        vec![
            Op::update("Port_Binding")
                .where_eq("logical_port", "cr-lrp-R1")
                .set("chassis", Datum::set(vec![Atom::Uuid(chassis)])),
        ]
    };
    // The gateway moves to node2: the scope goes, and the router is no longer followed.
    sbw.transact(bind(node2)).await.expect("move the gateway");
    until(&mut driver, "gateway moved away: withdrawn", |d| {
        scope(&d.desired_exposures().unwrap()).is_none() && !model_has(d, "vm1")
    })
    .await;
    // A gateway bound elsewhere is not even in this chassis' view, and explain says so.
    let why = driver.explain(&ExplainQuery::new("cr-lrp-R1")).join("\n");
    assert!(
        why.contains("no Port_Binding of this chassis' Southbound view mentions \"cr-lrp-R1\"")
            && why.contains("monitors the gateways bound to this chassis (node1)")
            && why.contains("not exposed by the EVPN driver"),
        "{why}"
    );

    // Back on node1: followed hop by hop again, everything exposed.
    sbw.transact(bind(node1))
        .await
        .expect("bind the gateway here");
    until(&mut driver, "gateway bound here again", fully_exposed).await;

    // The VPN's settings turn hostile: withdrawn, with the reason; never a panic.
    sbw.transact(vec![
        Op::update("Port_Binding")
            .where_eq("logical_port", "R1")
            .set("external_ids", vpn("1001;exit", "64999")),
    ])
    .await
    .expect("hostile VNI");
    until(&mut driver, "hostile VNI: withdrawn with a reason", |d| {
        let set = d.desired_exposures().unwrap();
        scope(&set).is_none()
            && set
                .skipped
                .iter()
                .any(|s| s.row.ends_with("(R1)") && s.reason.contains("\"1001;exit\""))
    })
    .await;
}
