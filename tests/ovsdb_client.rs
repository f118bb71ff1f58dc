//! The OVSDB client against real `ovsdb-server`s (and `ovn-northd`): schema validation,
//! transactions, events, conditions, reconnect with resume and with full resync.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod ovsdb_support;

use std::time::Duration;

use ovn_bgp_agent::caps::ovsdb::*;
use ovsdb_support::*;
use tokio::sync::mpsc::UnboundedReceiver;

const T: Duration = Duration::from_secs(15);

async fn next_batch(rx: &mut UnboundedReceiver<ChangeBatch>) -> ChangeBatch {
    tokio::time::timeout(T, rx.recv())
        .await
        .expect("no change batch within 15 s")
        .expect("event stream closed")
}

/// Collects batches until `pred` holds for the replica or the events seen.
async fn wait_replica(client: &OvsdbClient, what: &str, pred: impl Fn(&Replica) -> bool) {
    let start = std::time::Instant::now();
    loop {
        if pred(&client.replica()) {
            return;
        }
        assert!(start.elapsed() < T, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn nb_spec() -> MonitorSpec {
    MonitorSpec::default()
        .table(TableSpec::new(
            "Logical_Switch",
            &["name", "ports", "external_ids"],
        ))
        .table(TableSpec::new(
            "Logical_Switch_Port",
            &[
                "name",
                "addresses",
                "type",
                "options",
                "tag",
                "external_ids",
            ],
        ))
        .index("Logical_Switch_Port", "name")
        .index("Logical_Switch", "ports")
}

fn config(remote: &str, db: &str) -> ClientConfig {
    let mut c = ClientConfig::new(remote, db).unwrap();
    c.backoff_initial = Duration::from_millis(50);
    c.backoff_max = Duration::from_millis(500);
    c
}

#[tokio::test]
async fn schema_validation_names_missing_table_and_column() {
    let sb = OvsdbServer::standalone(SB_SCHEMA, "schema");
    let spec = MonitorSpec::default().table(TableSpec::new(
        "Port_Binding",
        &["logical_port", "no_such_column"],
    ));
    let err = OvsdbClient::connect(config(&sb.unix_remote(), "OVN_Southbound"), spec)
        .await
        .err()
        .expect("a missing column must fail the connect");
    match &err {
        OvsdbError::MissingColumn { table, column, .. } => {
            assert_eq!(
                (table.as_str(), column.as_str()),
                ("Port_Binding", "no_such_column")
            )
        }
        other => panic!("expected MissingColumn, got {other}"),
    }
    assert!(
        err.to_string().contains("Port_Binding.no_such_column"),
        "{err}"
    );

    let spec = MonitorSpec::default().table(TableSpec::new("No_Such_Table", &["name"]));
    let err = OvsdbClient::connect(config(&sb.unix_remote(), "OVN_Southbound"), spec)
        .await
        .err()
        .expect("a missing table must fail the connect");
    assert!(
        matches!(err, OvsdbError::MissingTable { ref table, .. } if table == "No_Such_Table"),
        "{err}"
    );

    // A condition on a column that does not exist is caught too.
    let spec = MonitorSpec::default().table(
        TableSpec::new("Chassis_Private", &["name"]).with_condition(condition_eq("bogus", "x")),
    );
    let err = OvsdbClient::connect(config(&sb.unix_remote(), "OVN_Southbound"), spec)
        .await
        .err()
        .expect("a condition on a missing column must fail");
    assert!(
        matches!(err, OvsdbError::MissingColumn { ref column, .. } if column == "bogus"),
        "{err}"
    );

    // An index on an unmonitored column is refused.
    let spec = MonitorSpec::default()
        .table(TableSpec::new("Chassis", &["name"]))
        .index("Chassis", "hostname");
    let err = OvsdbClient::connect(config(&sb.unix_remote(), "OVN_Southbound"), spec)
        .await
        .err()
        .expect("a bad index must fail");
    assert!(matches!(err, OvsdbError::BadIndex { .. }), "{err}");

    // Unknown database.
    let spec = MonitorSpec::default().table(TableSpec::new("Chassis", &["name"]));
    let err = OvsdbClient::connect(config(&sb.unix_remote(), "Nope"), spec)
        .await
        .err()
        .expect("an unknown database must fail");
    assert!(matches!(err, OvsdbError::NoSuchDatabase { .. }), "{err}");
    assert!(
        err.to_string().contains("OVN_Southbound"),
        "lists the served databases: {err}"
    );
}

#[tokio::test]
async fn the_agents_tables_and_columns_exist_in_the_installed_schemas() {
    let sb = OvsdbServer::standalone(SB_SCHEMA, "sbcols");
    let spec = MonitorSpec::default()
        .table(TableSpec::new(
            "Port_Binding",
            &[
                "logical_port",
                "type",
                "mac",
                "chassis",
                "up",
                "datapath",
                "options",
                "tag",
                "nat_addresses",
                "external_ids",
                "virtual_parent",
            ],
        ))
        .table(TableSpec::new("Chassis", &["name"]))
        .table(TableSpec::new("Chassis_Private", &["name", "chassis"]))
        .table(TableSpec::new(
            "Datapath_Binding",
            &["external_ids", "tunnel_key"],
        ))
        .table(TableSpec::new(
            "Load_Balancer",
            &["name", "vips", "datapaths", "datapath_group"],
        ))
        .table(TableSpec::new("Logical_DP_Group", &["datapaths"]))
        // No columns listed: all of them.
        .table(TableSpec::new("Encap", &[]))
        .index("Port_Binding", "logical_port")
        .index("Port_Binding", "datapath")
        .index("Port_Binding", "chassis")
        .index("Port_Binding", "type");
    let c = OvsdbClient::connect(config(&sb.unix_remote(), "OVN_Southbound"), spec)
        .await
        .expect("SB columns the agent needs");
    assert_eq!(c.stats().sessions, 1);
    {
        let r = c.replica();
        let encap = r.get_table("Encap").unwrap().meta().clone();
        for col in ["ip", "type", "chassis_name", "options"] {
            assert!(
                encap.column_index(col).is_some(),
                "Encap.{col} not monitored"
            );
        }
    }
    assert_eq!(
        c.list_dbs().await.unwrap(),
        vec!["OVN_Southbound".to_owned(), "_Server".to_owned()]
    );
    let echo = c
        .call("echo", serde_json::json!(["ping", 1]))
        .await
        .unwrap();
    assert_eq!(echo, serde_json::json!(["ping", 1]));

    let ovs = OvsdbServer::standalone(VSWITCH_SCHEMA, "vsw");
    let spec = MonitorSpec::default()
        .table(TableSpec::new("Open_vSwitch", &["external_ids"]))
        .table(TableSpec::new("Bridge", &["name", "ports", "external_ids"]))
        .table(TableSpec::new("Port", &["name", "interfaces"]))
        .table(TableSpec::new("Interface", &["name", "ofport"]))
        .index("Interface", "name");
    let c = OvsdbClient::connect(config(&ovs.unix_remote(), "Open_vSwitch"), spec)
        .await
        .expect("Open_vSwitch columns the agent needs");
    let mut ev = c.events().unwrap();
    assert_eq!(next_batch(&mut ev).await.kind, BatchKind::Initial);
    c.transact(vec![
        Op::insert("Interface")
            .uuid_name("i")
            .set("name", "br-ex")
            .set("ofport", Datum::set(vec![Atom::Integer(7)])),
        Op::insert("Port")
            .uuid_name("p")
            .set("name", "br-ex")
            .set("interfaces", Datum::Atom(Atom::NamedUuid("i".into()))),
        Op::insert("Bridge")
            .uuid_name("b")
            .set("name", "br-ex")
            .set("ports", Datum::Atom(Atom::NamedUuid("p".into()))),
        Op::insert("Open_vSwitch")
            .set("bridges", Datum::Atom(Atom::NamedUuid("b".into())))
            .set(
                "external_ids",
                Datum::map([
                    ("ovn-bridge-mappings", "physnet1:br-ex"),
                    ("system-id", "host-1"),
                ]),
            ),
    ])
    .await
    .unwrap();
    let b = next_batch(&mut ev).await;
    assert_eq!(b.changes.len(), 4, "{b:?}");
    let r = c.replica();
    let ovs_row = r
        .get_table("Open_vSwitch")
        .unwrap()
        .iter()
        .next()
        .unwrap()
        .clone();
    assert_eq!(ovs_row.map_get("external_ids", "system-id"), Some("host-1"));
    let maps: Vec<_> = ovs_row.map("external_ids").collect();
    assert!(maps.contains(&("ovn-bridge-mappings", "physnet1:br-ex")));
    let iface = r
        .get_table("Interface")
        .unwrap()
        .find_str("name", "br-ex")
        .unwrap()
        .next()
        .unwrap()
        .clone();
    assert_eq!(iface.int("ofport"), Some(7));
}

#[tokio::test]
async fn transact_round_trips_and_events_in_order() {
    let nb = OvsdbServer::standalone(NB_SCHEMA, "txn");
    let c = OvsdbClient::connect(config(&nb.unix_remote(), "OVN_Northbound"), nb_spec())
        .await
        .unwrap();
    let mut ev = c.events().unwrap();
    let init = next_batch(&mut ev).await;
    assert_eq!(init.kind, BatchKind::Initial);
    assert!(init.changes.is_empty());

    // insert with uuid-name references, and a comment.
    let res = c
        .transact(vec![
            Op::insert("Logical_Switch_Port")
                .uuid_name("p1")
                .set("name", "lp1")
                .set(
                    "addresses",
                    Datum::set(vec!["fa:16:3e:00:00:01 10.0.0.5".into()]),
                )
                .set("tag", Datum::set(vec![Atom::Integer(100)])),
            Op::insert("Logical_Switch")
                .uuid_name("sw")
                .set("name", "sw0")
                .set("ports", Datum::Atom(Atom::NamedUuid("p1".into())))
                .set(
                    "external_ids",
                    Datum::map([("neutron:network_name", "net \"quoted\" {x}")]),
                ),
            Op::comment("ovsdb client test"),
        ])
        .await
        .unwrap();
    let lsp = res[0].uuid().expect("insert uuid");
    let ls = res[1].uuid().expect("insert uuid");
    let b = next_batch(&mut ev).await;
    assert_eq!(b.kind, BatchKind::Update);
    assert_eq!(b.changes.len(), 2);
    assert!(
        b.changes
            .iter()
            .all(|ch| matches!(ch.kind, ChangeKind::Insert { .. }))
    );
    {
        let r = c.replica();
        let sw = r.row("Logical_Switch", ls).unwrap();
        assert_eq!(sw.str("name"), "sw0");
        assert_eq!(sw.uuids("ports").collect::<Vec<_>>(), vec![lsp]);
        assert_eq!(
            sw.map_get("external_ids", "neutron:network_name"),
            Some("net \"quoted\" {x}")
        );
        let port = r
            .get_table("Logical_Switch_Port")
            .unwrap()
            .find_str("name", "lp1")
            .unwrap()
            .next()
            .unwrap()
            .clone();
        assert_eq!(port.uuid(), lsp);
        assert_eq!(port.int("tag"), Some(100));
        assert_eq!(
            port.strs("addresses").collect::<Vec<_>>(),
            vec!["fa:16:3e:00:00:01 10.0.0.5"]
        );
        // Index on a set column (ports): which switch holds the port.
        let owner = r
            .get_table("Logical_Switch")
            .unwrap()
            .find_uuid("ports", lsp)
            .unwrap()
            .next()
            .unwrap()
            .uuid();
        assert_eq!(owner, ls);
    }

    // update + mutate in one transaction: one batch, old and new values.
    let res = c
        .transact(vec![
            Op::update("Logical_Switch_Port")
                .where_eq("name", "lp1")
                .set("type", "localnet")
                .set("tag", Datum::empty()),
            Op::mutate("Logical_Switch_Port").where_uuid(lsp).mutation(
                "options",
                Mutator::Insert,
                Datum::map([("network_name", "physnet1")]),
            ),
        ])
        .await
        .unwrap();
    assert_eq!(res[0].count(), Some(1));
    assert_eq!(res[1].count(), Some(1));
    let b = next_batch(&mut ev).await;
    assert_eq!(b.changes.len(), 1, "{b:?}");
    let ch = &b.changes[0];
    let mut changed = ch.changed_columns();
    changed.sort();
    assert_eq!(changed, vec!["options", "tag", "type"]);
    let (old, new) = (ch.old_row().unwrap(), ch.new_row().unwrap());
    assert_eq!((old.str("type"), new.str("type")), ("", "localnet"));
    assert_eq!((old.int("tag"), new.int("tag")), (Some(100), None));
    assert_eq!(new.map_get("options", "network_name"), Some("physnet1"));

    // Renaming an indexed column moves the row in the index.
    c.transact(vec![
        Op::update("Logical_Switch_Port")
            .where_uuid(lsp)
            .set("name", "lp1-renamed"),
    ])
    .await
    .unwrap();
    let b = next_batch(&mut ev).await;
    assert_eq!(b.changes[0].changed_columns(), vec!["name"]);
    {
        let r = c.replica();
        let t = r.get_table("Logical_Switch_Port").unwrap();
        assert_eq!(t.find_str("name", "lp1").unwrap().count(), 0);
        assert_eq!(
            t.find_str("name", "lp1-renamed")
                .unwrap()
                .next()
                .unwrap()
                .uuid(),
            lsp
        );
        // A lookup on a column without an index is refused, not turned into a scan.
        assert!(matches!(
            t.find_str("type", "localnet"),
            Err(OvsdbError::BadIndex { .. })
        ));
    }
    c.transact(vec![
        Op::update("Logical_Switch_Port")
            .where_uuid(lsp)
            .set("name", "lp1"),
    ])
    .await
    .unwrap();
    next_batch(&mut ev).await;

    // select and wait.
    let res = c
        .transact(vec![
            Op::wait(
                "Logical_Switch_Port",
                &["type"],
                vec![vec![("type".into(), "localnet".into())]],
            )
            .where_eq("name", "lp1")
            .timeout_ms(0),
            Op::select("Logical_Switch_Port")
                .where_eq("name", "lp1")
                .columns(&["name", "type"]),
        ])
        .await
        .unwrap();
    assert_eq!(res[1].rows().len(), 1);
    assert_eq!(res[1].rows()[0]["type"], "localnet");

    // An operation error names the operation.
    let err = c
        .transact(vec![
            Op::update("Logical_Switch_Port")
                .where_eq("name", "lp1")
                .set("no_such_col", 1),
        ])
        .await
        .expect_err("bad column must fail");
    assert!(err.to_string().contains("operation 0"), "{err}");

    // delete the switch; the unreferenced port is garbage-collected: two deletes, last values.
    let res = c
        .transact(vec![Op::delete("Logical_Switch").where_uuid(ls)])
        .await
        .unwrap();
    assert_eq!(res[0].count(), Some(1));
    let b = next_batch(&mut ev).await;
    assert_eq!(b.changes.len(), 2, "{b:?}");
    for ch in &b.changes {
        let ChangeKind::Delete { old } = &ch.kind else {
            panic!("expected delete, got {ch:?}")
        };
        if &*ch.table == "Logical_Switch_Port" {
            assert_eq!(old.str("type"), "localnet");
        }
    }
    let r = c.replica();
    assert!(r.get_table("Logical_Switch").unwrap().is_empty());
    assert_eq!(
        r.get_table("Logical_Switch_Port")
            .unwrap()
            .find_str("name", "lp1")
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn monitor_cond_change_moves_rows_in_and_out() {
    let nb = OvsdbServer::standalone(NB_SCHEMA, "cond");
    nb.transact(
        r#"["OVN_Northbound",
            {"op":"insert","table":"Logical_Switch_Port","uuid-name":"a","row":{"name":"a","type":""}},
            {"op":"insert","table":"Logical_Switch_Port","uuid-name":"b","row":{"name":"b","type":"localnet"}},
            {"op":"insert","table":"Logical_Switch_Port","uuid-name":"c","row":{"name":"c","type":"router"}},
            {"op":"insert","table":"Logical_Switch","uuid-name":"sw","row":{"name":"sw",
             "ports":["set",[["named-uuid","a"],["named-uuid","b"],["named-uuid","c"]]]}}]"#,
    );
    let spec = MonitorSpec::default()
        .table(
            TableSpec::new("Logical_Switch_Port", &["name", "type"])
                .with_condition(condition_eq("name", "a")),
        )
        .index("Logical_Switch_Port", "name");
    let c = OvsdbClient::connect(config(&nb.unix_remote(), "OVN_Northbound"), spec)
        .await
        .unwrap();
    assert_eq!(c.stats().monitor_method, Some("monitor_cond_since"));
    let mut ev = c.events().unwrap();
    let init = next_batch(&mut ev).await;
    assert_eq!(init.changes.len(), 1);
    assert_eq!(init.changes[0].new_row().unwrap().str("name"), "a");

    // OR semantics: type == localnet OR name == c.
    c.set_condition(
        "Logical_Switch_Port",
        MonitorCondition::any([Clause::eq("type", "localnet"), Clause::eq("name", "c")]),
    )
    .await
    .unwrap();
    wait_replica(&c, "rows b and c only", |r| {
        let t = r.get_table("Logical_Switch_Port").unwrap();
        let mut names: Vec<_> = t.iter().map(|r| r.str("name").to_owned()).collect();
        names.sort();
        names == ["b", "c"]
    })
    .await;
    let mut deleted = Vec::new();
    let mut inserted = Vec::new();
    while deleted.len() + inserted.len() < 3 {
        for ch in next_batch(&mut ev).await.changes {
            match ch.kind {
                ChangeKind::Delete { old } => deleted.push(old.str("name").to_owned()),
                ChangeKind::Insert { new } => inserted.push(new.str("name").to_owned()),
                ChangeKind::Update { .. } => panic!("unexpected update"),
            }
        }
    }
    inserted.sort();
    assert_eq!(deleted, ["a"]);
    assert_eq!(inserted, ["b", "c"]);

    // A row entering the condition later arrives too; one outside does not.
    nb.transact(
        r#"["OVN_Northbound",
            {"op":"insert","table":"Logical_Switch_Port","uuid-name":"d","row":{"name":"d","type":"localnet"}},
            {"op":"insert","table":"Logical_Switch_Port","uuid-name":"e","row":{"name":"e"}},
            {"op":"mutate","table":"Logical_Switch","where":[["name","==","sw"]],
             "mutations":[["ports","insert",["set",[["named-uuid","d"],["named-uuid","e"]]]]]}]"#,
    );
    let b = next_batch(&mut ev).await;
    assert_eq!(b.changes.len(), 1);
    assert_eq!(b.changes[0].new_row().unwrap().str("name"), "d");

    // A condition on an unknown column is refused without disturbing the monitor.
    let err = c
        .set_condition("Logical_Switch_Port", condition_eq("nope", "x"))
        .await
        .expect_err("bad condition");
    assert!(matches!(err, OvsdbError::MissingColumn { .. }), "{err}");
    assert!(c.is_connected());
}

#[tokio::test]
async fn northd_builds_port_bindings_seen_in_the_sb_replica() {
    let nb = OvsdbServer::standalone(NB_SCHEMA, "nbn");
    let sb = OvsdbServer::standalone(SB_SCHEMA, "sbn");
    let _northd = Northd::start(&nb, &sb);
    let sbc = OvsdbClient::connect(
        config(&sb.unix_remote(), "OVN_Southbound"),
        MonitorSpec::default()
            .table(TableSpec::new(
                "Port_Binding",
                &[
                    "logical_port",
                    "type",
                    "mac",
                    "chassis",
                    "up",
                    "datapath",
                    "options",
                    "tag",
                    "external_ids",
                ],
            ))
            .table(TableSpec::new(
                "Datapath_Binding",
                &["external_ids", "tunnel_key"],
            ))
            .index("Port_Binding", "logical_port")
            .index("Port_Binding", "datapath"),
    )
    .await
    .unwrap();
    let mut ev = sbc.events().unwrap();
    let nbc = OvsdbClient::connect(config(&nb.unix_remote(), "OVN_Northbound"), nb_spec())
        .await
        .unwrap();
    nbc.transact(vec![
        Op::insert("Logical_Switch_Port")
            .uuid_name("p1")
            .set("name", "vm1")
            .set(
                "addresses",
                Datum::set(vec!["fa:16:3e:11:11:11 192.168.1.10".into()]),
            ),
        Op::insert("Logical_Switch_Port")
            .uuid_name("p2")
            .set("name", "provnet")
            .set("type", "localnet")
            .set("addresses", Datum::set(vec!["unknown".into()]))
            .set("options", Datum::map([("network_name", "physnet1")])),
        Op::insert("Logical_Switch").set("name", "net1").set(
            "ports",
            Datum::set(vec![
                Atom::NamedUuid("p1".into()),
                Atom::NamedUuid("p2".into()),
            ]),
        ),
    ])
    .await
    .unwrap();
    wait_replica(&sbc, "Port_Binding rows for vm1 and provnet", |r| {
        let pb = r.get_table("Port_Binding").unwrap();
        pb.find_str("logical_port", "vm1").unwrap().count() == 1
            && pb.find_str("logical_port", "provnet").unwrap().count() == 1
    })
    .await;
    {
        let r = sbc.replica();
        let pb = r.get_table("Port_Binding").unwrap();
        let vm1 = pb
            .find_str("logical_port", "vm1")
            .unwrap()
            .next()
            .unwrap()
            .clone();
        assert_eq!(
            vm1.strs("mac").collect::<Vec<_>>(),
            vec!["fa:16:3e:11:11:11 192.168.1.10"]
        );
        assert_eq!(vm1.opt_uuid("chassis"), None);
        let dp = vm1.opt_uuid("datapath").expect("datapath ref");
        let dpb = r
            .row("Datapath_Binding", dp)
            .expect("referenced datapath is in the replica");
        assert_eq!(dpb.map_get("external_ids", "name"), Some("net1"));
        assert!(dpb.int("tunnel_key").unwrap() >= 1);
        assert_eq!(pb.find_uuid("datapath", dp).unwrap().count(), 2);
        let prov = pb
            .find_str("logical_port", "provnet")
            .unwrap()
            .next()
            .unwrap()
            .clone();
        assert_eq!(prov.str("type"), "localnet");
        assert_eq!(prov.map_get("options", "network_name"), Some("physnet1"));
    }
    // Events saw the inserts.
    let mut seen_insert = false;
    while !seen_insert {
        let b = next_batch(&mut ev).await;
        seen_insert = b.changes.iter().any(|c| {
            matches!(&c.kind, ChangeKind::Insert { new } if new.table() == "Port_Binding" && new.str("logical_port") == "vm1")
        });
    }
    // Deleting the port in NB deletes the binding in SB.
    // Read the replica in its own statement: the guard must be gone before any await.
    let vm1 = nbc
        .replica()
        .get_table("Logical_Switch_Port")
        .unwrap()
        .find_str("name", "vm1")
        .unwrap()
        .next()
        .unwrap()
        .uuid();
    nbc.transact(vec![
        Op::mutate("Logical_Switch")
            .where_eq("name", "net1")
            .mutation("ports", Mutator::Delete, Datum::Atom(Atom::Uuid(vm1))),
    ])
    .await
    .unwrap();
    let mut seen_delete = false;
    while !seen_delete {
        let b = next_batch(&mut ev).await;
        seen_delete = b.changes.iter().any(
            |c| matches!(&c.kind, ChangeKind::Delete { old } if old.str("logical_port") == "vm1"),
        );
    }
    assert_eq!(
        sbc.replica()
            .get_table("Port_Binding")
            .unwrap()
            .find_str("logical_port", "vm1")
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn reconnect_resumes_from_last_txn_id_without_full_download() {
    // A single-member cluster keeps transaction history across a restart.
    let mut nb = OvsdbServer::clustered_single(NB_SCHEMA, "resume", 16660);
    nb.transact(
        r#"["OVN_Northbound",{"op":"insert","table":"Logical_Switch","row":{"name":"before"}}]"#,
    );
    let c = OvsdbClient::connect(config(&nb.unix_remote(), "OVN_Northbound"), nb_spec())
        .await
        .unwrap();
    let mut ev = c.events().unwrap();
    assert_eq!(next_batch(&mut ev).await.changes.len(), 1);
    assert!(
        c.replica().last_txn_id().is_some(),
        "clustered db must report a txn id"
    );
    nb.transact(
        r#"["OVN_Northbound",{"op":"insert","table":"Logical_Switch","row":{"name":"second"}}]"#,
    );
    assert_eq!(next_batch(&mut ev).await.changes.len(), 1);

    nb.kill();
    wait_replica(&c, "disconnect noticed", |_| !c.is_connected()).await;
    nb.start();
    nb.transact(
        r#"["OVN_Northbound",{"op":"insert","table":"Logical_Switch","row":{"name":"after"}}]"#,
    );
    let start = std::time::Instant::now();
    while c.stats().sessions < 2 {
        assert!(
            start.elapsed() < T,
            "client did not reconnect: {:?}",
            c.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_replica(&c, "row 'after'", |r| {
        r.get_table("Logical_Switch")
            .unwrap()
            .iter()
            .any(|row| row.str("name") == "after")
    })
    .await;
    let stats = c.stats();
    assert_eq!(
        stats.resumed, 1,
        "resume path (found=true) not taken: {stats:?}"
    );
    assert_eq!(stats.full_downloads, 1, "{stats:?}");
    // The only event after the restart is the new row, as an ordinary update batch.
    let mut names = Vec::new();
    while names.is_empty() {
        let b = next_batch(&mut ev).await;
        assert_eq!(b.kind, BatchKind::Update);
        names.extend(
            b.changes
                .iter()
                .map(|c| c.new_row().unwrap().str("name").to_owned()),
        );
    }
    assert_eq!(names, ["after"]);
    assert_eq!(c.replica().get_table("Logical_Switch").unwrap().len(), 3);
}

#[tokio::test]
async fn full_resync_after_restart_reports_only_the_differences() {
    // A standalone server has no history: the client re-downloads and diffs.
    let mut nb = OvsdbServer::standalone(NB_SCHEMA, "resync");
    nb.transact(
        r#"["OVN_Northbound",
            {"op":"insert","table":"Logical_Switch","row":{"name":"keep"}},
            {"op":"insert","table":"Logical_Switch","row":{"name":"change"}},
            {"op":"insert","table":"Logical_Switch","row":{"name":"remove"}}]"#,
    );
    let c = OvsdbClient::connect(config(&nb.unix_remote(), "OVN_Northbound"), nb_spec())
        .await
        .unwrap();
    let mut ev = c.events().unwrap();
    assert_eq!(next_batch(&mut ev).await.changes.len(), 3);
    nb.kill();
    wait_replica(&c, "disconnect noticed", |_| !c.is_connected()).await;
    // Change the database while the server is down.
    run(
        "ovsdb-tool",
        &[
            "transact",
            nb.db_file.to_str().unwrap(),
            r#"["OVN_Northbound",
                {"op":"update","table":"Logical_Switch","where":[["name","==","change"]],"row":{"external_ids":["map",[["k","v"]]]}},
                {"op":"delete","table":"Logical_Switch","where":[["name","==","remove"]]},
                {"op":"insert","table":"Logical_Switch","row":{"name":"new"}}]"#,
        ],
    );
    nb.start();
    let b = next_batch(&mut ev).await;
    assert_eq!(b.kind, BatchKind::Resync);
    let mut summary: Vec<String> = b
        .changes
        .iter()
        .map(|ch| match &ch.kind {
            ChangeKind::Insert { new } => format!("+{}", new.str("name")),
            ChangeKind::Update { new, .. } => {
                format!("~{}:{}", new.str("name"), ch.changed_columns().join(","))
            }
            ChangeKind::Delete { old } => format!("-{}", old.str("name")),
        })
        .collect();
    summary.sort();
    assert_eq!(summary, ["+new", "-remove", "~change:external_ids"]);
    let s = c.stats();
    assert_eq!((s.full_downloads, s.resumed), (2, 0), "{s:?}");
}
