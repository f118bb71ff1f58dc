//! rtnetlink capability: links, addresses, rules, routes, neighbours, proxy neighbours and
//! sysctls, in the configured network namespace, over one long-lived netlink socket. No `ip`
//! processes.
//!
//! - [`NetlinkReconciler`]: applies the kernel part of a [`crate::system::DesiredSystem`].
//! - [`netns`]: the thread that lives in the target namespace.
//! - [`conn`]: dumps and pipelined batches of requests.
//! - one module per object class (`links`, `addresses`, `rules`, [`routes`],
//!   `neighbours`, `sysctl`) turning dumps into comparable values and specs into requests.

pub(crate) mod addresses;
mod changes;
pub mod conn;
mod error;
pub(crate) mod kinds;
pub(crate) mod links;
pub mod mirror;
pub(crate) mod neighbours;
pub mod netns;
pub(crate) mod reconciler;
pub mod routes;
pub(crate) mod rules;
pub(crate) mod sysctl;
pub(crate) mod validate;

pub use error::{KernelErrno, NetlinkError};
pub use kinds::{nic_link_kind, vrf_link_kind};
pub use netns::NetnsTarget;
pub use reconciler::{HOST_DEVICE_DUMPS_MAX, NetlinkReconciler, class};
