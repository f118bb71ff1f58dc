//! Keeps a set of FRR snippets applied, cheaply.
//!
//! `vtysh -f` is only run when the snippets changed, when FRR restarted since the last apply, or
//! when the last full apply is older than the re-apply interval (which also repairs a config
//! reload or a manual `no router bgp …` that did not restart anything).
//!
//! Restart detection costs no process: every FRR daemon creates its `<daemon>.vty` socket anew
//! when it starts (unlinks the old one and binds), so the identity (inode, change time) of the
//! sockets in the vty directory changes with every daemon restart. Comparing that fingerprint is
//! a few `stat` calls.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::FrrError;
use super::batch;
use super::vtysh::Vtysh;
use crate::caps::{CapError, FrrConfigurator};

/// Identity of the running FRR daemons: vty socket name → (inode, ctime in ns).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FrrFingerprint(BTreeMap<String, (u64, i128)>);

impl FrrFingerprint {
    /// Reads the fingerprint of the daemons whose sockets are in `dir`.
    ///
    /// The directory, the pid files and `/proc` are read in place, not through `tokio::fs`:
    /// these are a dozen syscalls on a runtime directory and procfs (tens of microseconds),
    /// and every reconcile reads the fingerprint, where handing each call to the blocking pool
    /// cost more in thread wake-ups than the calls themselves (about 0.15 ms per event at 1k
    /// exposures, issue 17). Only a daemon whose pid names no process is asked over its
    /// socket, asynchronously.
    pub async fn read(dir: &Path) -> Result<Self, FrrError> {
        use std::os::unix::fs::MetadataExt;
        let socket_dir = |source| FrrError::SocketDir {
            dir: dir.to_path_buf(),
            source,
        };
        let mut map = BTreeMap::new();
        for entry in std::fs::read_dir(dir).map_err(socket_dir)? {
            let entry = entry.map_err(socket_dir)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".vty") {
                continue;
            }
            // A daemon killed hard leaves its socket behind; its pid file (FRR writes
            // `<daemon>.pid` next to the socket by default) tells whether it still runs. A dead
            // daemon's socket is left out, so the fingerprint changes and the next apply is tried
            // (and fails loudly) instead of reporting "already applied".
            let daemon = name.trim_end_matches(".vty");
            if !daemon_alive(&dir.join(format!("{daemon}.pid")), &entry.path()).await {
                continue;
            }
            // A socket vanishing between readdir and stat is a restart in progress: skip it,
            // the changed set of names makes the fingerprint differ anyway.
            if let Ok(meta) = entry.metadata() {
                let ctime =
                    i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec());
                map.insert(name, (meta.ino(), ctime));
            }
        }
        Ok(Self(map))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// False only when a pid file exists, names no process this agent can see, and the daemon's
/// vty socket refuses connections. The socket is asked because the agent may run in a PID
/// namespace of its own (a container without `--pid host`), where FRR's pids name nothing: a
/// live daemon accepts the connection, a dead one's leftover socket refuses it. A pid file that
/// cannot be trusted (see [`read_pid_file`]) is reported and the daemon counted as running, as
/// before the pid file was consulted at all.
async fn daemon_alive(pid_file: &Path, socket: &Path) -> bool {
    match read_pid_file(pid_file) {
        Ok(Some(pid)) => {
            std::fs::metadata(format!("/proc/{pid}")).is_ok()
                || matches!(
                    tokio::time::timeout(
                        std::time::Duration::from_secs(1),
                        tokio::net::UnixStream::connect(socket)
                    )
                    .await,
                    Ok(Ok(_))
                )
        }
        Ok(None) => true,
        Err(e) => {
            tracing::warn!("{e}; counting the daemon as running");
            true
        }
    }
}

/// Most bytes read from a pid file: a pid and a newline fit many times over.
const PID_FILE_MAX: usize = 32;

/// Why a pid file was not used.
#[derive(Debug, thiserror::Error)]
#[error("FRR pid file {path}: {reason}")]
pub struct PidFileError {
    pub path: std::path::PathBuf,
    pub reason: String,
    #[source]
    pub source: Option<std::io::Error>,
}

/// Reads the pid in `path` (`None`: no such file), trusting nothing about the file: it lives in
/// a directory the `frr` user owns, and the agent runs as root. Opened with `O_NOFOLLOW` (a
/// symlink to `/dev/zero` or to a file of root's is refused) and `O_NONBLOCK` (opening a FIFO
/// does not wait for a writer), then only a regular file is read (`fstat` on what was opened,
/// so it cannot be swapped in between), and at most [`PID_FILE_MAX`] bytes of it.
pub fn read_pid_file(path: &Path) -> Result<Option<u32>, PidFileError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let fail = |reason: String, source: Option<std::io::Error>| PidFileError {
        path: path.to_path_buf(),
        reason,
        source,
    };
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(fail("is a symbolic link, not read".into(), None));
        }
        Err(e) => return Err(fail("cannot open".into(), Some(e))),
    };
    let kind = file
        .metadata()
        .map_err(|e| fail("cannot stat".into(), Some(e)))?
        .file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        return Err(fail(format!("is {what}, not read"), None));
    }
    let mut buf = [0u8; PID_FILE_MAX + 1];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(fail("cannot read".into(), Some(e))),
        }
    }
    if len > PID_FILE_MAX {
        return Err(fail(
            format!("longer than {PID_FILE_MAX} bytes, not a pid file"),
            None,
        ));
    }
    let text = std::str::from_utf8(&buf[..len]).unwrap_or("");
    if text.trim().is_empty() {
        // A daemon that is starting and has not written its pid yet.
        return Ok(None);
    }
    text.trim()
        .parse::<u32>()
        .map(Some)
        .map_err(|_| fail(format!("holds {:?}, not a pid", text.trim()), None))
}

#[derive(Debug, Default)]
struct Applied {
    snippets: Vec<String>,
    fingerprint: FrrFingerprint,
    at: Option<Instant>,
}

/// [`FrrConfigurator`] backed by `vtysh`.
pub struct VtyshConfigurator {
    vtysh: Vtysh,
    full_reapply_interval: Duration,
    applied: Mutex<Applied>,
    /// The snippets last asked for (applied or not), for [`Self::spawn_restart_watch`].
    requested: std::sync::Mutex<Option<Vec<String>>>,
}

impl VtyshConfigurator {
    /// Default interval after which the snippets are re-applied even if nothing was detected.
    pub const DEFAULT_FULL_REAPPLY: Duration = Duration::from_secs(300);

    pub fn from_config(config: &crate::config::AgentConfig) -> Self {
        Self::new(Vtysh::new(super::VtyshOptions::from_config(&config.frr)))
    }

    pub fn new(vtysh: Vtysh) -> Self {
        Self::with_full_reapply_interval(vtysh, Self::DEFAULT_FULL_REAPPLY)
    }

    pub fn with_full_reapply_interval(vtysh: Vtysh, full_reapply_interval: Duration) -> Self {
        Self {
            vtysh,
            full_reapply_interval,
            applied: Mutex::new(Applied::default()),
            requested: std::sync::Mutex::new(None),
        }
    }

    pub fn vtysh(&self) -> &Vtysh {
        &self.vtysh
    }

    /// Makes sure `snippets` are applied; returns how many were (re)applied (0: nothing to do).
    ///
    /// The snippets go to one `vtysh -f` run (per [`batch::MAX_SNIPPETS_PER_RUN`]). A snippet
    /// dropped from the list is not undone: FRR configuration is additive, so removal is
    /// explicit ([`Self::remove`] with the matching `no …` snippet, e.g. [`super::DelVrf`]).
    pub async fn ensure_applied(&self, snippets: &[String]) -> Result<usize, FrrError> {
        for (index, snippet) in snippets.iter().enumerate() {
            check_snippet(index, snippet)?;
        }
        if let Ok(mut requested) = self.requested.lock() {
            *requested = Some(snippets.to_vec());
        }
        // Serialises concurrent callers; an async mutex, so holding it across vtysh is fine.
        let mut applied = self.applied.lock().await;
        let fingerprint = FrrFingerprint::read(&self.vtysh.options().vty_socket_dir).await?;
        let fresh = applied
            .at
            .is_some_and(|at| at.elapsed() < self.full_reapply_interval);
        if fresh
            && !fingerprint.is_empty()
            && applied.fingerprint == fingerprint
            && applied.snippets == snippets
        {
            return Ok(0);
        }
        if snippets.is_empty() {
            *applied = Applied {
                snippets: Vec::new(),
                fingerprint,
                at: Some(Instant::now()),
            };
            return Ok(0);
        }
        if !applied.fingerprint.is_empty() && applied.fingerprint != fingerprint {
            crate::telemetry::global::FRR_RESTARTS.inc();
            tracing::warn!(
                dir = %self.vtysh.options().vty_socket_dir.display(),
                "FRR daemons restarted since the last apply; re-applying the agent's configuration"
            );
        }
        // Forget the previous state first: if this apply fails, the next call must retry.
        *applied = Applied::default();
        // The snippets in as few `vtysh -f` runs as they fit, each closed so the next is read
        // from the configuration node (see `batch`). vtysh goes on past a line FRR refuses, so
        // the others are applied all the same, and its output (in the error) names the line.
        for chunk in snippets.chunks(batch::MAX_SNIPPETS_PER_RUN) {
            self.vtysh
                .apply(&batch::joined(chunk.iter().map(String::as_str)))
                .await?;
        }
        *applied = Applied {
            snippets: snippets.to_vec(),
            fingerprint,
            at: Some(Instant::now()),
        };
        Ok(snippets.len())
    }

    /// Applies a removal snippet (`no …` lines, e.g. [`super::DelVrf`]) once. Only the lines
    /// whose object is in the running configuration are sent: FRR fails a `no router bgp … vrf X`
    /// for an instance that is already gone ("Can't find BGP instance"), so removing twice must
    /// not be an error. A removal that enters a block (`interface X` … `exit`) is sent as it is
    /// and must be idempotent. Returns how many lines were applied.
    pub async fn remove(&self, removal: &str) -> Result<usize, FrrError> {
        self.remove_all(&[removal]).await
    }

    /// [`Self::remove`] for several removals, in one vtysh run per
    /// [`batch::MAX_SNIPPETS_PER_RUN`]: the running configuration is read once and each
    /// removal's `no` lines filtered against it. Returns how many lines were applied. On an
    /// error, callers removing several objects fall back to [`Self::remove`] one by one, which
    /// sends only what is still configured.
    pub(crate) async fn remove_all(&self, removals: &[&str]) -> Result<usize, FrrError> {
        for (index, removal) in removals.iter().enumerate() {
            check_snippet(index, removal)?;
        }
        let _serialised = self.applied.lock().await;
        let running = self.vtysh.running_config().await?;
        let mut parts = Vec::with_capacity(removals.len());
        let mut lines = 0;
        for removal in removals {
            let pending = if only_no_lines(removal) {
                existing_removals(removal, &running)
            } else {
                removal
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_owned)
                    .collect()
            };
            if !pending.is_empty() {
                lines += pending.len();
                parts.push(pending.join("\n"));
            }
        }
        for chunk in parts.chunks(batch::MAX_SNIPPETS_PER_RUN) {
            self.vtysh
                .apply(&batch::joined(chunk.iter().map(String::as_str)))
                .await?;
        }
        Ok(lines)
    }

    /// Runs `vtysh -f` with `config`, serialised with the other applies of this configurator
    /// (two concurrent configuration sessions could interleave). Does not touch the record of
    /// applied snippets.
    pub(crate) async fn apply_serialised(&self, config: &str) -> Result<(), FrrError> {
        check_snippet(0, config)?;
        let _serialised = self.applied.lock().await;
        self.vtysh.apply(config).await
    }

    /// Re-runs [`Self::ensure_applied`] with the last requested snippets every `interval`
    /// (upstream's `frr_reconcile_interval`, 15 s): an FRR restart is noticed by the (free)
    /// fingerprint check and the configuration re-applied, whatever the rest of the agent is
    /// doing. Failures are logged and retried at the next tick. Abort the handle to stop.
    pub fn spawn_restart_watch(self: Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let requested = self.requested.lock().ok().and_then(|r| r.clone());
                let Some(snippets) = requested else {
                    continue;
                };
                match self.ensure_applied(&snippets).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(snippets = n, "FRR configuration re-applied"),
                    Err(e) => {
                        tracing::warn!(error = %e, "FRR configuration check failed; will retry")
                    }
                }
            }
        })
    }

    /// Forces the next [`Self::ensure_applied`] to run `vtysh -f`.
    pub async fn invalidate(&self) {
        *self.applied.lock().await = Applied::default();
    }
}

/// True when every line of `removal` is a top-level `no …` (which [`existing_removals`] can
/// filter against the running configuration); false for one that enters a block.
fn only_no_lines(removal: &str) -> bool {
    removal
        .lines()
        .filter(|l| !l.trim().is_empty())
        .all(|l| l.starts_with("no "))
}

/// The `no X` lines of `removal` whose `X` heads a line of the running configuration (exactly,
/// or followed by more words such as `interface veth-1 vrf vrf-1`).
fn existing_removals(removal: &str, running: &str) -> Vec<String> {
    let present: Vec<&str> = running.lines().map(str::trim).collect();
    removal
        .lines()
        .map(str::trim)
        .filter_map(|line| {
            let object = line.strip_prefix("no ")?;
            present
                .iter()
                .any(|p| *p == object || p.starts_with(&format!("{object} ")))
                .then(|| line.to_owned())
        })
        .collect()
}

/// Snippets are rendered from validated values; this is the last line of defence against a
/// snippet built some other way: only printable ASCII and newlines reach vtysh.
pub(crate) fn check_snippet(index: usize, snippet: &str) -> Result<(), FrrError> {
    if let Some(bad) = snippet
        .chars()
        .find(|c| !(*c == '\n' || (' '..='~').contains(c)))
    {
        return Err(FrrError::UnsafeSnippet {
            index,
            character: bad,
        });
    }
    Ok(())
}

#[async_trait]
impl FrrConfigurator for VtyshConfigurator {
    async fn ensure(&self, snippets: &[String]) -> Result<usize, CapError> {
        Ok(self.ensure_applied(snippets).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_keep_only_existing_objects() {
        let removal =
            "no vrf vrf-1001\nno interface veth-vrf-1001\nno router bgp 64999 vrf vrf-1001\n\n";
        let running = "!\nvrf vrf-1001\n vni 1001\nexit-vrf\n!\nrouter bgp 64999\nexit\n";
        assert_eq!(existing_removals(removal, running), ["no vrf vrf-1001"]);
        let running = "router bgp 64999 vrf vrf-1001\ninterface veth-vrf-1001 vrf vrf-1001\n";
        assert_eq!(
            existing_removals(removal, running),
            [
                "no interface veth-vrf-1001",
                "no router bgp 64999 vrf vrf-1001"
            ]
        );
        assert!(existing_removals(removal, "router bgp 64999 vrf vrf-10010\n").is_empty());
    }

    #[test]
    fn snippets_with_control_characters_are_refused() {
        assert!(check_snippet(0, "router bgp 1\n  bgp router-id 1.2.3.4\n").is_ok());
        assert!(check_snippet(0, "router bgp 1\r\n").is_err());
        assert!(check_snippet(0, "router bgp 1\0").is_err());
        assert!(check_snippet(0, "router bgp 1\x1b[A").is_err());
        assert!(check_snippet(0, "router bgp é").is_err());
    }
}
