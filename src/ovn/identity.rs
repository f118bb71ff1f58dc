//! Who this chassis is, read from the local `Open_vSwitch` row (upstream-behaviour.md §0): the
//! SB drivers key everything on `system-id`; the NB driver also compares `hostname` with
//! `options:requested-chassis`.

use std::collections::BTreeMap;

use tokio::sync::mpsc::UnboundedReceiver;
use tracing::warn;

use crate::caps::ovsdb::{
    ChangeBatch, ClientConfig, MonitorSpec, OvsdbClient, OvsdbError, TableSpec,
};
use crate::config::AgentConfig;

/// Prefix of the per-bridge mapping keys (`ovn-bridge-mappings-<chassis id>`, used by the `ovn`
/// exposing method for its node-local gateway chassis).
pub const EXTRA_MAPPINGS_PREFIX: &str = "ovn-bridge-mappings-";

/// What this chassis reads from its own `Open_vSwitch.external_ids`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChassisIdentity {
    /// `system-id`: the SB `Chassis.name`, and the LRP `status:hosting-chassis` value.
    pub system_id: String,
    /// `hostname`, else the kernel hostname (as upstream's `socket.gethostname()` fallback).
    pub hostname: String,
    /// `ovn-bridge-mappings` in order: (physnet, bridge), unvalidated.
    pub bridge_mappings: Vec<(String, String)>,
    /// `ovn-remote`: the Southbound remote when `[ovn] ovn_sb_connection` is unset.
    pub ovn_remote: Option<String>,
    /// `ovn-nb-remote`: the Northbound remote when `[ovn] ovn_nb_connection` is unset.
    pub ovn_nb_remote: Option<String>,
    /// Every `ovn-bridge-mappings-<suffix>` key, by suffix, raw.
    pub extra_bridge_mappings: BTreeMap<String, String>,
}

/// Why the local Open_vSwitch row does not give an identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("[DEFAULT] ovsdb_connection {remote:?}: {source}")]
    BadRemote {
        remote: String,
        #[source]
        source: OvsdbError,
    },
    #[error("local OVS database ({remote}): {source}")]
    Ovsdb {
        remote: String,
        #[source]
        source: OvsdbError,
    },
    #[error("local OVS database: the change stream of the client was already taken")]
    EventsTaken,
    #[error("local OVS database has no Open_vSwitch row")]
    NoRow,
    #[error("Open_vSwitch external_ids:system-id is not set (is ovn-controller configured?)")]
    NoSystemId,
}

/// `"physnet1:br-ex, physnet2:br-vlan"` → pairs in order; malformed entries are left out.
pub fn parse_bridge_mappings(value: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .filter_map(|m| {
            let (physnet, bridge) = m.split_once(':')?;
            Some((physnet.trim().to_owned(), bridge.trim().to_owned()))
        })
        .collect()
}

/// The kernel hostname (of this UTS namespace), `""` when unreadable.
pub fn kernel_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

/// The identity in an `external_ids` map (key, value pairs); `kernel_hostname` is asked only
/// when `hostname` is not set.
pub fn identity_from_external_ids<'a>(
    external_ids: impl IntoIterator<Item = (&'a str, &'a str)>,
    kernel_hostname: impl FnOnce() -> String,
) -> Result<ChassisIdentity, IdentityError> {
    let ids: BTreeMap<&str, &str> = external_ids.into_iter().collect();
    let system_id = ids
        .get("system-id")
        // Kept as written: it must match the SB Chassis.name ovn-controller registered.
        .filter(|s| !s.trim().is_empty())
        .ok_or(IdentityError::NoSystemId)?
        .to_string();
    let hostname = match ids
        .get("hostname")
        .map(|h| h.trim())
        .filter(|h| !h.is_empty())
    {
        Some(h) => h.to_owned(),
        None => kernel_hostname(),
    };
    let non_empty = |k: &str| {
        ids.get(k)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    Ok(ChassisIdentity {
        system_id,
        hostname,
        bridge_mappings: parse_bridge_mappings(ids.get("ovn-bridge-mappings").unwrap_or(&"")),
        ovn_remote: non_empty("ovn-remote"),
        ovn_nb_remote: non_empty("ovn-nb-remote"),
        extra_bridge_mappings: ids
            .iter()
            .filter_map(|(k, v)| {
                let suffix = k.strip_prefix(EXTRA_MAPPINGS_PREFIX)?;
                Some((suffix.to_owned(), (*v).to_owned()))
            })
            .collect(),
    })
}

/// The identity in the (only) `Open_vSwitch` row of a client monitoring `external_ids`.
pub fn read_identity(client: &OvsdbClient) -> Result<ChassisIdentity, IdentityError> {
    let replica = client.replica();
    let table = replica
        .get_table("Open_vSwitch")
        .map_err(|source| IdentityError::Ovsdb {
            remote: client_remote(client),
            source,
        })?;
    let row = table.iter().next().ok_or(IdentityError::NoRow)?;
    identity_from_external_ids(row.map("external_ids"), kernel_hostname)
}

fn client_remote(client: &OvsdbClient) -> String {
    client
        .stats()
        .current_remote
        .unwrap_or_else(|| "not connected".to_owned())
}

/// The local `Open_vSwitch` row, followed: [`IdentityWatch::changed`] yields each new usable
/// identity. A row that became unusable (system-id removed, say) is reported and the last good
/// identity kept, so exposures are not withdrawn on a hiccup.
pub struct IdentityWatch {
    client: OvsdbClient,
    events: UnboundedReceiver<ChangeBatch>,
    current: ChassisIdentity,
}

impl IdentityWatch {
    /// Connect to `[DEFAULT] ovsdb_connection` and read the identity; an unusable row is an
    /// error here (the agent cannot start without knowing who it is).
    pub async fn connect(config: &AgentConfig) -> Result<(Self, ChassisIdentity), IdentityError> {
        let remote = &config.default.ovsdb_connection;
        let mut client_config = ClientConfig::new(remote, "Open_vSwitch").map_err(|source| {
            IdentityError::BadRemote {
                remote: remote.clone(),
                source,
            }
        })?;
        client_config.max_message_size = crate::ovn::connect::max_message_size(config);
        let client = OvsdbClient::connect(
            client_config,
            // `ovs_version` is not identity: for `doctor` and the route-table advice.
            MonitorSpec::default().table(TableSpec::new(
                "Open_vSwitch",
                &["external_ids", "ovs_version"],
            )),
        )
        .await
        .map_err(|source| IdentityError::Ovsdb {
            remote: remote.clone(),
            source,
        })?;
        let events = client.events().ok_or(IdentityError::EventsTaken)?;
        let current = read_identity(&client)?;
        Ok((
            IdentityWatch {
                client,
                events,
                current: current.clone(),
            },
            current,
        ))
    }

    /// The last usable identity.
    pub fn current(&self) -> &ChassisIdentity {
        &self.current
    }

    /// `Open_vSwitch.ovs_version` as `ovs-ctl` wrote it when it started ovs-vswitchd; `None`
    /// when unset (ovs-vswitchd started some other way).
    pub fn ovs_version(&self) -> Option<String> {
        let replica = self.client.replica();
        let table = replica.get_table("Open_vSwitch").ok()?;
        let row = table.iter().next()?;
        row.opt_str("ovs_version")
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// Wait until the identity changes; `None` when the client stopped. Cancel-safe: nothing is
    /// consumed across an `.await` without being acted on.
    pub async fn changed(&mut self) -> Option<ChassisIdentity> {
        loop {
            self.events.recv().await?;
            if let Some(new) = self.reread() {
                return Some(new);
            }
        }
    }

    /// The changed identity if Open_vSwitch changes are already waiting, without waiting.
    pub fn try_changed(&mut self) -> Option<ChassisIdentity> {
        let mut any = false;
        // Empty or disconnected alike: a stopped client is reported by `changed`.
        while self.events.try_recv().is_ok() {
            any = true;
        }
        if any { self.reread() } else { None }
    }

    fn reread(&mut self) -> Option<ChassisIdentity> {
        // Later batches describe the same row: read it once.
        while self.events.try_recv().is_ok() {}
        let identity = match read_identity(&self.client) {
            Ok(identity) => identity,
            Err(e) => {
                warn!(
                    "{e}; keeping chassis {} and its bridge mappings",
                    self.current.system_id
                );
                return None;
            }
        };
        if identity == self.current {
            return None;
        }
        if identity.system_id != self.current.system_id {
            // The chassis identity is what every exposure is keyed on; follow it, loudly.
            warn!(
                old = %self.current.system_id,
                new = %identity.system_id,
                "Open_vSwitch external_ids:system-id changed"
            );
        }
        self.current = identity.clone();
        Some(identity)
    }
}

/// The chassis identity as the host hands it to plugins: read once from the local
/// `Open_vSwitch` row on first use (one OVSDB connection for the driver and the backend
/// together, and none for a plugin that never asks), then followed; every plugin gets a
/// receiver of the current identity.
#[derive(Clone)]
pub struct IdentitySource {
    config: std::sync::Arc<AgentConfig>,
    feed: std::sync::Arc<tokio::sync::OnceCell<tokio::sync::watch::Receiver<ChassisIdentity>>>,
    /// The sender of a fixed identity, kept so that its receivers never see it closed.
    _fixed_sender: Option<std::sync::Arc<tokio::sync::watch::Sender<ChassisIdentity>>>,
    /// `Open_vSwitch.ovs_version` when the feed connected (see [`IdentitySource::ovs_version`]).
    ovs_version: std::sync::Arc<std::sync::OnceLock<Option<String>>>,
}

impl std::fmt::Debug for IdentitySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentitySource")
            .field("connected", &self.feed.initialized())
            .finish()
    }
}

impl IdentitySource {
    /// Read from `[DEFAULT] ovsdb_connection` when first asked for.
    pub fn from_config(config: std::sync::Arc<AgentConfig>) -> Self {
        Self {
            config,
            feed: Default::default(),
            _fixed_sender: None,
            ovs_version: Default::default(),
        }
    }

    /// A fixed identity (tests, replay): no database is read.
    pub fn fixed(config: std::sync::Arc<AgentConfig>, identity: ChassisIdentity) -> Self {
        let (tx, rx) = tokio::sync::watch::channel(identity);
        Self {
            config,
            feed: std::sync::Arc::new(tokio::sync::OnceCell::new_with(Some(rx))),
            _fixed_sender: Some(std::sync::Arc::new(tx)),
            ovs_version: Default::default(),
        }
    }

    /// The local ovs-vswitchd's version as `ovs-ctl` wrote it in `Open_vSwitch.ovs_version`,
    /// read when the feed connected; `None` before, when unset, or for a fixed identity. (An
    /// upgrade restarts ovs-vswitchd and, with its packaging, usually the agent.)
    pub fn ovs_version(&self) -> Option<&str> {
        self.ovs_version.get()?.as_deref()
    }

    /// The identity feed: connects and reads the row on the first call, then follows it in a
    /// task of its own. The receiver's value is the last usable identity; `changed()` fails
    /// when the local OVS database client stopped.
    pub async fn feed(
        &self,
    ) -> Result<tokio::sync::watch::Receiver<ChassisIdentity>, IdentityError> {
        self.feed
            .get_or_try_init(|| async {
                let (mut watch, identity) = IdentityWatch::connect(&self.config).await?;
                let _ = self.ovs_version.set(watch.ovs_version());
                let (tx, rx) = tokio::sync::watch::channel(identity);
                tokio::spawn(async move {
                    loop {
                        tokio::select! {
                            changed = watch.changed() => match changed {
                                Some(identity) => {
                                    if tx.send(identity).is_err() {
                                        return;
                                    }
                                }
                                // The sender drops: receivers see the client stopped.
                                None => return,
                            },
                            () = tx.closed() => return,
                        }
                    }
                });
                Ok(rx)
            })
            .await
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fixed_identity_source_hands_out_a_live_feed() {
        let identity = ChassisIdentity {
            system_id: "node1".into(),
            ..Default::default()
        };
        let source = IdentitySource::fixed(Default::default(), identity);
        let mut feed = source.clone().feed().await.unwrap();
        assert_eq!(feed.borrow_and_update().system_id, "node1");
        // The sender lives with the source: no change, but not closed either.
        assert_eq!(feed.has_changed().ok(), Some(false));
        drop(source);
        assert!(
            feed.has_changed().is_err(),
            "closed once every source is gone"
        );
    }

    #[test]
    fn identity_from_a_full_row() {
        let ids = [
            ("system-id", "ch-1"),
            ("hostname", "node1.example"),
            (
                "ovn-bridge-mappings",
                "physnet1:br-ex, physnet2 : br-vlan,bad,,",
            ),
            ("ovn-remote", "tcp:10.0.0.1:6642"),
            ("ovn-nb-remote", "tcp:10.0.0.1:6641"),
            ("ovn-bridge-mappings-bgp", "physnet1:br-bgp"),
            ("unrelated", "x"),
        ];
        let id = identity_from_external_ids(ids, || panic!("hostname is set")).unwrap();
        assert_eq!(id.system_id, "ch-1");
        assert_eq!(id.hostname, "node1.example");
        assert_eq!(
            id.bridge_mappings,
            [
                ("physnet1".to_owned(), "br-ex".to_owned()),
                ("physnet2".to_owned(), "br-vlan".to_owned())
            ]
        );
        assert_eq!(id.ovn_remote.as_deref(), Some("tcp:10.0.0.1:6642"));
        assert_eq!(id.ovn_nb_remote.as_deref(), Some("tcp:10.0.0.1:6641"));
        assert_eq!(
            id.extra_bridge_mappings,
            BTreeMap::from([("bgp".to_owned(), "physnet1:br-bgp".to_owned())])
        );
    }

    #[test]
    fn hostname_falls_back_to_the_kernel_and_system_id_is_required() {
        let id = identity_from_external_ids([("system-id", "ch-1"), ("hostname", " ")], || {
            "kernel-name".to_owned()
        })
        .unwrap();
        assert_eq!(id.hostname, "kernel-name");
        assert!(id.bridge_mappings.is_empty());
        assert_eq!(id.ovn_remote, None);
        for ids in [vec![], vec![("system-id", "")], vec![("system-id", "  ")]] {
            let e = identity_from_external_ids(ids, String::new).unwrap_err();
            assert!(e.to_string().contains("system-id"), "{e}");
        }
        assert!(!kernel_hostname().is_empty());
    }
}
