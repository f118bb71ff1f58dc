//! The OVS port, output-flow and static FDB classes against a real ovsdb-server + ovs-vswitchd
//! (userspace datapath) started by each test in its own temp dir and network namespace, and the
//! composite reconciler applying them together with the kernel part.

mod frrovs_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use frrovs_support::{OvsNode, unique_tag, wait_for};
use ovn_bgp_agent::caps::SystemReconciler;
use ovn_bgp_agent::caps::ovs::{DriftCheck, OvsFdb, OvsFlows, OvsOptions, OvsPorts};
use ovn_bgp_agent::system::{
    AddressSpec, DesiredSystem, FdbEntrySpec, FlowAction, LinkKind, LinkSpec, OvsPortSpec,
    PortFlowSpec,
};
use ovn_bgp_agent::types::{InterfaceName, MacAddr};

const PATCH: &str = "patch-provnet-x-to-br-int";
const EVPN_COOKIE: u64 = 998;

fn name(s: &str) -> InterfaceName {
    InterfaceName::new(s).unwrap()
}

fn mac(s: &str) -> MacAddr {
    s.parse().unwrap()
}

fn options(node: &OvsNode) -> OvsOptions {
    OvsOptions {
        vsctl_path: frrovs_support::OVS_VSCTL.into(),
        ofctl_path: frrovs_support::OVS_OFCTL.into(),
        rundir: node.rundir().to_path_buf(),
        timeout: Duration::from_secs(10),
        flow_check_interval: Duration::from_secs(1),
    }
}

fn port(bridge: &str, port: &str, internal: bool, tag: Option<u16>) -> OvsPortSpec {
    OvsPortSpec {
        bridge: name(bridge),
        name: name(port),
        internal,
        vlan_tag: tag,
    }
}

/// `ovs-vsctl` behind a wrapper that logs each invocation, one line each, so a test can count
/// them.
fn logged_vsctl(node: &OvsNode) -> (OvsOptions, std::path::PathBuf) {
    let log = node.rundir().join("vsctl.log");
    let wrapper = node.rundir().join("ovs-vsctl-wrapper");
    frrovs_support::write_executable(
        &wrapper,
        &format!(
            "#!/bin/sh\necho \"$*\" >> {log}\nexec {real} \"$@\"\n",
            log = log.display(),
            real = frrovs_support::OVS_VSCTL
        ),
    );
    let mut opts = options(node);
    opts.vsctl_path = wrapper;
    (opts, log)
}

fn invocations(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn get(node: &OvsNode, table: &str, row: &str, column: &str) -> String {
    node.vsctl(&["get", table, row, column])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ovs_ports_are_added_corrected_and_removed_by_marker_only() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    // Someone else's port, with a name the backend (wrongly) desires too: never touched.
    node.vsctl(&[
        "add-port",
        "br-ex",
        "theirs0",
        "tag=9",
        "--",
        "set",
        "interface",
        "theirs0",
        "type=internal",
    ]);
    let (opts, log) = logged_vsctl(&node);
    let ports = OvsPorts::new(opts);

    let mut desired: BTreeSet<OvsPortSpec> = [
        port("br-ex", "vlan-100", true, Some(100)),
        // A veth end the kernel part has not created yet: fine for OVS.
        port("br-ex", "veth-ovs-5", false, None),
        port("br-ex", "theirs0", true, None),
        port("br-nope", "vlan-7", true, Some(7)),
    ]
    .into();
    let report = ports.reconcile(&desired).await;
    assert_eq!(report.added.get("ovs_ports"), Some(&2), "{report:?}");
    let errors: Vec<(&str, &str)> = report
        .errors
        .iter()
        .map(|e| (e.class.as_str(), e.object.as_str()))
        .collect();
    assert_eq!(
        errors,
        [
            ("ovs_ports", "port theirs0 on bridge br-ex"),
            ("ovs_ports", "port vlan-7 on bridge br-nope"),
        ]
    );
    assert_eq!(
        invocations(&log).len(),
        2,
        "one read and one write: {:?}",
        invocations(&log)
    );
    assert_eq!(node.vsctl(&["port-to-br", "vlan-100"]), "br-ex");
    assert_eq!(get(&node, "port", "vlan-100", "tag"), "100");
    assert_eq!(get(&node, "interface", "vlan-100", "type"), "internal");
    assert_eq!(
        get(&node, "port", "vlan-100", "external_ids:ovn-bgp-agent"),
        "owned"
    );
    assert_eq!(node.vsctl(&["port-to-br", "veth-ovs-5"]), "br-ex");
    assert_eq!(get(&node, "interface", "veth-ovs-5", "type"), "\"\"");
    let theirs = || {
        (
            get(&node, "port", "theirs0", "tag"),
            get(&node, "port", "theirs0", "external_ids"),
        )
    };
    assert_eq!(theirs(), ("9".to_owned(), "{}".to_owned()));

    // Nothing changed: one read, no write.
    let report = ports.reconcile(&desired).await;
    assert_eq!(report.total_changes(), 0, "{report:?}");
    assert_eq!(invocations(&log).len(), 3);

    // Drift on the agent's port is corrected in one write.
    node.vsctl(&["set", "port", "vlan-100", "tag=5"]);
    node.vsctl(&["set", "interface", "veth-ovs-5", "type=internal"]);
    let report = ports.reconcile(&desired).await;
    assert_eq!(report.changed.get("ovs_ports"), Some(&2), "{report:?}");
    assert_eq!(invocations(&log).len(), 5);
    assert_eq!(get(&node, "port", "vlan-100", "tag"), "100");
    assert_eq!(get(&node, "interface", "veth-ovs-5", "type"), "system");

    // A port deleted by hand comes back at the next check.
    node.vsctl(&["del-port", "vlan-100"]);
    let report = ports.check_now().await.expect("a last desired set");
    assert_eq!(report.added.get("ovs_ports"), Some(&1), "{report:?}");
    assert_eq!(get(&node, "port", "vlan-100", "tag"), "100");

    // No longer desired: the marked port goes, the unmarked one stays.
    desired.remove(&port("br-ex", "veth-ovs-5", false, None));
    desired.remove(&port("br-ex", "theirs0", true, None));
    let report = ports.reconcile(&desired).await;
    assert_eq!(report.removed.get("ovs_ports"), Some(&1), "{report:?}");
    let listed = node.vsctl(&["list-ports", "br-ex"]);
    assert!(!listed.contains("veth-ovs-5"), "{listed}");
    assert!(listed.contains("theirs0"), "{listed}");

    // Nothing desired: the agent's ports go, and then an empty set costs no OVS call at all.
    let report = ports.reconcile(&BTreeSet::new()).await;
    assert_eq!(report.removed.get("ovs_ports"), Some(&1), "{report:?}");
    assert!(report.errors.is_empty(), "{report:?}");
    let calls = invocations(&log).len();
    assert!(ports.reconcile(&BTreeSet::new()).await.is_noop());
    assert_eq!(invocations(&log).len(), calls);
    let listed = node.vsctl(&["list-ports", "br-ex"]);
    assert!(!listed.contains("vlan-100") && listed.contains("theirs0"));
    assert_eq!(theirs(), ("9".to_owned(), "{}".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_port_on_the_wrong_bridge_is_moved() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let ports = OvsPorts::new(options(&node));
    let on_int: BTreeSet<OvsPortSpec> = [port("br-int", "vlan-100", true, Some(100))].into();
    assert!(ports.reconcile(&on_int).await.errors.is_empty());
    let on_ex: BTreeSet<OvsPortSpec> = [port("br-ex", "vlan-100", true, Some(100))].into();
    let report = ports.reconcile(&on_ex).await;
    assert_eq!(report.changed.get("ovs_ports"), Some(&1), "{report:?}");
    assert_eq!(node.vsctl(&["port-to-br", "vlan-100"]), "br-ex");
    assert_eq!(
        get(&node, "port", "vlan-100", "external_ids:ovn-bgp-agent"),
        "owned"
    );
}

/// EVPN's subnet redirect (upstream `ovs.py:154-177`).
fn evpn_redirect(router_mac: &str, vlan_mac: &str) -> PortFlowSpec {
    PortFlowSpec {
        bridge: name("br-ex"),
        in_port: PATCH.to_owned(),
        cookie: EVPN_COOKIE,
        priority: 1000,
        matches: format!("ip,dl_src={router_mac},nw_src=10.0.0.0/24"),
        actions: FlowAction::render(&[
            FlowAction::ModDlDst(mac(vlan_mac)),
            FlowAction::StripVlan,
            FlowAction::Output("vlan-100".to_owned()),
        ]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_flows_get_the_real_ofport_and_wait_for_the_port() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let flows = OvsFlows::new(options(&node));
    let cookies: BTreeSet<u64> = [EVPN_COOKIE].into();
    let router_mac = "fa:16:3e:00:00:01";
    let vlan_mac = "fa:16:3e:00:00:02";
    let mut desired: BTreeSet<PortFlowSpec> = [evpn_redirect(router_mac, vlan_mac)].into();
    // The `ovn` mode's ingress flow shape, and one without any in_port.
    let patch_ofport = node.ofport(PATCH);
    desired.insert(PortFlowSpec {
        bridge: name("br-ex"),
        in_port: String::new(),
        cookie: EVPN_COOKIE,
        priority: 900,
        matches: "ip,nw_dst=10.1.0.0/24".to_owned(),
        actions: FlowAction::render(&[FlowAction::Output(PATCH.to_owned())]),
    });

    // vlan-100 does not exist yet: its flow is not emitted (no output:-1), the other one is.
    let report = flows.reconcile(&desired, &cookies).await;
    assert_eq!(report.added, 1, "{}", report.problems());
    assert_eq!(report.absent.len(), 1, "{:?}", report.absent);
    assert_eq!(report.absent[0].port, "vlan-100");
    assert_eq!(
        node.flows("br-ex", "cookie=998/-1"),
        [format!(
            "cookie=0x3e6, priority=900,ip,nw_dst=10.1.0.0/24 actions=output:{patch_ofport}"
        )]
    );

    // The port is created (as the OVS port class does it): the periodic check emits the flow
    // with the port's real ofport.
    let ports = OvsPorts::new(options(&node));
    let report = ports
        .reconcile(&[port("br-ex", "vlan-100", true, Some(100))].into())
        .await;
    assert!(report.errors.is_empty(), "{report:?}");
    let vlan_ofport = wait_for("vlan-100 ofport", Duration::from_secs(10), || {
        let p = node.ofport("vlan-100");
        p.parse::<u32>().ok().map(|_| p)
    });
    let report = flows.check_now().await.expect("a last desired set");
    assert!(report.is_complete(), "{}", report.problems());
    assert_eq!(report.added, 1);
    let dump = node.flows("br-ex", "cookie=998/-1");
    assert!(
        dump.contains(&format!(
            "cookie=0x3e6, priority=1000,ip,in_port={patch_ofport},dl_src={router_mac},nw_src=10.0.0.0/24 \
             actions=mod_dl_dst:{vlan_mac},strip_vlan,output:{vlan_ofport}"
        )),
        "{dump:?}"
    );
    // The dump compares equal to what was desired: no churn.
    let report = flows.reconcile(&desired, &cookies).await;
    assert_eq!((report.added, report.removed), (0, 0), "{report:?}");

    // An output port whose ofport is -1 defers the flow; -1 is never written.
    node.vsctl(&[
        "add-port",
        "br-ex",
        "broken0",
        "--",
        "set",
        "interface",
        "broken0",
        "type=nonexistenttype",
    ]);
    let mut broken = evpn_redirect(router_mac, vlan_mac);
    broken.matches = "ip,dl_src=fa:16:3e:00:00:09,nw_src=10.0.9.0/24".to_owned();
    broken.actions = FlowAction::render(&[FlowAction::Output("broken0".to_owned())]);
    desired.insert(broken);
    // A hostile output port name is rejected, never spliced into the flow.
    let mut hostile = evpn_redirect(router_mac, vlan_mac);
    hostile.actions = "output:{x,drop}".to_owned();
    desired.insert(hostile);
    let report = flows.reconcile(&desired, &cookies).await;
    assert_eq!((report.added, report.removed), (0, 0), "{report:?}");
    assert_eq!(report.deferred.len(), 1, "{report:?}");
    assert_eq!(report.deferred[0].port, "broken0");
    assert!(report.deferred[0].reason.contains("-1"), "{report:?}");
    assert_eq!(report.rejected.len(), 1, "{report:?}");
    let dump = node.flows("br-ex", "");
    assert!(
        !dump
            .iter()
            .any(|l| l.contains("output:65535") || l.contains("-1") || l.contains("drop")),
        "{dump:?}"
    );

    // The output port goes away: its flow is removed, the others stay.
    desired.retain(|f| f.actions.contains("{patch") || !f.actions.contains("{broken0}"));
    desired.retain(|f| !f.actions.contains("{x,drop}"));
    let report = ports.reconcile(&BTreeSet::new()).await;
    assert!(report.errors.is_empty(), "{report:?}");
    let report = flows.reconcile(&desired, &cookies).await;
    assert_eq!(report.removed, 1, "{report:?}");
    assert_eq!(node.flows("br-ex", "cookie=998/-1").len(), 1);
}

fn fdb_show(node: &OvsNode, bridge: &str) -> String {
    let out = std::process::Command::new("/usr/bin/ovs-appctl")
        .arg("-t")
        .arg(node.rundir().join("ovs-vswitchd.ctl"))
        .args(["fdb/show", bridge])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn static_entries(node: &OvsNode, bridge: &str) -> Vec<String> {
    let mut v: Vec<String> = fdb_show(node, bridge)
        .lines()
        .filter(|l| l.ends_with("static"))
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .collect();
    v.sort();
    v
}

fn appctl(node: &OvsNode, args: &[&str]) {
    let out = std::process::Command::new("/usr/bin/ovs-appctl")
        .arg("-t")
        .arg(node.rundir().join("ovs-vswitchd.ctl"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fdb_entries_are_added_removed_and_restored_after_a_vswitchd_restart() {
    let mut node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    node.vsctl(&[
        "add-port",
        "br-ex",
        "vlan-100",
        "--",
        "set",
        "interface",
        "vlan-100",
        "type=internal",
    ]);
    let vlan_ofport = wait_for("vlan-100 ofport", Duration::from_secs(10), || {
        let p = node.ofport("vlan-100");
        p.parse::<u32>().ok().map(|_| p)
    });
    // An operator's static entry: not the agent's, never deleted.
    appctl(
        &node,
        &["fdb/add", "br-ex", "br-ex", "7", "aa:00:00:00:00:07"],
    );

    let fdb = Arc::new(OvsFdb::new(options(&node)));
    let local = FdbEntrySpec {
        bridge: name("br-ex"),
        port: name("br-ex"),
        vlan: 0,
        mac: mac("aa:00:00:00:00:01"),
    };
    let on_vlan = FdbEntrySpec {
        bridge: name("br-ex"),
        port: name("vlan-100"),
        vlan: 100,
        mac: mac("aa:00:00:00:00:02"),
    };
    let on_missing_bridge = FdbEntrySpec {
        bridge: name("br-nope"),
        ..local.clone()
    };
    let mut desired: BTreeSet<FdbEntrySpec> =
        [local.clone(), on_vlan.clone(), on_missing_bridge].into();
    let report = fdb.reconcile(&desired).await;
    assert_eq!(report.added.get("fdb"), Some(&2), "{report:?}");
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert_eq!(report.errors[0].class, "fdb");
    assert!(report.errors[0].object.contains("br-nope"), "{report:?}");
    let expected = |with_vlan: bool| {
        let mut v = vec![
            "LOCAL 0 aa:00:00:00:00:01".to_owned(),
            "LOCAL 7 aa:00:00:00:00:07".to_owned(),
        ];
        if with_vlan {
            v.push(format!("{vlan_ofport} 100 aa:00:00:00:00:02"));
        }
        v.sort();
        v
    };
    assert_eq!(static_entries(&node, "br-ex"), expected(true));
    desired.retain(|e| e.bridge.as_str() == "br-ex");

    // Unchanged: nothing to do.
    let report = fdb.reconcile(&desired).await;
    assert!(report.is_noop(), "{report:?}");

    // No longer desired: deleted (the operator's entry stays).
    desired.remove(&on_vlan);
    let report = fdb.reconcile(&desired).await;
    assert_eq!(report.removed.get("fdb"), Some(&1), "{report:?}");
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(static_entries(&node, "br-ex"), expected(false));

    // vswitchd restarts: its FDB is empty; the periodic OVS check adds the entry again.
    let flows = Arc::new(
        OvsFlows::new(options(&node)).with_drift_checks(vec![fdb.clone() as Arc<dyn DriftCheck>]),
    );
    let checker = flows.clone().spawn_flow_check();
    node.kill_vswitchd();
    node.start_vswitchd();
    wait_for(
        "the FDB entry re-added after the restart",
        Duration::from_secs(15),
        || {
            static_entries(&node, "br-ex")
                .contains(&"LOCAL 0 aa:00:00:00:00:01".to_owned())
                .then_some(())
        },
    );
    checker.abort();
    assert_eq!(
        static_entries(&node, "br-ex"),
        ["LOCAL 0 aa:00:00:00:00:01"],
        "the operator's entry was lost with the restart, and is not the agent's to restore"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_creates_the_port_before_the_flow_that_outputs_to_it() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let reconciler = frrovs_support::composite_without_frr(&node);

    let mut desired = DesiredSystem::default();
    desired
        .ovs_ports
        .insert(port("br-ex", "vlan-100", true, Some(100)));
    desired
        .flows
        .insert(evpn_redirect("fa:16:3e:00:00:01", "fa:16:3e:00:00:02"));
    desired.ownership.flow_cookies.insert(EVPN_COOKIE);
    desired.fdb_entries.insert(FdbEntrySpec {
        bridge: name("br-ex"),
        port: name("vlan-100"),
        vlan: 100,
        mac: mac("fa:16:3e:00:00:01"),
    });
    // The kernel part, in the namespace where vswitchd created the internal port: an address on
    // the device OVS has just created.
    desired.links.insert(LinkSpec {
        name: name("tst-nic"),
        kind: LinkKind::Ifb,
        master: None,
        mac: None,
        up: true,
    });
    desired.addresses.insert(AddressSpec {
        dev: name("tst-nic"),
        addr: "172.24.100.10/32".parse().unwrap(),
    });
    desired.ownership.address_devices.insert(name("tst-nic"));

    let report = reconciler.reconcile(&desired).await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(report.added.get("ovs_ports"), Some(&1), "{report:?}");
    assert_eq!(report.added.get("flows"), Some(&1), "{report:?}");
    assert_eq!(report.added.get("fdb"), Some(&1), "{report:?}");
    assert_eq!(report.added.get("addresses"), Some(&1), "{report:?}");
    let vlan_ofport = node.ofport("vlan-100");
    let dump = node.flows("br-ex", "cookie=998/-1");
    assert_eq!(dump.len(), 1, "{dump:?}");
    assert!(
        dump[0].ends_with(&format!("output:{vlan_ofport}")),
        "{dump:?}"
    );
    // The internal port's device exists in the namespace the kernel part works in.
    node.netns.ip(&["link", "show", "dev", "vlan-100"]);

    // A second run changes nothing.
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert!(report.is_noop(), "{report:?}");

    // Everything withdrawn: the port, the flow and the FDB entry go.
    let empty = DesiredSystem {
        ownership: desired.ownership.clone(),
        ..Default::default()
    };
    let report = reconciler.reconcile(&empty).await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(report.removed.get("ovs_ports"), Some(&1), "{report:?}");
    assert_eq!(report.removed.get("flows"), Some(&1), "{report:?}");
    assert!(!node.vsctl(&["list-ports", "br-ex"]).contains("vlan-100"));
    assert!(node.flows("br-ex", "cookie=998/-1").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_ovsdb_refuses_does_not_block_the_others() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    // `dupe0` is an interface of someone's bond: no Port row has that name, so the plan adds it,
    // and ovs-vsctl refuses the whole transaction.
    node.vsctl(&["add-bond", "br-int", "bond0", "dupe0", "other0"]);
    let (opts, log) = logged_vsctl(&node);
    let ports = OvsPorts::new(opts);
    let desired: BTreeSet<OvsPortSpec> = [
        port("br-ex", "vlan-100", true, Some(100)),
        port("br-ex", "dupe0", true, None),
    ]
    .into();
    let report = ports.reconcile(&desired).await;
    assert_eq!(report.added.get("ovs_ports"), Some(&1), "{report:?}");
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert_eq!(report.errors[0].object, "add port dupe0 on bridge br-ex");
    assert!(
        report.errors[0].error.contains("dupe0"),
        "ovs-vsctl's own complaint: {report:?}"
    );
    // Read, the refused transaction, then one write per change.
    assert_eq!(invocations(&log).len(), 4, "{:?}", invocations(&log));
    assert_eq!(node.vsctl(&["port-to-br", "vlan-100"]), "br-ex");
    assert_eq!(node.vsctl(&["port-to-br", "bond0"]), "br-int");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ovs_without_static_fdb_support_is_a_clear_error() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    // An older ovs-vswitchd, as its ovs-appctl shows it: no fdb/add in list-commands.
    // ovs-appctl is looked up next to ovs-vsctl.
    let tools = node.rundir().join("old-ovs");
    std::fs::create_dir(&tools).unwrap();
    frrovs_support::write_executable(
        &tools.join("ovs-vsctl"),
        &format!("#!/bin/sh\nexec {} \"$@\"\n", frrovs_support::OVS_VSCTL),
    );
    frrovs_support::write_executable(
        &tools.join("ovs-appctl"),
        "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = list-commands ]; then /usr/bin/ovs-appctl \"$@\" | grep -v fdb/; exit 0; fi\ndone\nexec /usr/bin/ovs-appctl \"$@\"\n",
    );
    let mut opts = options(&node);
    opts.vsctl_path = tools.join("ovs-vsctl");
    let fdb = OvsFdb::new(opts);
    let desired: BTreeSet<FdbEntrySpec> = [FdbEntrySpec {
        bridge: name("br-ex"),
        port: name("br-ex"),
        vlan: 0,
        mac: mac("aa:00:00:00:00:01"),
    }]
    .into();
    let report = fdb.reconcile(&desired).await;
    assert_eq!(report.total_changes(), 0, "{report:?}");
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert_eq!(report.errors[0].class, "fdb");
    assert!(
        report.errors[0].error.contains("no `fdb/add`"),
        "{report:?}"
    );
    assert!(static_entries(&node, "br-ex").is_empty());
}

/// The OVS classes as the agent wires them (`Caps::for_agent`): flows, FDB entries and (with
/// `ports`) OVS ports through a composite reconciler on the node's netns, tool classes in the
/// background, unchanged sets left to the periodic check, which re-runs the ports' and FDB
/// entries' last reconcile beside the flows'.
fn wired_as_the_agent(
    node: &OvsNode,
    opts: OvsOptions,
    ports: bool,
) -> (
    Arc<OvsFlows>,
    ovn_bgp_agent::caps::reconcile::CompositeReconciler,
) {
    use ovn_bgp_agent::caps::{FdbReconciler, FlowReconciler, OvsPortReconciler};
    let ports = ports.then(|| Arc::new(OvsPorts::new(opts.clone())));
    let fdb = Arc::new(OvsFdb::new(opts.clone()));
    let mut checks: Vec<Arc<dyn DriftCheck>> = Vec::new();
    checks.extend(ports.iter().map(|p| p.clone() as Arc<dyn DriftCheck>));
    checks.push(fdb.clone());
    let flows = Arc::new(OvsFlows::new(opts).with_drift_checks(checks));
    let mut config = ovn_bgp_agent::config::AgentConfig::default();
    config.linux.netns = Some(node.netns.name.clone());
    let reconciler = ovn_bgp_agent::caps::reconcile::CompositeReconciler::new(
        Arc::new(ovn_bgp_agent::caps::netlink::NetlinkReconciler::from_config(&config.linux)),
        Some(flows.clone() as Arc<dyn FlowReconciler>),
        None,
    )
    .with_ovs_ports_and_fdb(
        ports.map(|p| p as Arc<dyn OvsPortReconciler>),
        Some(fdb as Arc<dyn FdbReconciler>),
    )
    .with_flow_check_running()
    .with_background_tools(ovn_bgp_agent::caps::reconcile::AGENT_TOOL_WAIT);
    (flows, reconciler)
}

/// As the agent wires it (tool classes in the background, the periodic OVS check running): an
/// OVS port set equal to the last one applied is not read again on every reconcile (an
/// `ovs-vsctl` per OVSDB event on an EVPN gateway), and a port deleted by hand comes back with
/// the periodic check, which re-runs the ports' last reconcile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_ports_are_left_to_the_periodic_check() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let (opts, log) = logged_vsctl(&node);
    let (flows, reconciler) = wired_as_the_agent(&node, opts, true);
    let port_reads = || {
        invocations(&log)
            .iter()
            .filter(|l| l.contains("find Port external_ids:ovn-bgp-agent=owned"))
            .count()
    };

    let mut desired = DesiredSystem::default();
    desired
        .ovs_ports
        .insert(port("br-ex", "vlan-100", true, Some(100)));
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(report.added.get("ovs_ports"), Some(&1), "{report:?}");
    let reads = port_reads();
    assert_eq!(reads, 1, "{:?}", invocations(&log));

    // Events that change something else: the ports are not read again.
    for i in 1..=3u8 {
        desired.flows.insert(evpn_redirect(
            &format!("fa:16:3e:00:00:0{i}"),
            "fa:16:3e:00:00:10",
        ));
        desired.ownership.flow_cookies.insert(EVPN_COOKIE);
        let report = reconciler.reconcile(&desired).await.unwrap();
        assert!(report.errors.is_empty(), "{report:?}");
        assert_eq!(report.added.get("flows"), Some(&1), "{report:?}");
    }
    assert_eq!(port_reads(), reads, "{:?}", invocations(&log));

    // Deleted by hand: the periodic check puts it back.
    node.vsctl(&["del-port", "vlan-100"]);
    flows.check_others_now().await;
    assert_eq!(node.vsctl(&["port-to-br", "vlan-100"]), "br-ex");
    assert_eq!(get(&node, "port", "vlan-100", "tag"), "100");

    // A changed set is applied at once, before the kernel part.
    desired
        .ovs_ports
        .insert(port("br-ex", "vlan-200", true, Some(200)));
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert_eq!(report.added.get("ovs_ports"), Some(&1), "{report:?}");
    assert_eq!(node.vsctl(&["port-to-br", "vlan-200"]), "br-ex");
}

/// As the agent wires it: a static FDB entry set equal to the last one applied costs no
/// `ovs-appctl` per reconcile (the ovn method's one entry took an `fdb/show` per OVSDB event,
/// about 30 ms each on a busy vswitchd), an entry deleted behind the agent's back (a vswitchd
/// restart drops them all) comes back with the periodic check, and a changed set is applied
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_fdb_entries_are_left_to_the_periodic_check() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    // ovs-appctl is looked up next to ovs-vsctl: both wrapped, the appctl runs logged.
    let tools = node.rundir().join("logged-ovs");
    std::fs::create_dir(&tools).unwrap();
    let log = tools.join("appctl.log");
    frrovs_support::write_executable(
        &tools.join("ovs-vsctl"),
        &format!("#!/bin/sh\nexec {} \"$@\"\n", frrovs_support::OVS_VSCTL),
    );
    frrovs_support::write_executable(
        &tools.join("ovs-appctl"),
        &format!(
            "#!/bin/sh\necho \"$*\" >> {}\nexec /usr/bin/ovs-appctl \"$@\"\n",
            log.display()
        ),
    );
    let mut opts = options(&node);
    opts.vsctl_path = tools.join("ovs-vsctl");
    let (flows, reconciler) = wired_as_the_agent(&node, opts, false);
    let fdb_runs = || {
        invocations(&log)
            .iter()
            .filter(|l| l.contains("fdb/"))
            .count()
    };
    let entry = |m: &str| FdbEntrySpec {
        bridge: name("br-ex"),
        port: name("br-ex"),
        vlan: 0,
        mac: mac(m),
    };

    let mut desired = DesiredSystem::default();
    desired.fdb_entries.insert(entry("aa:00:00:00:00:01"));
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(report.added.get("fdb"), Some(&1), "{report:?}");
    assert_eq!(
        static_entries(&node, "br-ex"),
        ["LOCAL 0 aa:00:00:00:00:01"]
    );
    let runs = fdb_runs();
    assert!(runs >= 2, "fdb/show, then fdb/add: {:?}", invocations(&log));

    // Events that change something else: no ovs-appctl at all.
    for i in 1..=3u8 {
        desired.flows.insert(evpn_redirect(
            &format!("fa:16:3e:00:00:0{i}"),
            "fa:16:3e:00:00:10",
        ));
        desired.ownership.flow_cookies.insert(EVPN_COOKIE);
        // (Deferred, not added: their VLAN port does not exist here; what matters is that
        // the desired state changed.)
        let report = reconciler.reconcile(&desired).await.unwrap();
        assert!(report.errors.is_empty(), "{report:?}");
    }
    assert_eq!(fdb_runs(), runs, "{:?}", invocations(&log));

    // Deleted behind the agent's back: the periodic check puts it back.
    appctl(&node, &["fdb/del", "br-ex", "0", "aa:00:00:00:00:01"]);
    assert!(static_entries(&node, "br-ex").is_empty());
    flows.check_others_now().await;
    assert_eq!(
        static_entries(&node, "br-ex"),
        ["LOCAL 0 aa:00:00:00:00:01"]
    );

    // A changed set is applied by the reconcile itself.
    desired.fdb_entries.insert(entry("aa:00:00:00:00:02"));
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert_eq!(report.added.get("fdb"), Some(&1), "{report:?}");
    assert_eq!(
        static_entries(&node, "br-ex"),
        ["LOCAL 0 aa:00:00:00:00:01", "LOCAL 0 aa:00:00:00:00:02"]
    );

    // An entry that cannot be applied yet (its bridge does not exist) stays in the report of
    // the events that leave it to the periodic check, until that check applies it.
    desired.fdb_entries.insert(FdbEntrySpec {
        bridge: name("br-new"),
        port: name("br-new"),
        ..entry("aa:00:00:00:00:03")
    });
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].object.contains("br-new"), "{report:?}");
    let runs = fdb_runs();
    desired
        .flows
        .insert(evpn_redirect("fa:16:3e:00:00:04", "fa:16:3e:00:00:10"));
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert_eq!(report.errors.len(), 1, "still reported: {report:?}");
    assert!(report.errors[0].object.contains("br-new"), "{report:?}");
    assert_eq!(fdb_runs(), runs, "{:?}", invocations(&log));
    node.vsctl(&[
        "add-br",
        "br-new",
        "--",
        "set",
        "bridge",
        "br-new",
        "datapath_type=netdev",
    ]);
    flows.check_others_now().await;
    assert_eq!(
        static_entries(&node, "br-new"),
        ["LOCAL 0 aa:00:00:00:00:03"]
    );
    desired
        .flows
        .insert(evpn_redirect("fa:16:3e:00:00:05", "fa:16:3e:00:00:10"));
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert!(report.errors.is_empty(), "applied since: {report:?}");

    // Flows likewise: a flow refused stays reported by the events that leave the unchanged
    // flow set to the flow check (here: one that changes only the FDB entries).
    let mut hostile = evpn_redirect("fa:16:3e:00:00:06", "fa:16:3e:00:00:10");
    hostile.actions = "output:{x,drop}".to_owned();
    desired.flows.insert(hostile.clone());
    let flow_errors = |r: &ovn_bgp_agent::system::ChangeReport| {
        r.errors.iter().filter(|e| e.class == "flows").count()
    };
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert_eq!(flow_errors(&report), 1, "{report:?}");
    desired.fdb_entries.insert(entry("aa:00:00:00:00:04"));
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert_eq!(report.added.get("fdb"), Some(&1), "{report:?}");
    assert_eq!(flow_errors(&report), 1, "still reported: {report:?}");
    desired.flows.remove(&hostile);
    let report = reconciler.reconcile(&desired).await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
}
