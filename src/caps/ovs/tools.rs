//! `ovs-vsctl` and `ovs-ofctl` invocations.
//!
//! Both tools find their sockets through `OVS_RUNDIR` (`db.sock`, `<bridge>.mgmt`), so the
//! configured run directory is passed that way: one setting serves both tools, and bridge names
//! stay plain arguments (validated [`InterfaceName`]s).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::OvsError;
use super::ports::{OvsPortName, PortTable};
use crate::caps::process::{Invocation, ProcessOutput};
use crate::config::OvsSection;
use crate::types::InterfaceName;

/// Where the OVS tools and sockets are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OvsOptions {
    pub vsctl_path: PathBuf,
    pub ofctl_path: PathBuf,
    pub rundir: PathBuf,
    /// Deadline of one tool invocation.
    pub timeout: Duration,
    /// How often [`super::OvsFlows::spawn_flow_check`] re-checks the installed flows.
    pub flow_check_interval: Duration,
}

impl OvsOptions {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

    /// `ovs-appctl` in the directory of `ovs-vsctl` (or from `PATH` when that is a bare name).
    pub fn appctl_path(&self) -> PathBuf {
        match self.vsctl_path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.join("ovs-appctl"),
            _ => PathBuf::from("ovs-appctl"),
        }
    }

    /// The tools are resolved to absolute paths here, once (see
    /// [`crate::caps::process::resolve_tool_or_warn`]).
    pub fn from_config(ovs: &OvsSection) -> Self {
        use crate::caps::process::resolve_tool_or_warn;
        Self {
            vsctl_path: resolve_tool_or_warn("[ovs] ovs_vsctl_path", &ovs.ovs_vsctl_path),
            ofctl_path: resolve_tool_or_warn("[ovs] ovs_ofctl_path", &ovs.ovs_ofctl_path),
            rundir: PathBuf::from(&ovs.ovs_rundir),
            timeout: Self::DEFAULT_TIMEOUT,
            flow_check_interval: Duration::from_secs(ovs.flow_check_interval.max(1)),
        }
    }
}

/// OpenFlow protocol choices tried in order for `ovs-ofctl` (upstream: 1.0, then 1.3).
const DUMP_PROTOCOLS: &[Option<&str>] = &[None, Some("OpenFlow13")];

/// Runs the OVS tools.
#[derive(Debug, Clone)]
pub struct OvsTools {
    options: OvsOptions,
    /// Per bridge, the `add-flows` variant that worked last ([`APPLY_VARIANTS`] index), tried
    /// first next time so a bridge without OpenFlow 1.4 does not cost a failing `--bundle` run
    /// on every change. A std mutex: never held across an await.
    preferred_variant: Arc<Mutex<HashMap<String, usize>>>,
}

/// `add-flows` variants, in order of preference: atomic bundle (OpenFlow 1.4+), OpenFlow 1.0,
/// OpenFlow 1.3.
const APPLY_VARIANTS: [&[&str]; 3] = [&["--bundle"], &[], &["-O", "OpenFlow13"]];

impl OvsTools {
    pub fn new(options: OvsOptions) -> Self {
        Self {
            options,
            preferred_variant: Arc::default(),
        }
    }

    pub fn options(&self) -> &OvsOptions {
        &self.options
    }

    fn invocation(&self, program: &PathBuf) -> Invocation {
        Invocation::new(program, self.options.timeout).env("OVS_RUNDIR", &self.options.rundir)
    }

    async fn run(inv: Invocation) -> Result<ProcessOutput, OvsError> {
        let command = inv.display();
        let out = inv.run().await.map_err(|source| OvsError::Run {
            command: command.clone(),
            source,
        })?;
        if !out.status.success() {
            return Err(OvsError::Failed {
                command,
                status: out.status,
                output: out.combined_output(),
            });
        }
        Ok(out)
    }

    /// Every interface with its bridge, ofport, error and MAC: one `ovs-vsctl` call.
    pub async fn port_table(&self) -> Result<PortTable, OvsError> {
        self.port_table_for(&[], &[]).await
    }

    /// As [`Self::port_table`], limited to these bridges and ports (empty: everything).
    pub async fn port_table_for(
        &self,
        bridges: &[&InterfaceName],
        ports: &[&OvsPortName],
    ) -> Result<PortTable, OvsError> {
        let secs = self.options.timeout.as_secs().max(1);
        let mut inv = self
            .invocation(&self.options.vsctl_path)
            .arg(format!("--timeout={secs}"))
            .arg("--format=json");
        let bridge_names: Vec<&str> = bridges.iter().map(|b| b.as_str()).collect();
        for a in PortTable::vsctl_args(&bridge_names, ports) {
            inv = inv.arg(a);
        }
        let out = Self::run(inv).await?;
        PortTable::parse(&out.stdout)
    }

    /// `ovs-vsctl --timeout=<t> <args>`: returns stdout. Arguments are built by the caller from
    /// validated names and numbers only.
    pub async fn vsctl(&self, args: &[String]) -> Result<String, OvsError> {
        let secs = self.options.timeout.as_secs().max(1);
        let mut inv = self
            .invocation(&self.options.vsctl_path)
            .arg(format!("--timeout={secs}"));
        for a in args {
            inv = inv.arg(a);
        }
        Ok(Self::run(inv).await?.stdout)
    }

    /// `ovs-appctl -t <ovs-vswitchd> <args>`: returns stdout. ovs-appctl sits next to
    /// ovs-vsctl (the `[ovs]` section names only the latter). The control socket is
    /// `<rundir>/ovs-vswitchd.ctl` when vswitchd was started with that name (`--unixctl`),
    /// otherwise ovs-appctl finds `ovs-vswitchd.<pid>.ctl` through the pid file in `OVS_RUNDIR`.
    pub async fn appctl(&self, args: &[&str]) -> Result<String, OvsError> {
        let socket = self.options.rundir.join("ovs-vswitchd.ctl");
        let target = if socket.exists() {
            socket.into_os_string()
        } else {
            "ovs-vswitchd".into()
        };
        let mut inv = self
            .invocation(&self.options.appctl_path())
            .arg("-T")
            .arg(self.options.timeout.as_secs().max(1).to_string())
            .arg("-t")
            .arg(target);
        for a in args {
            inv = inv.arg(*a);
        }
        Ok(Self::run(inv).await?.stdout)
    }

    /// `ovs-ofctl dump-flows <bridge> [<filter>]` (no stats, numeric ports), OpenFlow 1.0 then
    /// 1.3. `filter` is built by the caller from numbers only (e.g. `cookie=0x3e7/-1`).
    pub async fn dump_flows(
        &self,
        bridge: &InterfaceName,
        filter: Option<&str>,
    ) -> Result<String, OvsError> {
        let mut last = None;
        for proto in DUMP_PROTOCOLS {
            let mut inv = self.invocation(&self.options.ofctl_path);
            if let Some(p) = proto {
                inv = inv.arg("-O").arg(*p);
            }
            let mut inv = inv
                .arg("--no-names")
                .arg("--no-stats")
                .arg("dump-flows")
                .arg(bridge.as_str());
            if let Some(f) = filter {
                inv = inv.arg(f);
            }
            match Self::run(inv).await {
                Ok(out) => return Ok(out.stdout),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one protocol is tried"))
    }

    /// Applies an `add-flows` batch (lines starting with `add` / `delete_strict`) read from
    /// stdin: one process for the whole batch. Tries an atomic `--bundle` (OpenFlow 1.4+) first,
    /// then plain OpenFlow 1.0, then 1.3.
    ///
    /// A line ovs-ofctl cannot parse (it names it as `-:<n>:`) is dropped and the rest is applied
    /// again, so one malformed flow does not block every other flow of the bridge. Returns the
    /// dropped lines with ovs-ofctl's complaint.
    pub async fn apply_batch(
        &self,
        bridge: &InterfaceName,
        batch: &str,
    ) -> Result<Vec<(String, String)>, OvsError> {
        const MAX_DROPPED: usize = 32;
        let mut lines: Vec<&str> = batch.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut dropped = Vec::new();
        while !lines.is_empty() {
            let mut text = lines.join("\n");
            text.push('\n');
            let err = match self.apply_once(bridge, &text).await {
                Ok(()) => return Ok(dropped),
                Err(e) => e,
            };
            match bad_line(&err) {
                Some(n) if n >= 1 && n <= lines.len() && dropped.len() < MAX_DROPPED => {
                    let line = lines.remove(n - 1);
                    tracing::warn!(%bridge, flow = line, error = %err, "ovs-ofctl rejected a flow; applying the others");
                    dropped.push((line.to_owned(), err.to_string()));
                }
                _ => return Err(err),
            }
        }
        Ok(dropped)
    }

    async fn apply_once(&self, bridge: &InterfaceName, batch: &str) -> Result<(), OvsError> {
        let preferred = self
            .preferred_variant
            .lock()
            .map(|m| m.get(bridge.as_str()).copied().unwrap_or(0))
            .unwrap_or(0);
        let order =
            std::iter::once(preferred).chain((0..APPLY_VARIANTS.len()).filter(|i| *i != preferred));
        let mut last = None;
        for variant in order {
            let mut inv = self.invocation(&self.options.ofctl_path);
            for a in APPLY_VARIANTS[variant] {
                inv = inv.arg(*a);
            }
            let inv = inv
                .arg("add-flows")
                .arg(bridge.as_str())
                .arg("-")
                .stdin(batch.as_bytes().to_vec());
            match Self::run(inv).await {
                Ok(_) => {
                    if let Ok(mut m) = self.preferred_variant.lock() {
                        m.insert(bridge.as_str().to_owned(), variant);
                    }
                    return Ok(());
                }
                // A parse error is the same under every protocol: no point retrying.
                Err(e) if bad_line(&e).is_some() => return Err(e),
                Err(e) => {
                    tracing::debug!(bridge = %bridge, error = %e, "ovs-ofctl add-flows attempt failed");
                    last = Some(e)
                }
            }
        }
        Err(last.expect("at least one attempt is made"))
    }
}

/// The 1-based stdin line ovs-ofctl complains about (`ovs-ofctl: -:3: invalid mac address zz`).
fn bad_line(err: &OvsError) -> Option<usize> {
    let OvsError::Failed { output, .. } = err else {
        return None;
    };
    output.lines().find_map(|l| {
        let rest = &l[l.find("-:")? + 2..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() || !rest[digits.len()..].starts_with(':') {
            return None;
        }
        digits.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(output: &str) -> OvsError {
        use std::os::unix::process::ExitStatusExt;
        OvsError::Failed {
            command: "ovs-ofctl add-flows br-ex -".to_owned(),
            status: std::process::ExitStatus::from_raw(256),
            output: output.to_owned(),
        }
    }

    #[test]
    fn finds_the_line_ovs_ofctl_rejected() {
        assert_eq!(
            bad_line(&failed(
                "2026-12-02T14:44:52Z|00001|ofp_match|INFO|x\novs-ofctl: -:3: invalid mac address zz"
            )),
            Some(3)
        );
        assert_eq!(
            bad_line(&failed(
                "ovs-ofctl: br-ex: failed to connect to socket (Protocol error)"
            )),
            None
        );
        assert_eq!(bad_line(&failed("version 0x05 -:x: y")), None);
    }
}
