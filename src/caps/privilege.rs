//! What the configured mode needs from the operating system, checked against what the agent
//! process has: at start (`ovn-bgp-agent` refuses to run without what it cannot work without,
//! and warns about the rest) and in `ovn-bgp-agent doctor`.
//!
//! The agent needs no root. Its minimal set (docs/operations.md):
//! - `CAP_NET_ADMIN`, always: every exposing method configures the kernel over rtnetlink (links,
//!   addresses, rules, routes, neighbours) and writes `net.*` sysctls, which the kernel lets a
//!   holder of `CAP_NET_ADMIN` in the namespace write like root (`net_ctl_permissions`).
//! - `CAP_SYS_ADMIN` only with `[linux] netns`: `setns` into another network namespace needs it
//!   (running the agent inside that namespace, `NetworkNamespacePath=` in the unit, does not).
//! - write access to the rt_tables file (`[linux] rt_tables_path`) while a provider bridge has
//!   no line there;
//! - connect access (write permission) to FRR's vty sockets (`[frr] vty_socket_dir`, group
//!   `frrvty` on Debian) for vtysh, and to the OVS sockets (`db.sock`, `<bridge>.mgmt`,
//!   `ovs-vswitchd.ctl` in `[ovs] ovs_rundir`, and a `unix:` `[DEFAULT] ovsdb_connection`)
//!   for the agent and ovs-vsctl/ovs-ofctl/ovs-appctl.
//!
//! Fatal are the capabilities: they are fixed when the process starts, so an agent without
//! them can never do its job. Warnings are file and socket access: the operator can grant it
//! while the agent runs (socket group and mode, a pre-filled rt_tables file), a daemon that is
//! not running yet cannot be checked, and the agent retries each tool run at every reconcile.
//!
//! `[agent] root_helper` (upstream: the `sudo`/rootwrap prefix of its privsep daemons) is never
//! run: this agent has no helper that could gain privileges, it holds the set above itself.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::config::AgentConfig;

/// Capability numbers (`linux/capability.h`).
pub(crate) const CAP_DAC_OVERRIDE: u32 = 1;
pub(crate) const CAP_SETPCAP: u32 = 8;
pub(crate) const CAP_NET_BIND_SERVICE: u32 = 10;
pub(crate) const CAP_NET_ADMIN: u32 = 12;
pub(crate) const CAP_SYS_ADMIN: u32 = 21;

/// The name systemd and capabilities(7) use.
pub(crate) fn cap_name(cap: u32) -> String {
    match cap {
        CAP_DAC_OVERRIDE => "CAP_DAC_OVERRIDE".to_owned(),
        CAP_SETPCAP => "CAP_SETPCAP".to_owned(),
        CAP_NET_BIND_SERVICE => "CAP_NET_BIND_SERVICE".to_owned(),
        CAP_NET_ADMIN => "CAP_NET_ADMIN".to_owned(),
        CAP_SYS_ADMIN => "CAP_SYS_ADMIN".to_owned(),
        n => format!("capability {n}"),
    }
}

/// Names of the capabilities in a mask, e.g. `CAP_NET_ADMIN`; `none` for an empty mask.
pub(crate) fn cap_names(mask: u64) -> String {
    let names: Vec<String> = (0..64)
        .filter(|c| mask & (1u64 << c) != 0)
        .map(cap_name)
        .collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// Why the process's own privileges could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrivilegeError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no valid {field} line")]
    Malformed {
        path: &'static str,
        field: &'static str,
    },
}

const STATUS: &str = "/proc/self/status";

/// The identity and capabilities of a process, as `/proc/<pid>/status` shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Privileges {
    /// Effective user id.
    pub(crate) uid: u32,
    /// Effective group id.
    pub(crate) gid: u32,
    /// Supplementary groups.
    pub(crate) groups: Vec<u32>,
    /// `CapEff`: what the process may do now.
    pub(crate) effective: u64,
    /// `CapAmb`: what it passes to the programs it runs (when not root).
    pub(crate) ambient: u64,
    /// `CapBnd`: the most any program it runs can get.
    pub(crate) bounding: u64,
}

impl Privileges {
    /// This process's.
    pub(crate) fn current() -> Result<Self, PrivilegeError> {
        let text = std::fs::read_to_string(STATUS).map_err(|source| PrivilegeError::Read {
            path: STATUS,
            source,
        })?;
        Self::parse(&text)
    }

    /// From the text of `/proc/<pid>/status`.
    pub(crate) fn parse(status: &str) -> Result<Self, PrivilegeError> {
        let field = |name: &'static str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
                .ok_or(PrivilegeError::Malformed {
                    path: STATUS,
                    field: name,
                })
        };
        let malformed = |name| PrivilegeError::Malformed {
            path: STATUS,
            field: name,
        };
        // `Uid:` and `Gid:` list real, effective, saved and filesystem ids.
        let second = |name: &'static str| -> Result<u32, PrivilegeError> {
            field(name)?
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| malformed(name))
        };
        let mask = |name: &'static str| -> Result<u64, PrivilegeError> {
            u64::from_str_radix(field(name)?, 16).map_err(|_| malformed(name))
        };
        let groups = field("Groups")?
            .split_whitespace()
            .map(|g| g.parse().map_err(|_| malformed("Groups")))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            uid: second("Uid")?,
            gid: second("Gid")?,
            groups,
            effective: mask("CapEff")?,
            // Kernels before 4.3 have no ambient set.
            ambient: mask("CapAmb").unwrap_or(0),
            bounding: mask("CapBnd")?,
        })
    }

    pub(crate) fn has(&self, cap: u32) -> bool {
        self.effective & (1u64 << cap) != 0
    }

    /// `uid 0`, or `uid 998 (ovn-bgp-agent)` when the user has a name.
    pub(crate) fn describe_user(&self) -> String {
        match lookup_name("/etc/passwd", self.uid) {
            Some(name) => format!("uid {} ({name})", self.uid),
            None => format!("uid {}", self.uid),
        }
    }
}

/// The name of a user or group id from `/etc/passwd` or `/etc/group` (NSS-only names such as
/// LDAP's are not found: the number is printed then).
fn lookup_name(file: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _password = f.next()?;
        (f.next()?.parse::<u32>().ok()? == id).then(|| name.to_owned())
    })
}

/// How bad a missing privilege is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    /// The agent cannot do its job and the privilege cannot appear while it runs: it refuses
    /// to start.
    Fatal,
    /// Some objects or tools will fail until the operator grants it; the agent runs and
    /// retries.
    Warning,
}

/// One privilege the configured mode needs and the process lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing {
    pub(crate) severity: Severity,
    /// What is missing, e.g. `missing CAP_NET_ADMIN` or `no write access to
    /// /etc/iproute2/rt_tables`.
    pub(crate) what: String,
    /// Why the configured mode needs it.
    pub(crate) why: String,
    /// What to do about it.
    pub(crate) fix: String,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}. Fix: {}", self.what, self.why, self.fix)
    }
}

/// The file system questions the check asks, so that its logic can be tested without
/// changing users (as root every access is granted).
pub(crate) trait Access {
    /// Whether this process may write `path` (for a socket: connect to it). `Err` with
    /// `NotFound` when it does not exist.
    fn writable(&self, path: &Path) -> std::io::Result<bool>;
    /// The owner and group of `path` and its permission bits, for messages.
    fn owner(&self, path: &Path) -> Option<(u32, u32, u32)>;
    /// The names in directory `dir` (empty when it cannot be read).
    fn list(&self, dir: &Path) -> Vec<String>;
    /// `net.ipv4.ip_unprivileged_port_start`.
    fn unprivileged_port_start(&self) -> u16;
}

/// The real file system, asked with this process's effective ids and capabilities
/// (`faccessat(AT_EACCESS)`).
pub(crate) struct SystemAccess;

impl Access for SystemAccess {
    fn writable(&self, path: &Path) -> std::io::Result<bool> {
        use nix::unistd::{AccessFlags, faccessat};
        match faccessat(
            nix::fcntl::AT_FDCWD,
            path,
            AccessFlags::W_OK,
            nix::fcntl::AtFlags::AT_EACCESS,
        ) {
            Ok(()) => Ok(true),
            Err(nix::errno::Errno::EACCES | nix::errno::Errno::EROFS) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn owner(&self, path: &Path) -> Option<(u32, u32, u32)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some((m.uid(), m.gid(), m.mode() & 0o7777))
    }

    fn list(&self, dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    fn unprivileged_port_start(&self) -> u16 {
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1024)
    }
}

/// `frr:frrvty srwxrwx---`, for messages.
fn describe_owner(access: &dyn Access, path: &Path) -> String {
    match access.owner(path) {
        Some((uid, gid, mode)) => format!(
            "{}:{} mode {mode:04o}",
            lookup_name("/etc/passwd", uid).unwrap_or_else(|| uid.to_string()),
            lookup_name("/etc/group", gid).unwrap_or_else(|| gid.to_string()),
        ),
        None => "owner unknown".to_owned(),
    }
}

/// What a check found: the gaps, and for `doctor` what was checked and is fine.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) missing: Vec<Missing>,
    pub(crate) satisfied: Vec<String>,
}

impl Report {
    pub(crate) fn fatal(&self) -> impl Iterator<Item = &Missing> {
        self.missing
            .iter()
            .filter(|m| m.severity == Severity::Fatal)
    }
}

/// The fix for a missing capability: in a unit when not root, in the container or unit that
/// took it away when root.
fn grant_fix(privs: &Privileges, caps: &str) -> String {
    if privs.uid == 0 {
        format!(
            "the agent runs as root but without {caps}: whatever starts it removed it (a \
             container: --cap-add; a unit: CapabilityBoundingSet=); grant it there"
        )
    } else {
        format!(
            "grant it to the agent's user: AmbientCapabilities={caps} and \
             CapabilityBoundingSet={caps} in the unit (as \
             /lib/systemd/system/ovn-bgp-agent-nonroot.service does), or start it with \
             `setpriv --inh-caps=+{lower} --ambient-caps=+{lower}`",
            lower = caps
                .split(' ')
                .map(|c| c.trim_start_matches("CAP_").to_lowercase())
                .collect::<Vec<_>>()
                .join(",+")
        )
    }
}

/// Checks a path the agent writes (or creates: then its directory).
fn check_writable(
    access: &dyn Access,
    report: &mut Report,
    path: &Path,
    what: &str,
    why: &str,
    fix: &str,
) {
    let target = match access.writable(path) {
        Ok(true) => {
            report
                .satisfied
                .push(format!("{what} {} is writable", path.display()));
            return;
        }
        Ok(false) => path.to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Created at first use: its directory must take it (or be created in turn, which
            // a missing parent of a writable ancestor allows).
            let mut dir = path.parent().map(Path::to_owned);
            while let Some(d) = dir.clone() {
                match access.writable(&d) {
                    Ok(true) => {
                        report.satisfied.push(format!(
                            "{what} {} can be created in {}",
                            path.display(),
                            d.display()
                        ));
                        return;
                    }
                    Ok(false) => break,
                    Err(_) => dir = d.parent().map(Path::to_owned),
                }
            }
            match dir {
                Some(d) => d,
                None => return,
            }
        }
        Err(e) => {
            report.missing.push(Missing {
                severity: Severity::Warning,
                what: format!("no access to {what} {}", path.display()),
                why: format!("{why} ({e})"),
                fix: fix.to_owned(),
            });
            return;
        }
    };
    report.missing.push(Missing {
        severity: Severity::Warning,
        what: format!(
            "no write access to {} ({})",
            target.display(),
            describe_owner(access, &target)
        ),
        why: why.to_owned(),
        fix: fix.to_owned(),
    });
}

/// Checks that the sockets among `paths` that exist accept this process's connections; a
/// socket that is not there is a daemon not running (yet), which `doctor` reports on its own.
fn check_sockets(
    access: &dyn Access,
    report: &mut Report,
    paths: &[PathBuf],
    why: &str,
    fix: &str,
) {
    let mut refused = Vec::new();
    for path in paths {
        match access.writable(path) {
            Ok(true) => report.satisfied.push(format!(
                "{} accepts the agent's connections",
                path.display()
            )),
            Ok(false) => refused.push(format!(
                "{} ({})",
                path.display(),
                describe_owner(access, path)
            )),
            Err(_) => {}
        }
    }
    if !refused.is_empty() {
        report.missing.push(Missing {
            severity: Severity::Warning,
            what: format!("no connect (write) access to {}", refused.join(", ")),
            why: why.to_owned(),
            fix: fix.to_owned(),
        });
    }
}

/// Whether the configured mode uses an rt_tables file: the backends that give each provider
/// bridge a routing table.
fn uses_rt_tables(config: &AgentConfig) -> bool {
    let backend = crate::plugin::select(&config.default.driver, &config.default.exposing_method)
        .map(|(_, b)| b.name)
        .unwrap_or(config.default.exposing_method.as_str());
    matches!(backend, "underlay" | "vrf")
}

/// Everything the configured mode needs, checked against `privs` and `access`.
pub(crate) fn check(config: &AgentConfig, privs: &Privileges, access: &dyn Access) -> Report {
    let mut report = Report::default();
    report.satisfied.push(format!(
        "running as {} with capabilities: {}",
        privs.describe_user(),
        cap_names(privs.effective)
    ));
    let mut need_cap = |cap: u32, why: String, fix: String| {
        if privs.has(cap) {
            report
                .satisfied
                .push(format!("{} held: {why}", cap_name(cap)));
        } else {
            report.missing.push(Missing {
                severity: Severity::Fatal,
                what: format!("missing {}", cap_name(cap)),
                why,
                fix,
            });
        }
    };

    need_cap(
        CAP_NET_ADMIN,
        format!(
            "exposing_method = {} configures the kernel over rtnetlink (links, addresses, \
             rules, routes, neighbours) and writes net.* sysctls",
            config.default.exposing_method
        ),
        grant_fix(privs, "CAP_NET_ADMIN"),
    );
    if let Some(ns) = config
        .linux
        .netns
        .as_deref()
        .filter(|n| !n.trim().is_empty())
    {
        need_cap(
            CAP_SYS_ADMIN,
            format!("[linux] netns = {ns}: entering another network namespace (setns) needs it"),
            format!(
                "run the agent inside that namespace and leave [linux] netns unset \
                 (NetworkNamespacePath=/run/netns/{ns} in the unit, or `ip netns exec {ns}`), \
                 or {}",
                grant_fix(privs, "CAP_NET_ADMIN CAP_SYS_ADMIN")
            ),
        );
    }

    if let Some(port) = config
        .telemetry
        .metrics_address
        .as_deref()
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse::<u16>().ok())
        && port != 0
        && port < access.unprivileged_port_start()
        && !privs.has(CAP_NET_BIND_SERVICE)
    {
        report.missing.push(Missing {
            severity: Severity::Warning,
            what: format!("missing {}", cap_name(CAP_NET_BIND_SERVICE)),
            why: format!(
                "[telemetry] metrics_address uses port {port}, below \
                 net.ipv4.ip_unprivileged_port_start ({}): the metrics listener will not start",
                access.unprivileged_port_start()
            ),
            fix: "use a port from 1024 up, or grant CAP_NET_BIND_SERVICE".to_owned(),
        });
    }

    if uses_rt_tables(config) {
        check_writable(
            access,
            &mut report,
            Path::new(&config.linux.rt_tables_path),
            "[linux] rt_tables_path",
            "a provider bridge that has no line there gets one appended; without write \
             access such a bridge gets no routing table (its rules and routes are not \
             installed). A file that already lists every provider bridge works read-only",
            "let the agent's group write it (chgrp ovn-bgp-agent FILE && chmod g+w FILE, as \
             the non-root unit's ExecStartPre does), or list every provider bridge in it",
        );
    }

    let vty = Path::new(&config.frr.vty_socket_dir);
    check_sockets(
        access,
        &mut report,
        &[vty.join("zebra.vty"), vty.join("bgpd.vty")],
        "vtysh connects to FRR's vty sockets to read and apply the BGP configuration",
        "add the agent's user to FRR's vty group (frrvty on Debian and Red Hat): \
         SupplementaryGroups=frrvty in the unit, or usermod -aG frrvty USER",
    );

    let rundir = Path::new(&config.ovs.ovs_rundir);
    let mut ovs_sockets = vec![rundir.join("db.sock")];
    if let Some(path) = config.default.ovsdb_connection.strip_prefix("unix:") {
        let path = PathBuf::from(path);
        if !ovs_sockets.contains(&path) {
            ovs_sockets.push(path);
        }
    }
    ovs_sockets.extend(
        access
            .list(rundir)
            .into_iter()
            .filter(|n| {
                n.ends_with(".mgmt") || (n.starts_with("ovs-vswitchd") && n.ends_with(".ctl"))
            })
            .map(|n| rundir.join(n)),
    );
    check_sockets(
        access,
        &mut report,
        &ovs_sockets,
        "the agent reads the local OVS database (chassis identity, bridge mappings) and runs \
         ovs-vsctl (db.sock), ovs-ofctl (<bridge>.mgmt) and ovs-appctl (ovs-vswitchd.ctl), \
         which connect to these sockets",
        "give OVS's sockets a group the agent is in: run OVS as OVS_CTL_OPTS=\"--ovs-user=\
         openvswitch:openvswitch\" (/etc/default/openvswitch-switch) with UMask=0002 for \
         ovsdb-server.service and ovs-vswitchd.service (OVS creates its sockets 0770 minus \
         its umask; systemd's default 0022 leaves only the owner), and \
         SupplementaryGroups=openvswitch in the agent's unit",
    );

    let driver = config.default.driver.as_str();
    let mut ovn = vec![("Southbound", config.ovn.ovn_sb_connection.as_deref())];
    if driver.starts_with("nb_") || config.default.exposing_method == "ovn" {
        ovn.push(("Northbound", config.ovn.ovn_nb_connection.as_deref()));
    }
    if config.default.exposing_method == "ovn" {
        ovn.push((
            "node-local Northbound",
            Some(config.local_ovn_cluster.ovn_nb_connection.as_str()),
        ));
    }
    for (db, remotes) in ovn {
        let sockets: Vec<PathBuf> = remotes
            .unwrap_or_default()
            .split(',')
            .filter_map(|r| r.trim().strip_prefix("unix:"))
            .map(PathBuf::from)
            .collect();
        check_sockets(
            access,
            &mut report,
            &sockets,
            &format!("the agent uses the OVN {db} database over these sockets"),
            "connect over tcp: or ssl: (as a chassis reaches the central databases), or give \
             the socket a group the agent is in",
        );
    }

    if let Some(dir) = Path::new(&config.frr.state_file).parent() {
        check_writable(
            access,
            &mut report,
            dir,
            "the directory of [frr] state_file",
            "the FRR objects the agent creates are recorded there so that a restarted agent \
             still removes them; without it that record is kept in memory only",
            "StateDirectory=ovn-bgp-agent in the unit, or make the directory the agent's",
        );
    }
    let control = &config.telemetry.control_socket;
    if let Some(dir) = Path::new(control).parent().filter(|_| !control.is_empty()) {
        check_writable(
            access,
            &mut report,
            dir,
            "the directory of [telemetry] control_socket",
            "status, explain and health talk to the agent over that socket; without it they \
             cannot reach the agent",
            "RuntimeDirectory=ovn-bgp-agent in the unit, or make the directory the agent's",
        );
    }

    if privs.uid != 0 && config.agent.root_helper.trim() != "sudo" {
        report.missing.push(Missing {
            severity: Severity::Warning,
            what: format!(
                "[agent] root_helper = {:?} is not used",
                config.agent.root_helper
            ),
            why: "upstream starts its privileged helpers through it; this agent runs no \
                  helper and never gains privileges, it must hold what it needs itself"
                .to_owned(),
            fix: "remove the option (and the sudo/rootwrap rule behind it) and grant the \
                  capabilities above to the agent's user instead"
                .to_owned(),
        });
    }
    if privs.uid == 0 && !privs.has(CAP_SETPCAP) {
        report.missing.push(Missing {
            severity: Severity::Warning,
            what: format!("missing {}", cap_name(CAP_SETPCAP)),
            why: "running as root, the agent shrinks its bounding set to CAP_DAC_OVERRIDE at \
                  start so that the tools it runs (vtysh, ovs-*) get no more, which needs \
                  CAP_SETPCAP; without it the tools run with all of root's capabilities"
                .to_owned(),
            fix: "grant CAP_SETPCAP, or run the agent as a non-root user \
                  (ovn-bgp-agent-nonroot.service)"
                .to_owned(),
        });
    }
    report
}

/// The start-time check: each gap is logged (fatal ones as errors); `Err` with the fatal gaps
/// when the agent must not start.
pub(crate) fn check_at_start(config: &AgentConfig) -> Result<(), Vec<Missing>> {
    let privs = match Privileges::current() {
        Ok(p) => p,
        Err(e) => {
            // Without /proc the check cannot run; the agent's own operations then report
            // their errors as they happen.
            tracing::warn!("privilege check skipped: {e}");
            return Ok(());
        }
    };
    let report = check(config, &privs, &SystemAccess);
    tracing::info!(
        user = %privs.describe_user(),
        capabilities = %cap_names(privs.effective),
        "privileges"
    );
    for m in report
        .missing
        .iter()
        .filter(|m| m.severity == Severity::Warning)
    {
        tracing::warn!("{m}");
    }
    let fatal: Vec<Missing> = report.fatal().cloned().collect();
    if fatal.is_empty() { Ok(()) } else { Err(fatal) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const ROOT_STATUS: &str = "Name:\tovn-bgp-agent\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n\
        Groups:\t0 \nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
        CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n";
    const NONROOT_STATUS: &str = "Uid:\t998\t998\t998\t998\nGid:\t997\t997\t997\t997\n\
        Groups:\t106 997 \nCapEff:\t0000000000001000\nCapBnd:\t0000000000001000\n\
        CapAmb:\t0000000000001000\n";

    /// A file system where each listed path is writable or not; others do not exist.
    #[derive(Default)]
    struct FakeAccess {
        paths: BTreeMap<PathBuf, bool>,
    }

    impl FakeAccess {
        fn with(mut self, path: &str, writable: bool) -> Self {
            self.paths.insert(PathBuf::from(path), writable);
            self
        }
    }

    impl Access for FakeAccess {
        fn writable(&self, path: &Path) -> std::io::Result<bool> {
            self.paths
                .get(path)
                .copied()
                .ok_or_else(|| std::io::ErrorKind::NotFound.into())
        }
        fn owner(&self, _: &Path) -> Option<(u32, u32, u32)> {
            Some((0, 0, 0o750))
        }
        fn list(&self, dir: &Path) -> Vec<String> {
            self.paths
                .keys()
                .filter(|p| p.parent() == Some(dir))
                .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
                .collect()
        }
        fn unprivileged_port_start(&self) -> u16 {
            1024
        }
    }

    fn config(extra: &[(&str, &str, &str)]) -> AgentConfig {
        let mut c = AgentConfig::default();
        c.frr.vty_socket_dir = "/run/frr".into();
        c.ovs.ovs_rundir = "/run/openvswitch".into();
        c.default.ovsdb_connection = "unix:/run/openvswitch/db.sock".into();
        c.frr.state_file = "/var/lib/ovn-bgp-agent/frr-objects.json".into();
        c.telemetry.control_socket = "/run/ovn-bgp-agent/control.sock".into();
        for (section, key, value) in extra {
            match (*section, *key) {
                ("linux", "netns") => c.linux.netns = Some((*value).into()),
                ("agent", "root_helper") => c.agent.root_helper = (*value).into(),
                ("telemetry", "metrics_address") => {
                    c.telemetry.metrics_address = Some((*value).into())
                }
                _ => unreachable!("{section} {key}"),
            }
        }
        c
    }

    /// Everything a deployment grants the non-root unit's user.
    fn granted() -> FakeAccess {
        FakeAccess::default()
            .with("/etc/iproute2/rt_tables", true)
            .with("/run/frr/zebra.vty", true)
            .with("/run/frr/bgpd.vty", true)
            .with("/run/openvswitch/db.sock", true)
            .with("/run/openvswitch/br-ex.mgmt", true)
            .with("/var/lib/ovn-bgp-agent", true)
            .with("/run/ovn-bgp-agent", true)
    }

    #[test]
    fn status_lines_give_ids_groups_and_capability_sets() {
        let p = Privileges::parse(NONROOT_STATUS).unwrap();
        assert_eq!((p.uid, p.gid, p.groups.clone()), (998, 997, vec![106, 997]));
        assert!(p.has(CAP_NET_ADMIN) && !p.has(CAP_SYS_ADMIN));
        assert_eq!(p.ambient, 1 << CAP_NET_ADMIN);
        assert_eq!(cap_names(p.effective), "CAP_NET_ADMIN");
        assert!(Privileges::parse(ROOT_STATUS).unwrap().has(CAP_SYS_ADMIN));
        let e = Privileges::parse("Uid:\t0\t0\t0\t0\n").unwrap_err();
        assert_eq!(e.to_string(), "/proc/self/status: no valid Groups line");
        // This process's own status parses (the test runner's, whoever it runs as).
        Privileges::current().unwrap();
    }

    /// The minimal set: CAP_NET_ADMIN plus the file and socket access a deployment grants
    /// the unit's user; nothing is missing.
    #[test]
    fn the_minimal_set_is_enough_for_the_default_mode() {
        let privs = Privileges::parse(NONROOT_STATUS).unwrap();
        let report = check(&config(&[]), &privs, &granted());
        assert_eq!(report.missing, vec![], "{:?}", report.satisfied);
        assert!(
            report
                .satisfied
                .iter()
                .any(|s| s.starts_with("CAP_NET_ADMIN held"))
        );
    }

    #[test]
    fn no_net_admin_is_fatal_and_names_the_fix() {
        let privs =
            Privileges::parse(&NONROOT_STATUS.replace("0000000000001000", "0000000000000000"))
                .unwrap();
        let report = check(&config(&[]), &privs, &granted());
        let fatal: Vec<&Missing> = report.fatal().collect();
        assert_eq!(fatal.len(), 1, "{:?}", report.missing);
        let text = fatal[0].to_string();
        assert!(
            text.starts_with(
                "missing CAP_NET_ADMIN: exposing_method = underlay configures the kernel"
            ),
            "{text}"
        );
        assert!(text.contains("AmbientCapabilities=CAP_NET_ADMIN"), "{text}");
        assert!(
            text.contains("setpriv --inh-caps=+net_admin --ambient-caps=+net_admin"),
            "{text}"
        );
        // As root without it, the fix is in whatever took it away.
        let mut root = Privileges::parse(ROOT_STATUS).unwrap();
        root.effective &= !(1 << CAP_NET_ADMIN);
        let text = check(&config(&[]), &root, &granted())
            .fatal()
            .next()
            .unwrap()
            .to_string();
        assert!(
            text.contains("runs as root but without CAP_NET_ADMIN"),
            "{text}"
        );
    }

    #[test]
    fn a_netns_to_enter_needs_sys_admin() {
        let privs = Privileges::parse(NONROOT_STATUS).unwrap();
        let report = check(
            &config(&[("linux", "netns", "chassis")]),
            &privs,
            &granted(),
        );
        let fatal: Vec<String> = report.fatal().map(ToString::to_string).collect();
        assert_eq!(fatal.len(), 1);
        assert!(
            fatal[0].contains("missing CAP_SYS_ADMIN: [linux] netns = chassis"),
            "{}",
            fatal[0]
        );
        assert!(
            fatal[0].contains("NetworkNamespacePath=/run/netns/chassis"),
            "{}",
            fatal[0]
        );
        let root = Privileges::parse(ROOT_STATUS).unwrap();
        assert!(
            check(&config(&[("linux", "netns", "chassis")]), &root, &granted())
                .missing
                .is_empty()
        );
    }

    /// Files and sockets the user cannot write are warnings naming the path, its owner and
    /// the fix; a socket that does not exist (daemon not running) is not reported.
    #[test]
    fn file_and_socket_access_are_warnings_with_their_fix() {
        let privs = Privileges::parse(NONROOT_STATUS).unwrap();
        let access = FakeAccess::default()
            .with("/etc/iproute2/rt_tables", false)
            .with("/run/frr/zebra.vty", false)
            .with("/run/openvswitch/db.sock", false)
            .with("/run/openvswitch/br-ex.mgmt", false)
            .with("/run/openvswitch/ovs-vswitchd.ctl", true)
            .with("/var/lib", false)
            .with("/run", true);
        let report = check(&config(&[]), &privs, &access);
        assert_eq!(report.fatal().count(), 0);
        let text: Vec<String> = report.missing.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 4, "{text:#?}");
        assert!(
            text[0].contains("write access to /etc/iproute2/rt_tables (root:root mode 0750)"),
            "{}",
            text[0]
        );
        assert!(text[0].contains("chmod g+w"), "{}", text[0]);
        assert!(
            text[1].contains("connect (write) access to /run/frr/zebra.vty (root:root mode 0750)"),
            "{}",
            text[1]
        );
        assert!(!text[1].contains("bgpd.vty"), "{}", text[1]);
        assert!(
            text[1].contains("SupplementaryGroups=frrvty"),
            "{}",
            text[1]
        );
        assert!(
            text[2].contains(
                "/run/openvswitch/db.sock (root:root mode 0750), /run/openvswitch/br-ex.mgmt"
            ),
            "{}",
            text[2]
        );
        assert!(text[2].contains("UMask=0002"), "{}", text[2]);
        // The state directory does not exist and /var/lib is not writable.
        assert!(
            text[3].contains("write access to /var/lib (root:root"),
            "{}",
            text[3]
        );
        assert!(
            text[3].contains("StateDirectory=ovn-bgp-agent"),
            "{}",
            text[3]
        );
        // The control socket's directory does not exist but can be created in /run.
        assert!(
            report
                .satisfied
                .iter()
                .any(|s| s.contains("can be created in /run")),
            "{:?}",
            report.satisfied
        );
    }

    /// OVN databases on unix sockets (a node-local database) are checked like OVS's; tcp: and
    /// ssl: remotes need nothing; NB only for a driver that reads it.
    #[test]
    fn ovn_databases_on_unix_sockets_need_connect_access() {
        let privs = Privileges::parse(NONROOT_STATUS).unwrap();
        let mut c = config(&[]);
        c.ovn.ovn_sb_connection = Some("tcp:10.0.0.1:6642,unix:/run/ovn/ovnsb_db.sock".into());
        c.ovn.ovn_nb_connection = Some("unix:/run/ovn/ovnnb_db.sock".into());
        let access = granted()
            .with("/run/ovn/ovnsb_db.sock", false)
            .with("/run/ovn/ovnnb_db.sock", false);
        let text: Vec<String> = check(&c, &privs, &access)
            .missing
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(text.len(), 1, "{text:#?}");
        assert!(
            text[0].starts_with("no connect (write) access to /run/ovn/ovnsb_db.sock"),
            "{}",
            text[0]
        );
        assert!(text[0].contains("OVN Southbound"), "{}", text[0]);
        c.default.driver = "nb_ovn_bgp_driver".into();
        let missing = check(&c, &privs, &access).missing;
        assert_eq!(missing.len(), 2);
        assert!(
            missing[1].what.contains("/run/ovn/ovnnb_db.sock"),
            "{:?}",
            missing[1]
        );
    }

    #[test]
    fn root_helper_is_named_as_unused_when_not_root_and_a_low_metrics_port_needs_bind() {
        let privs = Privileges::parse(NONROOT_STATUS).unwrap();
        let c = config(&[
            (
                "agent",
                "root_helper",
                "sudo ovn-bgp-agent-rootwrap /etc/ovn-bgp-agent/rootwrap.conf",
            ),
            ("telemetry", "metrics_address", "0.0.0.0:80"),
        ]);
        let report = check(&c, &privs, &granted());
        let text: Vec<String> = report.missing.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:#?}");
        assert!(
            text[0]
                .contains("missing CAP_NET_BIND_SERVICE: [telemetry] metrics_address uses port 80"),
            "{}",
            text[0]
        );
        assert!(
            text[1].contains("root_helper = \"sudo ovn-bgp-agent-rootwrap"),
            "{}",
            text[1]
        );
        assert!(text[1].contains("never gains privileges"), "{}", text[1]);
        // As root it is simply not used: nothing to say.
        let root = Privileges::parse(ROOT_STATUS).unwrap();
        let c = config(&[("agent", "root_helper", "sudo rootwrap")]);
        assert!(check(&c, &root, &granted()).missing.is_empty());
        // A root that cannot shrink its bounding set is told that its tools keep everything.
        let mut root = root;
        root.effective &= !(1 << CAP_SETPCAP);
        let missing = check(&c, &root, &granted()).missing;
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert_eq!(missing[0].severity, Severity::Warning);
        assert!(
            missing[0]
                .to_string()
                .starts_with("missing CAP_SETPCAP: running as root"),
            "{}",
            missing[0]
        );
    }
}
