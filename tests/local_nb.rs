//! The node-local OVN NB class against a real ovsdb-server with the OVN NB schema: rows the
//! `ovn` exposing method writes (§2), ownership by `external_ids` marker, repair of edits,
//! deletion of rows no longer desired, rows of others left alone.

mod netlink_support;
mod ovsdb_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use std::sync::Arc;

use ovn_bgp_agent::caps::SystemReconciler;
use ovn_bgp_agent::caps::frr::{
    AddVrf, FrrObject, FrrObjects, Redistribute, RouteDistinguisher, Vni, Vtysh, VtyshConfigurator,
    VtyshOptions,
};
use ovn_bgp_agent::caps::local_nb::LocalNb;
use ovn_bgp_agent::caps::netlink::NetlinkReconciler;
use ovn_bgp_agent::caps::ovsdb::ClientConfig;
use ovn_bgp_agent::caps::reconcile::CompositeReconciler;
use ovn_bgp_agent::system::DesiredSystem;
use ovn_bgp_agent::system::{LocalNbDesired, NbAtom, NbParent, NbRow, NbRowId, NbValue};
use ovsdb_support::{NB_SCHEMA, OvsdbServer, run};

fn id(table: &str, key: &str) -> NbRowId {
    NbRowId::new(table, key)
}

fn strings(items: &[&str]) -> NbValue {
    NbValue::Set(
        items
            .iter()
            .map(|s| NbAtom::String((*s).to_owned()))
            .collect(),
    )
}

fn map(items: &[(&str, &str)]) -> NbValue {
    NbValue::Map(
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

fn row(columns: Vec<(&str, NbValue)>, parent: Option<(&NbRowId, &str)>) -> NbRow {
    NbRow {
        columns: columns
            .into_iter()
            .map(|(c, v)| (c.to_owned(), v))
            .collect(),
        parent: parent.map(|(row, column)| NbParent {
            row: row.clone(),
            column: column.to_owned(),
        }),
    }
}

/// What the `ovn` method writes for one provider network `physnet1` and peer 100.64.1.5.
fn desired(with_switch: bool, with_policy: bool) -> LocalNbDesired {
    let lr = id("Logical_Router", "bgp-router");
    let lrp_os = id("Logical_Router_Port", "bgp-router-openstack");
    let lrp_ext = id("Logical_Router_Port", "bgp-router-physnet1");
    let bfd = id("BFD", "bgp-router-physnet1 100.64.1.5");
    let mut rows = BTreeMap::new();
    rows.insert(
        lr.clone(),
        row(
            vec![
                ("name", "bgp-router".into()),
                ("options", map(&[("chassis", "bgp")])),
            ],
            None,
        ),
    );
    rows.insert(
        lrp_os.clone(),
        row(
            vec![
                ("name", "bgp-router-openstack".into()),
                ("mac", "40:44:00:00:00:06".into()),
                ("networks", strings(&["192.168.0.0/16"])),
            ],
            Some((&lr, "ports")),
        ),
    );
    rows.insert(
        lrp_ext.clone(),
        row(
            vec![
                ("name", "bgp-router-physnet1".into()),
                ("mac", "52:54:00:00:00:01".into()),
                ("networks", strings(&["100.64.1.1/30"])),
            ],
            Some((&lr, "ports")),
        ),
    );
    rows.insert(
        id("Gateway_Chassis", "bgp-router-openstack-bgp"),
        row(
            vec![
                ("name", "bgp-router-openstack-bgp".into()),
                ("chassis_name", "bgp".into()),
                ("priority", 1i64.into()),
            ],
            Some((&lrp_os, "gateway_chassis")),
        ),
    );
    if with_policy {
        rows.insert(
            id("Logical_Router_Policy", "10 bgp-router-openstack"),
            row(
                vec![
                    ("priority", 10i64.into()),
                    ("match", "inport == \"bgp-router-openstack\"".into()),
                    ("action", "reroute".into()),
                    ("nexthops", strings(&["100.64.1.5"])),
                ],
                Some((&lr, "policies")),
            ),
        );
    }
    rows.insert(
        bfd.clone(),
        row(
            vec![
                ("logical_port", "bgp-router-physnet1".into()),
                ("dst_ip", "100.64.1.5".into()),
            ],
            None,
        ),
    );
    rows.insert(
        id("Logical_Router_Static_Route", "0.0.0.0/0 100.64.1.5"),
        row(
            vec![
                ("ip_prefix", "0.0.0.0/0".into()),
                ("nexthop", "100.64.1.5".into()),
                (
                    "bfd",
                    NbValue::Set(BTreeSet::from([NbAtom::Ref(bfd.clone())])),
                ),
                ("options", map(&[("ecmp_symmetric_reply", "true")])),
            ],
            Some((&lr, "static_routes")),
        ),
    );
    rows.insert(
        id("Static_MAC_Binding", "bgp-router-openstack 192.168.1.10"),
        row(
            vec![
                ("logical_port", "bgp-router-openstack".into()),
                ("ip", "192.168.1.10".into()),
                ("mac", "fa:16:3e:00:00:10".into()),
                ("override_dynamic_mac", true.into()),
            ],
            None,
        ),
    );
    if with_switch {
        let ls = id("Logical_Switch", "physnet1");
        rows.insert(ls.clone(), row(vec![("name", "physnet1".into())], None));
        rows.insert(
            id("Logical_Switch_Port", "physnet1-localnet"),
            row(
                vec![
                    ("name", "physnet1-localnet".into()),
                    ("type", "localnet".into()),
                    ("addresses", strings(&["unknown"])),
                    ("options", map(&[("network_name", "physnet1")])),
                ],
                Some((&ls, "ports")),
            ),
        );
    }
    LocalNbDesired { rows: rows.into() }
}

fn nbctl(server: &OvsdbServer, args: &[&str]) -> String {
    let db = format!("--db={}", server.unix_remote());
    let mut full = vec![db.as_str()];
    full.extend_from_slice(args);
    run("ovn-nbctl", &full).trim().to_owned()
}

fn count(report: &ovn_bgp_agent::system::ChangeReport, which: &str) -> usize {
    let m = match which {
        "added" => &report.added,
        "changed" => &report.changed,
        _ => &report.removed,
    };
    m.get("local_nb").copied().unwrap_or(0)
}

fn foreign_state(server: &OvsdbServer) -> String {
    [
        nbctl(server, &["list", "Logical_Router", "foreign-router"]),
        nbctl(server, &["list", "Logical_Switch", "foreign-sw"]),
        nbctl(server, &["list", "Logical_Switch_Port", "foreign-port"]),
    ]
    .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_nb_rows_are_owned_repaired_and_removed() {
    let server = OvsdbServer::standalone(NB_SCHEMA, "localnb");
    // Someone else's rows: never touched.
    nbctl(&server, &["lr-add", "foreign-router"]);
    nbctl(&server, &["ls-add", "foreign-sw"]);
    nbctl(&server, &["lsp-add", "foreign-sw", "foreign-port"]);
    let foreign_before = foreign_state(&server);

    let config = ClientConfig::new(&server.unix_remote(), "OVN_Northbound").unwrap();
    let nb = tokio::time::timeout(Duration::from_secs(20), LocalNb::connect(config))
        .await
        .expect("connect in time")
        .unwrap();
    let mut changes = nb.subscribe();

    // Everything created in one transaction, with the marker.
    let full = desired(true, true);
    let report = nb.reconcile(&full).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "added"), full.rows.len(), "{report:?}");
    assert_eq!(nb.transactions_sent(), 1);
    let ports = nbctl(&server, &["lrp-list", "bgp-router"]);
    assert!(ports.contains("bgp-router-openstack"), "{ports}");
    assert!(ports.contains("bgp-router-physnet1"), "{ports}");
    let ext = nbctl(
        &server,
        &["get", "Logical_Router", "bgp-router", "external_ids"],
    );
    assert!(ext.contains("\"ovn-bgp-agent:owned\"=\"true\""), "{ext}");
    assert!(
        nbctl(
            &server,
            &["lrp-get-gateway-chassis", "bgp-router-openstack"]
        )
        .contains("bgp-router-openstack-bgp"),
    );
    let policies = nbctl(&server, &["lr-policy-list", "bgp-router"]);
    assert!(
        policies.contains("reroute") && policies.contains("100.64.1.5"),
        "{policies}"
    );
    let routes = nbctl(&server, &["lr-route-list", "bgp-router"]);
    assert!(
        routes.contains("0.0.0.0/0") && routes.contains("100.64.1.5"),
        "{routes}"
    );
    // The route's bfd column refers to the BFD row inserted in the same transaction.
    let bfd_uuid = nbctl(
        &server,
        &[
            "--bare",
            "--columns=_uuid",
            "find",
            "BFD",
            "dst_ip=100.64.1.5",
        ],
    );
    let route_bfd = nbctl(
        &server,
        &[
            "--bare",
            "--columns=bfd",
            "find",
            "Logical_Router_Static_Route",
            "ip_prefix=\"0.0.0.0/0\"",
        ],
    );
    assert_eq!(route_bfd, bfd_uuid);
    let smb = nbctl(
        &server,
        &[
            "--bare",
            "--columns=mac",
            "find",
            "Static_MAC_Binding",
            "ip=192.168.1.10",
        ],
    );
    assert_eq!(smb, "fa:16:3e:00:00:10");
    assert_eq!(
        nbctl(&server, &["lsp-get-type", "physnet1-localnet"]),
        "localnet"
    );
    assert_eq!(foreign_state(&server), foreign_before);

    // Second reconcile: nothing to do, no transaction sent.
    assert!(nb.plan(&full).ops.is_empty());
    let report = nb.reconcile(&full).await;
    assert!(report.is_noop(), "{report:?}");
    assert_eq!(nb.transactions_sent(), 1);

    // A new row of a non-root table whose parent exists (a fabric port added to the agent's
    // router once its bridge got an address; a policy deleted by hand) joins its parent in
    // the same transaction: the server would garbage-collect it at once otherwise, and every
    // reconcile would insert it again.
    let mut grown = full.clone();
    grown.rows.insert(
        id("Logical_Router_Port", "bgp-router-physnet2"),
        row(
            vec![
                ("name", "bgp-router-physnet2".into()),
                ("mac", "52:54:00:00:00:02".into()),
                ("networks", strings(&["100.64.2.1/30"])),
            ],
            Some((&id("Logical_Router", "bgp-router"), "ports")),
        ),
    );
    let report = nb.reconcile(&grown).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "added"), 1, "{report:?}");
    assert!(nbctl(&server, &["lrp-list", "bgp-router"]).contains("bgp-router-physnet2"));
    assert!(nb.plan(&grown).ops.is_empty(), "the new port stayed");
    let report = nb.reconcile(&full).await;
    assert_eq!(count(&report, "removed"), 1, "{report:?}");
    assert!(nb.reconcile(&full).await.is_noop());

    // Someone edits the agent's rows: the change is signalled, and the next reconcile restores
    // the desired columns. A port someone adds to the agent's router is theirs and stays.
    changes.borrow_and_update();
    nbctl(
        &server,
        &[
            "set",
            "Logical_Router_Port",
            "bgp-router-openstack",
            "mac=\"00:00:00:00:00:01\"",
        ],
    );
    nbctl(
        &server,
        &[
            "set",
            "Logical_Router",
            "bgp-router",
            "options:chassis=other",
        ],
    );
    nbctl(
        &server,
        &[
            "lrp-add",
            "bgp-router",
            "foreign-lrp",
            "00:00:00:00:00:99",
            "10.9.9.1/24",
        ],
    );
    tokio::time::timeout(Duration::from_secs(10), changes.changed())
        .await
        .expect("local NB change signalled")
        .unwrap();
    // The three edits may arrive as separate batches: wait until the last is in the replica.
    tokio::time::timeout(Duration::from_secs(10), async {
        while !nb
            .client()
            .replica()
            .get_table("Logical_Router_Port")
            .unwrap()
            .iter()
            .any(|r| r.str("name") == "foreign-lrp")
        {
            let _ = changes.changed().await;
        }
    })
    .await
    .expect("edits in the replica");
    let report = nb.reconcile(&full).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "changed"), 2, "{report:?}");
    assert_eq!(report.total_changes(), 2, "{report:?}");
    assert_eq!(
        nbctl(
            &server,
            &["get", "Logical_Router_Port", "bgp-router-openstack", "mac"]
        ),
        "\"40:44:00:00:00:06\""
    );
    assert_eq!(
        nbctl(
            &server,
            &["get", "Logical_Router", "bgp-router", "options:chassis"]
        ),
        "bgp"
    );
    assert!(nbctl(&server, &["lrp-list", "bgp-router"]).contains("foreign-lrp"));
    assert!(nb.reconcile(&full).await.is_noop());

    // The switch and the policy are no longer desired: deleted, everything else stays.
    let smaller = desired(false, true);
    let smaller = LocalNbDesired {
        rows: smaller
            .rows
            .into_iter()
            .filter(|(id, _)| id.table != "Logical_Router_Policy")
            .collect(),
    };
    let report = nb.reconcile(&smaller).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(count(&report, "removed"), 3, "{report:?}");
    assert_eq!(report.total_changes(), 3, "{report:?}");
    assert_eq!(
        nbctl(
            &server,
            &[
                "--bare",
                "--columns=name",
                "find",
                "Logical_Switch",
                "name=physnet1"
            ]
        ),
        ""
    );
    assert_eq!(
        nbctl(
            &server,
            &[
                "--bare",
                "--columns=name",
                "find",
                "Logical_Switch_Port",
                "name=physnet1-localnet"
            ]
        ),
        ""
    );
    assert_eq!(nbctl(&server, &["lr-policy-list", "bgp-router"]), "");
    assert!(nbctl(&server, &["lrp-list", "bgp-router"]).contains("bgp-router-openstack"));
    assert_eq!(foreign_state(&server), foreign_before);
    assert!(nb.reconcile(&smaller).await.is_noop());

    // A desired row colliding with someone else's (same name) is skipped and reported; the
    // rest is applied.
    let mut conflicting = smaller.clone();
    conflicting.rows.insert(
        id("Logical_Switch", "foreign-sw"),
        row(vec![("name", "foreign-sw".into())], None),
    );
    conflicting.rows.insert(
        id("Logical_Switch", "physnet2"),
        row(vec![("name", "physnet2".into())], None),
    );
    let report = nb.reconcile(&conflicting).await;
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].object.contains("foreign-sw"), "{report:?}");
    assert!(
        report.errors[0].error.contains("not the agent's"),
        "{report:?}"
    );
    assert_eq!(count(&report, "added"), 1, "{report:?}");
    assert_eq!(foreign_state(&server), foreign_before);

    // Deleting the agent's router would garbage-collect the port someone else added to it:
    // refused and reported, the router's other rows are still removed.
    let report = nb.reconcile(&LocalNbDesired::default()).await;
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.object.contains("bgp-router") && e.error.contains("not the agent's")),
        "{report:?}"
    );
    assert!(nbctl(&server, &["lrp-list", "bgp-router"]).contains("foreign-lrp"));
    assert_eq!(
        nbctl(
            &server,
            &[
                "--bare",
                "--columns=_uuid",
                "find",
                "BFD",
                "dst_ip=100.64.1.5"
            ]
        ),
        ""
    );
    assert_eq!(foreign_state(&server), foreign_before);
}

/// Through the composite reconciler: the two new classes are reported under their names, and
/// FRR being unreachable does not stop the local NB rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_reports_frr_objects_and_local_nb_classes() {
    let ns = netlink_support::TestNetns::new();
    let server = OvsdbServer::standalone(NB_SCHEMA, "localnbc");
    let config = ClientConfig::new(&server.unix_remote(), "OVN_Northbound").unwrap();
    let nb = tokio::time::timeout(Duration::from_secs(20), LocalNb::connect(config))
        .await
        .expect("connect in time")
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let frr = Arc::new(VtyshConfigurator::new(Vtysh::new(VtyshOptions {
        vtysh_path: "/usr/bin/vtysh".into(),
        vty_socket_dir: state.path().join("no-frr-here"),
        timeout: Duration::from_secs(5),
    })));
    let mut linux = ovn_bgp_agent::config::AgentConfig::default().linux;
    linux.netns = Some(ns.name.clone());
    let composite =
        CompositeReconciler::new(Arc::new(NetlinkReconciler::from_config(&linux)), None, None)
            .with_frr_objects(Arc::new(FrrObjects::new(
                frr,
                state.path().join("frr-objects.json"),
            )))
            .with_local_nb(Arc::new(nb));

    let vni = Vni::new(100).unwrap();
    let add = AddVrf {
        bgp_as: "64999".parse().unwrap(),
        vrf_name: AddVrf::default_vrf_name(vni),
        vni,
        rd: RouteDistinguisher::from_vtep("10.0.0.1".parse().unwrap(), vni).unwrap(),
        route_targets: vec![],
        export_targets: vec![],
        import_targets: vec![],
        redistribute: [Redistribute::Connected].into(),
    };
    let rows = desired(true, true);
    let system = DesiredSystem {
        frr_objects: [FrrObject::evpn_vrf(&add).unwrap()].into_iter().collect(),
        local_nb: Some(rows.clone()),
        ..Default::default()
    };
    let report = composite.reconcile(&system).await.unwrap();
    assert_eq!(
        report.added.get("local_nb"),
        Some(&rows.rows.len()),
        "{report:?}"
    );
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert_eq!(report.errors[0].class, "frr_objects", "{report:?}");
    assert!(report.errors[0].error.contains("no-frr-here"), "{report:?}");
}

/// A binding of the agent's router port `bgp-router-openstack`, as the `ovn` method writes one
/// per exposed IP with a MAC.
fn binding(ip: &str, mac: &str) -> (NbRowId, NbRow) {
    (
        id("Static_MAC_Binding", &format!("bgp-router-openstack {ip}")),
        row(
            vec![
                ("logical_port", "bgp-router-openstack".into()),
                ("ip", ip.into()),
                ("mac", mac.into()),
                ("override_dynamic_mac", true.into()),
            ],
            None,
        ),
    )
}

/// Waits until the replica shows an edit made by hand.
async fn until_replica(nb: &LocalNb, what: &str, seen: impl Fn(&LocalNb) -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !seen(nb) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: not in the replica within 10 s"));
}

/// The uuid of the binding of `ip` in the replica.
fn binding_uuid(nb: &LocalNb, ip: &str) -> Option<String> {
    nb.client()
        .replica()
        .get_table("Static_MAC_Binding")
        .unwrap()
        .iter()
        .find(|r| r.str("ip") == ip && r.str("logical_port") == "bgp-router-openstack")
        .map(|r| r.uuid().to_string())
}

/// A random walk of desired states (bindings come, go and change MAC; now and then a row
/// that is not a binding changes) applied by the reconciler, with rows edited by hand
/// between some steps (the agent's bindings, ports and router; a stray binding on its port;
/// someone else's binding): after every reconcile a full plan has nothing to do, so the delta
/// left the local NB as a full plan would. A reconcile is a delta exactly when only bindings
/// differ from the last state and nobody changed the agent's rows since (someone else's
/// binding does not count). The same tells whether a change of the local NB needs a reconcile
/// at all (`needs_reconcile`): the agent's own echo and someone else's binding do not, an edit
/// of the agent's rows does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_of_deltas_leaves_what_a_full_plan_would() {
    let server = OvsdbServer::standalone(NB_SCHEMA, "localnbdelta");
    nbctl(&server, &["lr-add", "foreign-router"]);
    nbctl(
        &server,
        &[
            "lrp-add",
            "foreign-router",
            "foreign-port",
            "00:00:00:00:00:98",
            "10.8.8.1/24",
        ],
    );
    let config = ClientConfig::new(&server.unix_remote(), "OVN_Northbound").unwrap();
    let nb = tokio::time::timeout(Duration::from_secs(20), LocalNb::connect(config))
        .await
        .expect("connect in time")
        .unwrap();

    let mut seed: u64 = std::env::var("LOCAL_NB_WALK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234_abcd_0017);
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut bindings: BTreeMap<u64, u64> = BTreeMap::new();
    let mut with_policy = true;
    let mut last: Option<LocalNbDesired> = None;
    let mut deltas = 0;
    for step in 0..48 {
        // The next desired state: 1 to 3 bindings changed, sometimes the policy too.
        let structural = step > 0 && next() % 5 == 0;
        if structural {
            with_policy = !with_policy;
        }
        for _ in 0..1 + next() % 3 {
            let (ip, mac) = (next() % 12, next() % 4);
            if next() % 3 == 0 {
                bindings.remove(&ip);
            } else {
                bindings.insert(ip, mac);
            }
        }
        let mut desired = desired(true, with_policy);
        for (ip, mac) in &bindings {
            let (id, row) = binding(
                &format!("192.168.2.{}", 10 + ip),
                &format!("fa:16:3e:00:02:0{mac}"),
            );
            desired.rows.insert(id, row);
        }

        // Every third step, an edit by hand first.
        let mut owned_edit = false;
        if step % 3 == 2 {
            let prev = last.clone().expect("applied before");
            // A binding the agent applied last.
            let any_ip = prev
                .rows
                .keys()
                .find_map(|id| id.key.strip_prefix("bgp-router-openstack 192.168.2."))
                .map(|last_octet| format!("192.168.2.{last_octet}"));
            match (step / 3) % 7 {
                0 if any_ip.is_some() => {
                    let ip = any_ip.unwrap();
                    let uuid = binding_uuid(&nb, &ip).expect("the agent's binding");
                    nbctl(
                        &server,
                        &[
                            "set",
                            "Static_MAC_Binding",
                            &uuid,
                            "mac=\"00:00:00:00:00:aa\"",
                        ],
                    );
                    owned_edit = true;
                }
                1 if any_ip.is_some() => {
                    let ip = any_ip.unwrap();
                    let uuid = binding_uuid(&nb, &ip).expect("the agent's binding");
                    nbctl(&server, &["destroy", "Static_MAC_Binding", &uuid]);
                    owned_edit = true;
                }
                2 => {
                    nbctl(
                        &server,
                        &[
                            "create",
                            "Static_MAC_Binding",
                            "logical_port=bgp-router-openstack",
                            "ip=\"192.168.9.9\"",
                            "mac=\"00:00:00:00:00:99\"",
                        ],
                    );
                    owned_edit = true;
                }
                3 => {
                    nbctl(
                        &server,
                        &[
                            "set",
                            "Logical_Router_Port",
                            "bgp-router-openstack",
                            "mac=\"00:00:00:00:00:01\"",
                        ],
                    );
                    owned_edit = true;
                }
                4 => {
                    nbctl(
                        &server,
                        &[
                            "set",
                            "Logical_Router",
                            "bgp-router",
                            "options:chassis=other",
                        ],
                    );
                    owned_edit = true;
                }
                5 => {
                    // The agent's route moved to someone else's router in one transaction
                    // (so the server does not collect it): only the agent's router changed.
                    let route = nb
                        .client()
                        .replica()
                        .get_table("Logical_Router_Static_Route")
                        .unwrap()
                        .iter()
                        .next()
                        .expect("the agent's route")
                        .uuid()
                        .to_string();
                    nbctl(
                        &server,
                        &[
                            "add",
                            "Logical_Router",
                            "foreign-router",
                            "static_routes",
                            &route,
                            "--",
                            "remove",
                            "Logical_Router",
                            "bgp-router",
                            "static_routes",
                            &route,
                        ],
                    );
                    owned_edit = true;
                }
                _ => {
                    // Someone else's binding, on their port: not the agent's business.
                    let ip = format!("ip=\"10.8.8.{}\"", 10 + step);
                    nbctl(
                        &server,
                        &[
                            "create",
                            "Static_MAC_Binding",
                            "logical_port=foreign-port",
                            &ip,
                            "mac=\"00:00:00:00:00:97\"",
                        ],
                    );
                    let ip = format!("10.8.8.{}", 10 + step);
                    until_replica(&nb, "someone else's binding", |nb| {
                        nb.client()
                            .replica()
                            .get_table("Static_MAC_Binding")
                            .unwrap()
                            .iter()
                            .any(|r| r.str("ip") == ip)
                    })
                    .await;
                    assert!(
                        !nb.needs_reconcile().await,
                        "step {step}: someone else's binding woke the agent"
                    );
                }
            }
            if owned_edit {
                until_replica(&nb, "an edit of the agent's rows", |nb| {
                    !nb.plan(&prev).ops.is_empty()
                })
                .await;
                assert!(
                    nb.needs_reconcile().await,
                    "step {step}: an edit of the agent's rows needs a reconcile"
                );
            }
        }

        let only_bindings = last.as_ref().is_some_and(|l| {
            l.rows
                .iter()
                .filter(|(id, _)| id.table != "Static_MAC_Binding")
                .eq(desired
                    .rows
                    .iter()
                    .filter(|(id, _)| id.table != "Static_MAC_Binding"))
        });
        let before = nb.deltas_planned();
        let report = nb.reconcile(&desired).await;
        assert!(report.errors.is_empty(), "step {step}: {report:?}");
        let plan = nb.plan(&desired);
        assert!(
            plan.ops.is_empty() && plan.errors.is_empty(),
            "step {step}: a full plan after the reconcile still has {} operations \
             (structural {structural}, edited by hand {owned_edit}, delta {}): {:?}",
            plan.ops.len(),
            nb.deltas_planned() - before,
            plan.ops
        );
        // Its own echo (in the replica before the reply) needs no reconcile of its own.
        assert!(
            !nb.needs_reconcile().await,
            "step {step}: the echo of the agent's own transaction would wake it again"
        );
        let delta = nb.deltas_planned() - before == 1;
        assert_eq!(
            delta,
            only_bindings && !owned_edit,
            "step {step}: delta {delta}, structural {structural}, edited by hand {owned_edit}"
        );
        deltas += usize::from(delta);
        last = Some(desired);
    }
    assert!(deltas >= 15, "only {deltas} deltas in the walk");
}
