//! OVSDB client configurations for the OVN databases, from `[ovn]`, `[local_ovn_cluster]` and
//! the chassis identity: which remote, and the TLS files for `ssl:` remotes.

use crate::caps::ovsdb::{ClientConfig, OvsdbError, TlsFiles};
use crate::config::AgentConfig;
use crate::ovn::identity::ChassisIdentity;

pub const SB_DB: &str = "OVN_Southbound";
pub const NB_DB: &str = "OVN_Northbound";

/// Why no client configuration could be built; each names the option to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "no Southbound remote: set [ovn] ovn_sb_connection or Open_vSwitch external_ids:ovn-remote"
    )]
    NoSbRemote,
    #[error(
        "no Northbound remote: set [ovn] ovn_nb_connection or Open_vSwitch external_ids:ovn-nb-remote"
    )]
    NoNbRemote,
    #[error("{option} {remote:?}: {source}")]
    BadRemote {
        /// Where the remote came from (`[ovn] ovn_sb_connection`, `Open_vSwitch
        /// external_ids:ovn-remote`, ...).
        option: &'static str,
        remote: String,
        #[source]
        source: Box<OvsdbError>,
    },
}

/// Whether any remote of a comma list is `ssl:`.
fn any_ssl(remotes: &str) -> bool {
    remotes.split(',').any(|r| r.trim().starts_with("ssl:"))
}

/// `[ovn] ovsdb_max_message_size` as a client setting.
pub fn max_message_size(config: &AgentConfig) -> usize {
    usize::try_from(config.ovn.ovsdb_max_message_size).unwrap_or(usize::MAX)
}

fn client_config(
    config: &AgentConfig,
    option: &'static str,
    remote: &str,
    db: &str,
    tls: impl FnOnce() -> TlsFiles,
) -> Result<ClientConfig, ConnectError> {
    let mut client = ClientConfig::new(remote, db).map_err(|source| ConnectError::BadRemote {
        option,
        remote: remote.to_owned(),
        source: Box::new(source),
    })?;
    client.max_message_size = max_message_size(config);
    // The TLS files are only read for ssl: remotes: their defaults name files that do not exist
    // on a deployment without TLS.
    if any_ssl(remote) {
        client.tls = Some(tls());
    }
    Ok(client)
}

fn sb_tls(config: &AgentConfig) -> TlsFiles {
    TlsFiles {
        private_key: config.ovn.ovn_sb_private_key.clone().into(),
        certificate: config.ovn.ovn_sb_certificate.clone().into(),
        ca_cert: config.ovn.ovn_sb_ca_cert.clone().into(),
    }
}

fn nb_tls(config: &AgentConfig) -> TlsFiles {
    TlsFiles {
        private_key: config.ovn.ovn_nb_private_key.clone().into(),
        certificate: config.ovn.ovn_nb_certificate.clone().into(),
        ca_cert: config.ovn.ovn_nb_ca_cert.clone().into(),
    }
}

/// The Southbound: `[ovn] ovn_sb_connection`, else `Open_vSwitch external_ids:ovn-remote`, with
/// the `[ovn] ovn_sb_*` TLS files for `ssl:` remotes.
pub fn sb_client_config(
    config: &AgentConfig,
    identity: &ChassisIdentity,
) -> Result<ClientConfig, ConnectError> {
    let (option, remote) = match (&config.ovn.ovn_sb_connection, &identity.ovn_remote) {
        (Some(r), _) => ("[ovn] ovn_sb_connection", r),
        (None, Some(r)) => ("Open_vSwitch external_ids:ovn-remote", r),
        (None, None) => return Err(ConnectError::NoSbRemote),
    };
    client_config(config, option, remote, SB_DB, || sb_tls(config))
}

/// The Northbound: `[ovn] ovn_nb_connection`, else `Open_vSwitch external_ids:ovn-nb-remote`,
/// with the `[ovn] ovn_nb_*` TLS files for `ssl:` remotes.
pub fn nb_client_config(
    config: &AgentConfig,
    identity: &ChassisIdentity,
) -> Result<ClientConfig, ConnectError> {
    let (option, remote) = match (&config.ovn.ovn_nb_connection, &identity.ovn_nb_remote) {
        (Some(r), _) => ("[ovn] ovn_nb_connection", r),
        (None, Some(r)) => ("Open_vSwitch external_ids:ovn-nb-remote", r),
        (None, None) => return Err(ConnectError::NoNbRemote),
    };
    client_config(config, option, remote, NB_DB, || nb_tls(config))
}

/// The node-local Northbound of the `ovn` exposing method: `[local_ovn_cluster]
/// ovn_nb_connection`, leader only (as upstream: writes go to the RAFT leader, and a follower
/// that lost its cluster is never read), with the `[ovn] ovn_nb_*` TLS files for `ssl:`
/// remotes (upstream's `OvnNbIdl` reads them for any NB connection).
pub fn local_nb_client_config(config: &AgentConfig) -> Result<ClientConfig, ConnectError> {
    let mut client = client_config(
        config,
        "[local_ovn_cluster] ovn_nb_connection",
        &config.local_ovn_cluster.ovn_nb_connection,
        NB_DB,
        || nb_tls(config),
    )?;
    client.leader_only = true;
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(sb: Option<&str>, nb: Option<&str>) -> ChassisIdentity {
        ChassisIdentity {
            system_id: "ch-1".into(),
            ovn_remote: sb.map(str::to_owned),
            ovn_nb_remote: nb.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn sb_prefers_the_option_and_uses_tls_only_for_ssl() {
        let mut config = AgentConfig::default();
        let c = sb_client_config(&config, &identity(Some("tcp:10.0.0.1:6642"), None)).unwrap();
        assert_eq!(c.db, SB_DB);
        assert_eq!(c.remotes.len(), 1);
        assert!(c.tls.is_none());
        assert!(!c.leader_only);

        config.ovn.ovn_sb_connection = Some("ssl:10.0.0.2:6642,tcp:10.0.0.3:6642".into());
        config.ovn.ovn_sb_private_key = "/k".into();
        config.ovn.ovn_sb_certificate = "/c".into();
        config.ovn.ovn_sb_ca_cert = "/ca".into();
        let c = sb_client_config(&config, &identity(Some("tcp:10.0.0.1:6642"), None)).unwrap();
        assert_eq!(c.remotes.len(), 2, "the option wins over ovn-remote");
        let tls = c.tls.expect("an ssl: remote gets the [ovn] ovn_sb_* files");
        assert_eq!(tls.private_key.to_str(), Some("/k"));
        assert_eq!(tls.certificate.to_str(), Some("/c"));
        assert_eq!(tls.ca_cert.to_str(), Some("/ca"));
    }

    #[test]
    fn sb_errors_name_the_option() {
        let mut config = AgentConfig::default();
        let e = sb_client_config(&config, &identity(None, None)).unwrap_err();
        assert!(e.to_string().contains("[ovn] ovn_sb_connection"), "{e}");
        let e = sb_client_config(&config, &identity(Some("bogus:1"), None)).unwrap_err();
        assert!(e.to_string().contains("external_ids:ovn-remote"), "{e}");
        config.ovn.ovn_sb_connection = Some("tcp:nope".into());
        let e = sb_client_config(&config, &identity(None, None)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("[ovn] ovn_sb_connection \"tcp:nope\""),
            "{e}"
        );
    }

    #[test]
    fn nb_uses_the_nb_options() {
        let mut config = AgentConfig::default();
        let e = nb_client_config(&config, &identity(Some("tcp:10.0.0.1:6642"), None)).unwrap_err();
        assert!(e.to_string().contains("[ovn] ovn_nb_connection"), "{e}");
        let c = nb_client_config(&config, &identity(None, Some("tcp:10.0.0.1:6641"))).unwrap();
        assert_eq!(c.db, NB_DB);
        assert!(c.tls.is_none());
        config.ovn.ovn_nb_connection = Some("ssl:10.0.0.1:6641".into());
        config.ovn.ovn_nb_private_key = "/nbk".into();
        let c = nb_client_config(&config, &identity(None, None)).unwrap();
        assert_eq!(c.tls.unwrap().private_key.to_str(), Some("/nbk"));
        config.ovn.ovn_nb_connection = Some("udp:1".into());
        let e = nb_client_config(&config, &identity(None, None)).unwrap_err();
        assert!(e.to_string().contains("[ovn] ovn_nb_connection"), "{e}");
    }

    #[test]
    fn local_nb_is_leader_only() {
        let mut config = AgentConfig::default();
        let c = local_nb_client_config(&config).unwrap();
        assert!(c.leader_only);
        assert_eq!(c.db, NB_DB);
        assert!(c.tls.is_none(), "the default unix: remote needs no TLS");
        config.local_ovn_cluster.ovn_nb_connection = "ssl:127.0.0.1:6645".into();
        config.ovn.ovn_nb_ca_cert = "/nbca".into();
        let c = local_nb_client_config(&config).unwrap();
        assert!(c.leader_only);
        assert_eq!(c.tls.unwrap().ca_cert.to_str(), Some("/nbca"));
        config.local_ovn_cluster.ovn_nb_connection = "nowhere".into();
        let e = local_nb_client_config(&config).unwrap_err();
        assert!(
            e.to_string()
                .contains("[local_ovn_cluster] ovn_nb_connection"),
            "{e}"
        );
    }
}
