//! Test fixtures: real `ovsdb-server` (standalone or Raft cluster members) and `ovn-northd`
//! processes in unique temporary directories, killed by pid when dropped.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub(crate) const SB_SCHEMA: &str = "/usr/share/ovn/ovn-sb.ovsschema";
pub(crate) const NB_SCHEMA: &str = "/usr/share/ovn/ovn-nb.ovsschema";
pub(crate) const VSWITCH_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique directory removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p = PathBuf::from(format!("/tmp/ovsdbt-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
        .unwrap_or(false)
        || Path::new("/usr/sbin").join(tool).exists();
    assert!(
        found,
        "{tool} is not installed: install the openvswitch-switch and ovn-central packages to run these tests"
    );
}

/// Runs a command, panicking with its stderr on failure; returns stdout.
pub(crate) fn run(cmd: &str, args: &[&str]) -> String {
    require(cmd);
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One `ovsdb-server` process serving one database file.
pub(crate) struct OvsdbServer {
    pub dir: TempDir,
    pub db_file: PathBuf,
    pub sock: PathBuf,
    /// `ptcp` client port, if any.
    pub tcp_port: Option<u16>,
    child: Option<Child>,
    name: String,
    /// Extra command-line arguments (e.g. `--remote=pssl:…` with key files).
    pub extra_args: Vec<String>,
}

impl OvsdbServer {
    /// A standalone database created from `schema`.
    pub(crate) fn standalone(schema: &str, tag: &str) -> OvsdbServer {
        let dir = TempDir::new(tag);
        let db_file = dir.path().join("db.db");
        run("ovsdb-tool", &["create", db_file.to_str().unwrap(), schema]);
        let mut s = OvsdbServer {
            sock: dir.path().join("db.sock"),
            db_file,
            dir,
            tcp_port: None,
            child: None,
            name: tag.to_owned(),
            extra_args: Vec::new(),
        };
        s.start();
        s
    }

    /// A single-member Raft cluster (the server keeps transaction history, so
    /// `monitor_cond_since` can resume). `raft_port` must be free (test port range).
    pub(crate) fn clustered_single(schema: &str, tag: &str, raft_port: u16) -> OvsdbServer {
        let dir = TempDir::new(tag);
        let db_file = dir.path().join("db.db");
        run(
            "ovsdb-tool",
            &[
                "create-cluster",
                db_file.to_str().unwrap(),
                schema,
                &format!("tcp:127.0.0.1:{raft_port}"),
            ],
        );
        let mut s = OvsdbServer {
            sock: dir.path().join("db.sock"),
            db_file,
            dir,
            tcp_port: None,
            child: None,
            name: tag.to_owned(),
            extra_args: Vec::new(),
        };
        s.start();
        s
    }

    /// A server for an existing database file (cluster members).
    pub(crate) fn from_file(
        dir: TempDir,
        db_file: PathBuf,
        tcp_port: Option<u16>,
        tag: &str,
    ) -> Self {
        let mut s = OvsdbServer {
            sock: dir.path().join("db.sock"),
            db_file,
            dir,
            tcp_port,
            child: None,
            name: tag.to_owned(),
            extra_args: Vec::new(),
        };
        s.start();
        s
    }

    /// A standalone database whose server also gets `extra` arguments.
    pub(crate) fn standalone_with(schema: &str, tag: &str, extra: Vec<String>) -> OvsdbServer {
        let dir = TempDir::new(tag);
        let db_file = dir.path().join("db.db");
        run("ovsdb-tool", &["create", db_file.to_str().unwrap(), schema]);
        let mut s = OvsdbServer {
            sock: dir.path().join("db.sock"),
            db_file,
            dir,
            tcp_port: None,
            child: None,
            name: tag.to_owned(),
            extra_args: extra,
        };
        s.start();
        s
    }

    pub(crate) fn unix_remote(&self) -> String {
        format!("unix:{}", self.sock.display())
    }

    pub(crate) fn tcp_remote(&self) -> String {
        format!(
            "tcp:127.0.0.1:{}",
            self.tcp_port.expect("server has no tcp port")
        )
    }

    /// Starts (or restarts) the server process.
    pub(crate) fn start(&mut self) {
        require("ovsdb-server");
        let _ = std::fs::remove_file(&self.sock);
        let mut args = vec![
            self.db_file.to_str().unwrap().to_owned(),
            format!("--remote=punix:{}", self.sock.display()),
            format!("--unixctl={}", self.dir.path().join("ctl").display()),
            format!(
                "--log-file={}",
                self.dir.path().join("server.log").display()
            ),
            "-vconsole:off".to_owned(),
            "-vfile:info".to_owned(),
            "--no-chdir".to_owned(),
        ];
        if let Some(p) = self.tcp_port {
            args.push(format!("--remote=ptcp:{p}:127.0.0.1"));
        }
        args.extend(self.extra_args.iter().cloned());
        let child = Command::new("ovsdb-server")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ovsdb-server");
        self.child = Some(child);
        let sock = self.sock.clone();
        wait_for(
            &format!("ovsdb-server {} socket", self.name),
            Duration::from_secs(10),
            || sock.exists(),
        );
        if let Some(p) = self.tcp_port {
            wait_for("ovsdb-server tcp port", Duration::from_secs(10), || {
                std::net::TcpStream::connect(("127.0.0.1", p)).is_ok()
            });
        }
    }

    /// Kills the process (SIGKILL, by pid) and reaps it.
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Whether the process is still alive (not exited by itself).
    pub(crate) fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Runs `ovsdb-client transact` against this server.
    pub(crate) fn transact(&self, json: &str) -> String {
        run("ovsdb-client", &["transact", &self.unix_remote(), json])
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for OvsdbServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A test PKI made with `openssl`: a CA, a server certificate for IP 127.0.0.1 and a client
/// certificate, all as PEM files in `dir`.
pub(crate) struct Pki {
    pub dir: TempDir,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        let dir = TempDir::new("pki");
        let d = dir.path().to_str().unwrap().to_owned();
        let f = |n: &str| format!("{d}/{n}");
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec!["req", "-x509"];
        ca.extend(ec);
        let (ca_key, ca_crt) = (f("ca.key"), f("ca.crt"));
        ca.extend([
            "-keyout",
            &ca_key,
            "-out",
            &ca_crt,
            "-days",
            "2",
            "-subj",
            "/CN=ovsdb-test-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        run("openssl", &ca);
        for (name, usage, san) in [
            ("server", "serverAuth", "subjectAltName=IP:127.0.0.1"),
            ("client", "clientAuth", "subjectAltName=DNS:ovn-bgp-agent"),
        ] {
            let (key, csr, crt, ext) = (
                f(&format!("{name}.key")),
                f(&format!("{name}.csr")),
                f(&format!("{name}.crt")),
                f(&format!("{name}.ext")),
            );
            let mut req = vec!["req"];
            req.extend(ec);
            req.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=ovsdb-test"]);
            run("openssl", &req);
            std::fs::write(
                &ext,
                format!("basicConstraints=CA:FALSE\nextendedKeyUsage={usage}\n{san}\n"),
            )
            .unwrap();
            run(
                "openssl",
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    &ca_crt,
                    "-CAkey",
                    &ca_key,
                    "-CAcreateserial",
                    "-out",
                    &crt,
                    "-days",
                    "2",
                    "-extfile",
                    &ext,
                ],
            );
        }
        Pki { dir }
    }
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `ovn-northd` translating one NB server into one SB server.
pub(crate) struct Northd {
    child: Child,
    _dir: TempDir,
}

impl Northd {
    pub(crate) fn start(nb: &OvsdbServer, sb: &OvsdbServer) -> Northd {
        require("ovn-northd");
        let dir = TempDir::new("northd");
        let child = Command::new("ovn-northd")
            .arg(format!("--ovnnb-db={}", nb.unix_remote()))
            .arg(format!("--ovnsb-db={}", sb.unix_remote()))
            .arg(format!("--unixctl={}", dir.path().join("ctl").display()))
            .arg(format!(
                "--log-file={}",
                dir.path().join("northd.log").display()
            ))
            .arg("-vconsole:off")
            .arg("--no-chdir")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ovn-northd");
        Northd { child, _dir: dir }
    }
}

impl Drop for Northd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Raft cluster of `ports.len()` members; member i uses raft port `ports[i].0` and client
/// port `ports[i].1`.
pub(crate) struct Cluster {
    pub members: Vec<OvsdbServer>,
}

impl Cluster {
    pub(crate) fn new(schema: &str, db: &str, ports: &[(u16, u16)]) -> Cluster {
        let mut members = Vec::new();
        let first_raft = format!("tcp:127.0.0.1:{}", ports[0].0);
        for (i, (raft, client)) in ports.iter().enumerate() {
            let dir = TempDir::new(&format!("raft{i}"));
            let file = dir.path().join("db.db");
            let local = format!("tcp:127.0.0.1:{raft}");
            if i == 0 {
                run(
                    "ovsdb-tool",
                    &["create-cluster", file.to_str().unwrap(), schema, &local],
                );
            } else {
                run(
                    "ovsdb-tool",
                    &[
                        "join-cluster",
                        file.to_str().unwrap(),
                        db,
                        &local,
                        &first_raft,
                    ],
                );
            }
            members.push(OvsdbServer::from_file(
                dir,
                file,
                Some(*client),
                &format!("raft{i}"),
            ));
        }
        Cluster { members }
    }

    pub(crate) fn remotes(&self) -> String {
        self.members
            .iter()
            .map(|m| m.tcp_remote())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Index of the current leader according to `cluster/status`, if any.
    pub(crate) fn leader(&self, db: &str) -> Option<usize> {
        self.members.iter().position(|m| {
            m.is_running()
                && Command::new("ovs-appctl")
                    .arg("-t")
                    .arg(m.dir.path().join("ctl"))
                    .args(["cluster/status", db])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).contains("Role: leader"))
                    .unwrap_or(false)
        })
    }

    /// Waits until every member reports `Status: cluster member` and a leader exists.
    pub(crate) fn wait_ready(&self, db: &str) -> usize {
        let start = Instant::now();
        loop {
            let all = self.members.iter().all(|m| {
                Command::new("ovs-appctl")
                    .arg("-t")
                    .arg(m.dir.path().join("ctl"))
                    .args(["cluster/status", db])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).contains("Status: cluster member"))
                    .unwrap_or(false)
            });
            if all && let Some(l) = self.leader(db) {
                return l;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "Raft cluster did not form within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Row-building helpers shared by the live driver tests (`tests/*_live.rs`).
pub(crate) fn named(n: &str) -> ovn_bgp_agent::caps::ovsdb::Datum {
    use ovn_bgp_agent::caps::ovsdb::{Atom, Datum};
    Datum::Atom(Atom::NamedUuid(n.into()))
}

pub(crate) fn named_set(names: &[&str]) -> ovn_bgp_agent::caps::ovsdb::Datum {
    use ovn_bgp_agent::caps::ovsdb::{Atom, Datum};
    Datum::set(names.iter().map(|n| Atom::NamedUuid((*n).into())).collect())
}

pub(crate) fn strings(values: &[&str]) -> ovn_bgp_agent::caps::ovsdb::Datum {
    use ovn_bgp_agent::caps::ovsdb::{Atom, Datum};
    Datum::set(values.iter().map(Atom::string).collect())
}

/// A client of `db` at `remote` that only writes (monitors one table, no columns).
pub(crate) async fn writer(
    remote: &str,
    db: &str,
    table: &str,
) -> ovn_bgp_agent::caps::ovsdb::OvsdbClient {
    use ovn_bgp_agent::caps::ovsdb::{ClientConfig, MonitorSpec, OvsdbClient, TableSpec};
    OvsdbClient::connect(
        ClientConfig::new(remote, db).unwrap(),
        MonitorSpec::default().table(TableSpec::new(table, &[])),
    )
    .await
    .unwrap()
}
