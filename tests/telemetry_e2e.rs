//! Seeing into the running agent, end to end on the lab with the NB driver: Prometheus
//! metrics and probes on the `[telemetry] metrics_address` listener, and `ovn-bgp-agent
//! status`, `explain` and `health` over the control socket, checked against the kernel state
//! and the ToR.
#![cfg(all(feature = "nb_bgp", feature = "underlay"))]
// Real daemons run on the wall clock.
#![allow(clippy::disallowed_types)]

mod agent_fixture;
mod lab_fixture;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use agent_fixture::Agent;
use lab_fixture::{Lab, has, require_root, wait_tor};
use serde_json::Value;

const OVERRIDES: &str = "[DEFAULT]\ndriver = nb_ovn_bgp_driver\nexposing_method = underlay\nreconcile_interval = 20\nfrr_reconcile_interval = 2\naddress_scopes = scope-a\n";

/// `GET path` on the agent's listener: (status code, body).
fn http_get(address: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(address).unwrap_or_else(|e| panic!("connect {address}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let code = reply
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

fn cli(lab: &Lab, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ovn-bgp-agent"))
        .args(args)
        .arg("--socket")
        .arg(lab.env("AGENT_CONTROL_SOCKET"))
        .output()
        .expect("run ovn-bgp-agent")
}

fn cli_json(lab: &Lab, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = cli(lab, &all);
    assert!(
        out.status.success(),
        "ovn-bgp-agent {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON reply")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The addresses on bgp-nic, without prefix length (link-local left out).
fn bgp_nic_addresses(lab: &Lab) -> BTreeSet<String> {
    lab.ip_chassis(&["-o", "addr", "show", "dev", "bgp-nic"])
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.find(|x| *x == "inet" || *x == "inet6")?;
            let a = w.next()?.split('/').next()?.to_owned();
            (!a.starts_with("fe80")).then_some(a)
        })
        .collect()
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

#[test]
fn metrics_probes_status_and_explain_describe_what_the_agent_does() {
    require_root();
    let lab = Lab::start_with_env(&[]);
    lab.nbctl(&[
        "set",
        "NB_Global",
        ".",
        "external_ids:\"neutron:fip-distributed\"=False",
    ]);
    // Address scopes: the tenant subnet's router interface is in the allowed scope, the tenant
    // VM's port in another one, so its address is refused (and explained).
    lab.nbctl(&[
        "set",
        "Logical_Switch_Port",
        lab.env("RI_PORT_ID"),
        "external_ids:\"neutron:subnet_pool_addr_scope4\"=scope-a",
    ]);
    lab.nbctl(&[
        "set",
        "Logical_Switch_Port",
        lab.env("VM_TENANT_PORT_ID"),
        "external_ids:\"neutron:subnet_pool_addr_scope4\"=scope-b",
    ]);
    let metrics = lab.env("AGENT_METRICS").to_owned();

    // Readiness before the first reconcile: the NB server is down, so the driver cannot sync;
    // the agent is live (its listener answers) but not ready.
    lab.restart(&["--kill", "--down", "nb"]);
    let mut agent = Agent::start(lab.dir(), OVERRIDES);
    wait_until(
        "the probes answer",
        Duration::from_secs(10),
        || match std::panic::catch_unwind(|| http_get(&metrics, "/healthz")) {
            Ok((200, _)) => Ok(()),
            Ok((code, body)) => Err(format!("{code} {body}")),
            Err(_) => Err("no listener yet".to_owned()),
        },
    );
    let (code, body) = http_get(&metrics, "/readyz");
    assert_eq!(code, 503, "ready before the databases synced: {body}");
    let out = cli(&lab, &["health"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "health before the first reconcile: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    lab.restart(&["--up", "nb"]);

    let vm4 = lab.env("VM_PROVIDER_IP4").to_owned();
    let tenant = lab.env("VM_TENANT_IP4").to_owned();
    wait_tor(&lab, "the topology (tenant VM refused by scope)", |p| {
        has(p, &format!("{vm4}/32"))
            && has(p, &format!("{}/32", lab.env("GW_IP4")))
            && has(p, &format!("{}/32", lab.env("FIP_IP4")))
            && !has(p, &format!("{tenant}/32"))
    });
    agent.assert_running();

    // Probes and the exec probe.
    assert_eq!(http_get(&metrics, "/readyz").0, 200);
    assert_eq!(http_get(&metrics, "/healthz").0, 200);
    let out = cli(&lab, &["health"]);
    assert!(
        out.status.success(),
        "health: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(http_get(&metrics, "/nonsense").0, 404);

    // doctor: the lab's prerequisites are met; a wrong FRR socket directory is a failure that
    // says what to fix.
    let conf = lab.dir().join("bgp-agent.conf");
    let overrides = lab.dir().join("agent-test-overrides.conf");
    let doctor = |extra: Option<&std::path::Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ovn-bgp-agent"));
        cmd.arg("--config-file")
            .arg(&conf)
            .arg("--config-file")
            .arg(&overrides);
        if let Some(e) = extra {
            cmd.arg("--config-file").arg(e);
        }
        cmd.arg("doctor").output().expect("run doctor")
    };
    let out = doctor(None);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "doctor on the lab:\n{text}");
    for line in [
        "ok   local OVS database",
        "ok   OVN Northbound",
        "ok   OVN Southbound",
        "zebra.vty answers",
        "provider bridge: br-ex",
    ] {
        assert!(text.contains(line), "{line} not in:\n{text}");
    }
    // The lab's OVS is Debian 12's 3.1.0 (or 3.5.0 with LAB_OVN=25.03), its version in
    // Open_vSwitch as ovs-ctl writes it.
    assert!(
        text.contains("warn ovs-vswitchd routes: Open vSwitch 3.1.0 reads every route")
            || text.contains("ok   ovs-vswitchd routes: Open vSwitch 3.5.0 follows only"),
        "{text}"
    );
    let broken = lab.dir().join("doctor-broken.conf");
    std::fs::write(&broken, "[frr]\nvty_socket_dir = /nonexistent-frr\n").unwrap();
    let out = doctor(Some(&broken));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL FRR: /nonexistent-frr/zebra.vty") && text.contains("fix: start FRR"),
        "{text}"
    );

    // status: what is exposed equals what is on bgp-nic.
    let status = cli_json(&lab, &["status"]);
    let mut exposed_ips = BTreeSet::new();
    let mut provider_ports = 0;
    for (kind, items) in status["exposed"].as_object().expect("exposed") {
        for i in items.as_array().unwrap() {
            if let Some(ip) = i["ip"].as_str() {
                exposed_ips.insert(ip.to_owned());
                if kind == "provider_port" && !ip.contains(':') {
                    provider_ports += 1;
                }
            }
        }
    }
    wait_until("bgp-nic equals status", Duration::from_secs(10), || {
        let on_nic = bgp_nic_addresses(&lab);
        if on_nic == exposed_ips {
            Ok(())
        } else {
            Err(format!("status {exposed_ips:?}, bgp-nic {on_nic:?}"))
        }
    });
    assert!(exposed_ips.contains(&vm4), "{status:#}");
    assert_eq!(status["health"]["ready"], Value::Bool(true));
    assert!(
        status["last_reconcile"]["trigger"].is_string(),
        "{status:#}"
    );
    let human = cli(&lab, &["status"]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("live, ready") && human.contains(&vm4),
        "{human}"
    );

    // Metrics with the values status shows.
    let (code, text) = http_get(&metrics, "/metrics");
    assert_eq!(code, 200);
    for line in [
        format!("ovn_bgp_agent_exposed{{kind=\"provider_port\",family=\"ipv4\"}} {provider_ports}"),
        "ovn_bgp_agent_build_info{version=".to_owned(),
        "driver=\"nb_ovn_bgp_driver\"".to_owned(),
        "ovn_bgp_agent_reconcile_duration_seconds_bucket{".to_owned(),
        "ovn_bgp_agent_process_resident_memory_bytes ".to_owned(),
        "ovn_bgp_agent_objects_changed_total{class=\"addresses\",op=\"added\"}".to_owned(),
        "ovn_bgp_agent_ovsdb_connected{database=\"OVN_Northbound\"} 1".to_owned(),
        "ovn_bgp_agent_subprocess_runs_total{tool=\"vtysh\",result=\"ok\"} ".to_owned(),
        "ovn_bgp_agent_subprocess_duration_seconds_count{tool=\"ovs-ofctl\"} ".to_owned(),
        "ovn_bgp_agent_ovsdb_connected{database=\"Open_vSwitch\"} 1".to_owned(),
        "ovn_bgp_agent_ovsdb_sessions_total{database=\"OVN_Northbound\"} ".to_owned(),
        "ovn_bgp_agent_ovsdb_rows{database=\"OVN_Northbound\",table=\"Logical_Switch_Port\"} "
            .to_owned(),
        "ovn_bgp_agent_kernel_mirror_events_total ".to_owned(),
        "ovn_bgp_agent_kernel_foreign_changes_total ".to_owned(),
    ] {
        assert!(text.contains(&line), "{line} not in /metrics:\n{text}");
    }
    // The tool chains (FRR, OVS) applying in the background are counted while they run, and
    // the count falls back to 0 once they caught up (every start matched by an end).
    wait_until("tool chains idle", Duration::from_secs(30), || {
        let (_, text) = http_get(&metrics, "/metrics");
        match text
            .lines()
            .find(|l| l.starts_with("ovn_bgp_agent_tool_chains_applying "))
        {
            Some("ovn_bgp_agent_tool_chains_applying 0") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    // The kernel is read from the mirror (the first reconcile plans in full), never by dumps.
    let plans = |plan: &str| -> f64 {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "ovn_bgp_agent_kernel_reconciles_total{{plan=\"{plan}\"}} "
                ))
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("kernel reconciles by plan {plan} not in /metrics:\n{text}"))
    };
    assert!(plans("full") >= 1.0, "{text}");
    assert_eq!(plans("dumps"), 0.0, "{text}");
    // Every stage of a reconcile is timed, each at least once by now.
    for stage in ["compute", "policy", "render", "apply"] {
        let count: f64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "ovn_bgp_agent_reconcile_stage_duration_seconds_count{{stage=\"{stage}\"}} "
                ))
            })
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("stage {stage} not in /metrics:\n{text}"));
        assert!(count >= 1.0, "stage {stage}: {count}");
    }
    let last_ok: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("ovn_bgp_agent_last_successful_reconcile_timestamp_seconds "))
        .and_then(|v| v.trim().parse().ok())
        .expect("last successful reconcile");
    assert!(last_ok > 1.7e9, "{last_ok}");

    // explain an exposed IP: the exposure, the driver's reasoning, the kernel objects.
    let e = cli_json(&lab, &["explain", &vm4]);
    assert_eq!(e["exposed"][0]["ip"]["kind"], "provider_port", "{e:#}");
    let driver = strings(&e["driver"]).join("\n");
    assert!(driver.contains("bound here"), "{driver}");
    let backend = strings(&e["backend"]).join("\n");
    assert!(
        backend.contains("addresses:") && backend.contains(&vm4),
        "{backend}"
    );
    // explain an address-scope refusal.
    let e = cli_json(&lab, &["explain", &tenant]);
    assert!(e["exposed"].as_array().unwrap().is_empty(), "{e:#}");
    let driver = strings(&e["driver"]).join("\n");
    assert!(
        driver.contains("address scope") && driver.contains("scope-b"),
        "{driver}"
    );
    // explain an IP bound elsewhere.
    lab.nbctl(&[
        "set",
        "Logical_Switch_Port",
        lab.env("VM_PROVIDER_PORT_ID"),
        "options:requested-chassis=another-host",
    ]);
    wait_tor(&lab, "provider VM withdrawn", |p| {
        !has(p, &format!("{vm4}/32"))
    });
    let e = cli_json(&lab, &["explain", &vm4]);
    assert!(e["exposed"].as_array().unwrap().is_empty(), "{e:#}");
    let driver = strings(&e["driver"]).join("\n");
    assert!(driver.contains("bound to another-host"), "{driver}");
    let human = cli(&lab, &["explain", &vm4]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("not exposed on this chassis"), "{human}");

    // A restarted agent replaces the stale socket file of its predecessor; under systemd
    // (NOTIFY_SOCKET, WATCHDOG_USEC) it says READY=1 with a status line once it has
    // reconciled, feeds the watchdog while its loop makes progress, and STOPPING=1 on SIGTERM.
    agent.stop();
    let notify_path = lab.dir().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).expect("notify socket");
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut agent = Agent::start_with_env(
        lab.dir(),
        OVERRIDES,
        &[
            ("NOTIFY_SOCKET", notify_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "1000000"),
        ],
    );
    let mut messages = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline
        && !(messages.iter().any(|m: &String| m.contains("READY=1"))
            && messages.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 2)
    {
        let n = notify.recv(&mut buf).expect("a notify message");
        messages.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let ready = messages
        .iter()
        .find(|m| m.contains("READY=1"))
        .unwrap_or_else(|| panic!("no READY=1 in {messages:?}"));
    assert!(ready.contains("STATUS=exposing "), "{ready}");
    assert!(
        messages.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 2,
        "{messages:?}"
    );
    wait_until("the new agent answers", Duration::from_secs(20), || {
        let out = cli(&lab, &["health"]);
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stdout).into_owned())
        }
    });
    agent.stop();
    let mut stopping = false;
    notify
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    while let Ok(n) = notify.recv(&mut buf) {
        stopping |= String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1");
    }
    assert!(stopping, "no STOPPING=1 after SIGTERM");
    // No agent: the exec probe says it cannot ask.
    assert_eq!(cli(&lab, &["health"]).status.code(), Some(2));
}

#[cfg(feature = "sb_bgp")]
#[test]
fn the_sb_driver_explains_its_port_bindings() {
    require_root();
    let lab = Lab::start_with_env(&[]);
    let mut agent = Agent::start(
        lab.dir(),
        "[DEFAULT]\nreconcile_interval = 20\nfrr_reconcile_interval = 2\n",
    );
    let vm4 = lab.env("VM_PROVIDER_IP4").to_owned();
    wait_tor(&lab, "the provider VM", |p| has(p, &format!("{vm4}/32")));
    let e = cli_json(&lab, &["explain", &vm4]);
    assert_eq!(e["exposed"][0]["ip"]["kind"], "provider_port", "{e:#}");
    let driver = strings(&e["driver"]).join("\n");
    assert!(
        driver.contains("Port_Binding") && driver.contains("bound here"),
        "{driver}"
    );
    assert!(
        driver.contains("provider network: physnet public on bridge br-ex"),
        "{driver}"
    );
    // Unplugged (Nova removes the interface's iface-id): the binding leaves this chassis, and
    // with it the agent's view.
    let port = lab.env("VM_PROVIDER_PORT_ID").to_owned();
    lab.vsctl(&[
        "remove",
        "Interface",
        &format!("tap{}", &port[..11]),
        "external_ids",
        "iface-id",
    ]);
    wait_tor(&lab, "provider VM withdrawn", |p| {
        !has(p, &format!("{vm4}/32"))
    });
    let e = cli_json(&lab, &["explain", &vm4]);
    assert!(e["exposed"].as_array().unwrap().is_empty(), "{e:#}");
    let driver = strings(&e["driver"]).join("\n");
    // Either the binding is still in the agent's view (its datapath is watched), unbound, or it
    // left the view with the chassis.
    assert!(
        driver.contains("bound to no chassis")
            || driver.contains("monitors the ports bound to this chassis"),
        "{driver}"
    );
    agent.assert_running();
    agent.stop();
}
