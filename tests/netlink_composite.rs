//! The composite reconciler wired by `Capabilities::new`: kernel work lands in `[linux] netns`,
//! flows and FRR are delegated to their capabilities (stand-ins here: those are tested by the
//! OVS and FRR tests), a failing class is reported without stopping the others.

mod netlink_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use netlink_support::{TestNetns, ifname, up_link};
use ovn_bgp_agent::caps::{CapError, Capabilities, FlowReconciler, FrrConfigurator};
use ovn_bgp_agent::config::AgentConfig;
use ovn_bgp_agent::system::*;

fn config_for(ns: &TestNetns) -> AgentConfig {
    let mut c = AgentConfig::default();
    c.linux.netns = Some(ns.name.clone());
    c
}

fn desired() -> DesiredSystem {
    let mut d = DesiredSystem::default();
    d.links.insert(up_link("bgp-nic", LinkKind::Ifb));
    d.addresses.insert(AddressSpec {
        dev: ifname("bgp-nic"),
        addr: "172.24.100.10/32".parse().unwrap(),
    });
    d.ownership.address_devices.insert(ifname("bgp-nic"));
    d.flows.insert(PortFlowSpec {
        bridge: ifname("br-ex"),
        in_port: "patch-provnet-1".to_owned(),
        cookie: 999,
        priority: 900,
        matches: "ip".to_owned(),
        actions: "NORMAL".to_owned(),
    });
    d.ownership.flow_cookies.insert(999);
    d.frr.push("router bgp 64999\n".to_owned());
    d
}

struct CountingFlows(AtomicUsize);
#[async_trait]
impl FlowReconciler for CountingFlows {
    async fn reconcile_flows(
        &self,
        desired: &ObjectSet<PortFlowSpec>,
        owned_cookies: &BTreeSet<u64>,
    ) -> Result<(usize, usize), CapError> {
        assert!(owned_cookies.contains(&999));
        let first = self.0.fetch_add(1, Ordering::SeqCst) == 0;
        Ok(if first { (desired.len(), 0) } else { (0, 0) })
    }
}

struct FailingFrr;
#[async_trait]
impl FrrConfigurator for FailingFrr {
    async fn ensure(&self, _snippets: &[String]) -> Result<usize, CapError> {
        Err(CapError::Failed {
            capability: "frr",
            message: "vtysh: connection refused".to_owned(),
        })
    }
}

#[tokio::test]
async fn kernel_work_lands_in_the_configured_netns_and_classes_are_reported() {
    let ns = TestNetns::new();
    let caps = Capabilities::new(&config_for(&ns));

    // No flow or FRR capability plugged in: those classes say so, the kernel part is applied.
    let report = caps.reconciler.reconcile(&desired()).await.unwrap();
    println!("{report:?}");
    assert_eq!(report.added.get("links"), Some(&1));
    assert_eq!(report.added.get("addresses"), Some(&1));
    let classes: Vec<_> = report
        .errors
        .iter()
        .map(|e| (e.class.as_str(), e.error.as_str()))
        .collect();
    assert_eq!(
        classes,
        [("flows", "not configured"), ("frr", "not configured")]
    );
    assert!(
        ns.ip(&["addr", "show", "dev", "bgp-nic"])
            .contains("172.24.100.10/32")
    );
    // Not in the test's own namespace.
    let here = std::process::Command::new("ip")
        .args(["-d", "link", "show", "dev", "bgp-nic"])
        .output()
        .unwrap();
    assert!(
        !here.status.success() || !String::from_utf8_lossy(&here.stdout).contains("ifb"),
        "bgp-nic leaked into the host namespace"
    );

    // Without flows or FRR in the desired state, no such error.
    let mut kernel_only = desired();
    kernel_only.flows.clear();
    kernel_only.frr.clear();
    assert!(
        caps.reconciler
            .reconcile(&kernel_only)
            .await
            .unwrap()
            .is_noop()
    );

    // Plugged in: flows counted; FRR failing is reported and does not stop the rest.
    let caps = caps.with_flows_and_frr(
        Some(Arc::new(CountingFlows(AtomicUsize::new(0)))),
        Some(Arc::new(FailingFrr)),
    );
    let mut d = desired();
    d.addresses.insert(AddressSpec {
        dev: ifname("bgp-nic"),
        addr: "172.24.100.11/32".parse().unwrap(),
    });
    let report = caps.reconciler.reconcile(&d).await.unwrap();
    println!("{report:?}");
    assert_eq!(report.added.get("flows"), Some(&1));
    assert_eq!(report.added.get("addresses"), Some(&1));
    assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
    assert_eq!(report.errors[0].class, "frr");
    assert!(report.errors[0].error.contains("connection refused"));

    // An invalid object is left out and reported; the kernel part, flows and FRR still run.
    let mut bad = d.clone();
    bad.sysctls
        .insert("kernel.panic".to_owned(), "1".to_owned());
    let report = caps.reconciler.reconcile(&bad).await.unwrap();
    let classes: Vec<&str> = report.errors.iter().map(|e| e.class.as_str()).collect();
    assert_eq!(classes, ["sysctls", "frr"], "{:#?}", report.errors);
    assert!(
        report.errors[0].object.contains("kernel.panic"),
        "{}",
        report.errors[0]
    );
}

#[tokio::test]
async fn a_missing_netns_is_a_clear_error_and_recovers_once_it_exists() {
    let mut c = AgentConfig::default();
    let name = format!("nlt-{}-late", std::process::id());
    c.linux.netns = Some(name.clone());
    let caps = Capabilities::new(&c);
    let err = caps
        .reconciler
        .reconcile(&DesiredSystem::default())
        .await
        .unwrap();
    let msg = format!("{:?}", err.errors);
    assert!(
        msg.contains(&format!("/run/netns/{name}")) && msg.contains("No such file"),
        "{msg}"
    );
    // Created later: the next reconcile connects.
    let _ns = {
        let ok = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(ok.success());
        DeleteNetns(name.clone())
    };
    let report = caps
        .reconciler
        .reconcile(&DesiredSystem::default())
        .await
        .unwrap();
    assert!(report.is_noop(), "{report:?}");
}

struct DeleteNetns(String);
impl Drop for DeleteNetns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

struct FailingFlows(AtomicUsize);
#[async_trait]
impl FlowReconciler for FailingFlows {
    async fn reconcile_flows(
        &self,
        _desired: &ObjectSet<PortFlowSpec>,
        _owned_cookies: &BTreeSet<u64>,
    ) -> Result<(usize, usize), CapError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(CapError::Failed {
            capability: "flows",
            message: "ovs-ofctl dump-flows br-ex: killed after 10s".to_owned(),
        })
    }
}

/// With the periodic flow check running (the agent's case), flows that failed are the check's
/// to retry: an event that does not change them does not run the failing dump again (with 30k
/// exposures a saturated ovs-vswitchd times every dump out, and retrying on each event kept the
/// OVS chain busy for good). Without the check, every reconcile retries.
#[tokio::test]
async fn failed_flows_are_retried_by_the_flow_check_not_by_every_event() {
    let ns = TestNetns::new();
    let config = config_for(&ns);
    let mut kernel_only = desired();
    kernel_only.frr.clear();
    for check_running in [true, false] {
        let flows = Arc::new(FailingFlows(AtomicUsize::new(0)));
        let kernel =
            Arc::new(ovn_bgp_agent::caps::netlink::NetlinkReconciler::from_config(&config.linux));
        let mut composite = ovn_bgp_agent::caps::reconcile::CompositeReconciler::new(
            kernel,
            Some(flows.clone() as Arc<dyn FlowReconciler>),
            None,
        );
        if check_running {
            composite = composite.with_flow_check_running();
        }
        use ovn_bgp_agent::caps::SystemReconciler;
        let first = composite.reconcile(&kernel_only).await.unwrap();
        assert_eq!(first.errors.len(), 1, "{:#?}", first.errors);
        assert_eq!(first.errors[0].class, "flows");
        let again = composite.reconcile(&kernel_only).await.unwrap();
        let calls = flows.0.load(Ordering::SeqCst);
        if check_running {
            assert_eq!(calls, 1, "the same flows were tried again");
            assert!(again.errors.is_empty(), "{:#?}", again.errors);
        } else {
            assert_eq!(calls, 2);
            assert_eq!(again.errors.len(), 1);
        }
        // Changed flows are always tried.
        let mut changed = kernel_only.clone();
        changed.flows.insert(PortFlowSpec {
            bridge: ifname("br-ex"),
            in_port: "patch-provnet-2".to_owned(),
            cookie: 999,
            priority: 900,
            matches: "ip".to_owned(),
            actions: "NORMAL".to_owned(),
        });
        composite.reconcile(&changed).await.unwrap();
        assert_eq!(flows.0.load(Ordering::SeqCst), calls + 1);
    }
}
