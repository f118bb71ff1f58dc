//! FRR capability: validated values ([`values`]), the configuration snippets of
//! upstream-behaviour.md §6 ([`templates`]), `vtysh` as a tool ([`vtysh`]) and a configurator that
//! keeps snippets applied across FRR restarts (`configurator`).

pub(crate) mod base;
pub(crate) mod batch;
pub(crate) mod configurator;
pub(crate) mod objects;
pub mod templates;
pub mod values;
pub mod vtysh;

use std::path::PathBuf;
use std::process::ExitStatus;

pub use base::{default_redistribute, leak_vrf_from_config};
pub use configurator::{FrrFingerprint, PidFileError, VtyshConfigurator, read_pid_file};
pub use objects::{FrrObject, FrrObjectKey, FrrObjects};
pub use templates::{
    AddVrf, ConfigureNd, DelVrf, FrrSnippet, LeakVrf, NicRedistribute, RenderError, UnconfigureNd,
};
pub use values::{
    Asn, ExtCommunityValue, FrrValueError, Redistribute, RouteDistinguisher, RouteTarget, RouterId,
    Vni, VrfName, parse_dns_servers,
};
pub use vtysh::{ShowQuery, Vtysh, VtyshOptions};

use crate::caps::process::RunError;

/// Errors of the FRR capability; each names the command and carries vtysh's own output.
#[derive(Debug, thiserror::Error)]
pub enum FrrError {
    #[error(transparent)]
    Value(#[from] FrrValueError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error(
        "FRR snippet #{index} contains {character:?}; only printable ASCII and newlines may reach vtysh"
    )]
    UnsafeSnippet { index: usize, character: char },
    #[error("cannot write the private FRR configuration file: {source}")]
    ConfigFile {
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the FRR vty socket directory {dir}: {source}")]
    SocketDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}`: {source}")]
    Run {
        command: String,
        #[source]
        source: RunError,
    },
    #[error("`{command}` failed ({status}): {output}")]
    VtyshFailed {
        command: String,
        status: ExitStatus,
        output: String,
    },
    #[error("`{command}` returned JSON the agent cannot read: {source}")]
    BadJson {
        command: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "FRR reports no BGP router id (no `router bgp` in the default instance?) and bgp_router_id is not configured"
    )]
    NoRouterId,
}
