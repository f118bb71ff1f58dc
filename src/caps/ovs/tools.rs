//! `ovs-vsctl` and `ovs-ofctl` invocations.
//!
//! Both tools find their sockets through `OVS_RUNDIR` (`db.sock`, `<bridge>.mgmt`), so the
//! configured run directory is passed that way: one setting serves both tools, and bridge names
//! stay plain arguments (validated [`InterfaceName`]s).

use std::path::PathBuf;
use std::time::Duration;

use super::OvsError;
use super::ports::PortTable;
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

    pub fn from_config(ovs: &OvsSection) -> Self {
        Self {
            vsctl_path: PathBuf::from(&ovs.ovs_vsctl_path),
            ofctl_path: PathBuf::from(&ovs.ovs_ofctl_path),
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
}

impl OvsTools {
    pub fn new(options: OvsOptions) -> Self {
        Self { options }
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
        let secs = self.options.timeout.as_secs().max(1);
        let mut inv = self
            .invocation(&self.options.vsctl_path)
            .arg(format!("--timeout={secs}"))
            .arg("--format=json");
        for a in PortTable::vsctl_args() {
            inv = inv.arg(a);
        }
        let out = Self::run(inv).await?;
        PortTable::parse(&out.stdout)
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
        let attempts: [&[&str]; 3] = [&["--bundle"], &[], &["-O", "OpenFlow13"]];
        let mut last = None;
        for extra in attempts {
            let mut inv = self.invocation(&self.options.ofctl_path);
            for a in extra {
                inv = inv.arg(*a);
            }
            let inv = inv
                .arg("add-flows")
                .arg(bridge.as_str())
                .arg("-")
                .stdin(batch.as_bytes().to_vec());
            match Self::run(inv).await {
                Ok(_) => return Ok(()),
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
