//! OVS flow capability against a real ovsdb-server + ovs-vswitchd (userspace datapath) started by
//! each test in its own temp dir and network namespace.

mod frrovs_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use frrovs_support::{OvsNode, unique_tag, wait_for};
use ovn_bgp_agent::caps::FlowReconciler;
use ovn_bgp_agent::caps::ovs::{OvsFlows, OvsOptions};
use ovn_bgp_agent::system::PortFlowSpec;
use ovn_bgp_agent::types::InterfaceName;

const COOKIE: u64 = 999;
const PATCH: &str = "patch-provnet-x-to-br-int";

fn options(node: &OvsNode) -> OvsOptions {
    OvsOptions {
        vsctl_path: frrovs_support::OVS_VSCTL.into(),
        ofctl_path: frrovs_support::OVS_OFCTL.into(),
        rundir: node.rundir().to_path_buf(),
        timeout: Duration::from_secs(10),
        flow_check_interval: Duration::from_secs(1),
    }
}

/// The MAC-tweak pair of §1.0 / A9 for `port` on br-ex.
fn mac_tweak(port: &str, mac: &str) -> BTreeSet<PortFlowSpec> {
    ["ip", "ipv6"]
        .into_iter()
        .map(|proto| PortFlowSpec {
            bridge: InterfaceName::new("br-ex").unwrap(),
            in_port: port.to_owned(),
            cookie: COOKIE,
            priority: 900,
            matches: proto.to_owned(),
            actions: format!("mod_dl_dst:{mac},NORMAL"),
        })
        .collect()
}

fn a9_lines(ofport: &str, mac: &str) -> Vec<String> {
    let mut v = vec![
        format!("cookie=0x3e7, priority=900,ip,in_port={ofport} actions=mod_dl_dst:{mac},NORMAL"),
        format!("cookie=0x3e7, priority=900,ipv6,in_port={ofport} actions=mod_dl_dst:{mac},NORMAL"),
    ];
    v.sort();
    v
}

fn owned() -> BTreeSet<u64> {
    [COOKIE].into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mac_tweak_flows_reconciled_stray_removed_others_untouched() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let ofport = node.ofport(PATCH);
    let mac = node.mac_in_use("br-ex");
    // A10: a stray flow with the agent's cookie, and a flow of someone else.
    node.ofctl(&[
        "add-flow",
        "br-ex",
        "cookie=999,priority=900,ip,in_port=7,actions=NORMAL",
    ]);
    node.ofctl(&[
        "add-flow",
        "br-ex",
        "cookie=5,priority=10,ip,actions=NORMAL",
    ]);
    node.ofctl(&["add-flow", "br-int", "cookie=999,priority=1,actions=NORMAL"]);

    let flows = OvsFlows::new(options(&node));
    let desired = mac_tweak(PATCH, &mac);
    let report = flows.reconcile(&desired, &owned()).await;
    assert!(report.is_complete(), "{}", report.problems());
    assert_eq!((report.added, report.removed), (2, 1));

    // A9: exactly the two flows, cookie shown as 0x3e7.
    assert_eq!(
        node.flows("br-ex", "cookie=999/-1"),
        a9_lines(&ofport, &mac)
    );
    assert_eq!(
        node.flows("br-ex", "cookie=5/-1"),
        ["cookie=0x5, priority=10,ip actions=NORMAL"]
    );
    // A bridge the agent was not asked about is not touched.
    assert_eq!(node.flows("br-int", "cookie=999/-1").len(), 1);

    // Second reconcile: a no-op, through the trait as the composite reconciler calls it.
    assert_eq!(
        flows
            .reconcile_flows(&desired.iter().cloned().collect(), &owned())
            .await
            .unwrap(),
        (0, 0)
    );

    // Removing the desire removes the flows from the bridge it managed.
    let report = flows.reconcile(&BTreeSet::new(), &owned()).await;
    assert_eq!((report.added, report.removed), (0, 2));
    assert!(node.flows("br-ex", "cookie=999/-1").is_empty());
    assert_eq!(node.flows("br-ex", "cookie=5/-1").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of13_only_bridge_is_handled_and_compares_equal() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    node.vsctl(&["set", "bridge", "br-ex", "protocols=OpenFlow13"]);
    let mac = node.mac_in_use("br-ex");
    let flows = OvsFlows::new(options(&node));
    let desired = mac_tweak(PATCH, &mac);
    let report = flows.reconcile(&desired, &owned()).await;
    assert!(report.is_complete(), "{}", report.problems());
    assert_eq!(report.added, 2);
    // The OF1.3 dump renders set_field:…->eth_dst; it must compare equal: no churn.
    let dump = node.ofctl(&["-O", "OpenFlow13", "dump-flows", "br-ex"]);
    assert!(dump.contains("->eth_dst"), "{dump}");
    let report = flows.reconcile(&desired, &owned()).await;
    assert!(report.is_complete(), "{}", report.problems());
    assert_eq!((report.added, report.removed), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flows_come_back_after_emer_reset_and_vswitchd_restart() {
    let mut node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    // As on a neutron node: secure fail mode and a controller (here an absent unix socket).
    // emer-reset removes both, and vswitchd then resets the bridge's flow table.
    let controller = format!("unix:{}", node.rundir().join("no-controller").display());
    node.vsctl(&["set", "bridge", "br-ex", "fail_mode=secure"]);
    node.vsctl(&["set-controller", "br-ex", &controller]);
    let mac = node.mac_in_use("br-ex");
    let flows = Arc::new(OvsFlows::new(options(&node)));
    let desired = mac_tweak(PATCH, &mac);
    assert_eq!(flows.reconcile(&desired, &owned()).await.added, 2);

    // emer-reset (lesson-ovs-restart-flows.txt) wipes the flows; one check reinstalls them.
    node.vsctl(&["emer-reset"]);
    wait_for(
        "emer-reset to wipe the flows",
        Duration::from_secs(10),
        || {
            node.flows("br-ex", "cookie=999/-1")
                .is_empty()
                .then_some(())
        },
    );
    let report = flows
        .check_now()
        .await
        .expect("a desired set is remembered");
    assert!(report.is_complete(), "{}", report.problems());
    let ofport = node.ofport(PATCH);
    assert_eq!(
        node.flows("br-ex", "cookie=999/-1"),
        a9_lines(&ofport, &mac)
    );

    // Someone wipes the flows; the periodic check (1 s) reinstalls them on its own.
    let checker = flows.clone().spawn_flow_check();
    node.ofctl(&["del-flows", "br-ex"]);
    assert!(node.flows("br-ex", "cookie=999/-1").is_empty());
    wait_for(
        "flows reinstalled after del-flows",
        Duration::from_secs(10),
        || (node.flows("br-ex", "cookie=999/-1").len() == 2).then_some(()),
    );

    // OVS down: errors reported, nothing panics, the agent keeps trying.
    node.kill_vswitchd();
    let report = flows.check_now().await.unwrap();
    assert!(!report.is_complete(), "a dead vswitchd must be reported");
    assert!(
        flows
            .reconcile_flows(&desired.iter().cloned().collect(), &owned())
            .await
            .is_err()
    );

    // vswitchd back with an empty flow table: the periodic check reinstalls the flows.
    node.start_vswitchd();
    wait_for(
        "flows reinstalled after restart",
        Duration::from_secs(15),
        || {
            let lines = node.try_flows("br-ex", "cookie=999/-1").ok()?;
            (lines == a9_lines(&node.ofport(PATCH), &mac)).then_some(())
        },
    );
    checker.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ofport_minus_one_is_deferred_until_the_port_works() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
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
    assert_eq!(node.ofport("broken0"), "-1");
    let mac = node.mac_in_use("br-ex");
    let flows = OvsFlows::new(options(&node));
    let mut desired = mac_tweak("broken0", &mac);
    // A port that does not exist at all is not an error (ovn-controller creates patch ports only
    // where a provider network is in use): its flows are simply not emitted yet.
    desired.extend(mac_tweak("not-there-yet", &mac));
    desired.extend(mac_tweak(PATCH, &mac));

    let report = flows.reconcile(&desired, &owned()).await;
    assert_eq!(report.added, 2, "the valid port's flows are applied");
    assert_eq!(report.deferred.len(), 2, "{:?}", report.deferred);
    assert_eq!(report.absent.len(), 2, "{:?}", report.absent);
    assert!(report.absent.iter().all(|d| d.port == "not-there-yet"));
    assert!(
        report
            .deferred
            .iter()
            .any(|d| d.port == "broken0" && d.reason.contains("-1")),
        "{:?}",
        report.deferred
    );
    let dump = node.flows("br-ex", "");
    assert!(
        !dump
            .iter()
            .any(|l| l.contains("in_port=-1") || l.contains("in_port=65535")),
        "{dump:?}"
    );
    let err = flows
        .reconcile_flows(&desired.iter().cloned().collect(), &owned())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("broken0") && !err.contains("not-there-yet"),
        "{err}"
    );

    // The interface becomes usable: the next reconcile emits its flows.
    node.vsctl(&["set", "interface", "broken0", "type=internal"]);
    let ofport = wait_for("broken0 ofport", Duration::from_secs(10), || {
        let p = node.ofport("broken0");
        p.parse::<u32>().ok().map(|_| p)
    });
    let report = flows.reconcile(&desired, &owned()).await;
    assert_eq!(report.added, 2);
    assert!(report.deferred.is_empty(), "{:?}", report.deferred);
    let dump = node.flows("br-ex", "cookie=999/-1");
    assert!(
        dump.contains(&format!(
            "cookie=0x3e7, priority=900,ip,in_port={ofport} actions=mod_dl_dst:{mac},NORMAL"
        )),
        "{dump:?}"
    );
    assert_eq!(dump.len(), 4);

    // The missing port appears (as ovn-controller creates a patch port): the flow check, which
    // re-runs the last desired set, emits its flows; the reconcile call itself now succeeds.
    flows
        .reconcile_flows(&desired.iter().cloned().collect(), &owned())
        .await
        .unwrap();
    node.vsctl(&[
        "add-port",
        "br-ex",
        "not-there-yet",
        "--",
        "set",
        "interface",
        "not-there-yet",
        "type=internal",
    ]);
    let ofport = wait_for("not-there-yet ofport", Duration::from_secs(10), || {
        let p = node.ofport("not-there-yet");
        p.parse::<u32>().ok().map(|_| p)
    });
    let report = flows
        .check_now()
        .await
        .expect("a last desired set to check");
    assert_eq!(report.added, 2, "{:?}", report.absent);
    let dump = node.flows("br-ex", "cookie=999/-1");
    assert!(
        dump.iter()
            .any(|l| l.contains(&format!("in_port={ofport} "))),
        "{dump:?}"
    );
    assert_eq!(dump.len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_port_names_never_reach_ovs_ofctl() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let mac = node.mac_in_use("br-ex");
    // A wrapper that records every ovs-ofctl invocation and its stdin before running the real
    // tool, so the test can prove what reached it.
    let log = node.rundir().join("ofctl.log");
    let wrapper = node.rundir().join("ovs-ofctl-wrapper");
    frrovs_support::write_executable(
        &wrapper,
        &format!(
            "#!/bin/sh\necho \"ARGS $*\" >> {log}\nif [ \"$3\" = - ] || [ \"$4\" = - ] || [ \"$5\" = - ]; then tee -a {log} | {real} \"$@\"; else exec {real} \"$@\"; fi\n",
            log = log.display(),
            real = frrovs_support::OVS_OFCTL
        ),
    );
    let mut opts = options(&node);
    opts.ofctl_path = wrapper;
    let flows = OvsFlows::new(opts);

    let hostile = [
        "patch\nadd cookie=0x3e7,priority=1 actions=drop",
        "a,in_port=1",
        "a;reboot",
        "a b",
    ];
    let mut desired = mac_tweak(PATCH, &mac);
    for name in hostile {
        desired.extend(mac_tweak(name, &mac));
    }
    // Hostile match/action text is refused too.
    desired.insert(PortFlowSpec {
        bridge: InterfaceName::new("br-ex").unwrap(),
        in_port: PATCH.to_owned(),
        cookie: COOKIE,
        priority: 901,
        matches: "ip actions=drop".to_owned(),
        actions: "NORMAL".to_owned(),
    });
    let report = flows.reconcile(&desired, &owned()).await;
    assert_eq!(report.rejected.len(), hostile.len() * 2 + 1, "{report:?}");
    assert_eq!(report.added, 2, "valid flows still applied");
    let recorded = std::fs::read_to_string(&log).unwrap();
    for bad in ["reboot", "a b", "a,in_port", "priority=1 ", "priority=901"] {
        assert!(
            !recorded.contains(bad),
            "{bad:?} reached ovs-ofctl:\n{recorded}"
        );
    }
    assert_eq!(node.flows("br-ex", "cookie=999/-1").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_ovs_ofctl_refuses_does_not_block_the_others() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let mac = node.mac_in_use("br-ex");
    let flows = OvsFlows::new(options(&node));
    let mut desired = mac_tweak(PATCH, &mac);
    // Passes the character check but is no MAC: only ovs-ofctl can tell.
    desired.insert(PortFlowSpec {
        bridge: InterfaceName::new("br-ex").unwrap(),
        in_port: PATCH.to_owned(),
        cookie: COOKIE,
        priority: 901,
        matches: "ip".to_owned(),
        actions: "mod_dl_dst:zz,NORMAL".to_owned(),
    });
    let report = flows.reconcile(&desired, &owned()).await;
    assert_eq!(report.added, 2, "{}", report.problems());
    assert_eq!(report.rejected.len(), 1, "{}", report.problems());
    assert!(
        report.rejected[0].error.contains("invalid mac address"),
        "{}",
        report.problems()
    );
    assert_eq!(node.flows("br-ex", "cookie=999/-1").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_ovs_renders_differently_is_learned_not_churned() {
    let node = OvsNode::start(&unique_tag());
    node.provider_bridges();
    let flows = OvsFlows::new(options(&node));
    // OVS shows `ip,nw_proto=6` as `tcp`: without learning that, every reconcile would delete
    // and re-add the flow.
    let desired: BTreeSet<PortFlowSpec> = [PortFlowSpec {
        bridge: InterfaceName::new("br-ex").unwrap(),
        in_port: PATCH.to_owned(),
        cookie: COOKIE,
        priority: 800,
        matches: "ip,nw_proto=6".to_owned(),
        actions: "NORMAL".to_owned(),
    }]
    .into();
    let report = flows.reconcile(&desired, &owned()).await;
    assert_eq!((report.added, report.removed), (1, 0));
    assert_eq!(report.non_canonical.len(), 1, "{report:?}");
    for _ in 0..2 {
        let report = flows.reconcile(&desired, &owned()).await;
        assert!(report.is_complete(), "{}", report.problems());
        assert_eq!((report.added, report.removed), (0, 0), "no churn");
    }
    let ofport = node.ofport(PATCH);
    assert_eq!(
        node.flows("br-ex", "cookie=999/-1"),
        [format!(
            "cookie=0x3e7, priority=800,tcp,in_port={ofport} actions=NORMAL"
        )]
    );
    // The learned rendering is still deleted when the flow is no longer desired.
    let report = flows.reconcile(&BTreeSet::new(), &owned()).await;
    assert_eq!(report.removed, 1);
    assert!(node.flows("br-ex", "cookie=999/-1").is_empty());
}
