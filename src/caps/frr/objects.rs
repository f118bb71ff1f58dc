//! FRR objects with diff-based removal: each object has a stable identity ([`FrrObjectKey`]), the
//! snippet that configures it and the snippet that removes it, both rendered from validated
//! values ([`super::values`]) through the templates of [`super::templates`].
//!
//! [`FrrObjects`] keeps the desired objects applied and removes the objects that are no longer
//! desired, but only those the agent created. "Created by the agent" is a record (key and
//! removal snippet) kept in a small state file (`[frr] state_file`), written atomically
//! (temporary file, fsync, rename; mode 0600) before the object is applied, so a new agent
//! process still removes what the previous one created. An object configured by hand is never
//! in that record, so it is never removed, whatever its name.
//!
//! Applying is cheap when nothing changed: an object is re-applied only when its snippet
//! changed, when FRR restarted since the last apply (the vty-socket fingerprint of
//! [`super::configurator`]) or when the last full apply is older than the re-apply interval.
//!
//! FRR configuration is additive: an object whose snippet changes under the same key is
//! re-applied over the old one, so a line dropped from the snippet (e.g. one route target of
//! several) stays until the object is removed. Backends that need a clean replacement give the
//! new variant another key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::FrrError;
use super::batch;
use super::configurator::{FrrFingerprint, VtyshConfigurator, check_snippet};
use super::templates::{AddVrf, ConfigureNd, DelVrf, FrrSnippet, RenderError, UnconfigureNd};
use super::values::{Asn, VrfName};
use crate::system::ChangeReport;
use crate::types::InterfaceName;

/// Object class name in the [`ChangeReport`].
pub(crate) const CLASS: &str = "frr_objects";

/// Stable identity of one FRR object, e.g. `vrf vrf-100` or `nd interface vrf1234 prefix
/// 2001:db8::/64`. Only an identity: it is never sent to vtysh.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FrrObjectKey(String);

impl FrrObjectKey {
    /// An EVPN VRF (`vrf <name>` and its `router bgp <as> vrf <name>`).
    pub fn vrf(vrf: &VrfName) -> Self {
        Self(format!("vrf {vrf}"))
    }

    /// A BGP instance in a VRF on its own (`router bgp <as> vrf <name>`).
    pub fn bgp_vrf(bgp_as: Asn, vrf: &VrfName) -> Self {
        Self(format!("router bgp {bgp_as} vrf {vrf}"))
    }

    /// Router advertisements of one prefix on one interface.
    pub fn nd_prefix(interface: &InterfaceName, prefix: ipnet::Ipv6Net) -> Self {
        Self(format!("nd interface {interface} prefix {prefix}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FrrObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One FRR object: the snippet that configures it and the snippet that removes it. Built only
/// by rendering templates (validated values), never from free text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FrrObject {
    apply: String,
    remove: String,
}

impl FrrObject {
    /// Any configuring template with its removal template.
    pub fn from_snippets(
        apply: &impl FrrSnippet,
        remove: &impl FrrSnippet,
    ) -> Result<Self, RenderError> {
        Ok(Self {
            apply: apply.render()?,
            remove: remove.render()?,
        })
    }

    /// An EVPN VRF: `ADD_VRF`, removed with `DEL_VRF` (§6).
    pub fn evpn_vrf(add: &AddVrf) -> Result<(FrrObjectKey, Self), RenderError> {
        let del = DelVrf::new(add.bgp_as, add.vrf_name.clone());
        Ok((
            FrrObjectKey::vrf(&add.vrf_name),
            Self::from_snippets(add, &del)?,
        ))
    }

    /// Router advertisements on a VRF-side interface: `CONFIGURE_ND`, removed inside the
    /// interface block (the interface may still exist).
    pub fn nd(nd: &ConfigureNd) -> Result<(FrrObjectKey, Self), RenderError> {
        Ok((
            FrrObjectKey::nd_prefix(&nd.interface, nd.prefix),
            Self::from_snippets(nd, &UnconfigureNd(nd.clone()))?,
        ))
    }

    /// The snippet that configures the object.
    pub fn apply_snippet(&self) -> &str {
        &self.apply
    }

    /// The snippet that removes the object.
    pub fn remove_snippet(&self) -> &str {
        &self.remove
    }
}

/// The configuration lines of a snippet or of FRR's running configuration, each with the blocks
/// it is in (`router bgp 64999 vrf vrf-100` / `address-family l2vpn evpn` / `rd 10.0.0.1:100`),
/// indentation and block ends ignored: what "FRR already has this" is checked on.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ConfigLines(std::collections::BTreeSet<(String, String, String)>);

impl ConfigLines {
    pub(crate) fn parse(text: &str) -> Self {
        let mut lines = std::collections::BTreeSet::new();
        let (mut block, mut family) = (String::new(), String::new());
        for raw in text.lines() {
            let line = raw.split_whitespace().collect::<Vec<_>>().join(" ");
            let top_level = !raw.starts_with(' ');
            match line.as_str() {
                "" | "!" | "end" => {}
                "exit-address-family" => family.clear(),
                "exit" | "exit-vrf" if top_level || family.is_empty() => {
                    block.clear();
                    family.clear();
                }
                "exit" | "exit-vrf" => family.clear(),
                l if l.starts_with("address-family ") && !block.is_empty() => family = l.to_owned(),
                l if top_level
                    && ["vrf ", "router ", "interface ", "route-map "]
                        .iter()
                        .any(|p| l.starts_with(p)) =>
                {
                    block = l.to_owned();
                    family.clear();
                    lines.insert((block.clone(), String::new(), String::new()));
                }
                l if block.is_empty() => {
                    lines.insert((String::new(), String::new(), l.to_owned()));
                }
                l => {
                    lines.insert((block.clone(), family.clone(), l.to_owned()));
                }
            }
        }
        Self(lines)
    }

    /// Whether every line of `other` is here, in the same blocks (an empty `other` is not).
    /// FRR leaves an EVPN VRF's route target out of its running configuration when it equals
    /// the one it derives itself (`<AS>:<VNI>`), so such a line counts as present when the VRF's
    /// `vni` is.
    pub(crate) fn contains_all(&self, other: &ConfigLines) -> bool {
        !other.0.is_empty()
            && other
                .0
                .iter()
                .all(|line| self.0.contains(line) || self.is_frr_default_rt(line))
    }

    fn is_frr_default_rt(&self, (block, family, line): &(String, String, String)) -> bool {
        let Some(rt) = [
            "route-target import ",
            "route-target export ",
            "route-target both ",
        ]
        .iter()
        .find_map(|p| line.strip_prefix(p)) else {
            return false;
        };
        // `router bgp <AS> vrf <VRF>` / `address-family l2vpn evpn`
        let mut words = block.split_whitespace();
        let (Some("router"), Some("bgp"), Some(asn), Some("vrf"), Some(vrf)) = (
            words.next(),
            words.next(),
            words.next(),
            words.next(),
            words.next(),
        ) else {
            return false;
        };
        if family != "address-family l2vpn evpn" {
            return false;
        }
        let Some((rt_as, rt_vni)) = rt.split_once(':') else {
            return false;
        };
        rt_as == asn
            && self
                .0
                .contains(&(format!("vrf {vrf}"), String::new(), format!("vni {rt_vni}")))
    }
}

/// The state file: objects the agent created, with the snippet that removes each.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StateFile {
    version: u32,
    objects: BTreeMap<FrrObjectKey, OwnedObject>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct OwnedObject {
    remove: String,
}

const STATE_VERSION: u32 = 1;

#[derive(Debug, Default)]
struct State {
    loaded: bool,
    /// What the agent created (persisted).
    owned: BTreeMap<FrrObjectKey, OwnedObject>,
    /// What is applied in the running FRR, as far as this process knows (not persisted: a new
    /// process re-applies everything once).
    applied: BTreeMap<FrrObjectKey, String>,
    fingerprint: FrrFingerprint,
    at: Option<Instant>,
    /// The last state-file error reported, so a persistent failure warns once.
    persist_error: Option<String>,
}

/// Why the state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateFileError {
    #[error("cannot {action} the FRR object state file {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the FRR object state file {path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// Keeps [`FrrObject`]s applied and removes the ones the agent created and no longer wants.
pub struct FrrObjects {
    configurator: Arc<VtyshConfigurator>,
    state_file: PathBuf,
    full_reapply_interval: Duration,
    state: Mutex<State>,
    /// The objects last asked for, for [`Self::spawn_restart_watch`].
    requested: std::sync::Mutex<Option<crate::system::ObjectMap<FrrObjectKey, FrrObject>>>,
}

impl FrrObjects {
    pub fn new(configurator: Arc<VtyshConfigurator>, state_file: impl Into<PathBuf>) -> Self {
        Self {
            configurator,
            state_file: state_file.into(),
            full_reapply_interval: VtyshConfigurator::DEFAULT_FULL_REAPPLY,
            state: Mutex::new(State::default()),
            requested: std::sync::Mutex::new(None),
        }
    }

    pub fn from_config(
        config: &crate::config::AgentConfig,
        configurator: Arc<VtyshConfigurator>,
    ) -> Self {
        Self::new(configurator, &config.frr.state_file)
    }

    pub fn state_file(&self) -> &Path {
        &self.state_file
    }

    /// Keys of the objects this agent created (recorded in the state file), for diagnostics.
    pub async fn owned_keys(&self) -> Vec<FrrObjectKey> {
        let mut state = self.state.lock().await;
        self.load(&mut state);
        state.owned.keys().cloned().collect()
    }

    /// Applies new and changed objects, removes owned objects that are no longer desired,
    /// re-applies everything after an FRR restart. Errors are per object, in the report.
    pub async fn reconcile(
        &self,
        desired: &crate::system::ObjectMap<FrrObjectKey, FrrObject>,
    ) -> ChangeReport {
        if let Ok(mut requested) = self.requested.lock() {
            *requested = Some(desired.clone());
        }
        let mut report = ChangeReport::default();
        let mut state = self.state.lock().await;
        self.load(&mut state);
        if desired.is_empty() && state.owned.is_empty() {
            return report;
        }
        let dir = &self.configurator.vtysh().options().vty_socket_dir;
        let fingerprint = match FrrFingerprint::read(dir).await {
            Ok(f) => f,
            Err(e) => {
                report.error(CLASS, "read the FRR daemons' fingerprint", e);
                return report;
            }
        };
        let fresh = state
            .at
            .is_some_and(|at| at.elapsed() < self.full_reapply_interval);
        if !fresh || fingerprint.is_empty() || state.fingerprint != fingerprint {
            if !state.applied.is_empty() && state.fingerprint != fingerprint {
                tracing::warn!(
                    dir = %dir.display(),
                    "FRR daemons restarted since the last apply; re-applying the agent's FRR objects"
                );
            }
            state.applied.clear();
        }

        self.remove_unwanted(&mut state, desired, &mut report).await;
        self.apply_wanted(&mut state, desired, &mut report).await;

        if report.errors.is_empty() {
            state.fingerprint = fingerprint;
            state.at = Some(Instant::now());
        } else {
            // Something failed: the next reconcile checks everything again.
            state.at = None;
        }
        report
    }

    async fn remove_unwanted(
        &self,
        state: &mut State,
        desired: &crate::system::ObjectMap<FrrObjectKey, FrrObject>,
        report: &mut ChangeReport,
    ) {
        let unwanted: Vec<(FrrObjectKey, OwnedObject)> = state
            .owned
            .iter()
            .filter(|(key, _)| !desired.contains_key(*key))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        if unwanted.is_empty() {
            return;
        }
        // All of them in one vtysh run; if that fails, one by one, so each error names its
        // object and one that FRR refuses to remove leaves the others removed.
        let removals: Vec<&str> = unwanted.iter().map(|(_, o)| o.remove.as_str()).collect();
        let all_removed = removals.len() > 1
            && match self.configurator.remove_all(&removals).await {
                Ok(_) => true,
                Err(e) => {
                    tracing::info!(
                        error = %e,
                        objects = removals.len(),
                        "one vtysh run removing several FRR objects failed; removing them one by one"
                    );
                    false
                }
            };
        for (key, owned) in unwanted {
            let removed = if all_removed {
                Ok(())
            } else {
                self.configurator.remove(&owned.remove).await.map(|_| ())
            };
            match removed {
                Ok(()) => {
                    state.owned.remove(&key);
                    state.applied.remove(&key);
                    report.count_removed(CLASS, 1);
                }
                // Still owned: retried at the next reconcile.
                Err(e) => report.error(CLASS, format!("remove {key}"), e),
            }
        }
        self.persist(state);
    }

    async fn apply_wanted(
        &self,
        state: &mut State,
        desired: &crate::system::ObjectMap<FrrObjectKey, FrrObject>,
        report: &mut ChangeReport,
    ) {
        let mut pending: Vec<(&FrrObjectKey, &FrrObject)> = Vec::new();
        for (key, object) in desired {
            if state.applied.get(key) == Some(&object.apply) {
                continue;
            }
            let unsafe_snippet =
                check_snippet(0, &object.apply).and_then(|()| check_snippet(0, &object.remove));
            if let Err(e) = unsafe_snippet {
                report.error(CLASS, format!("apply {key}"), e);
                continue;
            }
            pending.push((key, object));
        }
        if pending.is_empty() {
            return;
        }
        // Objects FRR already has exactly (a new agent process, the periodic full check) are
        // recorded as applied without sending them again: re-sending an EVPN VRF's `advertise
        // ipv4 unicast` makes bgpd re-announce the VRF's type-5 routes, UPDATEs the fabric
        // would see at every agent restart and every full check. Only objects whose lines are
        // all in the running configuration, in the same blocks, are skipped; when it cannot be
        // read, everything is applied.
        if let Ok(running) = self.configurator.vtysh().running_config().await {
            let configured = ConfigLines::parse(&running);
            let mut recorded = false;
            pending.retain(|(key, object)| {
                if !configured.contains_all(&ConfigLines::parse(&object.apply)) {
                    return true;
                }
                state.applied.insert((*key).clone(), object.apply.clone());
                if !state.owned.contains_key(*key) {
                    // Configured by an earlier agent whose record was lost: the agent's all the
                    // same, since the agent wants it.
                    state.owned.insert(
                        (*key).clone(),
                        OwnedObject {
                            remove: object.remove.clone(),
                        },
                    );
                    recorded = true;
                }
                false
            });
            if recorded {
                self.persist(state);
            }
            if pending.is_empty() {
                return;
            }
        }
        // Recorded as the agent's before it exists in FRR: a crash between the two leaves a
        // record of an object that may not exist (its removal is then a no-op), never an object
        // without a record.
        let mut new_keys = Vec::new();
        for (key, object) in &pending {
            let owned = OwnedObject {
                remove: object.remove.clone(),
            };
            if state.owned.insert((*key).clone(), owned).is_none() {
                new_keys.push((*key).clone());
            }
        }
        self.persist(state);

        // As few vtysh runs as the objects fit in (see `batch`): a run's fixed cost is paid
        // once per 32 objects, not once per EVPN VRF.
        let mut results = Vec::with_capacity(pending.len());
        for chunk in pending.chunks(batch::MAX_SNIPPETS_PER_RUN) {
            results.extend(self.apply_chunk(chunk).await);
        }
        for ((key, object), result) in pending.into_iter().zip(results) {
            match result {
                Ok(()) => {
                    state.applied.insert(key.clone(), object.apply.clone());
                    if new_keys.contains(key) {
                        report.count_added(CLASS, 1);
                    } else {
                        report.count_changed(CLASS, 1);
                    }
                }
                Err(e) => report.error(CLASS, format!("apply {key}"), e),
            }
        }
    }

    /// Applies `objects` in one vtysh run. When the run fails, the objects FRR does not show in
    /// full afterwards are applied again one by one, so each error is the failing object's own
    /// and one bad object keeps none of the others out; an object the run did configure is not
    /// sent twice (re-sending an EVPN VRF re-announces its routes).
    async fn apply_chunk(
        &self,
        objects: &[(&FrrObjectKey, &FrrObject)],
    ) -> Vec<Result<(), FrrError>> {
        let text = batch::joined(objects.iter().map(|(_, o)| o.apply.as_str()));
        let error = match self.configurator.apply_serialised(&text).await {
            Ok(()) => return objects.iter().map(|_| Ok(())).collect(),
            Err(e) if objects.len() == 1 => return vec![Err(e)],
            Err(e) => e,
        };
        tracing::info!(
            error = %error,
            objects = objects.len(),
            "one vtysh run for several FRR objects failed; applying them one by one"
        );
        let configured = match self.configurator.vtysh().running_config().await {
            Ok(running) => Some(ConfigLines::parse(&running)),
            Err(_) => None,
        };
        let mut results = Vec::with_capacity(objects.len());
        for (_, object) in objects {
            let done = configured
                .as_ref()
                .is_some_and(|c| c.contains_all(&ConfigLines::parse(&object.apply)));
            results.push(if done {
                Ok(())
            } else {
                self.configurator
                    .apply_serialised(&batch::closed(&object.apply))
                    .await
            });
        }
        results
    }

    fn load(&self, state: &mut State) {
        if state.loaded {
            return;
        }
        state.loaded = true;
        match read_state(&self.state_file) {
            Ok(file) => state.owned = file.objects,
            Err(e) => tracing::warn!(
                error = %e,
                "starting with no record of FRR objects created earlier: objects an earlier agent created will not be removed"
            ),
        }
    }

    /// Writes the ownership record; a failure is a warning (once per distinct error) and the
    /// record lives on in memory.
    fn persist(&self, state: &mut State) {
        let file = StateFile {
            version: STATE_VERSION,
            objects: state.owned.clone(),
        };
        match write_state(&self.state_file, &file) {
            Ok(()) => {
                if state.persist_error.take().is_some() {
                    tracing::info!(path = %self.state_file.display(), "FRR object state file written again");
                }
            }
            Err(e) => {
                let text = e.to_string();
                if state.persist_error.as_deref() != Some(text.as_str()) {
                    tracing::warn!(
                        error = %text,
                        "keeping the record of FRR objects created by the agent in memory only: after an agent restart they will not be removed"
                    );
                    state.persist_error = Some(text);
                }
            }
        }
    }

    /// Re-runs [`Self::reconcile`] with the last requested objects every `interval`, so an FRR
    /// restart is repaired whatever the rest of the agent is doing. Abort the handle to stop.
    pub fn spawn_restart_watch(self: Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let requested = self.requested.lock().ok().and_then(|r| r.clone());
                let Some(objects) = requested else {
                    continue;
                };
                let report = self.reconcile(&objects).await;
                for e in &report.errors {
                    tracing::warn!(error = %e, "FRR object check failed; will retry");
                }
                if report.total_changes() > 0 {
                    tracing::info!(?report, "FRR objects repaired");
                }
            }
        })
    }
}

/// A missing file is an empty record.
fn read_state(path: &Path) -> Result<StateFile, StateFileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(StateFile::default()),
        Err(source) => {
            return Err(StateFileError::Io {
                action: "read",
                path: path.to_owned(),
                source,
            });
        }
    };
    serde_json::from_str(&text).map_err(|source| StateFileError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Temporary file in the same directory (created 0600), fsync, rename over the old file.
fn write_state(path: &Path, file: &StateFile) -> Result<(), StateFileError> {
    use std::io::Write;
    let io = |action: &'static str| {
        move |source| StateFileError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(io("create the directory of"))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".frr-objects-")
        .tempfile_in(dir)
        .map_err(io("create a temporary file beside"))?;
    let text = serde_json::to_vec_pretty(file).map_err(|e| StateFileError::Io {
        action: "encode",
        path: path.to_owned(),
        source: std::io::Error::other(e),
    })?;
    tmp.write_all(&text).map_err(io("write"))?;
    tmp.as_file().sync_all().map_err(io("sync"))?;
    tmp.persist(path).map_err(|e| StateFileError::Io {
        action: "replace",
        path: path.to_owned(),
        source: e.error,
    })?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::caps::frr::values::{Redistribute, RouteDistinguisher, Vni};

    /// An EVPN VRF of VNI `vni` (route targets left to FRR), for the FRR capability's tests.
    pub(crate) fn add_vrf(vni: u32) -> AddVrf {
        let vni = Vni::new(vni).unwrap();
        AddVrf {
            bgp_as: "64999".parse().unwrap(),
            vrf_name: AddVrf::default_vrf_name(vni),
            vni,
            rd: RouteDistinguisher::from_vtep("10.0.0.1".parse().unwrap(), vni).unwrap(),
            route_targets: vec![],
            export_targets: vec![],
            import_targets: vec![],
            redistribute: [Redistribute::Connected].into(),
        }
    }

    /// FRR 8.4's `show running-config` after `ADD_VRF` for VNI 1001 (as the VM tier prints it).
    const RUNNING: &str = "Building configuration...\n\nCurrent configuration:\n!\n\
frr version 8.4.4\nfrr defaults traditional\nhostname chassis\n!\nvrf vrf-1001\n vni 1001\n\
exit-vrf\n!\nrouter bgp 64999\n neighbor 100.64.0.2 remote-as 65000\n !\n\
 address-family l2vpn evpn\n  neighbor 100.64.0.2 activate\n  advertise-all-vni\n\
 exit-address-family\nexit\n!\nrouter bgp 64999 vrf vrf-1001\n !\n\
 address-family ipv4 unicast\n  redistribute connected\n exit-address-family\n !\n\
 address-family ipv6 unicast\n  redistribute connected\n exit-address-family\n !\n\
 address-family l2vpn evpn\n  advertise ipv4 unicast\n  advertise ipv6 unicast\n\
  rd 10.0.0.1:1001\n exit-address-family\nexit\n!\nend\n";

    #[test]
    fn an_object_frr_already_has_is_recognised_in_the_running_configuration() {
        let running = ConfigLines::parse(RUNNING);
        let (_, object) = FrrObject::evpn_vrf(&add_vrf(1001)).unwrap();
        assert!(running.contains_all(&ConfigLines::parse(object.apply_snippet())));
        // Another VNI, another RD, a line in another block: not there.
        let (_, other) = FrrObject::evpn_vrf(&add_vrf(1002)).unwrap();
        assert!(!running.contains_all(&ConfigLines::parse(other.apply_snippet())));
        let mut kernel = add_vrf(1001);
        kernel.redistribute.insert(Redistribute::Kernel);
        let (_, kernel) = FrrObject::evpn_vrf(&kernel).unwrap();
        assert!(!running.contains_all(&ConfigLines::parse(kernel.apply_snippet())));
        // `advertise-all-vni` of the default instance does not count for the VRF's instance.
        assert!(!running.contains_all(&ConfigLines::parse(
            "router bgp 64999 vrf vrf-1001\n address-family l2vpn evpn\n  advertise-all-vni\n"
        )));
        assert!(!running.contains_all(&ConfigLines::parse("")));
        // An explicit route target equal to FRR's own (<AS>:<VNI>) is not printed by FRR.
        let mut default_rt = add_vrf(1001);
        default_rt.route_targets = vec!["64999:1001".parse().unwrap()];
        let (_, default_rt) = FrrObject::evpn_vrf(&default_rt).unwrap();
        assert!(running.contains_all(&ConfigLines::parse(default_rt.apply_snippet())));
        let mut other_rt = add_vrf(1001);
        other_rt.route_targets = vec!["64999:4242".parse().unwrap()];
        let (_, other_rt) = FrrObject::evpn_vrf(&other_rt).unwrap();
        assert!(!running.contains_all(&ConfigLines::parse(other_rt.apply_snippet())));
    }

    #[test]
    fn evpn_vrf_object_pairs_add_and_del_vrf() {
        let (key, object) = FrrObject::evpn_vrf(&add_vrf(100)).unwrap();
        assert_eq!(key.as_str(), "vrf vrf-100");
        assert!(
            object
                .apply_snippet()
                .starts_with("vrf vrf-100\n  vni 100\n")
        );
        assert_eq!(
            object.remove_snippet(),
            "no vrf vrf-100\nno interface veth-vrf-100\nno router bgp 64999 vrf vrf-100\n\n"
        );
    }

    #[test]
    fn state_file_round_trip_is_private_and_atomic() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/frr-objects.json");
        let (key, object) = FrrObject::evpn_vrf(&add_vrf(100)).unwrap();
        let file = StateFile {
            version: STATE_VERSION,
            objects: [(
                key.clone(),
                OwnedObject {
                    remove: object.remove_snippet().to_owned(),
                },
            )]
            .into(),
        };
        write_state(&path, &file).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = read_state(&path).unwrap();
        assert_eq!(back.objects, file.objects);
        // Only the state file itself is left (the temporary file was renamed).
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["frr-objects.json"]);
        assert!(
            read_state(&dir.path().join("missing.json"))
                .unwrap()
                .objects
                .is_empty()
        );
        std::fs::write(&path, "{not json").unwrap();
        assert!(matches!(
            read_state(&path),
            Err(StateFileError::Parse { .. })
        ));
    }

    #[test]
    fn unwritable_state_dir_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        // A directory path under a regular file cannot be created.
        let err = write_state(&blocker.join("x/state.json"), &StateFile::default()).unwrap_err();
        assert!(err.to_string().contains("create the directory of"), "{err}");
    }
}
