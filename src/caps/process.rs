//! Running an external tool (`vtysh`, `ovs-vsctl`, `ovs-ofctl`) as an argument vector, never
//! through a shell, with a deadline.
//!
//! The child runs in its own process group so that a timeout kills everything it started (a
//! wrapper script's `sleep`, a pager), not just the direct child: a hung tool must never hold the
//! agent's reconcile loop.

// Unsafe code allowed in this file only: `pre_exec` to put the child in its own process group.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// What a finished tool printed and how it exited.
#[derive(Debug, Clone)]
pub struct ProcessOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ProcessOutput {
    /// stdout and stderr together, trimmed, for error messages (tools differ in where they
    /// print their complaints: vtysh uses stdout, ovs-ofctl stderr).
    pub fn combined_output(&self) -> String {
        let mut text = String::new();
        for part in [self.stdout.trim(), self.stderr.trim()] {
            if !part.is_empty() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(part);
            }
        }
        text
    }
}

/// Why a tool could not be run to completion.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} did not finish within {timeout:?} and was killed")]
    Timeout { program: PathBuf, timeout: Duration },
    #[error("waiting for {program} failed: {source}")]
    Wait {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One invocation: program, arguments, extra environment, optional stdin, deadline.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
}

impl Invocation {
    pub fn new(program: impl AsRef<Path>, timeout: Duration) -> Self {
        Self {
            program: program.as_ref().to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
            stdin: None,
            timeout,
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn stdin(mut self, data: Vec<u8>) -> Self {
        self.stdin = Some(data);
        self
    }

    /// The command line for error messages (arguments are validated values, so printing them is
    /// safe and tells the operator exactly what ran).
    pub fn display(&self) -> String {
        let mut s = self.program.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    /// Runs to completion or kills the whole process group at the deadline.
    pub async fn run(&self) -> Result<ProcessOutput, RunError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
            program: self.program.clone(),
            source,
        })?;
        let pgid = child.id();
        if let (Some(data), Some(mut pipe)) = (self.stdin.clone(), child.stdin.take()) {
            // Written concurrently with reading the output so a large input cannot deadlock
            // against a full stdout pipe. A write error shows up as the tool's own failure.
            tokio::spawn(async move {
                let _ = pipe.write_all(&data).await;
                let _ = pipe.shutdown().await;
            });
        }
        match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(Ok(out)) => Ok(ProcessOutput {
                status: out.status,
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
            Ok(Err(source)) => Err(RunError::Wait {
                program: self.program.clone(),
                source,
            }),
            Err(_elapsed) => {
                if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()) {
                    // SAFETY: kill(2) with a negative pid signals the process group we created
                    // for this child (process_group(0) made its pid the group id).
                    unsafe {
                        libc::kill(-pgid, libc::SIGKILL);
                    }
                }
                Err(RunError::Timeout {
                    program: self.program.clone(),
                    timeout: self.timeout,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn captures_output_and_status() {
        let out = Invocation::new("/bin/sh", Duration::from_secs(5))
            .arg("-c")
            .arg("echo out; echo err >&2; exit 3")
            .run()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.combined_output(), "out\nerr");
    }

    #[tokio::test]
    async fn feeds_stdin() {
        let out = Invocation::new("/bin/cat", Duration::from_secs(5))
            .stdin(b"hello".to_vec())
            .run()
            .await
            .unwrap();
        assert_eq!(out.stdout, "hello");
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let start = tokio::time::Instant::now();
        let err = Invocation::new("/bin/sh", Duration::from_millis(500))
            .arg("-c")
            .arg(script)
            .run()
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Timeout { .. }), "{err}");
        assert!(start.elapsed() < Duration::from_secs(5));
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        let proc_path = format!("/proc/{}", pid.trim());
        // The grandchild `sleep` must be gone (or a zombie about to be reaped by init).
        for _ in 0..50 {
            let state = std::fs::read_to_string(format!("{proc_path}/stat")).unwrap_or_default();
            if state.is_empty() || state.contains(") Z") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("grandchild {pid} survived the timeout");
    }
}
