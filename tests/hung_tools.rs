//! A hung `vtysh` or `ovs-vsctl` never delays kernel exposures: the agent's host loop with the
//! real underlay backend and the agent's own capabilities (the composite reconciler with its
//! background tool classes, netlink in a network namespace of the test), while every FRR and OVS
//! tool it runs hangs (`[frr] vtysh_path`, `[ovs] ovs_vsctl_path`, `ovs_ofctl_path`: a script
//! that sleeps). Each new exposure must reach the kernel within a second.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod netlink_support;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ovn_bgp_agent::caps::Capabilities;
use ovn_bgp_agent::config::AgentConfig;
use ovn_bgp_agent::exposure::{ExposedIp, ExposureKind, ExposureSet};
use ovn_bgp_agent::host::{Agent, Shutdown};
use ovn_bgp_agent::plugin::{self, ChangeScope, Driver, PluginContext, PluginError};
use tokio::sync::{mpsc, oneshot};

use netlink_support::TestNetns;

/// Exposes the IPs it is told; each message on `events` is one change.
struct ListDriver {
    ips: Arc<std::sync::Mutex<Vec<IpAddr>>>,
    events: mpsc::UnboundedReceiver<()>,
}

#[async_trait]
impl Driver for ListDriver {
    async fn start(&mut self, _ctx: &PluginContext) -> Result<(), PluginError> {
        Ok(())
    }

    async fn changed(&mut self) -> Result<ChangeScope, PluginError> {
        match self.events.recv().await {
            Some(()) => Ok(ChangeScope::Rows),
            None => std::future::pending().await,
        }
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

/// Writes an executable script with a child process (a file this multi-threaded test process
/// held open for writing could leak into a sibling's fork and make the exec fail with ETXTBSY).
fn write_script(path: &std::path::Path, body: &str) {
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("printf '%s' \"$1\" > \"$0\" && chmod 755 \"$0\"")
        .arg(path)
        .arg(body)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Whether `ip` is on bgp-nic (which the agent creates on its first reconcile).
fn has_address(ns: &TestNetns, ip: &str) -> bool {
    let out = ns.ip_raw(&["-o", "addr", "show", "dev", "bgp-nic"]);
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&format!(" {ip}/32 "))
}

/// The agent's configuration for these tests: `tool` as vtysh (and as OVS's tools with
/// `ovs_too`), the kernel part in `ns`, no periodic reconcile or repair within a test.
fn test_config(
    ns: &TestNetns,
    dir: &std::path::Path,
    tool: &str,
    ovs_too: bool,
    router_id: Option<&str>,
) -> Arc<AgentConfig> {
    let mut config = AgentConfig::default();
    config.default.reconcile_interval = 3600;
    config.default.frr_reconcile_interval = 3600;
    config.default.bgp_router_id = router_id.map(str::to_owned);
    config.frr.vtysh_path = tool.to_owned();
    config.frr.vtysh_timeout = 30;
    config.frr.state_file = dir.join("frr-objects.json").display().to_string();
    if ovs_too {
        config.ovs.ovs_vsctl_path = tool.to_owned();
        config.ovs.ovs_ofctl_path = tool.to_owned();
    }
    config.linux.netns = Some(ns.name.clone());
    config.linux.rt_tables_path = dir.join("rt_tables").display().to_string();
    config.linux.vrf_device_kind = "bridge".into();
    config.linux.nic_device_kind = "ifb".into();
    Arc::new(config)
}

/// The running agent of a test: the list driver's IPs and events, its telemetry, and how to
/// stop it.
struct RunningAgent {
    ips: Arc<std::sync::Mutex<Vec<IpAddr>>>,
    events: mpsc::UnboundedSender<()>,
    telemetry: Arc<ovn_bgp_agent::telemetry::Telemetry>,
    stop: oneshot::Sender<()>,
    run: tokio::task::JoinHandle<
        Result<ovn_bgp_agent::host::LoopStats, ovn_bgp_agent::host::HostError>,
    >,
}

/// Starts the agent (the list driver exposing 172.24.4.10, the underlay backend).
fn start_agent(config: Arc<AgentConfig>) -> RunningAgent {
    let caps = Capabilities::for_agent(&config);
    let ctx = PluginContext::new(config.clone(), caps);
    let (_, underlay) = plugin::select("ovn_bgp_driver", "underlay").unwrap();
    let backend = (underlay.factory)(&ctx).unwrap();
    let ips = Arc::new(std::sync::Mutex::new(vec![
        "172.24.4.10".parse::<IpAddr>().unwrap(),
    ]));
    let (events_tx, events) = mpsc::unbounded_channel();
    let driver = ListDriver {
        ips: ips.clone(),
        events,
    };
    let agent = Agent::with_plugins(ctx, "list", Box::new(driver), "underlay", backend);
    let telemetry = agent.telemetry();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let shutdown: Shutdown = Box::pin(async move {
        let _ = stop_rx.await;
    });
    RunningAgent {
        ips,
        events: events_tx,
        telemetry,
        stop,
        run: tokio::spawn(agent.run_until(shutdown)),
    }
}

impl RunningAgent {
    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.run)
            .await
            .expect("agent did not stop")
            .unwrap()
            .unwrap();
    }
}

/// FRR's router id is not configured: the backend asks vtysh for it, and vtysh hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_router_id_query_never_delays_kernel_exposures() {
    exposures_reach_the_kernel_while_tools_hang(None, "-c show ip bgp summary json").await;
}

/// The router id is configured, so the FRR base configuration is rendered at once and applied
/// with `vtysh -f`, which hangs (as do the OVS tools of the flow class).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_frr_apply_never_delays_kernel_exposures() {
    exposures_reach_the_kernel_while_tools_hang(Some("192.0.2.1"), " -f ").await;
}

/// Runs the agent with every tool hanging; `hung_call` is part of the vtysh command line that
/// must have been started (and be hanging) while the exposures go through.
async fn exposures_reach_the_kernel_while_tools_hang(router_id: Option<&str>, hung_call: &str) {
    let ns = TestNetns::new();
    let dir = tempfile::tempdir().unwrap();
    let hang = dir.path().join("hang");
    let started = dir.path().join("started");
    // Records each run, then hangs well past the test (killed at the tool's timeout, or when
    // the test's runtime drops the task).
    write_script(
        &hang,
        &format!(
            "#!/bin/sh\necho \"$0 $*\" >> {}\nexec sleep 600\n",
            started.display()
        ),
    );
    let config = test_config(&ns, dir.path(), hang.to_str().unwrap(), true, router_id);
    let agent = start_agent(config);

    // The first exposure, at start (FRR's router id is asked for and does not come).
    let t = Instant::now();
    while !has_address(&ns, "172.24.4.10") {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "first exposure never reached the kernel"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // vtysh was run and is hanging (its 30 s timeout is far away).
    let t = Instant::now();
    while !std::fs::read_to_string(&started)
        .unwrap_or_default()
        .contains(hung_call)
    {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "vtysh {hung_call:?} never ran: {:?}",
            std::fs::read_to_string(&started)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Each new exposure reaches the kernel within a second, while vtysh (and OVS's tools, run
    // by the flow check) keep hanging.
    for (i, ip) in ["172.24.4.11", "172.24.4.12", "172.24.4.13"]
        .iter()
        .enumerate()
    {
        agent.ips.lock().unwrap().push(ip.parse().unwrap());
        let t = Instant::now();
        agent.events.send(()).unwrap();
        while !has_address(&ns, ip) {
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "exposure {i} ({ip}) took over 1 s with vtysh hung"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        eprintln!("{ip} on bgp-nic after {:?}", t.elapsed());
    }
    agent.stop().await;
}

/// A reconcile waits briefly for each tool chain that was idle when it started, and not at all
/// for one still busy with an earlier state (a hung vtysh): otherwise every event would be held
/// back by the whole wait for as long as the tool hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_still_busy_with_an_earlier_state_is_not_waited_for() {
    let ns = TestNetns::new();
    let dir = tempfile::tempdir().unwrap();
    let hang = dir.path().join("hang");
    write_script(&hang, "#!/bin/sh\nexec sleep 600\n");
    let mut config = AgentConfig::default();
    config.frr.vtysh_path = hang.to_str().unwrap().to_owned();
    config.frr.vtysh_timeout = 30;
    config.frr.state_file = dir.path().join("frr-objects.json").display().to_string();
    config.linux.netns = Some(ns.name.clone());
    let caps = Capabilities::for_agent(&config);
    let mut desired = ovn_bgp_agent::system::DesiredSystem::default();
    desired.frr.push("router bgp 64999\n".to_owned());
    let tools_errors = |report: &ovn_bgp_agent::system::ChangeReport| -> Vec<String> {
        report
            .errors
            .iter()
            .filter(|e| e.class == "tools" && e.object.starts_with("FRR"))
            .map(|e| e.error.clone())
            .collect()
    };
    let first = caps.reconciler.reconcile(&desired).await.expect("first");
    let errors = tools_errors(&first);
    assert!(
        errors.len() == 1 && errors[0].starts_with("still being applied after"),
        "the first reconcile waits for the idle FRR chain, then reports it pending: {first:?}"
    );
    for n in 2..=3 {
        let next = caps.reconciler.reconcile(&desired).await.expect("next");
        let errors = tools_errors(&next);
        assert!(
            errors.len() == 1 && errors[0].starts_with("still applying an earlier state"),
            "reconcile {n} does not wait for the FRR chain hung on the first state: {next:?}"
        );
    }
}

/// A tool chain the agent left applying in the background (a slow `vtysh`) is reported as
/// pending only until it is done: then `status` shows what it did, at once (not at the next
/// event or `frr_reconcile_interval` later), and nothing is applied again for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_slow_chain_done_as_soon_as_it_is() {
    let ns = TestNetns::new();
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("slow");
    let runs = dir.path().join("runs");
    // Each run is recorded, then takes a second (four times the agent's wait) and succeeds.
    write_script(
        &slow,
        &format!("#!/bin/sh\necho \"$0 $*\" >> {}\nsleep 1\n", runs.display()),
    );
    let config = test_config(
        &ns,
        dir.path(),
        slow.to_str().unwrap(),
        false,
        Some("192.0.2.1"),
    );
    let agent = start_agent(config);
    let telemetry = agent.telemetry.clone();
    let last = || async {
        let s = telemetry.snapshot().await;
        s.last_reconcile
            .as_ref()
            .map(|r| (r.trigger.clone(), r.errors.clone()))
    };
    let frr_pending = |errors: &[String]| {
        errors
            .iter()
            .any(|e| e.starts_with("tools: FRR") && e.contains("still being applied after"))
    };

    // The start's reconcile stops waiting for the FRR chain after 250 ms and says so.
    let t = Instant::now();
    let (trigger, errors) = loop {
        if let Some(l) = last().await {
            break l;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "no reconcile at start"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(trigger, "start");
    assert!(
        frr_pending(&errors),
        "the start's report shows the FRR chain pending: {errors:?}"
    );

    // Once vtysh is done, the report says so without an event (a repair of the kernel state
    // the start made may come first: it finds the chain busy and leaves it pending too).
    let t = Instant::now();
    let errors = loop {
        let l = last().await.unwrap();
        if l.0 == "tool chains caught up" {
            break l.1;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "status still shows pending chains after 10 s: {l:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!("caught up after {:?}: {errors:?}", t.elapsed());
    assert!(
        !errors.iter().any(|e| e.starts_with("tools: ")),
        "no chain pending any more: {errors:?}"
    );
    assert!(has_address(&ns, "172.24.4.10"));

    // Nothing is applied again for it: vtysh is not run again, and the report stays.
    let before = std::fs::read_to_string(&runs).unwrap_or_default();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(std::fs::read_to_string(&runs).unwrap_or_default(), before);
    assert_eq!(last().await.unwrap().0, "tool chains caught up");

    agent.stop().await;
}
