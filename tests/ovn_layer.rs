//! The shared OVN layer against real `ovsdb-server`s: the chassis identity followed from a local
//! Open_vSwitch database, and the Southbound session converging its monitor condition at start
//! and following rows afterwards. Run under the daemon lock:
//! `flock /tmp/ovn-bgp-daemons.lock cargo test --test ovn_layer`.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod ovsdb_support;

use std::time::Duration;

use ovn_bgp_agent::caps::ovsdb::*;
use ovn_bgp_agent::config::AgentConfig;
use ovn_bgp_agent::ovn::identity::{IdentitySource, IdentityWatch};
use ovn_bgp_agent::ovn::sb::condition::{ConditionClause, LocalChassisPolicy};
use ovn_bgp_agent::ovn::sb::session::SbSession;
use ovsdb_support::*;

const T: Duration = Duration::from_secs(15);

async fn client(remote: &str, db: &str, table: &str) -> OvsdbClient {
    OvsdbClient::connect(
        ClientConfig::new(remote, db).unwrap(),
        MonitorSpec::default().table(TableSpec::new(table, &[])),
    )
    .await
    .unwrap()
}

/// A local Open_vSwitch database with one row carrying `external_ids`.
async fn local_ovs(tag: &str, ids: &[(&str, &str)]) -> (OvsdbServer, OvsdbClient) {
    let ovs = OvsdbServer::standalone(VSWITCH_SCHEMA, tag);
    let c = client(&ovs.unix_remote(), "Open_vSwitch", "Open_vSwitch").await;
    c.transact(vec![
        Op::insert("Open_vSwitch").set("external_ids", Datum::map(ids.iter().copied())),
    ])
    .await
    .unwrap();
    (ovs, c)
}

async fn set_external_ids(c: &OvsdbClient, ids: &[(&str, &str)]) {
    c.transact(vec![
        // No where clause: the (only) row.
        Op::update("Open_vSwitch").set("external_ids", Datum::map(ids.iter().copied())),
    ])
    .await
    .unwrap();
}

fn config_for(ovs: &OvsdbServer) -> AgentConfig {
    let mut config = AgentConfig::default();
    config.default.ovsdb_connection = ovs.unix_remote();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_follows_the_open_vswitch_row_and_keeps_the_last_good_one() {
    let (ovs, c) = local_ovs(
        "ident",
        &[
            ("system-id", "ch-1"),
            ("hostname", "node1"),
            ("ovn-bridge-mappings", "physnet1:br-ex"),
            ("ovn-remote", "tcp:127.0.0.1:6642"),
        ],
    )
    .await;
    let (mut watch, id) = IdentityWatch::connect(&config_for(&ovs)).await.unwrap();
    assert_eq!(id.system_id, "ch-1");
    assert_eq!(id.hostname, "node1");
    assert_eq!(
        id.bridge_mappings,
        [("physnet1".to_owned(), "br-ex".to_owned())]
    );
    assert_eq!(id.ovn_remote.as_deref(), Some("tcp:127.0.0.1:6642"));

    // A new bridge mapping is a new identity.
    set_external_ids(
        &c,
        &[
            ("system-id", "ch-1"),
            ("hostname", "node1"),
            ("ovn-bridge-mappings", "physnet1:br-ex,physnet2:br-vlan"),
            ("ovn-remote", "tcp:127.0.0.1:6642"),
        ],
    )
    .await;
    let id = tokio::time::timeout(T, watch.changed())
        .await
        .expect("identity change within 15 s")
        .expect("client running");
    assert_eq!(id.bridge_mappings.len(), 2);

    // system-id removed: unusable, not reported; the last good identity stays.
    set_external_ids(&c, &[("hostname", "node1")]).await;
    assert!(
        tokio::time::timeout(Duration::from_secs(1), watch.changed())
            .await
            .is_err(),
        "an unusable row must not yield an identity"
    );
    assert_eq!(watch.current().system_id, "ch-1");
    assert_eq!(watch.current().bridge_mappings.len(), 2);

    // A new system-id is followed; hostname falls back to the kernel's.
    set_external_ids(&c, &[("system-id", "ch-2")]).await;
    let id = tokio::time::timeout(T, watch.changed())
        .await
        .expect("identity change within 15 s")
        .expect("client running");
    assert_eq!(id.system_id, "ch-2");
    assert_eq!(id.hostname, ovn_bgp_agent::ovn::identity::kernel_hostname());
    assert!(id.bridge_mappings.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_identity_at_start_is_an_error_naming_system_id() {
    let (ovs, _c) = local_ovs("noident", &[("hostname", "node1")]).await;
    let e = IdentityWatch::connect(&config_for(&ovs))
        .await
        .err()
        .expect("no system-id");
    assert!(e.to_string().contains("system-id"), "{e}");
}

fn port_binding(name: &str, ty: &str, dp: &str, key: i64) -> Op {
    Op::insert("Port_Binding")
        .set("logical_port", name)
        .set("type", ty)
        .set("datapath", named(dp))
        .set("tunnel_key", key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sb_session_converges_its_condition_at_start_and_follows_rows() {
    let sb = OvsdbServer::standalone(SB_SCHEMA, "sbsess");
    let writer = client(&sb.unix_remote(), "OVN_Southbound", "Chassis").await;
    writer
        .transact(vec![
            Op::insert("Encap")
                .uuid_name("e")
                .set("type", "geneve")
                .set("ip", "192.0.2.1")
                .set("chassis_name", "node1"),
            Op::insert("Chassis")
                .uuid_name("ch")
                .set("name", "node1")
                .set("hostname", "node1")
                .set("encaps", named("e")),
            Op::insert("Datapath_Binding")
                .uuid_name("router")
                .set("tunnel_key", 1i64),
            Op::insert("Datapath_Binding")
                .uuid_name("provider")
                .set("tunnel_key", 2i64),
            port_binding("cr-lrp-gw", "chassisredirect", "router", 1)
                .set("chassis", named("ch"))
                .set(
                    "mac",
                    Datum::set(vec![Atom::string("fa:16:3e:00:00:01 192.0.2.10/24")]),
                ),
            port_binding("lrp-gw", "patch", "router", 2)
                .set(
                    "mac",
                    Datum::set(vec![Atom::string("fa:16:3e:00:00:01 192.0.2.10/24")]),
                )
                .set("options", Datum::map([("peer", "gw")])),
            port_binding("gw", "patch", "provider", 1)
                .set("mac", Datum::set(vec![Atom::string("router")]))
                .set("options", Datum::map([("peer", "lrp-gw")])),
            port_binding("elsewhere", "", "provider", 2).set(
                "mac",
                Datum::set(vec![Atom::string("fa:16:3e:00:00:09 192.0.2.9")]),
            ),
        ])
        .await
        .unwrap();

    let (ovs, _c) = local_ovs(
        "sbsessovs",
        &[
            ("system-id", "node1"),
            ("ovn-remote", &sb.unix_remote()),
            ("ovn-bridge-mappings", "physnet1:br-ex"),
        ],
    )
    .await;
    let config = config_for(&ovs);
    // As the host hands it to plugins: one source, read on first use.
    let source = IdentitySource::from_config(std::sync::Arc::new(config.clone()));
    let identity = source.feed().await.unwrap();
    assert_eq!(identity.borrow().system_id, "node1");
    let mut session = SbSession::start(
        &config,
        identity,
        LocalChassisPolicy {
            follow_tenant_networks: false,
        },
    )
    .await
    .unwrap();
    // The gateway bound here arrived through `chassis == node1`; its provider patch port only
    // through the clause it called for, before start returned.
    let m = session.model();
    assert!(m.port_named("cr-lrp-gw").is_some());
    assert!(m.port_named("gw").is_some(), "condition converged at start");
    assert!(
        m.port_named("lrp-gw").is_none(),
        "router ports not followed"
    );
    assert!(
        m.port_named("elsewhere").is_none(),
        "unbound VM not monitored"
    );
    assert!(
        session
            .condition()
            .contains(&ConditionClause::PortNamed("gw".into()))
    );

    // Binding a VM here brings it in.
    writer
        .transact(vec![
            Op::update("Port_Binding")
                .where_eq("logical_port", "elsewhere")
                .set(
                    "chassis",
                    Datum::set(vec![Atom::Uuid(
                        m.chassis_uuids_named("node1")
                            .into_iter()
                            .next()
                            .and_then(|u| Uuid::parse(&u))
                            .unwrap(),
                    )]),
                ),
        ])
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + T;
    while session.model().port_named("elsewhere").is_none() {
        assert!(std::time::Instant::now() < deadline, "bound VM not seen");
        tokio::time::timeout(T, session.changed())
            .await
            .expect("a change within 15 s")
            .unwrap();
    }
    assert_eq!(session.identity().system_id, "node1");
}
