//! Work inside the configured network namespace (`[linux] netns`).
//!
//! A netlink socket belongs to the namespace of the thread that created it, and `/proc/sys/net`
//! shows the namespace of the thread that opens it. So one dedicated OS thread enters the
//! namespace once (`setns`) and runs the jobs that need it: opening the netlink socket and reading
//! or writing sysctls. The async runtime's own threads never change namespace.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use nix::sched::{CloneFlags, setns};
use tokio::sync::oneshot;

use super::NetlinkError;

type Job = Box<dyn FnOnce() + Send>;

/// Where the agent's kernel work happens: its own namespace, or a named/pathed one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetnsTarget {
    /// The namespace the agent runs in.
    Current,
    /// A namespace file (`/run/netns/<name>` for a name given without `/`).
    Path(PathBuf),
}

impl NetnsTarget {
    /// From `[linux] netns`: empty or absent means the agent's own namespace.
    pub fn from_config(netns: Option<&str>) -> Self {
        match netns.map(str::trim) {
            None | Some("") => Self::Current,
            Some(n) if n.contains('/') => Self::Path(PathBuf::from(n)),
            Some(n) => Self::Path(Path::new("/run/netns").join(n)),
        }
    }

    /// For messages: `the current network namespace` or `network namespace /run/netns/x`.
    pub fn describe(&self) -> String {
        match self {
            Self::Current => "the agent's network namespace".to_owned(),
            Self::Path(p) => format!("network namespace {}", p.display()),
        }
    }
}

/// A thread living in the target namespace, running jobs handed to it.
pub struct NetnsWorker {
    target: NetnsTarget,
    jobs: mpsc::Sender<Job>,
}

impl NetnsWorker {
    /// Start the thread and enter the namespace; fails if the namespace cannot be entered.
    pub fn spawn(target: NetnsTarget) -> Result<Self, NetlinkError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), std::io::Error>>();
        let enter = target.clone();
        std::thread::Builder::new()
            .name("netns-worker".to_owned())
            .spawn(move || {
                let entered = match &enter {
                    NetnsTarget::Current => Ok(()),
                    NetnsTarget::Path(path) => File::open(path).and_then(|f| {
                        setns(&f, CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
                    }),
                };
                let ok = entered.is_ok();
                let _ = ready_tx.send(entered);
                if ok {
                    while let Ok(job) = queue.recv() {
                        job();
                    }
                }
            })
            .map_err(|source| NetlinkError::Netns {
                netns: target.describe(),
                source,
            })?;
        let entered = ready_rx.recv().unwrap_or_else(|_| {
            Err(std::io::Error::other(
                "the namespace thread exited at start",
            ))
        });
        entered.map_err(|source| NetlinkError::Netns {
            netns: target.describe(),
            source,
        })?;
        Ok(Self { target, jobs })
    }

    pub fn target(&self) -> &NetnsTarget {
        &self.target
    }

    /// Run `f` on the namespace thread and wait for its result without blocking the runtime.
    pub async fn run<R, F>(&self, f: F) -> Result<R, NetlinkError>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.jobs
            .send(job)
            .map_err(|_| NetlinkError::WorkerGone(self.target.describe()))?;
        rx.await
            .map_err(|_| NetlinkError::WorkerGone(self.target.describe()))
    }
}
