//! `ovn-bgp-agent doctor`: checks the host prerequisites of the configured mode and says what to
//! fix, before (or beside) a running agent: the local OVS database and the chassis identity,
//! the OVN databases, FRR's vty sockets, the provider bridges, IP forwarding and reverse-path
//! filtering, the privileges of the mode ([`crate::caps::privilege`]), the kernel's VRF/dummy
//! support, and whether ovs-vswitchd follows bgp_vrf's routing table. Read-only: it changes
//! nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tokio::net::{TcpStream, UnixStream};

use crate::caps::ovs::route_table::{FIXED_IN, RouteTableFix, route_table_fix};
use crate::caps::ovsdb::Remote;
use crate::config::AgentConfig;
use crate::ovn::identity::IdentityWatch;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Ok,
    Warn,
    Fail,
}

/// One check's result.
#[derive(Debug, Clone)]
pub struct Finding {
    pub severity: Severity,
    pub check: String,
    pub detail: String,
    /// What to do about it (empty when all is well).
    pub fix: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tag = match self.severity {
            Severity::Ok => "ok  ",
            Severity::Warn => "warn",
            Severity::Fail => "FAIL",
        };
        write!(f, "{tag} {}: {}", self.check, self.detail)?;
        if !self.fix.is_empty() {
            write!(f, "\n     fix: {}", self.fix)?;
        }
        Ok(())
    }
}

fn finding(severity: Severity, check: &str, detail: impl Into<String>, fix: &str) -> Finding {
    Finding {
        severity,
        check: check.to_owned(),
        detail: detail.into(),
        fix: fix.to_owned(),
    }
}

/// ovs-vswitchd's reaction to the agent's addresses: each exposed IP is an address on bgp-nic
/// with a local route in bgp_vrf's table, and an ovs-vswitchd without the fix reads every route
/// of the namespace again at each change, with work per route that grows with the addresses:
/// quadratic in the IPs this chassis exposes (docs/sb-bgp-benchmark.md, "ovs-vswitchd on a real
/// gateway": 0.1 s of its CPU per address at 2k, 3 s at 10k, 30 s at 30k).
fn route_table_finding(ovs_version: Option<&str>) -> Finding {
    const CHECK: &str = "ovs-vswitchd routes";
    let Some(version) = ovs_version else {
        return finding(
            Severity::Warn,
            CHECK,
            "Open_vSwitch has no ovs_version (ovs-vswitchd was not started by ovs-ctl): \
             cannot tell whether it follows bgp_vrf's routing table",
            &format!(
                "check `ovs-vswitchd --version` against {FIXED_IN} (see the warning this check \
                 gives for an older one)"
            ),
        );
    };
    match route_table_fix(version) {
        RouteTableFix::Present => finding(
            Severity::Ok,
            CHECK,
            format!(
                "Open vSwitch {version} follows only the main routing tables (bgp_vrf's \
                 routes cost it nothing)"
            ),
            "",
        ),
        RouteTableFix::Missing => finding(
            Severity::Warn,
            CHECK,
            format!(
                "Open vSwitch {version} reads every route of every routing table again at each \
                 route change, bgp_vrf's included: each IP exposed here costs it CPU that grows \
                 with the square of the IPs exposed (about 0.1 s per change at 2k exposed IPs, \
                 3 s at 10k, 30 s at 30k; nothing to notice at a few hundred)"
            ),
            &format!(
                "on a gateway exposing thousands of IPs, upgrade Open vSwitch to {FIXED_IN} \
                 (OVS commit 840979663, which a distribution package may carry under an older \
                 version) and keep bgp-nic in its VRF"
            ),
        ),
        RouteTableFix::Unknown => finding(
            Severity::Warn,
            CHECK,
            format!("Open_vSwitch ovs_version {version:?} is not a version this check reads"),
            &format!("check that ovs-vswitchd has OVS commit 840979663 ({FIXED_IN})"),
        ),
    }
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long doctor waits for the local OVS database's answer.
const IDENTITY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether an OVSDB remote (`unix:`, `tcp:`, `ssl:`; the first of a comma list that answers)
/// accepts a connection. TLS is not negotiated: reachability only.
async fn reachable(remotes: &str) -> Result<String, String> {
    let mut errors = Vec::new();
    for remote in remotes.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let parsed = match Remote::parse(remote) {
            Ok(r) => r,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        let attempt = async {
            match &parsed {
                Remote::Unix(path) => UnixStream::connect(path).await.map(drop),
                Remote::Tcp { host, port } | Remote::Ssl { host, port } => {
                    TcpStream::connect((host.as_str(), *port)).await.map(drop)
                }
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(())) => return Ok(remote.to_owned()),
            Ok(Err(e)) => errors.push(format!("{remote}: {e}")),
            Err(_) => errors.push(format!("{remote}: no answer in {CONNECT_TIMEOUT:?}")),
        }
    }
    Err(errors.join("; "))
}

/// A sysctl, read in the configured network namespace.
fn sysctl(netns: Option<&str>, key: &str) -> Result<String, String> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let out = match netns {
        None => std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?,
        Some(ns) => {
            let o = Command::new("ip")
                .args(["netns", "exec", ns, "cat", &path])
                .output()
                .map_err(|e| format!("ip netns exec {ns}: {e}"))?;
            if !o.status.success() {
                return Err(format!(
                    "ip netns exec {ns} cat {path}: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
            }
            String::from_utf8_lossy(&o.stdout).into_owned()
        }
    };
    Ok(out.trim().to_owned())
}

/// `ip -o link show dev <dev>` in the configured namespace: `None` if absent.
fn link_state(netns: Option<&str>, dev: &str) -> Option<String> {
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    let o = cmd.args(["-o", "link", "show", "dev", dev]).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Whether the kernel can make links of `kind`: one is created in a throw-away network
/// namespace (`unshare --net`, gone with the process: nothing on the host changes), which also
/// covers built-in drivers that leave no trace in `/sys/module`; without the privilege for
/// that, a loaded or loadable module is taken as support.
fn kernel_has(kind: &str) -> bool {
    let probe = Command::new("unshare")
        .args(["--net", "ip", "link", "add", "doctor0", "type", kind])
        .output();
    match probe {
        Ok(o) if o.status.success() => true,
        Ok(o) if !String::from_utf8_lossy(&o.stderr).contains("Operation not permitted") => false,
        _ => {
            Path::new("/sys/module").join(kind).exists()
                || Command::new("modinfo")
                    .arg(kind)
                    .output()
                    .is_ok_and(|o| o.status.success())
        }
    }
}

/// Run every check for `config`.
pub async fn run(config: &AgentConfig) -> Vec<Finding> {
    let mut out = Vec::new();
    let netns = config.linux.netns.as_deref();

    // The local OVS database and who this chassis is.
    let ovsdb = &config.default.ovsdb_connection;
    // The client retries an absent database for ever: doctor must answer.
    let connected = tokio::time::timeout(IDENTITY_TIMEOUT, IdentityWatch::connect(config))
        .await
        .map_err(|_| format!("{ovsdb}: no answer within {IDENTITY_TIMEOUT:?}"))
        .and_then(|r| r.map_err(|e| e.to_string()));
    // `None` without a database; `Some(None)` when its row names no version.
    let ovs_version = connected
        .as_ref()
        .ok()
        .map(|(watch, _)| watch.ovs_version());
    let identity = match connected {
        Ok((_, id)) => {
            out.push(finding(
                Severity::Ok,
                "local OVS database",
                format!(
                    "{ovsdb}: system-id {}, hostname {}, bridge mappings {:?}",
                    id.system_id, id.hostname, id.bridge_mappings
                ),
                "",
            ));
            Some(id)
        }
        Err(e) => {
            out.push(finding(
                Severity::Fail,
                "local OVS database",
                e,
                "start ovsdb-server/ovs-vswitchd, or set [DEFAULT] ovsdb_connection; the \
                 Open_vSwitch row needs external_ids:system-id",
            ));
            None
        }
    };

    // What ovs-vswitchd does with the routes of the addresses the agent adds.
    if let Some(version) = ovs_version {
        out.push(route_table_finding(version.as_deref()));
    }

    // The OVN databases the configured driver reads.
    let driver = config.default.driver.as_str();
    let wants_nb = driver.starts_with("nb_") || config.default.exposing_method == "ovn";
    let mut dbs = vec![(
        "OVN Southbound",
        config
            .ovn
            .ovn_sb_connection
            .clone()
            .or_else(|| identity.as_ref().and_then(|i| i.ovn_remote.clone())),
        "[ovn] ovn_sb_connection or the local OVS external_ids:ovn-remote",
    )];
    if wants_nb {
        dbs.push((
            "OVN Northbound",
            config
                .ovn
                .ovn_nb_connection
                .clone()
                .or_else(|| identity.as_ref().and_then(|i| i.ovn_nb_remote.clone())),
            "[ovn] ovn_nb_connection or the local OVS external_ids:ovn-nb-remote",
        ));
    }
    if config.default.exposing_method == "ovn" {
        dbs.push((
            "node-local OVN Northbound",
            Some(config.local_ovn_cluster.ovn_nb_connection.clone()),
            "[local_ovn_cluster] ovn_nb_connection",
        ));
    }
    for (name, remote, where_) in dbs {
        out.push(match remote {
            None => finding(
                Severity::Fail,
                name,
                "no remote configured",
                &format!("set {where_}"),
            ),
            Some(r) => match reachable(&r).await {
                Ok(ok) => finding(Severity::Ok, name, format!("{ok} answers"), ""),
                Err(e) => finding(
                    Severity::Fail,
                    name,
                    e,
                    &format!("check that the server runs and {where_} points at it"),
                ),
            },
        });
    }

    // FRR's vty sockets (vtysh talks to zebra and bgpd through them).
    let vty = PathBuf::from(&config.frr.vty_socket_dir);
    for daemon in ["zebra", "bgpd"] {
        let sock = vty.join(format!("{daemon}.vty"));
        let r = tokio::time::timeout(CONNECT_TIMEOUT, UnixStream::connect(&sock)).await;
        out.push(match r {
            Ok(Ok(_)) => finding(
                Severity::Ok,
                "FRR",
                format!("{} answers", sock.display()),
                "",
            ),
            Ok(Err(e)) => finding(
                Severity::Fail,
                "FRR",
                format!("{}: {e}", sock.display()),
                "start FRR with zebra and bgpd, or set [frr] vty_socket_dir to its vty socket \
                 directory",
            ),
            Err(_) => finding(
                Severity::Fail,
                "FRR",
                format!("{}: no answer", sock.display()),
                "FRR is hung: restart it",
            ),
        });
    }
    if !Path::new(&config.frr.vtysh_path).exists() && !config.frr.vtysh_path.starts_with("vtysh") {
        out.push(finding(
            Severity::Fail,
            "FRR",
            format!("{} does not exist", config.frr.vtysh_path),
            "install frr or set [frr] vtysh_path",
        ));
    }

    // Provider bridges: they must exist and be up (the agent sets a down bridge up, never
    // creates one).
    if let Some(id) = &identity {
        for (physnet, bridge) in &id.bridge_mappings {
            out.push(match link_state(netns, bridge) {
                None => finding(
                    Severity::Fail,
                    "provider bridge",
                    format!("{bridge} (physnet {physnet}) does not exist"),
                    "create the OVS bridge (ovs-vsctl add-br) or fix ovn-bridge-mappings",
                ),
                Some(l) if l.contains(",UP") || l.contains("<UP") => finding(
                    Severity::Ok,
                    "provider bridge",
                    format!("{bridge} (physnet {physnet}) is up"),
                    "",
                ),
                Some(_) => finding(
                    Severity::Warn,
                    "provider bridge",
                    format!("{bridge} (physnet {physnet}) is down"),
                    "the agent sets it up at start; if it goes down again, something else \
                     manages it",
                ),
            });
        }
    }

    // Forwarding and reverse-path filtering.
    for key in ["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"] {
        out.push(match sysctl(netns, key) {
            Ok(v) if v == "1" => finding(Severity::Ok, "forwarding", format!("{key} = 1"), ""),
            Ok(v) => finding(
                Severity::Fail,
                "forwarding",
                format!("{key} = {v}"),
                &format!("sysctl -w {key}=1 (and persist it in /etc/sysctl.d)"),
            ),
            Err(e) => finding(Severity::Warn, "forwarding", e, ""),
        });
    }
    out.push(match sysctl(netns, "net.ipv4.conf.all.rp_filter") {
        Ok(v) if v == "1" => finding(
            Severity::Warn,
            "rp_filter",
            "net.ipv4.conf.all.rp_filter = 1 (strict)",
            "strict reverse-path filtering drops traffic routed asymmetrically through the \
             provider bridges: use 0 or 2 (loose)",
        ),
        Ok(v) => finding(
            Severity::Ok,
            "rp_filter",
            format!("net.ipv4.conf.all.rp_filter = {v}"),
            "",
        ),
        Err(e) => finding(Severity::Warn, "rp_filter", e, ""),
    });

    // The privileges the mode needs, as this process has them (run doctor as the agent runs:
    // same user, groups and capabilities).
    match crate::caps::privilege::Privileges::current() {
        Ok(privs) => {
            use crate::caps::privilege::{SystemAccess, check};
            let report = check(config, &privs, &SystemAccess);
            for ok in report.satisfied {
                out.push(finding(Severity::Ok, "privileges", ok, ""));
            }
            for m in report.missing {
                let severity = match m.severity {
                    crate::caps::privilege::Severity::Fatal => Severity::Fail,
                    crate::caps::privilege::Severity::Warning => Severity::Warn,
                };
                out.push(finding(
                    severity,
                    "privileges",
                    format!("{}: {}", m.what, m.why),
                    &m.fix,
                ));
            }
        }
        Err(e) => out.push(finding(Severity::Warn, "privileges", e.to_string(), "")),
    }

    // Device kinds the configuration asks for.
    for (kind, option) in [
        (config.linux.vrf_device_kind.as_str(), "vrf_device_kind"),
        (config.linux.nic_device_kind.as_str(), "nic_device_kind"),
    ] {
        out.push(if kernel_has(kind) {
            finding(
                Severity::Ok,
                "kernel",
                format!("{kind} links ([linux] {option})"),
                "",
            )
        } else {
            finding(
                Severity::Fail,
                "kernel",
                format!("no {kind} module ([linux] {option} = {kind})"),
                &format!(
                    "modprobe {kind} (a kernel with CONFIG_{} ), or a stand-in kind in [linux] \
                     {option}",
                    kind.to_uppercase()
                ),
            )
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unreachable_remotes_are_named_and_the_first_answering_one_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("db.sock");
        let _listener = tokio::net::UnixListener::bind(&sock).unwrap();
        let remotes = format!("unix:/nonexistent.sock,unix:{}", sock.display());
        assert_eq!(
            reachable(&remotes).await.unwrap(),
            format!("unix:{}", sock.display())
        );
        let e = reachable("unix:/nonexistent.sock,bogus:1")
            .await
            .unwrap_err();
        assert!(
            e.contains("/nonexistent.sock") && e.contains("bogus:1"),
            "{e}"
        );
    }

    #[test]
    fn the_route_table_finding_says_what_to_do() {
        let old = route_table_finding(Some("3.1.0"));
        assert_eq!(old.severity, Severity::Warn);
        assert!(
            old.to_string()
                .contains("Open vSwitch 3.1.0 reads every route"),
            "{old}"
        );
        assert!(old.fix.contains("3.1.5"), "{old}");
        assert_eq!(route_table_finding(Some("3.5.0")).severity, Severity::Ok);
        let unset = route_table_finding(None);
        assert_eq!(unset.severity, Severity::Warn);
        assert!(unset.detail.contains("no ovs_version"), "{unset}");
        let ok = route_table_finding(Some("3.5.0"));
        for f in [old, unset, ok, route_table_finding(Some("banana"))] {
            assert!(
                !f.detail.contains("  ") && !f.fix.contains("  "),
                "a run of spaces in: {f}"
            );
        }
    }

    #[test]
    fn findings_say_what_to_fix() {
        let f = finding(Severity::Fail, "FRR", "no socket", "start FRR");
        assert_eq!(f.to_string(), "FAIL FRR: no socket\n     fix: start FRR");
        assert_eq!(
            finding(Severity::Ok, "x", "fine", "").to_string(),
            "ok   x: fine"
        );
    }
}
