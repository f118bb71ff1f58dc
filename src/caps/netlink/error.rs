//! Errors of the kernel capability, each naming the object and carrying the kernel's own answer.

use std::fmt;

/// An errno returned by the kernel for one netlink request (displayed as the OS message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelErrno(pub i32);

impl KernelErrno {
    pub fn io(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(self.0)
    }
}

impl fmt::Display for KernelErrno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.io())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("cannot enter {netns}: {source}")]
    Netns {
        netns: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the worker thread of {0} is gone")]
    WorkerGone(String),
    #[error("cannot open a netlink socket in {netns}: {source}")]
    Socket {
        netns: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the netlink connection to the kernel is closed ({0})")]
    ConnectionClosed(String),
    #[error("{op} failed: {errno}")]
    Kernel { op: String, errno: KernelErrno },
    #[error("netlink {op}: unexpected reply: {detail}")]
    Unexpected { op: String, detail: String },
    #[error("cannot create {name} of kind {kind}: the kernel has no {kind} support ({fix})")]
    MissingKind {
        name: String,
        kind: String,
        fix: String,
    },
    #[error("invalid {object}: {reason}")]
    Invalid { object: String, reason: String },
    #[error(
        "{op}: no answer from the kernel within {timeout:?} ({netns}); the netlink session is dropped and reopened"
    )]
    Timeout {
        op: String,
        netns: String,
        timeout: std::time::Duration,
    },
    #[error(
        "{op}: the netlink receive buffer overflowed in {netns} (ENOBUFS), answers were lost; the session is dropped and the next reconcile reads everything afresh"
    )]
    Resync { op: String, netns: String },
    #[error(
        "the kernel mirror of {netns} stopped following the kernel ({detail}); the kernel is read by dumps until a new mirror is up"
    )]
    MirrorLost { netns: String, detail: String },
    #[error("sysctl {key} ({path}): {source}")]
    Sysctl {
        key: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl NetlinkError {
    /// After this error the session cannot be trusted (closed, or answers possibly lost or
    /// still to come): the reconcile stops and the next one opens a new socket.
    pub fn ends_session(&self) -> bool {
        matches!(
            self,
            Self::ConnectionClosed(_) | Self::Timeout { .. } | Self::Resync { .. }
        )
    }
}

impl From<NetlinkError> for crate::caps::CapError {
    fn from(e: NetlinkError) -> Self {
        crate::caps::CapError::Failed {
            capability: "netlink",
            message: e.to_string(),
        }
    }
}
