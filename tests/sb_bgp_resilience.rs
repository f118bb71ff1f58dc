//! The BGP drivers (underlay) survive their surroundings restarting, without the agent
//! restarting. The SB driver (`ovn_bgp_driver`): FRR killed (it comes back with the operator
//! configuration only), ovs-vswitchd killed and `ovs-vsctl emer-reset`, the SB server killed,
//! the leader of a 3-member SB RAFT cluster killed, and kernel state deleted by hand. The NB
//! driver (`nb_ovn_bgp_driver`, the `nb_` tests): FRR killed, ovs-vswitchd killed, the NB server
//! killed, and kernel state deleted by hand. After each, the ToR has every expected route again
//! and the chassis kernel state (bgp-nic addresses, `ip rule` to-rules, routes of the provider
//! bridge's table, permanent neighbours on it) is back, within a bound derived from the
//! intervals the agent runs with. The scenarios are shared; [`Driver`] says how the lab is
//! prepared for the agent and how a VM is moved away from the chassis.
//!
//! Real lab (`scripts/lab/up.sh`, daemons restarted with `scripts/lab/restart.sh`), real agent
//! binary. Runs as root. The scenarios run one at a time (each has its own lab), so they never
//! compete for the lab's TCP ports.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod agent_fixture;
mod lab_fixture;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agent_fixture::Agent;
use lab_fixture::{Lab, require_root, run_ok};

/// The agent's intervals in these tests (seconds).
const RECONCILE_INTERVAL: u64 = 5;
/// Also the repair tick (the last desired kernel/OVS/FRR state is re-applied) and the FRR
/// restart watch.
const FRR_RECONCILE_INTERVAL: u64 = 3;
const FLOW_CHECK_INTERVAL: u64 = 3;

/// The lab's BGP session (timers 3/10, connect retry 1 s, advertisement-interval 0): after a
/// peer restarts, at worst the hold time passes before the ToR notices and re-learns.
const BGP_CONVERGENCE: Duration = Duration::from_secs(10);
/// Propagation of a kernel change to the ToR on a running session (zebra → bgpd → update).
const BGP_PROPAGATION: Duration = Duration::from_secs(3);
/// The agent's OVSDB client reconnects with a capped backoff (100 ms … 8 s).
const OVSDB_RECONNECT_MAX: Duration = Duration::from_secs(8);
/// Kernel state removed by hand is noticed through the kernel mirror and put back within this.
const KERNEL_REPAIR: Duration = Duration::from_secs(1);
/// Slack for process start-up and polling.
const SLACK: Duration = Duration::from_secs(2);
/// First exposure after the agent starts (initial SB download, FRR/kernel set-up, BGP).
const FIRST_EXPOSURE: Duration = Duration::from_secs(30);

/// TCP ports (127.0.0.1) for an SB RAFT cluster: 6 per lab (client + RAFT port per member).
const CLUSTER_PORTS: std::ops::RangeInclusive<u16> = 16720..=16749;

/// One scenario (one lab) at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The driver the agent runs in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// `ovn_bgp_driver`, the lab's bgp-agent.conf as written: it follows the Southbound.
    Sb,
    /// `nb_ovn_bgp_driver`: it follows the Northbound (on OVN 23.03 it also reads the
    /// gateway's chassisredirect binding from the Southbound).
    #[cfg_attr(not(feature = "nb_bgp"), allow(dead_code))]
    Nb,
}

impl Driver {
    /// The agent's configuration on top of the lab's bgp-agent.conf.
    fn overrides(self) -> String {
        let driver = match self {
            Driver::Sb => "",
            Driver::Nb => "driver = nb_ovn_bgp_driver\nexposing_method = underlay\n",
        };
        format!(
            "[DEFAULT]\n{driver}reconcile_interval = {RECONCILE_INTERVAL}\n\
             frr_reconcile_interval = {FRR_RECONCILE_INTERVAL}\n\
             [ovs]\nflow_check_interval = {FLOW_CHECK_INTERVAL}\n"
        )
    }

    /// What the lab needs before the agent starts.
    fn prepare(self, lab: &Lab) {
        if self == Driver::Nb {
            // The lab's floating IP is centralized (its NAT row has no external_mac), which
            // Neutron says in NB_Global (as in nb_bgp_e2e.rs).
            lab.nbctl(&[
                "set",
                "NB_Global",
                ".",
                "external_ids:\"neutron:fip-distributed\"=False",
            ]);
        }
    }
}

/// What the chassis exposes in the lab's topology (see scripts/lab/README.md).
struct Expected {
    /// At the ToR, IPv4 and IPv6 prefixes.
    routes4: BTreeSet<String>,
    routes6: BTreeSet<String>,
    /// Host addresses reached through the provider bridge (rules and table routes), without the
    /// tenant VM (only its FIP and the router gateway are reachable on the provider network).
    provider_ips: Vec<String>,
    /// Permanent neighbours on the provider bridge, as [`KernelState::neighbours`] has them.
    neighbours: BTreeSet<String>,
}

fn expected(lab: &Lab, driver: Driver) -> Expected {
    let routes4 = ["VM_PROVIDER_IP4", "GW_IP4", "FIP_IP4", "VM_TENANT_IP4"]
        .iter()
        .map(|k| format!("{}/32", lab.env(k)))
        .collect();
    let routes6 = ["VM_PROVIDER_IP6", "GW_IP6"]
        .iter()
        .map(|k| format!("{}/128", lab.env(k)))
        .collect();
    let provider_ips = [
        "VM_PROVIDER_IP4",
        "GW_IP4",
        "FIP_IP4",
        "VM_PROVIDER_IP6",
        "GW_IP6",
    ]
    .iter()
    .map(|k| lab.env(k).to_owned())
    .collect();
    let neighbours = match driver {
        Driver::Sb => BTreeSet::new(),
        Driver::Nb => BTreeSet::from([format!(
            "{} lladdr {}",
            lab.env("VM_PROVIDER_IP4"),
            lab.env("VM_PROVIDER_MAC")
        )]),
    };
    Expected {
        routes4,
        routes6,
        provider_ips,
        neighbours,
    }
}

/// The prefixes the ToR learned over BGP.
fn tor_routes(lab: &Lab) -> (BTreeSet<String>, BTreeSet<String>) {
    let keys = |cmd: &str| -> BTreeSet<String> {
        lab.tor_json(cmd)["routes"]
            .as_object()
            .map(|routes| routes.keys().cloned().collect())
            .unwrap_or_default()
    };
    (keys("show ip bgp json"), keys("show bgp ipv6 unicast json"))
}

/// Ok once the ToR has learned exactly the expected prefixes.
fn tor_has_expected(lab: &Lab, exp: &Expected) -> Result<(), String> {
    let (v4, v6) = tor_routes(lab);
    if v4 == exp.routes4 && v6 == exp.routes6 {
        Ok(())
    } else {
        Err(format!(
            "ToR IPv4 {v4:?} (expected {:?}), IPv6 {v6:?} (expected {:?})",
            exp.routes4, exp.routes6
        ))
    }
}

/// The agent's kernel state in the chassis netns, as `ip` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KernelState {
    /// bgp-nic's master device and whether it is up (`master bgp-vrf up`); empty if missing.
    bgp_nic_link: String,
    /// Global addresses on bgp-nic (`10.0.0.10/32`, …).
    bgp_nic: BTreeSet<String>,
    /// `ip rule` / `ip -6 rule` lines that look up the provider bridge's table, without priority.
    rules: BTreeSet<String>,
    /// `ip route` / `ip -6 route` lines of the provider bridge's table.
    routes: BTreeSet<String>,
    /// Permanent neighbours on the provider bridge (`IP lladdr MAC`): the NB driver adds one
    /// per exposed provider VM address.
    neighbours: BTreeSet<String>,
}

/// `ip -n <chassis> ARGS…` output; empty if it fails (a device deleted by hand, say).
fn ip_chassis_lenient(lab: &Lab, args: &[&str]) -> String {
    Command::new("ip")
        .arg("-n")
        .arg(lab.ns_chassis())
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

fn kernel_state(lab: &Lab, table: &str) -> KernelState {
    let link = ip_chassis_lenient(lab, &["-o", "link", "show", "dev", "bgp-nic"]);
    let bgp_nic_link = if link.is_empty() {
        String::new()
    } else {
        let words: Vec<&str> = link.split_whitespace().collect();
        let master = words
            .iter()
            .position(|w| *w == "master")
            .and_then(|i| words.get(i + 1))
            .unwrap_or(&"none");
        let flags = words.get(2).copied().unwrap_or_default();
        let up = flags.trim_matches(['<', '>']).split(',').any(|f| f == "UP");
        format!("master {master} {}", if up { "up" } else { "down" })
    };
    let bgp_nic = ip_chassis_lenient(lab, &["-o", "addr", "show", "dev", "bgp-nic"])
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3).map(str::to_owned))
        .filter(|a| !a.starts_with("fe80:"))
        .collect();
    let lookup = format!("lookup {table}");
    let mut rules = BTreeSet::new();
    for family in ["-4", "-6"] {
        for line in lab.ip_chassis(&[family, "rule", "show"]).lines() {
            if line.contains(&lookup) {
                let rule = line.split_once(':').map_or(line, |(_, r)| r);
                rules.insert(format!("{family} {}", rule.trim()));
            }
        }
    }
    let mut routes = BTreeSet::new();
    for family in ["-4", "-6"] {
        for line in lab
            .ip_chassis(&[family, "route", "show", "table", table])
            .lines()
        {
            routes.insert(format!("{family} {}", line.trim()));
        }
    }
    let neighbours =
        ip_chassis_lenient(lab, &["neigh", "show", "dev", "br-ex", "nud", "permanent"])
            .lines()
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .filter(|l| !l.is_empty())
            .collect();
    KernelState {
        bgp_nic_link,
        bgp_nic,
        rules,
        routes,
        neighbours,
    }
}

/// Ok if the kernel state has everything the topology needs (the baseline's check).
fn kernel_complete(state: &KernelState, exp: &Expected, table: &str) -> Result<(), String> {
    if state.bgp_nic_link != "master bgp-vrf up" {
        return Err(format!("bgp-nic is not up in bgp-vrf: {state:#?}"));
    }
    for prefix in exp.routes4.iter().chain(&exp.routes6) {
        if !state.bgp_nic.contains(prefix) {
            return Err(format!("bgp-nic lacks {prefix}: {state:#?}"));
        }
    }
    for ip in &exp.provider_ips {
        let family = if ip.contains(':') { "-6" } else { "-4" };
        let rule = format!("{family} from all to {ip} lookup {table}");
        if !state.rules.contains(&rule) {
            return Err(format!("no rule `{rule}`: {state:#?}"));
        }
        let route = format!("{family} {ip} dev br-ex ");
        if !state.routes.iter().any(|r| r.starts_with(&route)) {
            return Err(format!("no route `{route}…` in table {table}: {state:#?}"));
        }
    }
    if let Some(missing) = exp.neighbours.difference(&state.neighbours).next() {
        return Err(format!("no permanent neighbour `{missing}`: {state:#?}"));
    }
    Ok(())
}

/// Polls until the kernel state equals `baseline` again.
fn kernel_back(lab: &Lab, table: &str, baseline: &KernelState) -> Result<(), String> {
    let now = kernel_state(lab, table);
    if &now == baseline {
        Ok(())
    } else {
        Err(now.diff(baseline))
    }
}

impl KernelState {
    /// What differs from `baseline`: `-` missing now, `+` not in the baseline.
    fn diff(&self, baseline: &KernelState) -> String {
        let mut out = Vec::new();
        if self.bgp_nic_link != baseline.bgp_nic_link {
            out.push(format!(
                "bgp-nic link `{}` (baseline `{}`)",
                self.bgp_nic_link, baseline.bgp_nic_link
            ));
        }
        let sets = [
            ("bgp-nic address", &self.bgp_nic, &baseline.bgp_nic),
            ("rule", &self.rules, &baseline.rules),
            ("route", &self.routes, &baseline.routes),
            ("neighbour", &self.neighbours, &baseline.neighbours),
        ];
        for (what, now, base) in sets {
            out.extend(base.difference(now).map(|x| format!("-{what} `{x}`")));
            out.extend(now.difference(base).map(|x| format!("+{what} `{x}`")));
        }
        out.join(", ")
    }
}

/// The configuration the agent adds to the chassis FRR (its leak configuration).
fn frr_has_agent_config(lab: &Lab) -> Result<(), String> {
    let config = lab.vtysh_chassis("show running-config");
    if config.contains("router bgp 64999 vrf bgp-vrf") && config.contains("import vrf bgp-vrf") {
        Ok(())
    } else {
        Err(format!(
            "the chassis FRR lacks the agent's leak configuration:\n{config}"
        ))
    }
}

/// The agent's cookie-0x3e7 flows on br-ex, as (duration in seconds, flow text).
fn cookie_flows(lab: &Lab) -> Vec<(f64, String)> {
    let out = run_ok(
        Command::new("ovs-ofctl")
            .env("OVS_RUNDIR", lab.env("OVS_RUNDIR"))
            .args(["dump-flows", "br-ex", "cookie=0x3e7/-1"]),
    );
    out.lines()
        .filter(|l| l.contains("cookie=0x3e7"))
        .map(|l| {
            let duration = l
                .split("duration=")
                .nth(1)
                .and_then(|d| d.split('s').next())
                .and_then(|d| d.parse().ok())
                .unwrap_or(f64::MAX);
            (duration, l.trim().to_owned())
        })
        .collect()
}

/// A lab with the agent running and everything exposed: the baseline of every scenario.
struct Running {
    driver: Driver,
    // Fields drop in this order: the agent must stop before the lab removes its directory
    // (a running agent still writing its log there made down.sh's `rm -rf` fail).
    agent: Agent,
    lab: Lab,
    exp: Expected,
    table: String,
    kernel: KernelState,
}

impl Running {
    fn start(driver: Driver, up_env: &[(&str, &str)]) -> Running {
        let lab = Lab::start_with_env(up_env);
        driver.prepare(&lab);
        let agent = Agent::start(lab.dir(), &driver.overrides());
        let exp = expected(&lab, driver);
        let mut running = Running {
            driver,
            lab,
            agent,
            exp,
            table: String::new(),
            kernel: KernelState {
                bgp_nic_link: String::new(),
                bgp_nic: BTreeSet::new(),
                rules: BTreeSet::new(),
                routes: BTreeSet::new(),
                neighbours: BTreeSet::new(),
            },
        };
        let started = Instant::now();
        running.wait("first exposure at the ToR", FIRST_EXPOSURE, |r| {
            tor_has_expected(&r.lab, &r.exp)
        });
        running.table = running.lab.br_ex_table();
        // Settle: the kernel state must be stable for a repair tick before it is the baseline.
        let table = running.table.clone();
        running.wait(
            "kernel state complete",
            secs(FRR_RECONCILE_INTERVAL) + SLACK,
            |r| kernel_complete(&kernel_state(&r.lab, &table), &r.exp, &table),
        );
        running.kernel = kernel_state(&running.lab, &running.table);
        if let Err(e) = kernel_complete(&running.kernel, &running.exp, &running.table) {
            panic!("baseline kernel state incomplete: {e}");
        }
        running.agent.assert_running();
        assert_eq!(
            cookie_flows(&running.lab).len(),
            2,
            "the agent's 2 MAC-tweak flows on br-ex: {:?}",
            cookie_flows(&running.lab)
        );
        eprintln!(
            "baseline reached {:.1} s after the agent started",
            started.elapsed().as_secs_f64()
        );
        running
    }

    /// `wait_for` with the agent's log tail in the failure message, and a check that the agent
    /// is still running (it must survive everything here without a restart).
    fn wait<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&Running) -> Result<T, String>,
    ) -> Duration {
        let started = Instant::now();
        let deadline = started + timeout;
        loop {
            self.agent.assert_running();
            match probe(self) {
                Ok(_) => {
                    let took = started.elapsed();
                    eprintln!(
                        "{what}: {:.2} s (bound {:.0} s)",
                        took.as_secs_f64(),
                        timeout.as_secs_f64()
                    );
                    return took;
                }
                Err(last) if Instant::now() >= deadline => panic!(
                    "timed out after {timeout:?} waiting for {what}; last state: {last}\n\
                     --- agent log (tail) ---\n{}",
                    self.agent.log_tail()
                ),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The ToR has every expected route within `tor_bound` and the kernel state is the
    /// baseline again within `kernel_bound`, both counted from `since` (the disruption), and
    /// both hold at the same time at the end.
    fn wait_all_back(
        &mut self,
        what: &str,
        since: Instant,
        tor_bound: Duration,
        kernel_bound: Duration,
    ) {
        let mut tor_at = None;
        let mut kernel_at = None;
        let (mut first_tor_gap, mut first_kernel_gap) = (None, None);
        loop {
            self.agent.assert_running();
            let tor = tor_has_expected(&self.lab, &self.exp);
            let kernel = kernel_back(&self.lab, &self.table, &self.kernel);
            let now = since.elapsed();
            if tor.is_ok() {
                tor_at.get_or_insert(now);
            } else if first_tor_gap.is_none() {
                first_tor_gap = tor.clone().err();
            }
            if kernel.is_ok() {
                kernel_at.get_or_insert(now);
            } else if first_kernel_gap.is_none() {
                first_kernel_gap = kernel.clone().err();
            }
            if tor.is_ok() && kernel.is_ok() {
                break;
            }
            let late = |bound: Duration, state: &Result<(), String>, which: &str| {
                if state.is_err() && now > bound {
                    panic!(
                        "{what}: {which} not back within {bound:?}: {}\n--- agent log (tail) ---\n{}",
                        state.as_ref().err().map(String::as_str).unwrap_or(""),
                        self.agent.log_tail()
                    );
                }
            };
            late(tor_bound, &tor, "ToR routes");
            late(kernel_bound, &kernel, "kernel state");
            std::thread::sleep(Duration::from_millis(100));
        }
        let report = |which: &str, at: Duration, bound: Duration, gap: Option<String>| match gap {
            Some(gap) => eprintln!(
                "{what}: {which} back after {:.2} s (bound {:.0} s); first seen: {gap}",
                at.as_secs_f64(),
                bound.as_secs_f64()
            ),
            None => eprintln!(
                "{what}: {which} never seen disturbed (first checked {:.2} s after; bound {:.0} s)",
                at.as_secs_f64(),
                bound.as_secs_f64()
            ),
        };
        let (tor_at, kernel_at) = (tor_at.unwrap_or_default(), kernel_at.unwrap_or_default());
        report("ToR routes", tor_at, tor_bound, first_tor_gap);
        report("kernel state", kernel_at, kernel_bound, first_kernel_gap);
        assert!(
            tor_at <= tor_bound,
            "{what}: ToR routes came back after {tor_at:?} > {tor_bound:?}"
        );
        assert!(
            kernel_at <= kernel_bound,
            "{what}: kernel state came back after {kernel_at:?} > {kernel_bound:?}"
        );
    }

    fn provider_tap(&self) -> String {
        let port = self.lab.env("VM_PROVIDER_PORT_ID");
        format!("tap{}", &port[..11])
    }

    /// Moves the provider VM away from the chassis: the ToR withdraws its /32 and /128 and
    /// its kernel state goes, the rest stays. For the SB driver the VM is unbound (as Nova
    /// does when it unplugs it: the Port_Binding loses its chassis); for the NB driver its
    /// port's `requested-chassis` names another host (as Neutron does when it migrates it).
    fn move_provider_vm_away_and_see_it_withdrawn(&mut self, bound: Duration) {
        match self.driver {
            Driver::Sb => {
                let tap = self.provider_tap();
                self.lab
                    .vsctl(&["remove", "Interface", &tap, "external_ids", "iface-id"]);
            }
            Driver::Nb => self.set_provider_vm_requested_chassis("another-host"),
        }
        let v4 = format!("{}/32", self.lab.env("VM_PROVIDER_IP4"));
        let v6 = format!("{}/128", self.lab.env("VM_PROVIDER_IP6"));
        let mut left4 = self.exp.routes4.clone();
        left4.remove(&v4);
        let mut left6 = self.exp.routes6.clone();
        left6.remove(&v6);
        self.wait(
            "provider VM moved away: ToR withdrew it, kept the rest",
            bound,
            |r| {
                let (now4, now6) = tor_routes(&r.lab);
                if now4 == left4 && now6 == left6 {
                    Ok(())
                } else {
                    Err(format!("ToR IPv4 {now4:?}, IPv6 {now6:?}"))
                }
            },
        );
        let table = self.table.clone();
        let vm4 = self.lab.env("VM_PROVIDER_IP4").to_owned();
        let vm6 = self.lab.env("VM_PROVIDER_IP6").to_owned();
        self.wait(
            "provider VM moved away: its kernel state removed",
            secs(FRR_RECONCILE_INTERVAL) + SLACK,
            |r| {
                let s = kernel_state(&r.lab, &table);
                let mentions = |ip: &str| {
                    s.bgp_nic.iter().any(|a| a.starts_with(&format!("{ip}/")))
                        || s.rules.iter().any(|l| l.contains(&format!("to {ip} ")))
                        || s.routes.iter().any(|l| l.contains(&format!(" {ip} ")))
                        || s.neighbours
                            .iter()
                            .any(|l| l.starts_with(&format!("{ip} ")))
                };
                if mentions(&vm4) || mentions(&vm6) {
                    Err(format!("{s:#?}"))
                } else {
                    Ok(())
                }
            },
        );
    }

    /// Undoes [`Self::move_provider_vm_away_and_see_it_withdrawn`].
    fn bring_provider_vm_back(&mut self) {
        match self.driver {
            Driver::Sb => {
                let tap = self.provider_tap();
                let iface_id = format!(
                    "external_ids:iface-id={}",
                    self.lab.env("VM_PROVIDER_PORT_ID")
                );
                self.lab.vsctl(&["set", "Interface", &tap, &iface_id]);
            }
            Driver::Nb => {
                let here = self.lab.env("CHASSIS_HOSTNAME").to_owned();
                self.set_provider_vm_requested_chassis(&here);
            }
        }
    }

    /// Sets only the `requested-chassis` option of the provider VM's port (up.sh gives it this
    /// chassis), leaving its other options alone.
    fn set_provider_vm_requested_chassis(&self, chassis: &str) {
        let port = self.lab.env("VM_PROVIDER_PORT_ID");
        self.lab.nbctl(&[
            "set",
            "Logical_Switch_Port",
            port,
            &format!("options:requested-chassis={chassis}"),
        ]);
    }
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Pids of the chassis FRR daemons.
fn frr_chassis_pids(lab: &Lab) -> Vec<u32> {
    lab.daemon_pids()
        .into_iter()
        .filter(|(f, _)| f.starts_with("frr/chassis/"))
        .map(|(_, p)| p)
        .collect()
}

#[test]
fn frr_killed_and_restarted_gets_the_agents_config_back_and_the_tor_relearns() {
    frr_killed_and_restarted(Driver::Sb);
}

#[cfg(feature = "nb_bgp")]
#[test]
fn nb_frr_killed_and_restarted_gets_the_agents_config_back_and_the_tor_relearns() {
    frr_killed_and_restarted(Driver::Nb);
}

fn frr_killed_and_restarted(driver: Driver) {
    require_root();
    let _serial = serial();
    let mut r = Running::start(driver, &[]);
    frr_has_agent_config(&r.lab).expect("the agent configured FRR before the restart");
    let before = frr_chassis_pids(&r.lab);

    let killed_at = Instant::now();
    r.lab.restart(&["--kill", "frr-chassis"]);
    let after = frr_chassis_pids(&r.lab);
    assert!(
        after.iter().all(|p| !before.contains(p)),
        "zebra and bgpd must be new processes: before {before:?}, after {after:?}"
    );
    // The restarted daemons read the operator's files only (the agent may already have
    // re-applied its part by the time we look; that is what is tested next).
    eprintln!(
        "right after the restart the agent's leak config is {}",
        if frr_has_agent_config(&r.lab).is_ok() {
            "already back"
        } else {
            "gone, as expected"
        }
    );

    let bound = secs(FRR_RECONCILE_INTERVAL) + SLACK;
    r.wait("FRR restarted: the agent's config re-applied", bound, |r| {
        frr_has_agent_config(&r.lab)
    });
    // The agent counts the restart it noticed.
    r.wait(
        "FRR restart counted in the metrics",
        bound,
        |r| match lab_fixture::agent_metric(&r.lab, "ovn_bgp_agent_frr_restarts_total") {
            Some(n) if n >= 1.0 => Ok(()),
            other => Err(format!("ovn_bgp_agent_frr_restarts_total = {other:?}")),
        },
    );
    r.wait_all_back(
        "FRR restarted",
        killed_at,
        secs(FRR_RECONCILE_INTERVAL) + BGP_CONVERGENCE,
        secs(FRR_RECONCILE_INTERVAL) + SLACK,
    );

    // An outage: FRR stays down for two repair ticks (the agent's applies fail meanwhile and
    // must be retried), then comes back.
    r.lab.restart(&["--kill", "--down", "frr-chassis"]);
    std::thread::sleep(secs(2 * FRR_RECONCILE_INTERVAL));
    let back_at = Instant::now();
    r.lab.restart(&["--up", "frr-chassis"]);
    r.wait(
        "FRR back after an outage: the agent's config re-applied",
        bound,
        |r| frr_has_agent_config(&r.lab),
    );
    r.wait_all_back(
        "FRR back after an outage",
        back_at,
        secs(FRR_RECONCILE_INTERVAL) + BGP_CONVERGENCE,
        secs(FRR_RECONCILE_INTERVAL) + SLACK,
    );
}

#[test]
fn ovs_vswitchd_killed_and_restarted_gets_the_cookie_flows_back() {
    ovs_vswitchd_killed_and_restarted(Driver::Sb);
}

#[cfg(feature = "nb_bgp")]
#[test]
fn nb_ovs_vswitchd_killed_and_restarted_gets_the_cookie_flows_back() {
    ovs_vswitchd_killed_and_restarted(Driver::Nb);
}

fn ovs_vswitchd_killed_and_restarted(driver: Driver) {
    require_root();
    let _serial = serial();
    let mut r = Running::start(driver, &[]);

    let killed_at = Instant::now();
    r.lab.restart(&["--kill", "ovs-vswitchd"]);
    let bound = secs(FLOW_CHECK_INTERVAL) + SLACK;
    r.wait(
        "ovs-vswitchd restarted: 2 new cookie flows on br-ex",
        bound,
        |r| {
            let flows = cookie_flows(&r.lab);
            let since = killed_at.elapsed().as_secs_f64();
            // Flows older than the restart would be survivors, not reinstalled ones.
            if flows.len() == 2 && flows.iter().all(|(d, _)| *d <= since) {
                Ok(())
            } else {
                Err(format!("{flows:?} ({since:.1} s since the kill)"))
            }
        },
    );
    r.wait_all_back(
        "ovs-vswitchd restarted",
        killed_at,
        secs(FRR_RECONCILE_INTERVAL) + BGP_PROPAGATION,
        secs(FRR_RECONCILE_INTERVAL) + SLACK,
    );

    // An outage: ovs-vswitchd stays down for two flow checks, then comes back.
    r.lab.restart(&["--kill", "--down", "ovs-vswitchd"]);
    std::thread::sleep(secs(2 * FLOW_CHECK_INTERVAL));
    let back_at = Instant::now();
    r.lab.restart(&["--up", "ovs-vswitchd"]);
    r.wait(
        "ovs-vswitchd back after an outage: 2 new cookie flows",
        bound,
        |r| {
            let flows = cookie_flows(&r.lab);
            let since = back_at.elapsed().as_secs_f64();
            if flows.len() == 2 && flows.iter().all(|(d, _)| *d <= since) {
                Ok(())
            } else {
                Err(format!("{flows:?} ({since:.1} s since it came back)"))
            }
        },
    );
    r.wait_all_back(
        "ovs-vswitchd back after an outage",
        back_at,
        secs(FRR_RECONCILE_INTERVAL) + BGP_PROPAGATION,
        secs(FRR_RECONCILE_INTERVAL) + SLACK,
    );
}

#[test]
fn ovs_emer_reset_gets_the_cookie_flows_back() {
    require_root();
    let _serial = serial();
    let mut r = Running::start(Driver::Sb, &[]);

    // emer-reset clears fail_mode, and a bridge whose fail_mode changes while it has no
    // controller gets its flows flushed by ovs-vswitchd (the situation of
    // lesson-ovs-restart-flows). The lab's br-ex has the default mode, so give it the
    // `secure` mode Neutron gives physical bridges: that change flushes too, a first check.
    let secured_at = Instant::now();
    r.lab.vsctl(&["set", "Bridge", "br-ex", "fail_mode=secure"]);
    let flushed = cookie_flows(&r.lab).is_empty();
    eprintln!(
        "right after fail_mode=secure the cookie flows were {}",
        if flushed { "gone" } else { "still there" }
    );
    r.wait(
        "fail_mode=secure on br-ex: 2 new cookie flows",
        secs(FLOW_CHECK_INTERVAL) + SLACK,
        |r| {
            let flows = cookie_flows(&r.lab);
            let since = secured_at.elapsed().as_secs_f64();
            if flows.len() == 2 && flows.iter().all(|(d, _)| *d <= since) {
                Ok(())
            } else {
                Err(format!("{flows:?} ({since:.1} s since fail_mode=secure)"))
            }
        },
    );

    let reset_at = Instant::now();
    r.lab.vsctl(&["emer-reset"]);
    let flushed = cookie_flows(&r.lab).is_empty();
    let fail_mode = r.lab.vsctl(&["get", "Bridge", "br-ex", "fail_mode"]);
    assert_eq!(fail_mode.trim(), "[]", "emer-reset clears fail_mode");
    eprintln!(
        "right after emer-reset the cookie flows were {}",
        if flushed { "gone" } else { "still there" }
    );

    r.wait(
        "emer-reset: 2 new cookie flows on br-ex",
        secs(FLOW_CHECK_INTERVAL) + SLACK,
        |r| {
            let flows = cookie_flows(&r.lab);
            let since = reset_at.elapsed().as_secs_f64();
            if flows.len() == 2 && flows.iter().all(|(d, _)| *d <= since) {
                Ok(())
            } else {
                Err(format!("{flows:?} ({since:.1} s since emer-reset)"))
            }
        },
    );
    r.wait_all_back(
        "emer-reset",
        reset_at,
        secs(FRR_RECONCILE_INTERVAL) + BGP_PROPAGATION,
        secs(FRR_RECONCILE_INTERVAL) + SLACK,
    );
}

#[test]
fn sb_server_killed_and_restarted_the_agent_follows_changes_made_after() {
    ovsdb_server_killed_and_restarted(Driver::Sb);
}

#[cfg(feature = "nb_bgp")]
#[test]
fn nb_server_killed_and_restarted_the_nb_driver_follows_changes_made_after() {
    ovsdb_server_killed_and_restarted(Driver::Nb);
}

/// The database server the driver follows (restart.sh's component) is killed.
fn ovsdb_server_killed_and_restarted(driver: Driver) {
    require_root();
    let _serial = serial();
    let mut r = Running::start(driver, &[]);
    let server = match driver {
        Driver::Sb => "sb",
        Driver::Nb => "nb",
    };

    r.lab.restart(&["--kill", server]);
    // The agent must reconnect on its own (backoff ≤ 8 s) and follow what changes from now on.
    // The NB driver reads a VM's place from the Northbound only (`requested-chassis`; the
    // Southbound serves it the gateway's binding), so its withdrawal proves it reconnected.
    r.move_provider_vm_away_and_see_it_withdrawn(OVSDB_RECONNECT_MAX + BGP_PROPAGATION + SLACK);
    let rebound_at = Instant::now();
    r.bring_provider_vm_back();
    r.wait_all_back(
        &format!("{server} restarted, provider VM back"),
        rebound_at,
        BGP_PROPAGATION + SLACK,
        secs(FRR_RECONCILE_INTERVAL) + SLACK,
    );

    // An outage longer than the longest reconnect backoff: the agent keeps retrying and
    // follows the server again once it is back.
    r.lab.restart(&["--kill", "--down", server]);
    std::thread::sleep(OVSDB_RECONNECT_MAX + SLACK);
    r.agent.assert_running();
    r.lab.restart(&["--up", server]);
    r.move_provider_vm_away_and_see_it_withdrawn(OVSDB_RECONNECT_MAX + BGP_PROPAGATION + SLACK);
    let rebound_at = Instant::now();
    r.bring_provider_vm_back();
    r.wait_all_back(
        &format!("{server} back after an outage, provider VM back"),
        rebound_at,
        BGP_PROPAGATION + SLACK,
        secs(FRR_RECONCILE_INTERVAL) + SLACK,
    );
}

/// A base port with 6 free ports (3 members × client + RAFT) in [`CLUSTER_PORTS`].
fn free_cluster_port_base() -> u16 {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    CLUSTER_PORTS
        .clone()
        .step_by(6)
        .filter(|b| b + 5 <= *CLUSTER_PORTS.end())
        .find(|&b| (b..b + 6).all(free))
        .unwrap_or_else(|| panic!("no 6 free TCP ports in {CLUSTER_PORTS:?} on 127.0.0.1"))
}

/// Which SB member (`sb-N`) the agent is connected to: its TCP connection to a member's client
/// port (the agent uses the tcp remotes of bgp-agent.conf).
fn agent_sb_member(base: u16) -> Option<String> {
    let out = run_ok(Command::new("ss").args(["-tnpH", "state", "established"]));
    (1..=3u16).find_map(|n| {
        let port = format!("127.0.0.1:{}", base + 2 * (n - 1));
        out.lines()
            .any(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                fields.len() >= 4 && fields[3] == port && l.contains("\"ovn-bgp-agent\"")
            })
            .then(|| format!("sb-{n}"))
    })
}

#[test]
fn sb_cluster_leader_failover_the_agent_keeps_following() {
    require_root();
    let _serial = serial();
    let base = free_cluster_port_base().to_string();
    let mut r = Running::start(
        Driver::Sb,
        &[("LAB_SB_CLUSTER", "3"), ("LAB_SB_CLUSTER_PORT_BASE", &base)],
    );
    let base: u16 = base.parse().expect("port");
    assert_eq!(
        r.lab.env("SB_TCP").split(',').count(),
        3,
        "the agent is configured with all three members: {}",
        r.lab.env("SB_TCP")
    );
    let first = agent_sb_member(base);
    eprintln!("the agent is connected to {first:?}");

    // 1. The leader dies; the agent (whether it was connected to it or not) follows the change.
    let leader = r.lab.restart(&["--kill", "--down", "sb-leader"]);
    let leader = leader.trim().to_owned();
    eprintln!("killed the SB leader {leader}");
    r.move_provider_vm_away_and_see_it_withdrawn(OVSDB_RECONNECT_MAX + BGP_PROPAGATION + SLACK);
    r.lab.restart(&["--up", &leader]);

    // 2. The member the agent is connected to now dies (if step 1 did not already move it).
    let current = agent_sb_member(base);
    eprintln!("the agent is connected to {current:?} after the failover");
    let killed_second = match current {
        Some(member) if member != leader => {
            r.lab.restart(&["--kill", "--down", &member]);
            eprintln!("killed {member}, the agent's member");
            Some(member)
        }
        _ => None,
    };
    let rebound_at = Instant::now();
    r.bring_provider_vm_back();
    // The binding is written by ovn-controller, which may have lost the same member and comes
    // back with its own reconnect backoff (up to OVSDB_RECONNECT_MAX) before it claims the
    // port: the kernel's bound includes it, as the ToR's does. (A CI run under load saw the
    // agent reconnected at once and the binding still unwritten 5 s after the kill.)
    r.wait_all_back(
        "SB failover, provider VM bound again",
        rebound_at,
        OVSDB_RECONNECT_MAX + BGP_PROPAGATION + SLACK,
        OVSDB_RECONNECT_MAX + SLACK,
    );
    if let Some(member) = killed_second {
        r.lab.restart(&["--up", &member]);
    }
}

#[test]
fn kernel_state_deleted_by_hand_is_repaired() {
    kernel_state_deleted_by_hand(Driver::Sb);
}

#[cfg(feature = "nb_bgp")]
#[test]
fn nb_kernel_state_deleted_by_hand_is_repaired() {
    kernel_state_deleted_by_hand(Driver::Nb);
}

fn kernel_state_deleted_by_hand(driver: Driver) {
    require_root();
    let _serial = serial();
    let mut r = Running::start(driver, &[]);
    let table = r.table.clone();
    let vm4 = r.lab.env("VM_PROVIDER_IP4").to_owned();
    let vm6 = r.lab.env("VM_PROVIDER_IP6").to_owned();
    let fip = r.lab.env("FIP_IP4").to_owned();
    let gw4 = r.lab.env("GW_IP4").to_owned();

    let deleted_at = Instant::now();
    r.lab
        .ip_chassis(&["addr", "del", &format!("{vm4}/32"), "dev", "bgp-nic"]);
    r.lab
        .ip_chassis(&["-4", "rule", "del", "to", &fip, "table", &table]);
    r.lab
        .ip_chassis(&["-6", "rule", "del", "to", &vm6, "table", &table]);
    r.lab
        .ip_chassis(&["-4", "route", "del", &gw4, "dev", "br-ex", "table", &table]);
    if driver == Driver::Nb {
        // The NB driver's permanent neighbour of the provider VM on the provider bridge.
        r.lab.ip_chassis(&["neigh", "del", &vm4, "dev", "br-ex"]);
    }
    assert_ne!(
        kernel_state(&r.lab, &table),
        r.kernel,
        "the deletions took effect"
    );

    // Put back by the repair the kernel mirror's notifications trigger, not by the repair tick.
    r.wait_all_back(
        "kernel state deleted by hand",
        deleted_at,
        KERNEL_REPAIR + BGP_PROPAGATION,
        KERNEL_REPAIR + SLACK,
    );
    let log = r.agent.log();
    assert!(
        log.contains("reason=\"kernel change\""),
        "the repair was triggered by the kernel's notifications (a reconcile with reason \
         \"kernel change\" in the agent log):\n{}",
        r.agent.log_tail()
    );

    // The agent's devices themselves: bgp-nic (and with it every exposed address), then the
    // VRF device it is enslaved to.
    for device in ["bgp-nic", "bgp-vrf"] {
        let deleted_at = Instant::now();
        r.lab.ip_chassis(&["link", "del", device]);
        r.wait_all_back(
            &format!("{device} deleted by hand"),
            deleted_at,
            KERNEL_REPAIR + BGP_PROPAGATION,
            KERNEL_REPAIR + SLACK,
        );
    }
}

/// The command line of a running process, NUL-separated arguments joined by spaces.
fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|a| !a.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `restart.sh` itself, without an agent: every component comes back as a new process with the
/// command line up.sh gave it, SIGTERM or SIGKILL, and FRR comes back with the operator
/// configuration only.
#[test]
fn restart_sh_brings_every_daemon_back_with_its_command_line() {
    require_root();
    let _serial = serial();
    let lab = Lab::start();

    // Something an agent would add at run time; a restarted FRR must not have it.
    let extra = lab.dir().join("extra-frr.conf");
    std::fs::write(
        &extra,
        "router bgp 64999 vrf bgp-vrf\n bgp router-id 100.64.0.1\nexit\n",
    )
    .expect("write extra FRR config");
    lab.vtysh_chassis_apply(&extra);
    assert!(
        lab.vtysh_chassis("show running-config")
            .contains("router bgp 64999 vrf bgp-vrf"),
        "vtysh -f applied the extra configuration"
    );

    let components: [(&str, &[&str], bool); 7] = [
        ("sb", &["ovn/ovsdb-server-sb.pid"], true),
        ("nb", &["ovn/ovsdb-server-nb.pid"], false),
        ("northd", &["ovn/ovn-northd.pid"], true),
        ("ovs-vswitchd", &["ovs/ovs-vswitchd.pid"], false),
        ("ovn-controller", &["ovn/ovn-controller.pid"], true),
        (
            "frr-tor",
            &["frr/tor/run/zebra.pid", "frr/tor/run/bgpd.pid"],
            false,
        ),
        (
            "frr-chassis",
            &["frr/chassis/run/zebra.pid", "frr/chassis/run/bgpd.pid"],
            true,
        ),
    ];
    for (component, pidfiles, kill) in components {
        let pids = |lab: &Lab| -> Vec<(u32, String)> {
            let all = lab.daemon_pids();
            pidfiles
                .iter()
                .map(|f| {
                    let pid = all
                        .iter()
                        .find(|(p, _)| p == f)
                        .unwrap_or_else(|| panic!("no pid file {f}: {all:?}"))
                        .1;
                    (pid, cmdline(pid))
                })
                .collect()
        };
        let before = pids(&lab);
        let started = Instant::now();
        let args: Vec<&str> = if kill {
            vec!["--kill", component]
        } else {
            vec![component]
        };
        lab.restart(&args);
        let after = pids(&lab);
        eprintln!(
            "restart.sh {}: {:.2} s",
            args.join(" "),
            started.elapsed().as_secs_f64()
        );
        for ((old_pid, old_cmd), (new_pid, new_cmd)) in before.iter().zip(&after) {
            assert_ne!(old_pid, new_pid, "{component} was not restarted");
            assert!(
                lab_fixture::process_alive(*new_pid, &format!("{}/", lab.dir().display())),
                "{component}: new pid {new_pid} does not run"
            );
            assert_eq!(
                old_cmd, new_cmd,
                "{component} restarted with another command line"
            );
        }
    }

    let config = lab.vtysh_chassis("show running-config");
    assert!(
        !config.contains("vrf bgp-vrf") && config.contains("router bgp 64999"),
        "the restarted chassis FRR must have the operator configuration only:\n{config}"
    );
    // The lab still works: the BGP session is back and SB has the bindings.
    lab_fixture::wait_for("the eBGP session after the restarts", secs(15), || {
        let n = lab.tor_json("show bgp neighbors json");
        if n[lab.env("CHASSIS_IP4")]["bgpState"] == "Established" {
            Ok(())
        } else {
            Err(format!("{:#}", n[lab.env("CHASSIS_IP4")]["bgpState"]))
        }
    });
}
