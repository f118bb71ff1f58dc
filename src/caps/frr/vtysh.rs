//! `vtysh` as a tool: apply a configuration file, run fixed `show` queries.
//!
//! Configuration goes through a file in a fresh private directory (0700) with mode 0600, passed
//! with `-f`; nothing is ever given to a shell. Queries are a closed set ([`ShowQuery`]) whose
//! command text is built from validated names only.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt;

use super::FrrError;
use super::values::{RouterId, VrfName};
use crate::caps::process::{Invocation, ProcessOutput};
use crate::config::FrrSection;

/// Where `vtysh` is and how long it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VtyshOptions {
    pub vtysh_path: PathBuf,
    /// Directory holding the daemons' `*.vty` sockets (`--vty_socket`).
    pub vty_socket_dir: PathBuf,
    pub timeout: Duration,
}

impl VtyshOptions {
    /// vtysh is resolved to an absolute path here, once (see
    /// [`crate::caps::process::resolve_tool_or_warn`]).
    pub fn from_config(frr: &FrrSection) -> Self {
        Self {
            vtysh_path: crate::caps::process::resolve_tool_or_warn(
                "[frr] vtysh_path",
                &frr.vtysh_path,
            ),
            vty_socket_dir: PathBuf::from(&frr.vty_socket_dir),
            timeout: Duration::from_secs(frr.vtysh_timeout.max(1)),
        }
    }
}

/// The read-only queries the agent makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShowQuery {
    /// `show ip bgp summary json` (router id discovery, A3).
    IpBgpSummaryJson,
    /// `show ip bgp json` (the default instance's IPv4 RIB).
    IpBgpJson,
    /// `show ip bgp vrf <vrf> json`.
    IpBgpVrfJson(VrfName),
    /// `show running-config`.
    RunningConfig,
}

impl ShowQuery {
    pub fn command(&self) -> String {
        match self {
            Self::IpBgpSummaryJson => "show ip bgp summary json".to_owned(),
            Self::IpBgpJson => "show ip bgp json".to_owned(),
            Self::IpBgpVrfJson(vrf) => format!("show ip bgp vrf {vrf} json"),
            Self::RunningConfig => "show running-config".to_owned(),
        }
    }
}

/// Part of `show ip bgp summary json` the agent reads.
#[derive(Debug, Clone, Deserialize)]
pub struct BgpSummary {
    #[serde(rename = "ipv4Unicast")]
    pub ipv4_unicast: Option<BgpAfiSummary>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct BgpAfiSummary {
    #[serde(rename = "routerId")]
    pub router_id: Option<String>,
    #[serde(rename = "as")]
    pub asn: Option<u32>,
}

/// Part of `show ip bgp [vrf X] json`: prefixes present in the RIB.
#[derive(Debug, Clone, Deserialize)]
pub struct BgpRib {
    #[serde(default)]
    pub routes: std::collections::BTreeMap<String, serde_json::Value>,
}

/// Runs `vtysh`.
#[derive(Debug, Clone)]
pub struct Vtysh {
    options: VtyshOptions,
}

impl Vtysh {
    pub fn new(options: VtyshOptions) -> Self {
        Self { options }
    }

    pub fn options(&self) -> &VtyshOptions {
        &self.options
    }

    fn invocation(&self) -> Invocation {
        Invocation::new(&self.options.vtysh_path, self.options.timeout)
            .arg("--vty_socket")
            .arg(self.options.vty_socket_dir.as_os_str())
    }

    async fn run(&self, inv: Invocation) -> Result<ProcessOutput, FrrError> {
        let command = inv.display();
        let out = inv.run().await.map_err(|source| FrrError::Run {
            command: command.clone(),
            source,
        })?;
        if !out.status.success() {
            return Err(FrrError::VtyshFailed {
                command,
                status: out.status,
                output: out.combined_output(),
            });
        }
        Ok(out)
    }

    /// Applies `config` with `vtysh -f <private file>`. The file lives in a new 0700 directory
    /// that is removed afterwards, whatever happened.
    pub async fn apply(&self, config: &str) -> Result<(), FrrError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("oba-frr-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|source| FrrError::ConfigFile { source })?;
        let path = dir.path().join("frr-snippet.conf");
        write_private(&path, config)
            .await
            .map_err(|source| FrrError::ConfigFile { source })?;
        let inv = self.invocation().arg("-f").arg(path.as_os_str());
        let result = self.run(inv).await;
        drop(dir);
        result.map(|_| ())
    }

    /// Runs a query and returns its raw output.
    pub async fn show(&self, query: &ShowQuery) -> Result<String, FrrError> {
        let inv = self.invocation().arg("-c").arg(query.command());
        Ok(self.run(inv).await?.stdout)
    }

    /// Runs a `... json` query and parses it.
    pub async fn show_json<T: DeserializeOwned>(&self, query: &ShowQuery) -> Result<T, FrrError> {
        let text = self.show(query).await?;
        serde_json::from_str(&text).map_err(|source| FrrError::BadJson {
            command: query.command(),
            source,
        })
    }

    /// The default instance's router id (`show ip bgp summary json` → `ipv4Unicast.routerId`),
    /// used when `bgp_router_id` is not configured (A3).
    pub async fn bgp_router_id(&self) -> Result<RouterId, FrrError> {
        let summary: BgpSummary = self.show_json(&ShowQuery::IpBgpSummaryJson).await?;
        let raw = summary
            .ipv4_unicast
            .and_then(|s| s.router_id)
            .ok_or(FrrError::NoRouterId)?;
        raw.parse().map_err(FrrError::Value)
    }

    /// `show running-config`.
    pub async fn running_config(&self) -> Result<String, FrrError> {
        self.show(&ShowQuery::RunningConfig).await
    }
}

/// Creates `path` with mode 0600 (never follows or reuses an existing file) and writes `text`.
async fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut f = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await?;
    f.write_all(text.as_bytes()).await?;
    f.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in vtysh that records its arguments, the mode of the file and directory it is
    /// given and the file's content: proves the argument vector and the private file.
    #[tokio::test]
    async fn apply_passes_a_private_file_with_f() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let fake = dir.path().join("vtysh");
        let script = format!(
            "#!/bin/sh\n{{ echo \"$1|$2|$3\"; stat -c %a \"$4\" \"$(dirname \"$4\")\"; cat \"$4\"; }} > {}\n",
            log.display()
        );
        // Written by a child process: a script file held open for writing by this
        // multi-threaded test process could leak into a sibling test's fork and make the exec
        // fail with ETXTBSY.
        let written = Invocation::new("/bin/sh", Duration::from_secs(5))
            .arg("-c")
            .arg("cat > \"$0\" && chmod 755 \"$0\"")
            .arg(fake.as_os_str())
            .stdin(script.into_bytes())
            .run()
            .await
            .unwrap();
        assert!(written.status.success());
        let vtysh = Vtysh::new(VtyshOptions {
            vtysh_path: fake,
            vty_socket_dir: "/run/frr-test/".into(),
            timeout: Duration::from_secs(5),
        });
        vtysh.apply("router bgp 64999\n").await.unwrap();
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "--vty_socket|/run/frr-test/|-f\n600\n700\nrouter bgp 64999\n"
        );
    }

    /// vtysh as configured (`[frr] vtysh_path`, a bare name found in PATH or a path) runs by
    /// its absolute path with a clean environment: a stand-in that dumps what it got.
    #[tokio::test]
    async fn vtysh_from_config_runs_by_absolute_path_with_a_clean_environment() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("vtysh");
        let script = "#!/bin/sh\necho \"argv0=$0\"\nenv\n";
        let written = Invocation::new("/bin/sh", Duration::from_secs(5))
            .arg("-c")
            .arg("cat > \"$0\" && chmod 755 \"$0\"")
            .arg(fake.as_os_str())
            .stdin(script.as_bytes().to_vec())
            .run()
            .await
            .unwrap();
        assert!(written.status.success());
        let section = FrrSection {
            vtysh_path: fake.to_str().unwrap().to_owned(),
            ..FrrSection::default()
        };
        let vtysh = Vtysh::new(VtyshOptions::from_config(&section));
        assert_eq!(vtysh.options().vtysh_path, fake);
        let out = vtysh.running_config().await.unwrap();
        assert!(out.contains(&format!("argv0={}", fake.display())), "{out}");
        assert!(out.contains("LANG=C\n"), "{out}");
        assert!(
            out.contains(&format!("PATH={}\n", crate::caps::process::TOOL_PATH)),
            "{out}"
        );
        for inherited in ["CARGO_", "HOME=", "USER=", "RUST_"] {
            assert!(
                !out.contains(inherited),
                "{inherited} leaked into vtysh: {out}"
            );
        }
    }

    #[tokio::test]
    async fn failure_carries_status_and_output() {
        let vtysh = Vtysh::new(VtyshOptions {
            vtysh_path: "/bin/sh".into(),
            vty_socket_dir: "/nonexistent".into(),
            timeout: Duration::from_secs(5),
        });
        // `sh --vty_socket …` fails with sh's own complaint: stands in for vtysh's.
        let err = vtysh.running_config().await.unwrap_err();
        match err {
            FrrError::VtyshFailed {
                command,
                status,
                output,
            } => {
                assert!(command.contains("-c show running-config"), "{command}");
                assert!(!status.success());
                assert!(!output.is_empty());
            }
            other => panic!("{other}"),
        }
    }
}
