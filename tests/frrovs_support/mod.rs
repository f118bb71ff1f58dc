//! Fixtures for the FRR and OVS capability tests: network namespaces, FRR daemons and an OVS
//! (ovsdb-server + userspace ovs-vswitchd), each owned by the test and torn down on drop, even when
//! the test panics. Names use the `fot` prefix plus pid and a counter; every daemon is killed by
//! the pid this fixture started.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A short unique tag for this test: `fot<pid%10000><n>` (≤ 9 characters).
pub(crate) fn unique_tag() -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("fot{}{}", std::process::id() % 10000, n)
}

/// Fails the test with a clear message when a required tool is missing.
pub(crate) fn require(paths: &[&str]) {
    for p in paths {
        assert!(
            Path::new(p).exists(),
            "required tool {p} is missing: install the Debian packages frr, openvswitch-switch and iproute2"
        );
    }
    assert!(
        // SAFETY: geteuid has no preconditions.
        {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
        },
        "these tests need root (network namespaces, FRR and OVS daemons)"
    );
}

/// Runs a command, panicking with its output on failure.
pub(crate) fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `f` until it returns `Some` or the deadline passes.
pub(crate) fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A network namespace deleted on drop.
pub(crate) struct Netns {
    pub name: String,
}

impl Netns {
    pub(crate) fn new(name: String) -> Self {
        assert!(name.len() <= 15, "netns name {name} too long");
        run("ip", &["netns", "add", &name]);
        run("ip", &["-n", &name, "link", "set", "lo", "up"]);
        Self { name }
    }

    pub(crate) fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        run("ip", &full)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A daemon process killed (SIGKILL, by pid) and reaped on drop.
pub(crate) struct Daemon {
    pub name: String,
    pub child: Child,
}

impl Daemon {
    pub(crate) fn spawn(name: &str, cmd: &mut Command) -> Self {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Self {
            name: name.to_owned(),
            child,
        }
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited early: {status}", self.name);
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Writes an executable script. The write happens in a child process: a file this (heavily
/// multi-threaded) test process held open for writing could leak into a sibling test's fork and
/// make exec fail with ETXTBSY.
pub(crate) fn write_executable(path: &Path, content: &str) {
    use std::io::Write;
    let mut child = Command::new("/bin/sh")
        .arg("-c")
        .arg("cat > \"$0\" && chmod 755 \"$0\"")
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("cannot run /bin/sh");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(content.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "writing {}",
        path.display()
    );
}

/// A temporary directory readable by other users (FRR drops to user `frr`).
pub(crate) fn shared_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("fot-").tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

// ---------------------------------------------------------------------------------------------
// FRR

pub(crate) const ZEBRA: &str = "/usr/lib/frr/zebra";
pub(crate) const BGPD: &str = "/usr/lib/frr/bgpd";
pub(crate) const VTYSH: &str = "/usr/bin/vtysh";

/// zebra + bgpd with their own config, pid files, zserv socket and vty socket directory, running
/// inside a network namespace.
pub(crate) struct FrrNode {
    pub netns_name: String,
    pub dir: PathBuf,
    daemons: Vec<Daemon>,
}

impl FrrNode {
    /// `dir` must exist; it is made owned by `frr` and holds everything of this instance.
    pub(crate) fn start(netns: &Netns, dir: PathBuf, config: &str) -> Self {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("frr.conf"), config).unwrap();
        run("chown", &["-R", "frr:frr", dir.to_str().unwrap()]);
        let mut node = Self {
            netns_name: netns.name.clone(),
            dir,
            daemons: Vec::new(),
        };
        node.spawn_daemons();
        node
    }

    fn spawn_daemons(&mut self) {
        for daemon in [ZEBRA, BGPD] {
            let name = Path::new(daemon).file_name().unwrap().to_str().unwrap();
            let d = |f: &str| self.dir.join(f).to_str().unwrap().to_owned();
            // Stale sockets of a killed instance must not count as "up" below.
            let _ = std::fs::remove_file(self.dir.join(format!("{name}.vty")));
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &self.netns_name, daemon])
                .args(["-F", "traditional", "-A", "127.0.0.1", "-P", "0"])
                .args(["-u", "frr", "-g", "frr"])
                .args(["-i", &d(&format!("{name}.pid"))])
                .args(["--vty_socket", &d("")])
                .args(["-f", &d("frr.conf")])
                .args(["-z", &d("zserv.api")])
                .arg("--log")
                .arg(format!("file:{}", d(&format!("{name}.log"))));
            if daemon == BGPD {
                // bgpd in its own netns listens on the standard port there.
                cmd.args(["-p", "179"]);
            }
            self.daemons.push(Daemon::spawn(name, &mut cmd));
            // zebra must be up before bgpd connects to zserv.
            let sock = self.dir.join(format!("{name}.vty"));
            wait_for(
                &format!("{name} vty socket"),
                Duration::from_secs(15),
                || sock.exists().then_some(()),
            );
        }
    }

    /// SIGKILL both daemons (FRR "crash") without restarting them.
    pub(crate) fn kill(&mut self) {
        for d in &mut self.daemons {
            d.kill();
        }
        self.daemons.clear();
    }

    /// Kill and start again from the original config file (the agent's config is gone).
    pub(crate) fn restart(&mut self) {
        self.kill();
        self.spawn_daemons();
    }

    pub(crate) fn vtysh_cmd(&self, command: &str) -> String {
        run(
            VTYSH,
            &["--vty_socket", self.dir.to_str().unwrap(), "-c", command],
        )
    }

    pub(crate) fn running_config(&self) -> String {
        self.vtysh_cmd("show running-config")
    }

    /// `show running-config`, or `None` while vtysh cannot get it (for polling).
    pub(crate) fn try_running_config(&self) -> Option<String> {
        let out = Command::new(VTYSH)
            .args([
                "--vty_socket",
                self.dir.to_str()?,
                "-c",
                "show running-config",
            ])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

// ---------------------------------------------------------------------------------------------
// OVS

pub(crate) const OVSDB_SERVER: &str = "/usr/sbin/ovsdb-server";
pub(crate) const OVS_VSWITCHD: &str = "/usr/sbin/ovs-vswitchd";
pub(crate) const OVS_VSCTL: &str = "/usr/bin/ovs-vsctl";
pub(crate) const OVS_OFCTL: &str = "/usr/bin/ovs-ofctl";
pub(crate) const OVSDB_TOOL: &str = "/usr/bin/ovsdb-tool";
pub(crate) const VSWITCH_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// ovsdb-server + ovs-vswitchd (userspace datapath) with all state in a temp dir; vswitchd runs
/// in its own network namespace so its bridges' tap devices never appear on the host.
pub(crate) struct OvsNode {
    // Drop order = declaration order: daemons first, then their netns, then their files.
    vswitchd: Option<Daemon>,
    ovsdb: Daemon,
    pub netns: Netns,
    pub dir: tempfile::TempDir,
}

impl OvsNode {
    pub(crate) fn start(tag: &str) -> Self {
        require(&[
            OVSDB_SERVER,
            OVS_VSWITCHD,
            OVS_VSCTL,
            OVS_OFCTL,
            OVSDB_TOOL,
            VSWITCH_SCHEMA,
        ]);
        let dir = tempfile::Builder::new()
            .prefix("fot-ovs-")
            .tempdir()
            .unwrap();
        let netns = Netns::new(format!("{tag}-o"));
        let db = dir.path().join("conf.db");
        run(
            OVSDB_TOOL,
            &["create", db.to_str().unwrap(), VSWITCH_SCHEMA],
        );
        let p = |f: &str| dir.path().join(f).to_str().unwrap().to_owned();
        let mut cmd = Command::new(OVSDB_SERVER);
        cmd.arg(&db)
            .arg(format!("--remote=punix:{}", p("db.sock")))
            .arg(format!("--pidfile={}", p("ovsdb-server.pid")))
            .arg(format!("--unixctl={}", p("ovsdb-server.ctl")))
            .arg(format!("--log-file={}", p("ovsdb-server.log")));
        Self::env(&mut cmd, dir.path());
        let ovsdb = Daemon::spawn("ovsdb-server", &mut cmd);
        let sock = dir.path().join("db.sock");
        wait_for("ovsdb-server socket", Duration::from_secs(10), || {
            sock.exists().then_some(())
        });
        let mut node = Self {
            vswitchd: None,
            ovsdb,
            netns,
            dir,
        };
        node.vsctl(&["--no-wait", "init"]);
        node.start_vswitchd();
        node
    }

    fn env(cmd: &mut Command, dir: &Path) {
        for var in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            cmd.env(var, dir);
        }
    }

    pub(crate) fn rundir(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn start_vswitchd(&mut self) {
        let p = |f: &str| self.dir.path().join(f).to_str().unwrap().to_owned();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns.name, OVS_VSWITCHD])
            .arg(format!("unix:{}", p("db.sock")))
            .arg(format!("--pidfile={}", p("ovs-vswitchd.pid")))
            .arg(format!("--unixctl={}", p("ovs-vswitchd.ctl")))
            .arg(format!("--log-file={}", p("ovs-vswitchd.log")));
        Self::env(&mut cmd, self.dir.path());
        let ctl = self.dir.path().join("ovs-vswitchd.ctl");
        let _ = std::fs::remove_file(&ctl);
        self.vswitchd = Some(Daemon::spawn("ovs-vswitchd", &mut cmd));
        wait_for(
            "ovs-vswitchd control socket",
            Duration::from_secs(10),
            || ctl.exists().then_some(()),
        );
    }

    pub(crate) fn kill_vswitchd(&mut self) {
        if let Some(mut d) = self.vswitchd.take() {
            d.kill();
        }
    }

    fn tool(&self, program: &str, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(program);
        cmd.args(args);
        Self::env(&mut cmd, self.dir.path());
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
    }

    pub(crate) fn vsctl(&self, args: &[&str]) -> String {
        let mut full = vec!["--timeout=10"];
        full.extend_from_slice(args);
        let out = self.tool(OVS_VSCTL, &full);
        assert!(
            out.status.success(),
            "ovs-vsctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    pub(crate) fn ofctl(&self, args: &[&str]) -> String {
        let out = self.tool(OVS_OFCTL, args);
        assert!(
            out.status.success(),
            "ovs-ofctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Flow lines of `dump-flows <br> <filter>` without stats, trimmed and sorted.
    pub(crate) fn flows(&self, bridge: &str, filter: &str) -> Vec<String> {
        self.try_flows(bridge, filter)
            .unwrap_or_else(|e| panic!("dump-flows {bridge}: {e}"))
    }

    /// As [`Self::flows`], but an unreachable switch is an `Err` (for polling during restarts).
    pub(crate) fn try_flows(&self, bridge: &str, filter: &str) -> Result<Vec<String>, String> {
        let mut args = vec!["--no-stats", "--no-names", "dump-flows", bridge];
        if !filter.is_empty() {
            args.push(filter);
        }
        let out = self.tool(OVS_OFCTL, &args);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| l.contains("actions="))
            .map(str::to_owned)
            .collect();
        lines.sort();
        Ok(lines)
    }

    /// br-ex and br-int (netdev datapath) joined by the patch pair
    /// `patch-provnet-x-to-br-int` / `patch-br-int-to-provnet-x`.
    pub(crate) fn provider_bridges(&self) {
        self.vsctl(&[
            "add-br",
            "br-ex",
            "--",
            "set",
            "bridge",
            "br-ex",
            "datapath_type=netdev",
            "--",
            "add-br",
            "br-int",
            "--",
            "set",
            "bridge",
            "br-int",
            "datapath_type=netdev",
        ]);
        self.vsctl(&[
            "add-port",
            "br-ex",
            "patch-provnet-x-to-br-int",
            "--",
            "set",
            "interface",
            "patch-provnet-x-to-br-int",
            "type=patch",
            "options:peer=patch-br-int-to-provnet-x",
            "--",
            "add-port",
            "br-int",
            "patch-br-int-to-provnet-x",
            "--",
            "set",
            "interface",
            "patch-br-int-to-provnet-x",
            "type=patch",
            "options:peer=patch-provnet-x-to-br-int",
        ]);
    }

    pub(crate) fn ofport(&self, iface: &str) -> String {
        self.vsctl(&["get", "interface", iface, "ofport"])
    }

    pub(crate) fn mac_in_use(&self, iface: &str) -> String {
        self.vsctl(&["get", "interface", iface, "mac_in_use"])
            .trim_matches('"')
            .to_owned()
    }
}

/// The composite reconciler as `Capabilities::for_agent` wires it, without FRR (not running
/// here): the kernel part in the node's namespace, flows, ports and FDB entries on its OVS.
pub(crate) fn composite_without_frr(
    node: &OvsNode,
) -> ovn_bgp_agent::caps::reconcile::CompositeReconciler {
    use ovn_bgp_agent::caps::ovs::{OvsFdb, OvsFlows, OvsOptions, OvsPorts};
    use ovn_bgp_agent::caps::{FdbReconciler, FlowReconciler, OvsPortReconciler};
    use std::sync::Arc;
    let mut config = ovn_bgp_agent::config::AgentConfig::default();
    config.linux.netns = Some(node.netns.name.clone());
    config.ovs.ovs_rundir = node.rundir().display().to_string();
    config.ovs.ovs_vsctl_path = OVS_VSCTL.to_owned();
    config.ovs.ovs_ofctl_path = OVS_OFCTL.to_owned();
    let opts = OvsOptions::from_config(&config.ovs);
    ovn_bgp_agent::caps::reconcile::CompositeReconciler::new(
        Arc::new(ovn_bgp_agent::caps::netlink::NetlinkReconciler::from_config(&config.linux)),
        Some(Arc::new(OvsFlows::new(opts.clone())) as Arc<dyn FlowReconciler>),
        None,
    )
    .with_ovs_ports_and_fdb(
        Some(Arc::new(OvsPorts::new(opts.clone())) as Arc<dyn OvsPortReconciler>),
        Some(Arc::new(OvsFdb::new(opts)) as Arc<dyn FdbReconciler>),
    )
}
