//! A real lab (OVN + OVS + two FRR instances in network namespaces) brought up by
//! `scripts/lab/up.sh` for one test and torn down by `scripts/lab/down.sh` when dropped, even if
//! the test panics.
//!
//! Every lab gets its own state directory (`/tmp/ovn-bgp-lab-test-<pid>-<n>`), its own network
//! namespace prefix (`labt<pid % 1000><n>-`) and its own pair of NB/SB TCP ports, so it never
//! collides with a developer's lab (`/tmp/ovn-bgp-lab`, `lab-…`) or with other tests.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]
#![allow(dead_code)] // each test binary uses a different part of the fixture

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// up.sh environment of the OVN 25.03 tier: OVN central, northd, ovn-controller and OVS from
/// Debian 13's packages in a cached chroot (`scripts/lab/ovn-chroot.sh`; the first lab on a
/// machine builds it, about 1.5 minutes).
pub(crate) const OVN_25_03: &[(&str, &str)] = &[("LAB_OVN", "25.03")];

/// How long a single wait for the lab to converge may take.
pub(crate) const CONVERGENCE_TIMEOUT: Duration = Duration::from_secs(30);

/// The TCP ports (on 127.0.0.1) test labs may use for NB/SB, two per lab.
const TEST_TCP_PORTS: std::ops::RangeInclusive<u16> = 16650..=16659;
/// Labs started over the life of one test process (one letter each in the netns prefix); how
/// many run at once is limited by the free port pairs in [`TEST_TCP_PORTS`].
const MAX_LABS_PER_PROCESS: u32 = 26;

static LAB_COUNTER: AtomicU32 = AtomicU32::new(0);

/// Fails the test with a clear message unless it runs as root.
pub(crate) fn require_root() {
    let uid = run_ok(Command::new("id").arg("-u"));
    assert_eq!(
        uid.trim(),
        "0",
        "this test must run as root: it creates network namespaces and starts OVS, OVN and FRR"
    );
}

/// The value of one series on the agent's `/metrics` (the lab's `[telemetry] metrics_address`),
/// e.g. `ovn_bgp_agent_frr_restarts_total`; `None` when the agent does not answer or has no
/// such series.
pub(crate) fn agent_metric(lab: &Lab, series: &str) -> Option<f64> {
    use std::io::{Read, Write};
    let address = lab.env("AGENT_METRICS");
    let mut s = std::net::TcpStream::connect(address).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    reply.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// One running lab. Dropping it runs `down.sh`.
pub(crate) struct Lab {
    dir: PathBuf,
    ns_prefix: String,
    nb_tcp_port: u16,
    /// Extra environment for up.sh (e.g. `LAB_SB_CLUSTER=3`, `LAB_KERNEL=full`), kept for
    /// [`Lab::rerun_up`].
    up_env: Vec<(String, String)>,
    env: HashMap<String, String>,
    up_duration: Duration,
    up_output: String,
    down_done: bool,
}

impl Lab {
    /// Runs `scripts/lab/up.sh` for a fresh lab and returns once it reported success.
    /// Panics (after tearing down whatever was started) with up.sh's output if it fails.
    pub(crate) fn start() -> Lab {
        Lab::start_with_env(&[])
    }

    /// [`Lab::start`] with extra environment for up.sh, e.g.
    /// `[("LAB_SB_CLUSTER", "3"), ("LAB_SB_CLUSTER_PORT_BASE", "16720")]`.
    pub(crate) fn start_with_env(up_env: &[(&str, &str)]) -> Lab {
        let n = LAB_COUNTER.fetch_add(1, Ordering::SeqCst);
        assert!(
            n < MAX_LABS_PER_PROCESS,
            "at most {MAX_LABS_PER_PROCESS} labs per test process"
        );
        let pid = std::process::id();
        // The guard exists before up.sh runs, so a failing up.sh is still cleaned up.
        let mut lab = Lab {
            dir: PathBuf::from(format!("/tmp/ovn-bgp-lab-test-{pid}-{n}")),
            ns_prefix: format!("labt{}{}-", pid % 1000, char::from(b'a' + n as u8)),
            nb_tcp_port: free_port_pair(),
            up_env: up_env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            env: HashMap::new(),
            up_duration: Duration::ZERO,
            up_output: String::new(),
            down_done: false,
        };
        lab.run_up();
        lab
    }

    /// Runs `up.sh` again on this lab (it tears the running lab down first, then starts anew).
    pub(crate) fn rerun_up(&mut self) {
        self.run_up();
    }

    fn run_up(&mut self) {
        let started = Instant::now();
        let out = self
            .script("up.sh")
            .env("LAB_NB_TCP_PORT", self.nb_tcp_port.to_string())
            .env("LAB_SB_TCP_PORT", (self.nb_tcp_port + 1).to_string())
            .envs(self.up_env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("cannot execute scripts/lab/up.sh");
        self.up_duration = started.elapsed();
        self.up_output = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            out.status.success(),
            "scripts/lab/up.sh failed ({}):\n{}",
            out.status,
            self.up_output
        );
        self.env = parse_lab_env(&self.dir.join("lab.env"));
    }

    /// Output of `scripts/lab/status.sh`, which must succeed.
    pub(crate) fn status(&self) -> String {
        run_ok(&mut self.script("status.sh"))
    }

    /// `scripts/lab/restart.sh ARGS…` (e.g. `["--kill", "frr-chassis"]`), which must succeed;
    /// returns its stdout (`sb-leader` prints the member it stopped, e.g. `sb-2`).
    pub(crate) fn restart(&self, args: &[&str]) -> String {
        run_ok(self.script("restart.sh").args(args))
    }

    /// `scripts/lab/local-ovn.sh ARGS…` (the node-local OVN cluster of `exposing_method = ovn`:
    /// its NB, SB, northd, br-fab and `ovn-controller -n bgp` on this lab's OVS), which must
    /// succeed; then reads the keys it added to `lab.env` (`LOCAL_NB_SOCK`, `FABRIC_NIC`, …).
    pub(crate) fn start_local_ovn(&mut self, args: &[&str]) -> String {
        let out = run_ok(self.script("local-ovn.sh").args(args));
        self.env = parse_lab_env(&self.dir.join("lab.env"));
        out
    }

    /// How long `up.sh` took.
    pub(crate) fn up_duration(&self) -> Duration {
        self.up_duration
    }

    /// What up.sh printed (step log and summary).
    pub(crate) fn up_output(&self) -> &str {
        &self.up_output
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// A value from `$LAB_DIR/lab.env` (sockets, netns names, topology ids, addresses).
    pub(crate) fn env(&self, key: &str) -> &str {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("lab.env of {} has no {key}", self.dir.display()))
    }

    pub(crate) fn ns_chassis(&self) -> &str {
        self.env("NS_CHASSIS")
    }

    pub(crate) fn ns_tor(&self) -> &str {
        self.env("NS_TOR")
    }

    /// `ip -n <chassis netns> ARGS…`, which must succeed.
    pub(crate) fn ip_chassis(&self, args: &[&str]) -> String {
        run_ok(
            Command::new("ip")
                .arg("-n")
                .arg(self.ns_chassis())
                .args(args),
        )
    }

    /// `vtysh -c CMD` against the ToR's FRR.
    pub(crate) fn vtysh_tor(&self, cmd: &str) -> String {
        self.vtysh("VTY_TOR", "FRR_TOR_DIR", &["-c", cmd])
    }

    /// `vtysh -c CMD` against the chassis' FRR.
    pub(crate) fn vtysh_chassis(&self, cmd: &str) -> String {
        self.vtysh("VTY_CHASSIS", "FRR_CHASSIS_DIR", &["-c", cmd])
    }

    /// Applies a configuration file to the chassis' FRR the way the agent does (`vtysh -f`).
    pub(crate) fn vtysh_chassis_apply(&self, file: &Path) -> String {
        self.vtysh(
            "VTY_CHASSIS",
            "FRR_CHASSIS_DIR",
            &["-f", file.to_str().expect("utf-8 path")],
        )
    }

    /// A JSON `show` command against the ToR.
    /// Every prefix the ToR learned (IPv4 and IPv6 unicast), sorted.
    pub(crate) fn tor_prefixes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for cmd in ["show ip bgp json", "show bgp ipv6 unicast json"] {
            if let Some(routes) = self.tor_json(cmd)["routes"].as_object() {
                out.extend(routes.keys().cloned());
            }
        }
        out.sort();
        out
    }

    /// BGP UPDATE messages the ToR received from the chassis so far.
    pub(crate) fn updates_received_from_chassis(&self) -> u64 {
        let chassis_ip = self.env("CHASSIS_IP4").to_owned();
        let v = self.tor_json(&format!("show bgp neighbors {chassis_ip} json"));
        v[&chassis_ip]["messageStats"]["updatesRecv"]
            .as_u64()
            .expect("updatesRecv in show bgp neighbors json")
    }

    /// The routing table the agent allocated for br-ex in the lab's rt_tables file.
    pub(crate) fn br_ex_table(&self) -> String {
        let path = self.env("RT_TABLES");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        text.lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let n = f.next()?;
                (f.next()? == "br-ex").then(|| n.to_owned())
            })
            .next()
            .unwrap_or_else(|| panic!("no br-ex table in {path}:\n{text}"))
    }

    /// `ovs-vsctl` against the lab's OVS database; must succeed.
    pub(crate) fn vsctl(&self, args: &[&str]) -> String {
        run_ok(
            Command::new("ovs-vsctl")
                .arg(format!("--db=unix:{}", self.env("OVS_SOCK")))
                .arg("--timeout=10")
                .args(args),
        )
    }

    /// `ovs-ofctl` with the lab's OVS run directory; must succeed.
    pub(crate) fn ovs_ofctl(&self, args: &[&str]) -> String {
        run_ok(
            Command::new("ovs-ofctl")
                .env("OVS_RUNDIR", self.env("OVS_RUNDIR"))
                .args(args),
        )
    }

    /// `ovn-nbctl` against the lab's Northbound; must succeed.
    pub(crate) fn nbctl(&self, args: &[&str]) -> String {
        run_ok(
            Command::new("ovn-nbctl")
                .arg(format!("--db=unix:{}", self.env("NB_SOCK")))
                .args(args),
        )
    }

    /// `ovsdb-client ARGS… unix:<NB socket> …`: `ovsdb-client` takes the schema from the server,
    /// so it reads columns the host's `ovn-nbctl` (an older OVN) does not know.
    /// `args` are the command and its arguments, with `{NB}` standing for the NB remote.
    pub(crate) fn nb_client(&self, args: &[&str]) -> String {
        let remote = format!("unix:{}", self.env("NB_SOCK"));
        run_ok(
            Command::new("ovsdb-client").arg("--timeout=10").args(
                args.iter()
                    .map(|a| if *a == "{NB}" { remote.as_str() } else { a }),
            ),
        )
    }

    /// The columns of an NB table as the running NB server's schema defines them.
    pub(crate) fn nb_columns(&self, table: &str) -> Vec<String> {
        self.nb_client(&["list-columns", "{NB}", "OVN_Northbound", table])
            .lines()
            .skip(2) // the "Column  Type" heading and its underline
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    }

    pub(crate) fn tor_json(&self, cmd: &str) -> Value {
        let text = self.vtysh_tor(cmd);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("ToR `{cmd}` did not return JSON ({e}):\n{text}"))
    }

    fn vtysh(&self, socket_key: &str, dir_key: &str, args: &[&str]) -> String {
        run_ok(
            Command::new("vtysh")
                .arg("--vty_socket")
                .arg(self.env(socket_key))
                .arg("--config_dir")
                .arg(self.env(dir_key))
                .args(args),
        )
    }

    /// `ovn-sbctl --format=json --columns=COLUMNS list TABLE` as one map per row.
    pub(crate) fn sb_rows(&self, table: &str, columns: &[&str]) -> Vec<HashMap<String, Value>> {
        let text = run_ok(
            Command::new("ovn-sbctl")
                .arg(format!("--db=unix:{}", self.env("SB_SOCK")))
                .arg("--format=json")
                .arg(format!("--columns={}", columns.join(",")))
                .arg("list")
                .arg(table),
        );
        let table_json: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("ovn-sbctl list {table} is not JSON ({e}): {text}"));
        let headings: Vec<String> = table_json["headings"]
            .as_array()
            .unwrap_or_else(|| panic!("no headings in ovn-sbctl output: {text}"))
            .iter()
            .map(|h| h.as_str().unwrap_or_default().to_owned())
            .collect();
        table_json["data"]
            .as_array()
            .unwrap_or_else(|| panic!("no data in ovn-sbctl output: {text}"))
            .iter()
            .map(|row| {
                let cells = row.as_array().cloned().unwrap_or_default();
                headings.iter().cloned().zip(cells).collect()
            })
            .collect()
    }

    /// The lab's daemons: (pid file relative to LAB_DIR, pid) for every pid file up.sh left.
    pub(crate) fn daemon_pids(&self) -> Vec<(String, u32)> {
        let mut found = Vec::new();
        collect_pidfiles(&self.dir, &self.dir, &mut found);
        found.sort();
        found
    }

    /// Runs `scripts/lab/down.sh` and returns its output (the Drop guard then has nothing to do).
    pub(crate) fn down(&mut self) -> Output {
        self.down_done = true;
        self.script("down.sh")
            .output()
            .expect("cannot execute scripts/lab/down.sh")
    }

    fn script(&self, name: &str) -> Command {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scripts/lab")
            .join(name);
        let mut cmd = Command::new("bash");
        cmd.arg(path)
            .env("LAB_DIR", &self.dir)
            .env("LAB_NS_PREFIX", &self.ns_prefix);
        cmd
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // After down.sh (below, or the test's own `down`): the lab's ports are free again.
        let _release = PortPairLease(self.nb_tcp_port);
        if self.down_done {
            return;
        }
        let failure = match self.script("down.sh").output() {
            Ok(out) if out.status.success() => return,
            Ok(out) => format!(
                "lab teardown (down.sh) failed for {}: {}\n{}",
                self.dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => format!("cannot run down.sh for {}: {e}", self.dir.display()),
        };
        // A lab left behind (daemons, namespaces) is a failure of the test that made it, not
        // a line in its output; while already unwinding, the first failure is the one to see.
        if std::thread::panicking() {
            eprintln!("{failure}");
        } else {
            panic!("{failure}");
        }
    }
}

/// True if `p` is among `prefixes` (as [`Lab::tor_prefixes`] returns them).
pub(crate) fn has(prefixes: &[String], p: &str) -> bool {
    prefixes.iter().any(|x| x == p)
}

/// Polls `probe` until it returns `Ok`, or panics after `timeout` with the last `Err` message.
pub(crate) fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match probe() {
            Ok(value) => return value,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last state: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// True if `pid` is a live process whose command line mentions `marker` (so a recycled pid of
/// an unrelated process does not count).
pub(crate) fn process_alive(pid: u32, marker: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
        .unwrap_or(false)
}

/// Names of the network namespaces that exist now.
pub(crate) fn netns_names() -> Vec<String> {
    run_ok(Command::new("ip").args(["netns", "list"]))
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// Runs a command that must succeed; returns its stdout.
pub(crate) fn run_ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot execute {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Port pairs of this process' labs that exist (from before up.sh until after down.sh). A pair that
/// is still free on 127.0.0.1 may already be promised to a lab whose up.sh has not bound it yet:
/// two tests starting labs at the same moment must not both take it.
static PORT_PAIRS_TAKEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Gives a pair back to [`PORT_PAIRS_TAKEN`] when dropped.
struct PortPairLease(u16);

impl Drop for PortPairLease {
    fn drop(&mut self) {
        PORT_PAIRS_TAKEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.0);
    }
}

/// The first pair of ports (p, p+1) in [`TEST_TCP_PORTS`] both free on 127.0.0.1 right now and not
/// taken by another lab of this process (up.sh refuses a taken port); taken until the lab drops.
fn free_port_pair() -> u16 {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    let mut taken = PORT_PAIRS_TAKEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let pair = TEST_TCP_PORTS
        .step_by(2)
        .find(|&p| !taken.contains(&p) && free(p) && free(p + 1))
        .unwrap_or_else(|| panic!("no free pair of TCP ports in {TEST_TCP_PORTS:?} on 127.0.0.1"));
    taken.insert(pair);
    pair
}

fn parse_lab_env(path: &Path) -> HashMap<String, String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn collect_pidfiles(root: &Path, dir: &Path, found: &mut Vec<(String, u32)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_pidfiles(root, &path, found);
        } else if path.extension().is_some_and(|e| e == "pid") {
            let pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            if let Some(pid) = pid {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                found.push((rel.display().to_string(), pid));
            }
        }
    }
}

/// Waits until the ToR's prefixes satisfy `pred`; returns them.
pub(crate) fn wait_tor(lab: &Lab, what: &str, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
    wait_for(what, CONVERGENCE_TIMEOUT, || {
        let p = lab.tor_prefixes();
        if pred(&p) {
            Ok(p)
        } else {
            Err(format!("ToR has {p:?}"))
        }
    })
}

impl Lab {
    /// The chassis a Southbound Port_Binding is bound to, by name; `None` when unbound.
    pub(crate) fn sb_bound_chassis(&self, logical_port: &str) -> Option<String> {
        let chassis_uuid = self
            .sb_rows("Port_Binding", &["logical_port", "chassis"])
            .into_iter()
            .find(|r| r["logical_port"].as_str() == Some(logical_port))
            .unwrap_or_else(|| panic!("no SB Port_Binding {logical_port}"))["chassis"]
            .clone();
        // A bound row holds ["uuid", "<uuid>"]; an unbound one the empty set ["set", []].
        let uuid = chassis_uuid[1].as_str()?.to_owned();
        self.sb_rows("Chassis", &["_uuid", "name"])
            .into_iter()
            .find(|r| r["_uuid"][1].as_str() == Some(uuid.as_str()))
            .map(|r| r["name"].as_str().unwrap_or_default().to_owned())
    }

    /// Waits until the Southbound binds `logical_port` to `chassis` (by name).
    pub(crate) fn wait_sb_bound(&self, what: &str, logical_port: &str, chassis: &str) {
        wait_for(what, CONVERGENCE_TIMEOUT, || {
            match self.sb_bound_chassis(logical_port) {
                Some(c) if c == chassis => Ok(()),
                other => Err(format!("{logical_port} bound to {other:?}")),
            }
        });
    }

    /// Whether the NB server's schema has `Logical_Router_Port.status` (OVN >= 23.09).
    pub(crate) fn nb_has_lrp_status(&self) -> bool {
        self.nb_columns("Logical_Router_Port")
            .iter()
            .any(|c| c == "status")
    }

    /// `status:hosting-chassis` of a Logical_Router_Port (northd's answer to "where is this
    /// gateway port active"; OVN >= 23.09), read with `ovsdb-client`, which takes the schema from
    /// the server; `None` while it has none.
    pub(crate) fn nb_hosting_chassis(&self, lrp: &str) -> Option<String> {
        let select = serde_json::json!([
            "OVN_Northbound",
            {"op": "select", "table": "Logical_Router_Port",
             "where": [["name", "==", lrp]], "columns": ["status"]}
        ])
        .to_string();
        let text = self.nb_client(&["transact", "{NB}", &select]);
        let reply: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("ovsdb-client transact is not JSON ({e}): {text}"));
        let status = &reply[0]["rows"][0]["status"];
        // An OVSDB map: ["map", [[key, value], ...]].
        status[1]
            .as_array()
            .unwrap_or_else(|| panic!("no {lrp} or no status map in {text}"))
            .iter()
            .find(|kv| kv[0].as_str() == Some("hosting-chassis"))
            .and_then(|kv| kv[1].as_str().map(str::to_owned))
    }

    /// The BFD sessions of chassis 1 (`second: false`) or chassis 2, from `ovs-appctl bfd/show`
    /// of its ovs-vswitchd: (tunnel interface, local session state) each.
    pub(crate) fn bfd_sessions(&self, second: bool) -> Vec<(String, String)> {
        let rundir = self.env(if second { "OVS2_RUNDIR" } else { "OVS_RUNDIR" });
        let text = run_ok(
            Command::new("ovs-appctl")
                .arg("-t")
                .arg(format!("{rundir}/ovs-vswitchd.ctl"))
                .arg("bfd/show"),
        );
        let mut sessions = Vec::new();
        let mut interface = None;
        for line in text.lines() {
            if let Some(name) = line
                .strip_prefix("---- ")
                .and_then(|l| l.strip_suffix(" ----"))
            {
                interface = Some(name.to_owned());
            } else if let Some(state) = line.trim().strip_prefix("Local Session State: ")
                && let Some(name) = interface.take()
            {
                sessions.push((name, state.to_owned()));
            }
        }
        sessions
    }

    /// Waits until both chassis have a BFD session over their geneve tunnel and it is up on
    /// both sides (OVN turns BFD on between the gateway chassis of one port).
    pub(crate) fn wait_bfd_up_between_the_chassis(&self) {
        wait_for("BFD up on both chassis", CONVERGENCE_TIMEOUT, || {
            let (one, two) = (self.bfd_sessions(false), self.bfd_sessions(true));
            let up = |s: &[(String, String)]| !s.is_empty() && s.iter().all(|(_, st)| st == "up");
            if up(&one) && up(&two) {
                Ok(())
            } else {
                Err(format!("chassis 1: {one:?}, chassis 2: {two:?}"))
            }
        });
    }
}

/// With the agent on chassis 1 of a `LAB_CHASSIS2=1` lab (a geneve tunnel between the chassis,
/// so BFD runs between them once both are gateway chassis of the router's gateway port), the
/// gateway is handed over to chassis 2 and back, twice:
///
/// 1. by priority: chassis 2 gets 20 (chassis 1 has 1); chassis 2's ovn-controller claims
///    `cr-lrp-<gw port>` (SB `Port_Binding.chassis` = chassis 2, and on OVN >= 23.09 the NB
///    LRP's `status:hosting-chassis`), which it does only with BFD up to chassis 1. The gateway
///    IPs and the centralized FIP leave the ToR and chassis 1's bgp-nic, the provider VM (bound
///    on chassis 1, not behind the router) stays. Chassis 1 then gets 30: it claims it back and
///    everything is exposed again.
/// 2. by failure: chassis 1's ovn-controller stops the way `systemctl stop ovn-controller` does
///    (`restart.sh --exit`: it removes its chassis from SB); chassis 2, the only gateway chassis
///    left, claims the port and chassis 1's agent withdraws the gateway (its VMs go too: their
///    bindings went with the chassis). ovn-controller starts again, chassis 1 registers anew,
///    takes the port back (priority 30 > 20) and everything is exposed again.
///
/// (A partition does not hand over with two gateway chassis: OVN lets a chassis that lost every
/// BFD session claim nothing, unless it still reaches a chassis hosting ports behind the router;
/// here only chassis 1 does.) `behind_gateway`: further prefixes the test exposed through the
/// router (e.g. its load balancers' VIPs), which must follow the gateway too. `check_agent` runs
/// after each phase.
pub(crate) fn gateway_hands_over_and_back(
    lab: &Lab,
    behind_gateway: &[String],
    check_agent: &mut dyn FnMut(),
) {
    let vm4 = format!("{}/32", lab.env("VM_PROVIDER_IP4"));
    let vm6 = format!("{}/128", lab.env("VM_PROVIDER_IP6"));
    let gw4 = format!("{}/32", lab.env("GW_IP4"));
    let gw6 = format!("{}/128", lab.env("GW_IP6"));
    let fip = format!("{}/32", lab.env("FIP_IP4"));
    let mut gateway_routes = vec![&gw4, &gw6, &fip];
    gateway_routes.extend(behind_gateway);
    let lrp = format!("lrp-{}", lab.env("GW_PORT_ID"));
    let cr_lrp = format!("cr-{lrp}");
    let chassis1 = lab.env("CHASSIS_NAME").to_owned();
    let chassis2 = lab.env("CHASSIS2_NAME").to_owned();
    let lrp_status = lab.nb_has_lrp_status();
    let hosted_on = |chassis: &str| {
        lab.wait_sb_bound(
            &format!("{cr_lrp} bound to {chassis} in SB"),
            &cr_lrp,
            chassis,
        );
        if lrp_status {
            wait_for(
                &format!("{lrp} status:hosting-chassis={chassis} in NB"),
                CONVERGENCE_TIMEOUT,
                || match lab.nb_hosting_chassis(&lrp) {
                    Some(c) if c == chassis => Ok(()),
                    other => Err(format!("hosting-chassis {other:?}")),
                },
            );
        }
    };
    let withdrawn_from_chassis_1 = |keep_vm: bool| {
        wait_tor(lab, "gateway and FIP withdrawn", |p| {
            gateway_routes.iter().all(|x| !has(p, x))
                && (!keep_vm || (has(p, &vm4) && has(p, &vm6)))
        });
        let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
        for a in &gateway_routes {
            assert!(
                !addrs.contains(a.as_str()),
                "{a} still on chassis 1's bgp-nic:\n{addrs}"
            );
        }
        if keep_vm {
            assert!(addrs.contains(vm4.as_str()), "{vm4} left bgp-nic:\n{addrs}");
        }
    };
    let exposed_on_chassis_1 = || {
        wait_tor(lab, "gateway, FIP and provider VM at the ToR", |p| {
            gateway_routes.iter().all(|x| has(p, x)) && has(p, &vm4) && has(p, &vm6)
        });
        let addrs = lab.ip_chassis(&["addr", "show", "dev", "bgp-nic"]);
        for a in &gateway_routes {
            assert!(addrs.contains(a.as_str()), "{a} not on bgp-nic:\n{addrs}");
        }
    };

    exposed_on_chassis_1();
    assert_eq!(
        lab.sb_bound_chassis(&cr_lrp).as_deref(),
        Some(chassis1.as_str())
    );
    check_agent();

    // Chassis 2 claims the port after `act`, chassis 1's agent withdraws the gateway.
    let hand_over = |what: &str, act: &dyn Fn(), keep_vm: bool| {
        let started = Instant::now();
        act();
        hosted_on(&chassis2);
        eprintln!(
            "{cr_lrp} claimed by {chassis2} {:.2} s after {what}",
            started.elapsed().as_secs_f64()
        );
        withdrawn_from_chassis_1(keep_vm);
        eprintln!(
            "withdrawn at the ToR {:.2} s after {what}",
            started.elapsed().as_secs_f64()
        );
    };
    // Chassis 1 claims the port back after `act`, its agent exposes the gateway again.
    let take_back = |what: &str, act: &dyn Fn()| {
        let started = Instant::now();
        act();
        hosted_on(&chassis1);
        exposed_on_chassis_1();
        eprintln!(
            "claimed back by {chassis1} and re-exposed at the ToR {:.2} s after {what}",
            started.elapsed().as_secs_f64()
        );
    };

    // 1. By priority (chassis 2 claims only with BFD up to chassis 1).
    hand_over(
        "chassis 2's priority went up",
        &|| drop(lab.nbctl(&["lrp-set-gateway-chassis", &lrp, &chassis2, "20"])),
        true,
    );
    lab.wait_bfd_up_between_the_chassis();
    check_agent();
    take_back("chassis 1's priority went up", &|| {
        drop(lab.nbctl(&["lrp-set-gateway-chassis", &lrp, &chassis1, "30"]))
    });
    check_agent();

    // 2. By failure: chassis 1's ovn-controller leaves SB (its VM bindings go with it).
    hand_over(
        "chassis 1's ovn-controller exited",
        &|| drop(lab.restart(&["--exit", "--down", "ovn-controller"])),
        false,
    );
    check_agent();
    take_back("chassis 1's ovn-controller started", &|| {
        drop(lab.restart(&["--up", "ovn-controller"]))
    });
    check_agent();
}

/// A load balancer of the Octavia OVN provider on the lab's router, written as
/// ovn-octavia-provider and Neutron's OVN driver write it (interactions.md §5).
pub(crate) struct OctaviaLb<'a> {
    /// The Octavia load balancer id: `Load_Balancer.name`.
    pub(crate) id: &'a str,
    /// The VIP's Neutron port (`ovn-lb-vip-<lb id>`): `neutron:vip_port_id`, its LSP's name.
    pub(crate) vip_port_id: &'a str,
    /// The network of the VIP (switch `neutron-<id>`).
    pub(crate) network_id: &'a str,
    /// The VIP with the prefix length of its subnet, e.g. `10.0.0.30/24`.
    pub(crate) vip_cidr: &'a str,
    /// A floating IP associated with the VIP port (`neutron:vip_fip`), if any.
    pub(crate) vip_fip: Option<&'a str>,
    /// The pool's one member (`ip:port`).
    pub(crate) member: String,
}

impl OctaviaLb<'_> {
    fn vip(&self) -> &str {
        self.vip_cidr
            .split_once('/')
            .map_or(self.vip_cidr, |(ip, _)| ip)
    }
}

/// The TCP port of the lab's Octavia listeners.
const LB_LISTENER_PORT: u16 = 80;

/// A quoted OVSDB map entry for ovn-nbctl: `COLUMN:"KEY"="VALUE"` (keys with `:` need quotes).
fn map_entry(column: &str, key: &str, value: &str) -> String {
    format!(
        "{column}:\"{key}\"=\"{}\"",
        value.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

/// `external_ids:"KEY"="VALUE"` for each pair.
fn external_ids(pairs: &[(&str, &str)]) -> Vec<String> {
    pairs
        .iter()
        .map(|(k, v)| map_entry("external_ids", k, v))
        .collect()
}

/// The commands of one ovn-nbctl transaction (`-- CMD ARGS… -- CMD ARGS…`): what Neutron writes
/// in one OVSDB transaction is written in one here too.
#[derive(Default)]
struct NbTxn(Vec<String>);

impl NbTxn {
    fn cmd(&mut self, words: &[&str], extra: Vec<String>) -> &mut Self {
        self.0.push("--".to_owned());
        self.0.extend(words.iter().map(|w| (*w).to_owned()));
        self.0.extend(extra);
        self
    }

    /// `add TABLE ROW COLUMN VALUE`, e.g. a new row's `@id` to a router's `load_balancer`.
    fn add(&mut self, table: &str, row: &str, column: &str, value: &str) -> &mut Self {
        self.cmd(&["add", table, row, column, value], Vec::new())
    }

    fn run(&self, lab: &Lab) -> String {
        lab.nbctl(&self.0.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

impl Lab {
    /// `neutron-<ROUTER_ID>`: the lab's router, as Neutron names its Logical_Router.
    pub(crate) fn router_name(&self) -> String {
        format!("neutron-{}", self.env("ROUTER_ID"))
    }

    /// Creates an Octavia OVN-provider load balancer on the lab's router, as the provider and
    /// Neutron write it: the VIP port (Neutron writes an `ovn-lb-vip-*` port with no
    /// `addresses`; nothing ever binds it), the `Load_Balancer` (`name` = LB id, `lr_ref`,
    /// `ls_refs`, `neutron:vip`, `neutron:vip_port_id`, listener and pool keys) attached to the
    /// router and the VIP's switch; with a floating IP also Neutron's NAT row for the VIP port
    /// (no `external_mac`: the port is unbound) and what Neutron adds to the LB for it (the FIP
    /// VIP in `vips`, `neutron:vip_fip`).
    pub(crate) fn add_octavia_lb(&self, lb: &OctaviaLb) {
        let router = self.router_name();
        let switch = format!("neutron-{}", lb.network_id);
        let vip = lb.vip();
        let short = &lb.id[..8];
        let port_name = format!("ovn-lb-vip-{}", lb.id);
        let mut port_ids = vec![
            ("neutron:cidrs", lb.vip_cidr),
            ("neutron:device_owner", ""),
            ("neutron:network_name", switch.as_str()),
            ("neutron:port_name", port_name.as_str()),
            ("neutron:revision_number", "2"),
        ];
        let listener = (
            format!("listener_{short}-listener"),
            format!("{LB_LISTENER_PORT}:pool_{short}-pool"),
        );
        let pool = (
            format!("pool_{short}-pool"),
            format!("member_{short}-member_{}_{}", lb.member, lb.network_id),
        );
        let ls_refs = format!("{{\"{switch}\": 1}}");
        let mut lb_ids = vec![
            ("lr_ref", router.as_str()),
            ("ls_refs", ls_refs.as_str()),
            ("neutron:vip", vip),
            ("neutron:vip_port_id", lb.vip_port_id),
            ("enabled", "True"),
            (listener.0.as_str(), listener.1.as_str()),
            (pool.0.as_str(), pool.1.as_str()),
        ];
        let mut vips = vec![map_entry(
            "vips",
            &format!("{vip}:{LB_LISTENER_PORT}"),
            &lb.member,
        )];
        if let Some(fip) = lb.vip_fip {
            port_ids.push(("neutron:port_fip", fip));
            lb_ids.push(("neutron:vip_fip", fip));
            vips.push(map_entry(
                "vips",
                &format!("{fip}:{LB_LISTENER_PORT}"),
                &lb.member,
            ));
        }
        vips.extend(external_ids(&lb_ids));
        let mut txn = NbTxn::default();
        txn.cmd(&["lsp-add", &switch, lb.vip_port_id], Vec::new())
            .cmd(
                &["set", "Logical_Switch_Port", lb.vip_port_id],
                external_ids(&port_ids),
            )
            .cmd(
                &[
                    "--id=@lb",
                    "create",
                    "Load_Balancer",
                    &format!("name={}", lb.id),
                    "protocol=tcp",
                ],
                vips,
            )
            .add("Logical_Router", &router, "load_balancer", "@lb")
            .add("Logical_Switch", &switch, "load_balancer", "@lb");
        if let Some(fip) = lb.vip_fip {
            let gw_lrp = self.nbctl(&[
                "get",
                "Logical_Router_Port",
                &format!("lrp-{}", self.env("GW_PORT_ID")),
                "_uuid",
            ]);
            txn.cmd(
                &[
                    "--id=@fip",
                    "create",
                    "NAT",
                    "type=dnat_and_snat",
                    &format!("external_ip={fip}"),
                    &format!("logical_ip={vip}"),
                    &format!("logical_port={}", lb.vip_port_id),
                    &format!("gateway_port={}", gw_lrp.trim()),
                ],
                external_ids(&[
                    ("neutron:fip_port_id", lb.vip_port_id),
                    ("neutron:fip_network_id", self.env("NET_PUBLIC_ID")),
                    ("neutron:router_name", &router),
                ]),
            )
            .add("Logical_Router", &router, "nat", "@fip");
        }
        txn.run(self);
    }

    /// Deletes an Octavia load balancer as the provider does (the `Load_Balancer` row; the
    /// router's and switch's weak references go with it). The VIP port and its floating IP are
    /// Neutron's and stay until [`Lab::delete_vip_port`].
    pub(crate) fn delete_octavia_lb(&self, lb: &OctaviaLb) {
        self.nbctl(&["lb-del", lb.id]);
    }

    /// Deletes the VIP port of an Octavia load balancer as Neutron does: its floating IP's NAT
    /// row, then the port.
    pub(crate) fn delete_vip_port(&self, lb: &OctaviaLb) {
        if let Some(fip) = lb.vip_fip {
            self.nbctl(&["lr-nat-del", &self.router_name(), "dnat_and_snat", fip]);
        }
        self.nbctl(&["lsp-del", lb.vip_port_id]);
    }

    /// Creates the load balancer Neutron's OVN driver writes for the TCP port forwardings of a
    /// floating IP: `pf-floatingip-<fip id>-tcp`, one `vips` entry per forwarding (`fip:external
    /// port` → `internal ip:internal port`), `neutron:router_name` = `neutron-<router id>`,
    /// attached to the router. Returns the LB's name.
    pub(crate) fn add_port_forwarding_lb(
        &self,
        fip_id: &str,
        forwardings: &[(&str, &str)],
    ) -> String {
        let name = format!("pf-floatingip-{fip_id}-tcp");
        let router = self.router_name();
        let mut columns: Vec<String> = forwardings
            .iter()
            .map(|(external, internal)| map_entry("vips", external, internal))
            .collect();
        columns.extend(external_ids(&[
            ("neutron:device_owner", "port_forwarding_plugin"),
            ("neutron:fip_id", fip_id),
            ("neutron:router_name", &router),
        ]));
        NbTxn::default()
            .cmd(
                &[
                    "--id=@lb",
                    "create",
                    "Load_Balancer",
                    &format!("name={name}"),
                    "protocol=tcp",
                ],
                columns,
            )
            .add("Logical_Router", &router, "load_balancer", "@lb")
            .run(self);
        name
    }

    /// Deletes the lab's router as Neutron does when the router goes: its router-interface and
    /// gateway ports (LSPs), then the `Logical_Router` (its LRPs, NATs and gateway chassis go
    /// with it; load balancers only lose the reference).
    pub(crate) fn delete_router(&self) {
        NbTxn::default()
            .cmd(&["lsp-del", self.env("RI_PORT_ID")], Vec::new())
            .cmd(&["lsp-del", self.env("GW_PORT_ID")], Vec::new())
            .cmd(&["lr-del", &self.router_name()], Vec::new())
            .run(self);
    }
}

// ---------------------------------------------------------------------------------------------
// EVPN (a lab started with `LAB_EVPN=1`; the ToR's VRFs need real ones: `LAB_KERNEL=full`).

/// One EVPN type-5 (IP prefix) route in the ToR's `l2vpn evpn` table: its best path, as
/// `show bgp l2vpn evpn route type prefix json` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Type5Route {
    /// Route distinguisher, e.g. `100.65.0.1:1001` (the agent's `rd <vtep>:<vni>`).
    pub(crate) rd: String,
    /// The IP prefix, e.g. `10.0.0.10/32`, `0.0.0.0/0`, `2001:db8::/64`.
    pub(crate) prefix: String,
    /// The VTEP the route points at (for the chassis' routes its VXLAN local address).
    pub(crate) nexthop: String,
    /// Route targets without the `RT:` tag, e.g. `64999:1001`, in the order FRR lists them.
    pub(crate) route_targets: Vec<String>,
    /// The router MAC extended community (the sender's SVI MAC, symmetric IRB), if any.
    pub(crate) router_mac: Option<String>,
    /// The BGP peer it came from (`(unspec)` for the ToR's own routes).
    pub(crate) peer: String,
}

/// Every type-5 route of a `show bgp l2vpn evpn route type prefix json` reply, best path of each
/// (FRR 8.4 shape: `{ "<rd>": { "rd": .., "[5]:[tag]:[len]:[ip]": { "paths": [[{..}]] } }, .. }`).
pub(crate) fn parse_type5_routes(reply: &Value) -> Vec<Type5Route> {
    let mut routes = Vec::new();
    let Some(by_rd) = reply.as_object() else {
        return routes;
    };
    for (rd, entries) in by_rd {
        // Besides the RDs the reply carries counters (numPrefix, numPaths): only objects with "rd".
        let Some(entries) = entries.as_object().filter(|e| e.contains_key("rd")) else {
            continue;
        };
        for (key, route) in entries {
            if !key.starts_with("[5]:") {
                continue;
            }
            let paths = route["paths"].as_array().into_iter().flatten();
            // Each element is a list of paths for the prefix; the best one is the route.
            let best = paths
                .flat_map(|p| p.as_array().into_iter().flatten())
                .find(|p| p["bestpath"].as_bool() == Some(true));
            let Some(best) = best else { continue };
            let communities = best["extendedCommunity"]["string"]
                .as_str()
                .unwrap_or_default();
            routes.push(Type5Route {
                rd: rd.clone(),
                prefix: format!(
                    "{}/{}",
                    best["ip"].as_str().unwrap_or_default(),
                    best["ipLen"].as_u64().unwrap_or_default()
                ),
                nexthop: best["nexthops"][0]["ip"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                route_targets: communities
                    .split_whitespace()
                    .filter_map(|c| c.strip_prefix("RT:"))
                    .map(str::to_owned)
                    .collect(),
                router_mac: communities
                    .split_whitespace()
                    .find_map(|c| c.strip_prefix("Rmac:"))
                    .map(str::to_owned),
                peer: best["peerId"].as_str().unwrap_or_default().to_owned(),
            });
        }
    }
    routes.sort_by(|a, b| (&a.rd, &a.prefix).cmp(&(&b.rd, &b.prefix)));
    routes
}

impl Lab {
    /// `ip -n <ToR netns> ARGS…`, which must succeed.
    pub(crate) fn ip_tor(&self, args: &[&str]) -> String {
        run_ok(Command::new("ip").arg("-n").arg(self.ns_tor()).args(args))
    }

    /// Gives the ToR a VRF for `vni` (`scripts/lab/tor-evpn.sh add VNI ARGS…`; e.g.
    /// `["--rt", "64999:1001", "--address", "192.168.200.1/32"]`; without an RT it imports and
    /// exports `<chassis AS>:<vni>`, what FRR derives for a VRF stanza without RTs). Returns once
    /// the ToR's L3VNI is up.
    pub(crate) fn tor_add_evpn_vrf(&self, vni: u32, args: &[&str]) -> String {
        run_ok(
            self.script("tor-evpn.sh")
                .args(["add", &vni.to_string()])
                .args(args),
        )
    }

    /// Takes the ToR's VRF for `vni` away again (`tor-evpn.sh del VNI`).
    pub(crate) fn tor_del_evpn_vrf(&self, vni: u32) -> String {
        run_ok(self.script("tor-evpn.sh").args(["del", &vni.to_string()]))
    }

    /// The ToR's EVPN type-5 routes (its own and those learned from the chassis), sorted by RD
    /// and prefix.
    pub(crate) fn tor_type5_routes(&self) -> Vec<Type5Route> {
        parse_type5_routes(&self.tor_json("show bgp l2vpn evpn route type prefix json"))
    }

    /// The prefixes in the BGP table of the ToR's `vrf-<vni>` (IPv4 and IPv6): what it imported
    /// from the type-5 routes whose RTs it imports, plus its own connected ones.
    pub(crate) fn tor_vrf_prefixes(&self, vni: u32) -> Vec<String> {
        let mut out = Vec::new();
        for af in ["ipv4", "ipv6"] {
            let reply = self.tor_json(&format!("show bgp vrf vrf-{vni} {af} unicast json"));
            if let Some(routes) = reply["routes"].as_object() {
                out.extend(routes.keys().cloned());
            }
        }
        out.sort();
        out
    }
}
