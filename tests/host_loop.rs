//! The host loop with fake plugins and a fake reconciler, under tokio's paused time where timing
//! matters: cancel safety (a timer firing while the driver settles a change loses nothing),
//! shutdown during a hung apply, backend-reported changes, and the policy stage between the
//! driver and the backend.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ovn_bgp_agent::caps::{CapError, Capabilities, SystemReconciler};
use ovn_bgp_agent::config::AgentConfig;
use ovn_bgp_agent::exposure::{ExposedIp, ExposureKind, ExposureSet, POLICY};
use ovn_bgp_agent::host::{Agent, Shutdown};
use ovn_bgp_agent::plugin::{
    ChangeScope, Driver, ExposureBackend, PluginContext, PluginError, Rendered,
};
use ovn_bgp_agent::system::{AddressSpec, ChangeReport, DesiredSystem};
use ovn_bgp_agent::types::InterfaceName;
use tokio::sync::{Mutex, mpsc, oneshot};

/// Counts applies; optionally hangs in every apply after the first `hang_after`.
struct FakeReconciler {
    applied: Mutex<Vec<DesiredSystem>>,
    hang_after: Option<usize>,
    entered: mpsc::UnboundedSender<usize>,
}

#[async_trait]
impl SystemReconciler for FakeReconciler {
    async fn reconcile(&self, desired: &DesiredSystem) -> Result<ChangeReport, CapError> {
        let n = {
            let mut applied = self.applied.lock().await;
            applied.push(desired.clone());
            applied.len()
        };
        let _ = self.entered.send(n);
        if self.hang_after.is_some_and(|h| n > h) {
            // A netlink request that never returns, a vtysh that hangs...
            std::future::pending::<()>().await;
        }
        Ok(ChangeReport::default())
    }
}

/// Exposes the IPs it is told; each message on `events` is one change. `settle` takes
/// `settle_time` of (paused) time, as a slow `monitor_cond_change` round trip would.
struct FakeDriver {
    ips: Arc<std::sync::Mutex<Vec<IpAddr>>>,
    events: mpsc::UnboundedReceiver<()>,
    settle_time: Duration,
    settles: Arc<std::sync::Mutex<(u64, u64)>>,
}

#[async_trait]
impl Driver for FakeDriver {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        Ok(())
    }

    async fn changed(&mut self) -> Result<ChangeScope, PluginError> {
        match self.events.recv().await {
            Some(()) => Ok(ChangeScope::Rows),
            None => std::future::pending().await,
        }
    }

    async fn settle(&mut self) -> Result<(), PluginError> {
        self.settles.lock().unwrap().0 += 1;
        tokio::time::sleep(self.settle_time).await;
        self.settles.lock().unwrap().1 += 1;
        Ok(())
    }

    fn desired_exposures(&self) -> Result<ExposureSet, PluginError> {
        let mut set = ExposureSet::default();
        for ip in self.ips.lock().unwrap().iter() {
            set.expose_ip(ExposedIp::announced(
                *ip,
                ExposureKind::ProviderPort,
                format!("port-{ip}"),
            ));
        }
        Ok(set)
    }
}

/// Puts every global IP on `nic`; remembers the skipped rows it saw; `changes` wakes the host.
struct FakeBackend {
    changes: mpsc::UnboundedReceiver<()>,
    seen: Arc<std::sync::Mutex<Vec<ExposureSet>>>,
}

#[async_trait]
impl ExposureBackend for FakeBackend {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        Ok(())
    }

    fn desired_system(&self, exposures: &ExposureSet) -> Result<Rendered, PluginError> {
        self.seen.lock().unwrap().push(exposures.clone());
        let mut r = Rendered::default();
        for ip in exposures.global().ips.keys() {
            r.system.addresses.insert(AddressSpec {
                dev: InterfaceName::new("nic").unwrap(),
                addr: (*ip).into(),
            });
        }
        Ok(r)
    }

    async fn changed(&mut self) -> Result<(), PluginError> {
        match self.changes.recv().await {
            Some(()) => Ok(()),
            None => std::future::pending().await,
        }
    }
}

struct Harness {
    agent: Agent,
    reconciler: Arc<FakeReconciler>,
    entered: mpsc::UnboundedReceiver<usize>,
    driver_events: mpsc::UnboundedSender<()>,
    backend_changes: mpsc::UnboundedSender<()>,
    ips: Arc<std::sync::Mutex<Vec<IpAddr>>>,
    settles: Arc<std::sync::Mutex<(u64, u64)>>,
    seen: Arc<std::sync::Mutex<Vec<ExposureSet>>>,
}

fn harness(settle_time: Duration, hang_after: Option<usize>) -> Harness {
    let mut config = AgentConfig::default();
    config.default.reconcile_interval = 1;
    config.default.frr_reconcile_interval = 1;
    // The policy stage reads the host's addresses through netlink; a namespace that does not
    // exist makes that a logged warning, so these tests do not depend on this host.
    config.linux.netns = Some("obatest-no-such-netns".into());
    let config = Arc::new(config);
    let (entered_tx, entered) = mpsc::unbounded_channel();
    let reconciler = Arc::new(FakeReconciler {
        applied: Mutex::new(Vec::new()),
        hang_after,
        entered: entered_tx,
    });
    let caps = Capabilities::new_test(&config, reconciler.clone());
    let ctx = PluginContext::new(config, caps);
    let (driver_events, events) = mpsc::unbounded_channel();
    let (backend_changes, changes) = mpsc::unbounded_channel();
    let ips = Arc::new(std::sync::Mutex::new(vec!["172.24.4.10".parse().unwrap()]));
    let settles = Arc::new(std::sync::Mutex::new((0, 0)));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let driver = FakeDriver {
        ips: ips.clone(),
        events,
        settle_time,
        settles: settles.clone(),
    };
    let backend = FakeBackend {
        changes,
        seen: seen.clone(),
    };
    Harness {
        agent: Agent::with_plugins(ctx, "fake", Box::new(driver), "fake", Box::new(backend)),
        reconciler,
        entered,
        driver_events,
        backend_changes,
        ips,
        settles,
        seen,
    }
}

fn shutdown_channel() -> (oneshot::Sender<()>, Shutdown) {
    let (tx, rx) = oneshot::channel::<()>();
    (
        tx,
        Box::pin(async move {
            let _ = rx.await;
        }),
    )
}

#[tokio::test(start_paused = true)]
async fn timers_firing_while_a_change_settles_lose_nothing() {
    // Settling takes 10 s while both timers fire every second: with the old loop the timer won
    // the race and the half-done condition change was dropped.
    let h = harness(Duration::from_secs(10), None);
    let (stop, shutdown) = shutdown_channel();
    let run = tokio::spawn(h.agent.run_until(shutdown));
    for _ in 0..5 {
        h.driver_events.send(()).unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    // Let every queued change settle (5 x 10 s), with timers firing all along.
    tokio::time::sleep(Duration::from_secs(120)).await;
    stop.send(()).unwrap();
    let stats = run.await.unwrap().unwrap();
    let (started, finished) = *h.settles.lock().unwrap();
    assert_eq!(stats.changes, 5, "{stats:?}");
    assert_eq!(
        (started, finished),
        (5, 5),
        "every settle ran to completion"
    );
    assert_eq!(stats.settled, 5);
    // Timers kept working between changes: periodic reconciles and repairs happened.
    assert!(stats.reconciles > 5 + 1, "{stats:?}");
    assert!(stats.repairs > 0, "{stats:?}");
}

#[tokio::test]
async fn shutdown_during_a_hung_apply_stops_within_five_seconds() {
    // The first apply (start) returns; the second hangs forever.
    let mut h = harness(Duration::ZERO, Some(1));
    let (stop, shutdown) = shutdown_channel();
    let run = tokio::spawn(h.agent.run_until(shutdown));
    assert_eq!(h.entered.recv().await, Some(1));
    h.driver_events.send(()).unwrap();
    assert_eq!(h.entered.recv().await, Some(2), "the hung apply started");
    let asked = std::time::Instant::now();
    stop.send(()).unwrap();
    let stats = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the agent stops within 5 s of the signal during an apply")
        .unwrap()
        .unwrap();
    assert!(asked.elapsed() < Duration::from_secs(5));
    assert_eq!(stats.changes, 1);
    assert_eq!(h.reconciler.applied.lock().await.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_backend_change_triggers_a_reconcile() {
    let mut h = harness(Duration::ZERO, None);
    let (stop, shutdown) = shutdown_channel();
    let run = tokio::spawn(h.agent.run_until(shutdown));
    assert_eq!(h.entered.recv().await, Some(1));
    h.ips.lock().unwrap().push("172.24.4.11".parse().unwrap());
    h.backend_changes.send(()).unwrap();
    // The next apply carries the new IP: the backend's change made the host recompute.
    let n = h.entered.recv().await.unwrap();
    let applied = h.reconciler.applied.lock().await[n - 1].clone();
    assert!(
        applied
            .addresses
            .iter()
            .any(|a| a.addr.addr().to_string() == "172.24.4.11"),
        "{applied:?}"
    );
    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn refused_exposures_never_reach_the_backend_and_are_reported_with_their_row() {
    let mut h = harness(Duration::ZERO, None);
    h.ips.lock().unwrap().extend([
        "127.0.0.1".parse::<IpAddr>().unwrap(),
        "224.0.0.9".parse().unwrap(),
    ]);
    let telemetry = h.agent.telemetry();
    let (stop, shutdown) = shutdown_channel();
    let run = tokio::spawn(h.agent.run_until(shutdown));
    assert_eq!(h.entered.recv().await, Some(1));
    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
    // The last rendering is the start reconcile's (an earlier one is the base rendering the
    // host asks for to tell the agent's own addresses from the host's).
    let first = h.seen.lock().unwrap().last().cloned().unwrap();
    let ips: Vec<String> = first.global().ips.keys().map(ToString::to_string).collect();
    assert_eq!(ips, vec!["172.24.4.10"]);
    // Reported (in `status`) with their rows.
    let snapshot = telemetry.snapshot().await;
    let rows: Vec<(&str, &str)> = snapshot
        .skipped
        .iter()
        .map(|s| (s.table.as_str(), s.row.as_str()))
        .collect();
    assert_eq!(
        rows,
        vec![(POLICY, "port-127.0.0.1"), (POLICY, "port-224.0.0.9")]
    );
    let applied = h.reconciler.applied.lock().await;
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].addresses.len(), 1);
}
