//! The agent binary run against a lab: started with the lab's `bgp-agent.conf` plus test
//! overrides (short intervals), its log kept in the lab directory, stopped with SIGTERM (as an
//! operator's service manager does) or killed, and always stopped when dropped.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]
#![allow(dead_code)] // each test binary uses a different part of the fixture

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Agent {
    child: Option<Child>,
    /// Extra environment of the agent process (e.g. systemd's `NOTIFY_SOCKET`).
    env: Vec<(String, String)>,
    /// A command line the agent is started through (`ip netns exec NS setpriv ...`), which
    /// must exec the agent so that the child is the agent itself; empty: none.
    wrapper: Vec<String>,
    log: PathBuf,
    config: PathBuf,
    overrides: PathBuf,
}

impl Agent {
    /// Start the agent with the lab's configuration and `overrides` (INI text, e.g.
    /// `[DEFAULT]\nreconcile_interval = 5\n`) layered on top.
    pub(crate) fn start(lab_dir: &Path, overrides: &str) -> Agent {
        Self::start_with_env(lab_dir, overrides, &[])
    }

    /// [`Agent::start`] with extra environment variables for the agent process.
    pub(crate) fn start_with_env(lab_dir: &Path, overrides: &str, env: &[(&str, &str)]) -> Agent {
        Self::start_wrapped(lab_dir, overrides, env, &[])
    }

    /// [`Agent::start_with_env`] through `wrapper` (e.g. `setpriv` with a user and
    /// capabilities), which must end by exec'ing the agent's command line it is given.
    pub(crate) fn start_wrapped(
        lab_dir: &Path,
        overrides: &str,
        env: &[(&str, &str)],
        wrapper: &[String],
    ) -> Agent {
        let overrides_path = lab_dir.join("agent-test-overrides.conf");
        std::fs::write(&overrides_path, overrides).expect("write agent overrides");
        let mut agent = Agent {
            child: None,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            wrapper: wrapper.to_vec(),
            log: lab_dir.join("agent.log"),
            config: lab_dir.join("bgp-agent.conf"),
            overrides: overrides_path,
        };
        agent.spawn();
        agent
    }

    fn spawn(&mut self) {
        let agent = env!("CARGO_BIN_EXE_ovn-bgp-agent");
        let mut command = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(agent);
                c
            }
            None => Command::new(agent),
        };
        let child = command
            .arg("--config-file")
            .arg(&self.config)
            .arg("--config-file")
            .arg(&self.overrides)
            .arg("--log-file")
            .arg(&self.log)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ovn-bgp-agent");
        self.child = Some(child);
    }

    /// The agent's process id (the wrapper's exec keeps it); `None` once stopped.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGTERM, then wait for a clean exit; returns how long the agent took to stop.
    pub(crate) fn stop(&mut self) -> Duration {
        let Some(mut child) = self.child.take() else {
            return Duration::ZERO;
        };
        let started = Instant::now();
        // SAFETY-free: kill(2) through the `kill` command keeps this test code dependency-free.
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                assert!(
                    status.success(),
                    "agent exited with {status} on SIGTERM\n{}",
                    self.log_tail()
                );
                return started.elapsed();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "agent did not stop within 10 s of SIGTERM\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Start again after [`Agent::stop`], appending to the same log.
    pub(crate) fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Panics with the log tail if the agent process has exited.
    pub(crate) fn assert_running(&mut self) {
        if let Some(child) = &mut self.child
            && let Ok(Some(status)) = child.try_wait()
        {
            panic!("the agent exited ({status}):\n{}", self.log_tail());
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log's lines that contain any of `needles`, each with the two lines before it (a
    /// failure's cause may be far from the log's tail).
    pub(crate) fn log_lines_with(&self, needles: &[&str]) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        let mut out = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if needles.iter().any(|n| line.contains(n)) {
                out.extend_from_slice(&lines[i.saturating_sub(2)..=i]);
                out.push("--");
            }
        }
        out.join("\n")
    }

    pub(crate) fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
