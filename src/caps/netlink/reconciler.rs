//! The kernel reconciler: read each object class (from the [`KernelMirror`], kept current by
//! the kernel's notifications; by dumps when there is none), diff against the desired state,
//! apply the difference pipelined, touching only what [`Ownership`] gives the agent. When
//! nothing the agent owns changed behind its back since the last reconcile, a new desired
//! state is applied as a delta from the last one instead (see `apply_delta` and
//! docs/kernel-mirror.md).
//!
//! Invalid and conflicting objects are screened out first ([`validate::screen`]) and what the
//! kernel has under their identities is held. Each class is then planned by its own function
//! from three inputs: the desired objects of that class, the held identities, and the class's
//! observed objects.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ipnet::IpNet;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::route::RouteProtocol;
use tokio::sync::watch;

use super::changes::Changes;
use super::conn::{NetlinkConn, REQUEST_TIMEOUT, Request};
use super::mirror::{Dirty, Interest, KERNEL_STATS, KernelMirror, MirrorOptions, MirrorStatus};
use super::netns::{NetnsTarget, NetnsWorker};
use super::validate::{self, Held};
use super::{NetlinkError, addresses, links, neighbours, routes, rules, sysctl};
use crate::hash::{HashMap, HashSet};
use crate::system::{
    ChangeReport, DesiredSystem, LOCAL_TABLE, LinkKind, LinkSpec, LocalRouteSuppression, ObjectSet,
    Ownership, RouteSpec,
};
use crate::types::InterfaceName;

type Message = rtnetlink::packet_route::RouteNetlinkMessage;

/// Object class names used in [`ChangeReport`].
pub mod class {
    pub const LINKS: &str = "links";
    pub const SYSCTLS: &str = "sysctls";
    pub const ADDRESSES: &str = "addresses";
    pub const RULES: &str = "rules";
    pub const ROUTES: &str = "routes";
    pub const NEIGHBOURS: &str = "neighbours";
    pub const PROXY_NEIGHBOURS: &str = "proxy_neighbours";
    /// The kernel's own local routes removed ([`crate::system::LocalRouteSuppression`]).
    pub const LOCAL_ROUTES: &str = "local_routes";
    /// Ownership entries refused (a reserved table).
    pub const OWNERSHIP: &str = "ownership";
}

/// The namespace thread and the netlink connection opened from it.
struct Session {
    worker: NetnsWorker,
    conn: NetlinkConn,
}

/// Links by name (and names by ifindex), as last dumped.
#[derive(Default)]
struct LinkTable {
    by_name: HashMap<String, links::ObservedLink>,
    names: HashMap<u32, String>,
}

impl LinkTable {
    fn from_messages<'m>(
        messages: impl IntoIterator<Item = &'m rtnetlink::packet_route::RouteNetlinkMessage>,
    ) -> Self {
        let by_name: HashMap<String, links::ObservedLink> = messages
            .into_iter()
            .filter_map(links::parse)
            .map(|l| (l.name.clone(), l))
            .collect();
        let names = by_name
            .values()
            .map(|l| (l.index, l.name.clone()))
            .collect();
        Self { by_name, names }
    }

    fn index(&self, name: &InterfaceName) -> Option<u32> {
        self.by_name.get(name.as_str()).map(|l| l.index)
    }

    /// The device's name, for messages (`ifindex N` if it is gone).
    fn name_of(&self, index: u32) -> String {
        self.names
            .get(&index)
            .cloned()
            .unwrap_or_else(|| format!("ifindex {index}"))
    }

    /// The ifindexes of the devices in `names` that exist.
    fn indexes(&self, names: &BTreeSet<InterfaceName>) -> HashSet<u32> {
        names.iter().filter_map(|n| self.index(n)).collect()
    }

    /// Each desired object with the ifindex of its device; an object whose device does not
    /// exist is reported (`what` describes it) and left out.
    fn resolve<'d, T>(
        &self,
        items: impl IntoIterator<Item = &'d T>,
        dev: impl Fn(&T) -> &InterfaceName,
        what: impl Fn(&T) -> String,
        class: &str,
        report: &mut ChangeReport,
    ) -> Vec<(u32, &'d T)>
    where
        T: 'd,
    {
        let mut out = Vec::new();
        for item in items {
            match self.index(dev(item)) {
                Some(i) => out.push((i, item)),
                None => report.error(
                    class,
                    what(item),
                    format!("device {} does not exist", dev(item)),
                ),
            }
        }
        out
    }
}

/// The observed `(ifindex, key)` objects on an owned device that are not wanted, in order
/// (so removals are applied and reported deterministically).
fn stale_on_owned<K: Ord + Copy + std::hash::Hash>(
    observed: impl IntoIterator<Item = (u32, K)>,
    owned: &HashSet<u32>,
    wanted: &HashSet<(u32, K)>,
) -> Vec<(u32, K)> {
    let mut stale: Vec<(u32, K)> = observed
        .into_iter()
        .filter(|o| owned.contains(&o.0) && !wanted.contains(o))
        .collect();
    stale.sort();
    stale
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Add,
    Change,
    Remove,
    /// Part of an operation already counted (setting up a link created in this run).
    Uncounted,
}

/// Requests to apply, each tagged with its class and what it does, for the report.
#[derive(Default)]
struct Plan {
    requests: Vec<Request>,
    tags: Vec<(&'static str, Op)>,
}

impl Plan {
    fn push(&mut self, class: &'static str, op: Op, r: Request) {
        self.requests.push(r);
        self.tags.push((class, op));
    }

    async fn apply(
        self,
        conn: &NetlinkConn,
        report: &mut ChangeReport,
    ) -> Result<(), NetlinkError> {
        let results = conn.apply(self.requests).await;
        let mut closed = None;
        for ((class, op), (what, result)) in self.tags.into_iter().zip(results) {
            match result {
                Ok(()) => match op {
                    Op::Add => report.count_added(class, 1),
                    Op::Change => report.count_changed(class, 1),
                    Op::Remove => report.count_removed(class, 1),
                    Op::Uncounted => {}
                },
                // Gone already: deleted concurrently, or with the link it sat on (a VLAN whose
                // parent went first, a route of a deleted device).
                Err(NetlinkError::Kernel { errno, .. })
                    if op == Op::Remove && already_gone(errno.0) =>
                {
                    report.count_removed(class, 1)
                }
                Err(NetlinkError::Kernel { errno, .. }) => report.error(class, what, errno),
                // The session is unusable (closed, timed out, acks lost): stop here, the
                // next reconcile opens a new one and dumps afresh.
                Err(e) if e.ends_session() => {
                    if closed.is_none() {
                        closed = Some(e)
                    }
                }
                Err(e) => report.error(class, what, e),
            }
        }
        closed.map_or(Ok(()), Err)
    }
}

fn already_gone(errno: i32) -> bool {
    matches!(
        errno,
        libc::ENODEV | libc::ENOENT | libc::ESRCH | libc::EADDRNOTAVAIL
    )
}

/// See [`links::owned`].
fn owns_link(ownership: &Ownership, link: &links::ObservedLink, table: &LinkTable) -> bool {
    links::owned(ownership, link, |i| table.names.get(&i).map(String::as_str))
}

/// Reconciles links, addresses, rules, routes, neighbours, proxy neighbours and sysctls in one
/// network namespace over one long-lived netlink connection (opened on first use, reopened
/// after it breaks).
pub struct NetlinkReconciler {
    target: NetnsTarget,
    session: Mutex<Option<Arc<Session>>>,
    probes: AtomicU32,
    request_timeout: Duration,
    /// Read the kernel from a [`KernelMirror`] instead of dumping it per reconcile.
    use_mirror: bool,
    mirror: Mutex<Option<Arc<KernelMirror>>>,
    /// The next reconcile replaces the mirror by a fresh dump first ([`Self::resync_next`]).
    resync_next: AtomicBool,
    /// The next reconcile plans every class, not a delta ([`Self::plan_in_full_next`]).
    full_next: AtomicBool,
    /// The mirror's foreign-change and sync counts the last reconcile accounted for: more
    /// than these means something changed kernel state behind the agent's back.
    seen: watch::Sender<Seen>,
    /// The base of the next delta: what the last reconcile through the mirror applied.
    last: Mutex<Option<Last>>,
    deltas: std::sync::atomic::AtomicU64,
    /// The request socket's receive buffer, when not the default (tests).
    receive_buffer: Option<libc::c_int>,
    /// The mirror's links as last parsed.
    links: LinkCache,
    /// The devices of the desired local-route suppressions, kept by difference.
    suppression_devices: Mutex<SuppressionDevices>,
    /// What the mirror's interest was last made from: the same inputs make the same interest
    /// (a few hundred device names resolved per reconcile otherwise).
    interest_made: Mutex<Option<InterestMade>>,
    /// How long a reconcile applied as a delta trusts the last reading of what the mirror
    /// cannot see (see [`UNWATCHED_RECHECK`]).
    unwatched_recheck: Duration,
    /// When sysctls and proxy neighbours were last read and repaired.
    unwatched_checked: Mutex<Option<tokio::time::Instant>>,
}

/// Sysctls and proxy neighbours change without a notification, so the mirror cannot tell a
/// delta that someone changed them: a reconcile applied as a delta reads them again (every
/// desired sysctl, both proxy tables) when this long has passed since they were last read,
/// and otherwise applies only the proxy neighbours that differ from the last state. On a busy
/// gateway (hundreds of sysctls: four per VRF device, an event every few milliseconds) this
/// takes the reading out of nearly every event, while a change by hand is still repaired by
/// the first reconcile a second later (and by the periodic full reconcile on a quiet chassis,
/// as upstream's sync does).
pub(crate) const UNWATCHED_RECHECK: Duration = Duration::from_secs(1);

/// The devices the desired local-route suppressions are on, counted, and the set they were
/// counted from: the mirror's interest names them, and an EVPN gateway has one suppression
/// per tenant VM (30k) on a few dozen devices, so the next set is counted by its difference
/// with the last one (a persistent set: the paths a render changed), not walked per reconcile.
#[derive(Default)]
struct SuppressionDevices {
    counted: ObjectSet<LocalRouteSuppression>,
    devices: BTreeMap<InterfaceName, usize>,
    /// Moves when a device enters or leaves `devices`.
    version: u64,
}

impl SuppressionDevices {
    fn update(&mut self, suppressions: &ObjectSet<LocalRouteSuppression>) {
        use imbl::ordset::DiffItem;
        for item in self.counted.diff(suppressions) {
            match item {
                DiffItem::Add(l) => {
                    let n = self.devices.entry(l.dev.clone()).or_insert(0);
                    if *n == 0 {
                        self.version += 1;
                    }
                    *n += 1;
                }
                DiffItem::Remove(l) => {
                    if let Some(n) = self.devices.get_mut(&l.dev) {
                        *n -= 1;
                        if *n == 0 {
                            self.devices.remove(&l.dev);
                            self.version += 1;
                        }
                    }
                }
            }
        }
        self.counted = suppressions.clone();
    }
}

/// The links of a mirror state as last parsed, with the state's
/// [`MirrorState::links_version`](super::mirror::MirrorState::links_version): a reconcile reads
/// them two to four times, and a chassis with many VRFs has hundreds, which no event changes.
#[derive(Default)]
struct LinkCache(Mutex<Option<(u64, Arc<LinkTable>)>>);

impl LinkCache {
    fn read(&self, m: &KernelMirror) -> Arc<LinkTable> {
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.read(|s| match &*cached {
            Some((version, table)) if *version == s.links_version() => table.clone(),
            _ => {
                let table = Arc::new(LinkTable::from_messages(s.links()));
                *cached = Some((s.links_version(), table.clone()));
                table
            }
        })
    }
}

/// See `NetlinkReconciler::seen`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Seen {
    /// The mirror the counts belong to (its address; 0: none).
    mirror: usize,
    foreign: u64,
    syncs: u64,
}

/// A desired state screened, with what differs from the base it was screened against.
struct Checked<'a> {
    screened: &'a validate::Screened<'a>,
    /// The base and the changes from it (`None`: screened in full).
    known: Option<(&'a Arc<DesiredSystem>, &'a Changes<'a>)>,
}

/// A desired state applied without error through one mirror, up to its sync `syncs`.
struct Last {
    mirror: usize,
    syncs: u64,
    desired: Arc<DesiredSystem>,
}

impl NetlinkReconciler {
    /// Cheap: nothing is opened until the first reconcile.
    pub fn new(target: NetnsTarget) -> Self {
        Self {
            target,
            session: Mutex::new(None),
            probes: AtomicU32::new(0),
            request_timeout: REQUEST_TIMEOUT,
            use_mirror: true,
            mirror: Mutex::new(None),
            resync_next: AtomicBool::new(false),
            full_next: AtomicBool::new(false),
            seen: watch::channel(Seen::default()).0,
            last: Mutex::new(None),
            deltas: std::sync::atomic::AtomicU64::new(0),
            receive_buffer: None,
            links: LinkCache::default(),
            suppression_devices: Mutex::default(),
            interest_made: Mutex::new(None),
            unwatched_recheck: UNWATCHED_RECHECK,
            unwatched_checked: Mutex::new(None),
        }
    }

    /// How long a delta trusts the last reading of sysctls and proxy neighbours (default
    /// one second; `Duration::ZERO`: read on every reconcile).
    #[doc(hidden)]
    pub fn with_unwatched_recheck(mut self, every: Duration) -> Self {
        self.unwatched_recheck = every;
        self
    }

    /// Whether this reconcile reads sysctls and proxy neighbours again (a full plan always
    /// does, and restarts the clock).
    fn unwatched_due(&self, full_plan: bool) -> bool {
        let now = tokio::time::Instant::now();
        let mut checked = self
            .unwatched_checked
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let due =
            full_plan || checked.is_none_or(|t| now.duration_since(t) >= self.unwatched_recheck);
        if due {
            *checked = Some(now);
        }
        due
    }

    /// Open the request socket with a receive buffer of `bytes`: a tiny one makes the kernel
    /// drop acknowledgements, so that a session ends in the middle of a reconcile (tests).
    #[doc(hidden)]
    pub fn with_receive_buffer(mut self, bytes: usize) -> Self {
        self.receive_buffer = Some(libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX));
        self
    }

    /// Read the kernel by dumps on every reconcile, without a mirror (the way to compare the
    /// two, and an escape hatch).
    pub fn without_mirror(mut self) -> Self {
        self.use_mirror = false;
        self
    }

    /// The next reconcile first replaces the kernel mirror by a fresh dump: the periodic full
    /// reconcile's drift repair of last resort, should the kernel ever change something
    /// without a notification.
    pub fn resync_next(&self) {
        self.resync_next.store(true, Ordering::Relaxed);
    }

    /// The next reconcile plans every class against the mirror instead of applying a delta:
    /// the periodic full reconcile.
    pub fn plan_in_full_next(&self) {
        self.full_next.store(true, Ordering::Relaxed);
    }

    /// The working mirror, started on first use and replaced when it stopped; `None` (and a
    /// warning) when it cannot be started: the reconciler then dumps.
    async fn mirror(&self) -> Option<Arc<KernelMirror>> {
        if !self.use_mirror {
            return None;
        }
        let current = self
            .mirror
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(m) = current {
            if m.is_running() {
                return Some(m);
            }
            tracing::warn!(netns = %self.target.describe(), "the kernel mirror stopped: starting a new one");
        }
        match KernelMirror::start(self.target.clone(), MirrorOptions::default()).await {
            Ok(m) => {
                let m = Arc::new(m);
                *self.mirror.lock().unwrap_or_else(|e| e.into_inner()) = Some(m.clone());
                Some(m)
            }
            Err(e) => {
                tracing::warn!("cannot start the kernel mirror, reading the kernel by dumps: {e}");
                *self.mirror.lock().unwrap_or_else(|e| e.into_inner()) = None;
                None
            }
        }
    }

    fn drop_mirror(&self, e: &NetlinkError) {
        tracing::warn!("{e}");
        *self.mirror.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Wait until something the agent owns changed in the kernel behind its back since the
    /// last reconcile read the mirror: an object of an owned table or device added, changed or
    /// removed by someone else (a route deleted by hand), or a resync (a link set down flushes
    /// its routes silently, an overflow). The agent's own requests are told apart by their
    /// netlink port. Cancel-safe; never resolves without a mirror.
    pub async fn changed_behind_back(&self) {
        let mut seen = self.seen.subscribe();
        loop {
            let current = *seen.borrow_and_update();
            let mirror = self
                .mirror
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            match mirror {
                Some(m) if mirror_id(&m) == current.mirror => {
                    let mut status = m.status();
                    tokio::select! {
                        // Reduced to a bool at once: the watch guard is not Send.
                        alive = async {
                            status
                                .wait_for(|s| s.foreign > current.foreign || s.syncs > current.syncs)
                                .await
                                .is_ok()
                        } => {
                            if alive {
                                if current.syncs == m.status().borrow().syncs
                                    && self.only_echoes(&m)
                                {
                                    // Accounted for: wait on.
                                    let foreign = m.status().borrow().foreign;
                                    self.seen.send_modify(|s| s.foreign = s.foreign.max(foreign));
                                    continue;
                                }
                                return;
                            }
                            // The mirror is gone: wait for the next reconcile.
                            let _ = seen.changed().await;
                        }
                        _ = seen.changed() => {}
                    }
                }
                // No mirror yet, or one the last reconcile did not read.
                _ => {
                    if seen.changed().await.is_err() {
                        return std::future::pending().await;
                    }
                }
            }
        }
    }

    /// Whether the foreign changes the mirror holds are only the kernel's late echo of the
    /// IPv6 addresses the last reconcile applied (their duplicate address detection ending
    /// after it): then they are consumed here; otherwise they are left for the reconcile.
    fn only_echoes(&self, m: &KernelMirror) -> bool {
        let last = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|l| l.desired.clone());
        let Some(desired) = last else {
            return false;
        };
        let dirty = m.take_dirty();
        let table = self.links.read(m);
        if only_expected(&dirty, &desired, &table)
            && late_local_routes(&dirty, &desired, &table, m).is_empty()
        {
            true
        } else {
            m.restore_dirty(dirty);
            false
        }
    }

    /// How long one netlink request may take ([`REQUEST_TIMEOUT`] by default).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    pub fn from_config(linux: &crate::config::LinuxSection) -> Self {
        Self::new(NetnsTarget::from_config(linux.netns.as_deref()))
    }

    pub fn target(&self) -> &NetnsTarget {
        &self.target
    }

    async fn session(&self) -> Result<Arc<Session>, NetlinkError> {
        if let Some(s) = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Ok(s);
        }
        let target = self.target.clone();
        let worker = tokio::task::spawn_blocking(move || NetnsWorker::spawn(target))
            .await
            .map_err(|e| NetlinkError::WorkerGone(e.to_string()))??;
        let conn = match self.receive_buffer {
            Some(bytes) => {
                NetlinkConn::open_with_buffer(&worker, self.request_timeout, bytes).await?
            }
            None => NetlinkConn::open(&worker, self.request_timeout).await?,
        };
        let s = Arc::new(Session { worker, conn });
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.clone());
        Ok(s)
    }

    fn forget_session_if_closed<T>(&self, r: &Result<T, NetlinkError>) {
        if let Err(e) = r
            && e.ends_session()
        {
            self.forget_session();
        }
    }

    /// Drop the session: the next reconcile opens a new socket.
    fn forget_session(&self) {
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Can links of `kind` (`vrf`, `dummy`, `vlan`, ...) be created in the target namespace?
    pub async fn link_kind_supported(&self, kind: &str) -> Result<bool, NetlinkError> {
        let s = self.session().await?;
        let n = self.probes.fetch_add(1, Ordering::Relaxed);
        let name = format!("obaprobe{}", n % 10_000_000);
        let r = s.conn.apply_one(links::probe_request(kind, &name)).await;
        self.forget_session_if_closed(&r);
        match r {
            Ok(()) => {
                // Kinds without required attributes really get created: remove the probe.
                let dump = s
                    .conn
                    .dump_flags("link", links::get_request(&name), 0)
                    .await?;
                if let Some(l) = dump.iter().filter_map(links::parse).next() {
                    s.conn
                        .apply_one(links::delete_request(l.index, &name))
                        .await?;
                }
                Ok(true)
            }
            Err(NetlinkError::Kernel { errno, .. }) if errno.0 == libc::EOPNOTSUPP => Ok(false),
            // Rejected for a missing attribute: the kind exists.
            Err(NetlinkError::Kernel { .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Apply `desired`. An invalid or conflicting object is left out (and what the kernel has
    /// under its identity left alone, see `validate::screen`); it and every object that
    /// fails are reported in [`ChangeReport::errors`], and never stop the others.
    pub async fn reconcile(&self, desired: &DesiredSystem) -> Result<ChangeReport, NetlinkError> {
        self.reconcile_shared(&Arc::new(desired.clone())).await
    }

    /// [`Self::reconcile`] of a state the caller shares: kept (not copied) as the base of
    /// the next reconcile's delta.
    ///
    /// Through the mirror, a reconcile is a delta when nothing the agent owns changed in the
    /// kernel behind its back since the last one ([`KernelMirror::take_dirty`]), the last one
    /// applied everything, and the links, sysctls and ownership are the same: then only the objects that differ between the two desired states are
    /// applied, and nothing is read but the links and the routes a new route would replace.
    /// Otherwise every class is planned against the mirror.
    pub async fn reconcile_shared(
        &self,
        desired: &Arc<DesiredSystem>,
    ) -> Result<ChangeReport, NetlinkError> {
        let mut report = ChangeReport::default();
        // After a state applied cleanly, only what this one adds needs checking; what differs
        // is found once, for the screening and for the delta.
        let base: Option<Arc<DesiredSystem>> = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|l| same_structure(&l.desired, desired))
            .map(|l| l.desired.clone());
        let changes = base.as_deref().map(|old| Changes::between(old, desired));
        let by_delta = changes
            .as_ref()
            .and_then(|c| validate::screen_delta(c, desired));
        let screened = by_delta.unwrap_or_else(|| validate::screen(desired));
        for d in &screened.dropped {
            report.error(
                d.class,
                d.object.clone(),
                format!("not applied: {}", d.reason),
            );
        }
        let s = self.session().await?;
        if let Some(m) = self.mirror().await {
            let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).take();
            let checked = Checked {
                screened: &screened,
                known: base.as_ref().zip(changes.as_ref()),
            };
            let r = self
                .reconcile_mirrored(&s, &m, desired, checked, last, &mut report)
                .await;
            match r {
                Ok(()) => return Ok(report),
                Err(e @ NetlinkError::MirrorLost { .. }) => self.drop_mirror(&e),
                Err(e) => return self.partial(report, e),
            }
        }
        let r = reconcile_in(
            &s,
            View::Dumps(&s.conn),
            &screened.desired,
            &screened.held,
            &mut report,
        )
        .await;
        KERNEL_STATS.by_dumps.fetch_add(1, Ordering::Relaxed);
        match r {
            Ok(()) => Ok(report),
            Err(e) => self.partial(report, e),
        }
    }

    /// A reconcile cut short by `e`. When `e` ended the session (a timeout, lost acks), what
    /// was applied before it is still reported, with `e` as an error of the whole kernel
    /// part: the objects added are there, and the next reconcile (on a new session) finds
    /// them so and does not count them again.
    fn partial(
        &self,
        mut report: ChangeReport,
        e: NetlinkError,
    ) -> Result<ChangeReport, NetlinkError> {
        if !e.ends_session() {
            return Err(e);
        }
        self.forget_session();
        report.error("kernel", "netlink reconcile", e);
        Ok(report)
    }

    async fn reconcile_mirrored(
        &self,
        s: &Session,
        m: &Arc<KernelMirror>,
        desired: &Arc<DesiredSystem>,
        checked: Checked<'_>,
        last: Option<Last>,
        report: &mut ChangeReport,
    ) -> Result<(), NetlinkError> {
        let Checked { screened, known } = checked;
        let view = View::Mirror(m, self.request_timeout, &self.links);
        let resync = self.resync_next.swap(false, Ordering::Relaxed);
        let full = self.full_next.swap(false, Ordering::Relaxed) || resync;
        if resync {
            m.resync(self.request_timeout).await?;
        }
        view.catch_up().await?;
        // Everything others did until now; what they do from here on is in the next one.
        // The status first: every change it counts is in what is taken next.
        let status = *m.status().borrow();
        let dirty = m.take_dirty();
        let table = view.links().await?;
        let delta = last.filter(|last| {
            !full
                && last.mirror == mirror_id(m)
                && last.syncs == status.syncs
                && screened.dropped.is_empty()
                && same_structure(&last.desired, desired)
                && only_expected(&dirty, &last.desired, &table)
        });
        let errors_before = report.errors.len();
        match &delta {
            Some(last) => {
                // The changes found for the screening, when they are from this base.
                let fresh;
                let changes = match known {
                    Some((base, changes)) if Arc::ptr_eq(base, &last.desired) => changes,
                    _ => {
                        fresh = Changes::between(&last.desired, desired);
                        &fresh
                    }
                };
                let delta = Delta {
                    changes,
                    readded: &dirty,
                    reread_unwatched: self.unwatched_due(false),
                };
                apply_delta(s, view, m, delta, desired, &table, report).await?;
                self.deltas.fetch_add(1, Ordering::Relaxed);
                KERNEL_STATS.deltas.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.unwatched_due(true);
                reconcile_in(s, view, &screened.desired, &screened.held, report).await?;
                KERNEL_STATS.full_plans.fetch_add(1, Ordering::Relaxed);
            }
        }
        // The reconciler's own changes are in the mirror before anything is recorded.
        view.catch_up().await?;
        let after = *m.status().borrow();
        // What came in meanwhile: the kernel's echo of this reconcile's IPv6 addresses (sent
        // as the kernel's own) is expected; anything else is left for the next reconcile, and
        // wakes the host at once.
        let late = m.take_dirty();
        let links = view.links().await?;
        // A local route the kernel added after this reconcile looked for it (an IPv6
        // address's, from a work queue) is left for the next one too.
        let unexpected = !late.is_empty()
            && (!only_expected(&late, desired, &links)
                || !late_local_routes(&late, desired, &links, m).is_empty());
        if unexpected {
            m.restore_dirty(late);
        }
        // The mirror resynced meanwhile: the kernel flushed something silently (a link
        // deleted, the last IPv4 address of a device removed takes the routes through it),
        // maybe something still wanted. No base for a delta, and the host is woken at once
        // (the resync is left unaccounted) to plan everything again.
        let resynced = after.syncs != status.syncs;
        // A state with objects screened out is no base for a delta: they were never applied.
        let base = report.errors.len() == errors_before && screened.dropped.is_empty() && !resynced;
        // Without a base, any change of a route in an owned table matters (a routing daemon's
        // route that kept one of the agent's out may have gone).
        {
            let mut suppressed = self
                .suppression_devices
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            suppressed.update(&desired.suppressed_local_routes);
            let inputs = InterestInputs {
                mirror: mirror_id(m),
                links_table: &links,
                desired,
                suppressed: suppressed.version,
                own_port: s.conn.port(),
                strict: !base,
            };
            let mut made = self.interest_made.lock().unwrap_or_else(|e| e.into_inner());
            if !made.as_ref().is_some_and(|made| made.same(&inputs)) {
                m.set_interest(interest(&inputs, &suppressed.devices));
                *made = Some(InterestMade::of(&inputs));
            }
        }
        if base {
            *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Last {
                mirror: mirror_id(m),
                syncs: after.syncs,
                desired: desired.clone(),
            });
        }
        self.seen.send_if_modified(|seen| {
            let new = Seen {
                mirror: mirror_id(m),
                foreign: if unexpected {
                    status.foreign
                } else {
                    after.foreign
                },
                syncs: if resynced { status.syncs } else { after.syncs },
            };
            std::mem::replace(seen, new) != new
        });
        Ok(())
    }

    /// The kernel mirror's counters and the foreign changes it holds for the next reconcile
    /// (`None` without a mirror): for tests.
    pub fn mirror_status(&self) -> Option<(MirrorStatus, Dirty)> {
        let m = self
            .mirror
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        let status = *m.status().borrow();
        Some((status, m.peek_dirty()))
    }

    /// Reconciles applied as a delta since the start (for tests and benchmarks).
    pub fn deltas(&self) -> u64 {
        self.deltas.load(Ordering::Relaxed)
    }

    /// Every address configured in the target namespace (both families) with the name of its
    /// device, for the policy stage's "never expose what covers the host's own addresses".
    /// Addresses on the agent's own devices (those carrying its alias: bgp-nic, `lo-<vni>`, an
    /// EVPN veth) are what the agent exposes, not the host's, and are left out: a restarted
    /// agent must not refuse what its predecessor exposed there. They are not read either while
    /// the other devices are few ([`HOST_DEVICE_DUMPS_MAX`]): each of those is dumped by its
    /// index, so tens of thousands of exposed addresses are not walked at every periodic
    /// reconcile (at 30k, 42 ms for the dump of every address, 0.2 ms for one device's).
    pub async fn host_addresses(&self) -> Result<Vec<(String, ipnet::IpNet)>, NetlinkError> {
        let s = self.session().await?;
        let r = dump_links(&s.conn).await;
        self.forget_session_if_closed(&r);
        let links = r?;
        let theirs: Vec<(u32, &str)> = links
            .by_name
            .values()
            .filter(|l| !l.marked())
            .map(|l| (l.index, l.name.as_str()))
            .collect();
        if theirs.len() <= HOST_DEVICE_DUMPS_MAX {
            return self.dump_addresses_of(&s.conn, &theirs).await;
        }
        let every = self.dump_addresses(&s.conn, 0).await?;
        Ok(every
            .into_iter()
            .filter_map(|a| {
                let dev = links.names.get(&a.index).cloned().unwrap_or_default();
                let agents = links.by_name.get(&dev).is_some_and(|l| l.marked());
                (!agents).then_some((dev, a.addr))
            })
            .collect())
    }

    /// The addresses of the named devices only (both families), each device's dumped by its
    /// index: the `ovn` method reads its fabric bridges' every few seconds, and a dump of every
    /// address would walk the tens of thousands the agent exposes on bgp-nic each time (and hold
    /// the session's connection meanwhile). A name without a device has none.
    pub async fn addresses_of(
        &self,
        devices: &[&str],
    ) -> Result<Vec<(String, ipnet::IpNet)>, NetlinkError> {
        let s = self.session().await?;
        let r = dump_links(&s.conn).await;
        self.forget_session_if_closed(&r);
        let links = r?;
        let found: Vec<(u32, &str)> = devices
            .iter()
            .filter_map(|&dev| links.by_name.get(dev).map(|l| (l.index, dev)))
            .collect();
        self.dump_addresses_of(&s.conn, &found).await
    }

    /// The addresses of each device (index, name), in one dump per device and family.
    async fn dump_addresses_of(
        &self,
        conn: &NetlinkConn,
        devices: &[(u32, &str)],
    ) -> Result<Vec<(String, ipnet::IpNet)>, NetlinkError> {
        let mut out = Vec::new();
        for &(index, dev) in devices {
            let found = self.dump_addresses(conn, index).await?;
            out.extend(found.into_iter().map(|a| (dev.to_owned(), a.addr)));
        }
        Ok(out)
    }

    /// The addresses of device `index` (0: of every device), both families. The session's
    /// socket has strict checking: for one device the kernel walks its addresses alone.
    async fn dump_addresses(
        &self,
        conn: &NetlinkConn,
        index: u32,
    ) -> Result<Vec<addresses::ObservedAddress>, NetlinkError> {
        let mut out = Vec::new();
        for (family, what) in [
            (AddressFamily::Inet, "ipv4 addresses"),
            (AddressFamily::Inet6, "ipv6 addresses"),
        ] {
            let r = conn
                .dump(what, addresses::dump_request_of(family, index))
                .await;
            self.forget_session_if_closed(&r);
            out.extend(
                r?.iter()
                    .filter_map(addresses::parse)
                    // A kernel without the filter answers with every device's.
                    .filter(|a| index == 0 || a.index == index),
            );
        }
        Ok(out)
    }
}

/// Up to this many devices that are not the agent's, [`NetlinkReconciler::host_addresses`]
/// dumps each one's addresses rather than every address of the namespace: a round trip each,
/// against a walk of everything the agent exposes (a network node has few devices and many
/// exposures; a compute node with hundreds of VM taps has few exposures).
pub const HOST_DEVICE_DUMPS_MAX: usize = 64;

/// What [`interest`] makes the mirror's interest from.
struct InterestInputs<'a> {
    mirror: usize,
    links_table: &'a Arc<LinkTable>,
    desired: &'a DesiredSystem,
    /// [`SuppressionDevices::version`].
    suppressed: u64,
    own_port: u32,
    strict: bool,
}

/// The inputs the mirror's interest was last made from, compared per reconcile: the links
/// and the link table are shared versions (equal at a glance when unchanged), the ownership's
/// device and table sets are small.
struct InterestMade {
    mirror: usize,
    links_table: Arc<LinkTable>,
    links: ObjectSet<LinkSpec>,
    address_devices: BTreeSet<InterfaceName>,
    all_address_devices: BTreeSet<InterfaceName>,
    neighbour_devices: BTreeSet<InterfaceName>,
    tables: BTreeSet<u32>,
    swept_tables: BTreeSet<u32>,
    suppressed: u64,
    own_port: u32,
    strict: bool,
}

impl InterestMade {
    fn of(i: &InterestInputs<'_>) -> Self {
        let o = &i.desired.ownership;
        Self {
            mirror: i.mirror,
            links_table: i.links_table.clone(),
            links: i.desired.links.clone(),
            address_devices: o.address_devices.clone(),
            all_address_devices: o.all_address_devices.clone(),
            neighbour_devices: o.neighbour_devices.clone(),
            tables: o.tables.clone(),
            swept_tables: o.swept_tables.clone(),
            suppressed: i.suppressed,
            own_port: i.own_port,
            strict: i.strict,
        }
    }

    /// Whether [`interest`] would make the same interest of `i`.
    fn same(&self, i: &InterestInputs<'_>) -> bool {
        let o = &i.desired.ownership;
        self.mirror == i.mirror
            && Arc::ptr_eq(&self.links_table, i.links_table)
            && self.suppressed == i.suppressed
            && self.own_port == i.own_port
            && self.strict == i.strict
            && self.links == i.desired.links
            && self.address_devices == o.address_devices
            && self.all_address_devices == o.all_address_devices
            && self.neighbour_devices == o.neighbour_devices
            && self.tables == o.tables
            && self.swept_tables == o.swept_tables
    }
}

/// What the reconciler owns, for the mirror to tell its own changes from others'.
/// `suppressed` holds the devices of the desired local-route suppressions (counted in
/// [`SuppressionDevices`], whose version `inputs` carries).
fn interest(inputs: &InterestInputs<'_>, suppressed: &BTreeMap<InterfaceName, usize>) -> Interest {
    let InterestInputs {
        links_table: table,
        desired,
        own_port,
        strict,
        ..
    } = *inputs;
    let own = &desired.ownership;
    let tables = own.tables.iter().copied().collect();
    let swept_tables = own.swept_tables.iter().copied().collect();
    let names = own
        .address_devices
        .iter()
        .chain(&own.all_address_devices)
        .chain(&own.neighbour_devices)
        // An address re-added there brings its local route back.
        .chain(suppressed.keys())
        .map(|n| n.as_str())
        .chain(desired.links.iter().flat_map(|l| {
            let peer = match &l.kind {
                LinkKind::Veth { peer } => Some(peer.as_str()),
                _ => None,
            };
            std::iter::once(l.name.as_str()).chain(peer)
        }));
    let devices = names
        .filter_map(|n| table.by_name.get(n).map(|l| l.index))
        .collect();
    let local_route_devices = suppressed
        .keys()
        .filter_map(|n| table.by_name.get(n.as_str()).map(|l| l.index))
        .collect();
    Interest {
        own_port,
        tables,
        swept_tables,
        devices,
        local_route_devices,
        strict,
    }
}

/// Whether the foreign changes in `dirty` are only the kernel's echo of IPv6 addresses as
/// `desired` has them (present when desired, gone when not), or IPv6 addresses the agent does
/// not manage.
fn only_expected(dirty: &Dirty, desired: &DesiredSystem, table: &LinkTable) -> bool {
    if dirty.objects != 0 {
        return false;
    }
    // What each address ended as: added then removed (one state, then the next) is absent.
    let mut last: HashMap<(u32, IpNet), bool> = HashMap::default();
    for (index, addr, present) in &dirty.v6_addresses {
        last.insert((*index, *addr), *present);
    }
    last.into_iter().all(|((index, addr), present)| {
        let dev = table.name_of(index);
        // Addresses the agent never manages there (the kernel's link-local /64, an
        // operator's prefix): only host addresses are the agent's, except on the devices
        // whose every address is.
        let managed = addr.prefix_len() == addr.max_prefix_len()
            || desired
                .ownership
                .all_address_devices
                .iter()
                .any(|d| d.as_str() == dev);
        if !managed {
            return true;
        }
        let wanted = InterfaceName::new(&dev).is_ok_and(|dev| {
            desired
                .addresses
                .contains(&crate::system::AddressSpec { dev, addr })
        });
        wanted == present
    })
}

/// The suppressions of `desired` whose local route the mirror recorded in `dirty` as added by
/// the kernel and still holds: it came after the reconcile that removed the others looked (an
/// IPv6 address's local route is added from a work queue, after the address), so a delta
/// removes it. Local routes are the kernel's echo of addresses: they never take a full plan.
fn late_local_routes<'d>(
    dirty: &Dirty,
    desired: &'d DesiredSystem,
    table: &LinkTable,
    m: &KernelMirror,
) -> Vec<&'d LocalRouteSuppression> {
    if dirty.local_routes.is_empty() || desired.suppressed_local_routes.is_empty() {
        return Vec::new();
    }
    m.read(|state| {
        dirty
            .local_routes
            .iter()
            .filter_map(|&(t, dst, oif)| {
                let dev = InterfaceName::new(table.name_of(oif)).ok()?;
                let wanted = desired
                    .suppressed_local_routes
                    .get(&LocalRouteSuppression { table: t, dst, dev })?;
                state
                    .routes_at(t, IpNet::from(dst), 0)
                    .filter_map(routes::parse_local)
                    .any(|r| r.table == t && r.dst == dst && r.oif == oif)
                    .then_some(wanted)
            })
            .collect()
    })
}

/// The parts a delta does not apply: any change there takes a full plan.
fn same_structure(old: &DesiredSystem, new: &DesiredSystem) -> bool {
    old.links == new.links && old.sysctls == new.sysctls && old.ownership == new.ownership
}

/// Applies what differs between `old` (applied without error, and the kernel has not changed
/// behind the agent's back since) and `new`: additions first, then removals, as a full plan
/// orders them. Only the routes a new route would replace are read (from the mirror), to
/// refuse replacing a routing daemon's route as the full plan does.
async fn apply_delta(
    s: &Session,
    view: View<'_>,
    m: &KernelMirror,
    delta: Delta<'_, '_>,
    new: &DesiredSystem,
    table: &LinkTable,
    report: &mut ChangeReport,
) -> Result<(), NetlinkError> {
    let changes = delta.changes;
    let mut adds = Plan::default();
    let mut removes = Plan::default();
    let missing = |dev: &InterfaceName| format!("device {dev} does not exist");
    // Neither sysctls nor proxy neighbours are in the mirror (no notifications): when due,
    // read and repaired as in a full plan, also when the state is the same again; otherwise
    // (the sysctls are those of the last state, as a delta's structure is) only the proxy
    // neighbours that changed.
    if delta.reread_unwatched {
        reconcile_sysctls(&s.worker, &new.sysctls, report).await?;
        let p4 = s
            .conn
            .dump(
                "ipv4 proxy neighbours",
                neighbours::dump_request(false, true),
            )
            .await?;
        let p6 = s
            .conn
            .dump(
                "ipv6 proxy neighbours",
                neighbours::dump_request(true, true),
            )
            .await?;
        plan_proxies(
            new,
            &Held::default(),
            table,
            p4.iter().chain(&p6),
            &mut adds,
            &mut removes,
            report,
        );
    } else {
        let added = table.resolve(
            changes.proxy_neighbours.added.iter().copied(),
            |p| &p.dev,
            |p| format!("add proxy neighbour {} dev {}", p.ip, p.dev),
            class::PROXY_NEIGHBOURS,
            report,
        );
        for (i, p) in added {
            // Created or replaced: already there is no error.
            adds.push(
                class::PROXY_NEIGHBOURS,
                Op::Add,
                neighbours::add_proxy_request(i, p.dev.as_str(), p.ip),
            );
        }
        // Those on a device that is gone went with it.
        for p in &changes.proxy_neighbours.removed {
            if let Some(i) = table.index(&p.dev) {
                removes.push(
                    class::PROXY_NEIGHBOURS,
                    Op::Remove,
                    neighbours::delete_proxy_request(i, p.dev.as_str(), p.ip),
                );
            }
        }
    }
    for a in &changes.addresses.added {
        match table.index(&a.dev) {
            Some(i) => adds.push(
                class::ADDRESSES,
                Op::Add,
                addresses::add_request(i, a.dev.as_str(), a.addr),
            ),
            None => report.error(
                class::ADDRESSES,
                format!("add address {} dev {}", a.addr, a.dev),
                missing(&a.dev),
            ),
        }
    }
    // Those on a device that is gone went with it.
    for a in &changes.addresses.removed {
        if let Some(i) = table.index(&a.dev) {
            removes.push(
                class::ADDRESSES,
                Op::Remove,
                addresses::delete_request(i, a.dev.as_str(), a.addr),
            );
        }
    }

    for r in &changes.rules.added {
        adds.push(class::RULES, Op::Add, rules::add_request(r));
    }
    for r in &changes.rules.removed {
        removes.push(class::RULES, Op::Remove, rules::delete_spec_request(r));
    }

    let mut added: Vec<&RouteSpec> = changes.routes.added.clone();
    // Device routes first: a gateway must be reachable when its route is added.
    added.sort_by_key(|r| r.via.is_some());
    let mut replaced: HashSet<routes::RouteIdentity> = HashSet::default();
    m.read(|state| {
        for spec in added {
            let oif = match &spec.dev {
                Some(d) => match table.index(d) {
                    Some(i) => Some(i),
                    None => {
                        report.error(class::ROUTES, routes::describe(spec), missing(d));
                        continue;
                    }
                },
                None => None,
            };
            let key = routes::desired_key(spec, oif);
            let id = &key.identity;
            let there: Vec<routes::ObservedRoute> = state
                .routes_at(id.table, id.dst, id.metric)
                .filter_map(routes::parse)
                .collect();
            if there.iter().any(|r| {
                r.protocol == RouteProtocol::Boot
                    && r.key.as_ref().is_some_and(|k| {
                        *k == key
                            || (oif.is_none()
                                && k.via.is_some()
                                && routes::RouteKey {
                                    oif: None,
                                    ..k.clone()
                                } == key)
                    })
            }) {
                continue;
            }
            if let Some(f) = there
                .iter()
                .find(|r| r.protocol != RouteProtocol::Boot && !swept(&new.ownership, r))
            {
                refuse_replacing(report, spec, f.protocol);
                continue;
            }
            let op = if there.is_empty() {
                Op::Add
            } else {
                Op::Change
            };
            replaced.insert(key.identity.clone());
            adds.push(class::ROUTES, op, routes::add_request(spec, oif));
        }
    });
    for spec in &changes.routes.removed {
        let oif = match &spec.dev {
            Some(d) => match table.index(d) {
                Some(i) => Some(i),
                // Gone with its device.
                None => continue,
            },
            None => None,
        };
        if replaced.contains(&routes::desired_key(spec, oif).identity) {
            continue;
        }
        removes.push(
            class::ROUTES,
            Op::Remove,
            routes::delete_spec_request(spec, oif),
        );
    }

    let changed: HashSet<(&InterfaceName, IpAddr)> = changes
        .neighbours
        .added
        .iter()
        .map(|n| (&n.dev, n.ip))
        .collect();
    let had: HashSet<(&InterfaceName, IpAddr)> = changes
        .neighbours
        .removed
        .iter()
        .map(|n| (&n.dev, n.ip))
        .collect();
    for n in &changes.neighbours.added {
        match table.index(&n.dev) {
            Some(i) => {
                let op = if had.contains(&(&n.dev, n.ip)) {
                    Op::Change
                } else {
                    Op::Add
                };
                adds.push(
                    class::NEIGHBOURS,
                    op,
                    neighbours::replace_request(i, n.dev.as_str(), n.ip, n.lladdr),
                );
            }
            None => report.error(
                class::NEIGHBOURS,
                format!("replace neighbour {} dev {}", n.ip, n.dev),
                missing(&n.dev),
            ),
        }
    }
    for n in &changes.neighbours.removed {
        if changed.contains(&(&n.dev, n.ip)) {
            continue;
        }
        if let Some(i) = table.index(&n.dev) {
            removes.push(
                class::NEIGHBOURS,
                Op::Remove,
                neighbours::delete_request(i, n.dev.as_str(), n.ip),
            );
        }
    }

    adds.apply(&s.conn, report).await?;
    removes.apply(&s.conn, report).await?;
    // An address added brings its local route; a suppression added names one that may be
    // there. The others were removed before, and nothing brought them back since (an
    // address re-added behind the agent's back takes a full plan).
    // IPv6 addresses that came back behind the agent's back as it wants them (the kernel's
    // echo of its own, or re-added by hand) bring their local routes too.
    let readded: Vec<(InterfaceName, IpNet)> = delta
        .readded
        .v6_addresses
        .iter()
        .filter(|(_, _, present)| *present)
        .filter_map(|(index, addr, _)| {
            let dev = InterfaceName::new(table.name_of(*index)).ok()?;
            Some((dev, *addr))
        })
        .collect();
    let added = changes
        .addresses
        .added
        .iter()
        .map(|a| (&a.dev, a.addr))
        .chain(readded.iter().map(|(dev, addr)| (dev, *addr)));
    let mut wanted = suppressions_to_apply(&changes.local_routes.added, added, new);
    wanted.extend(late_local_routes(delta.readded, new, table, m));
    wanted.sort_unstable();
    wanted.dedup();
    if !wanted.is_empty() {
        suppress_these(&s.conn, view, m, wanted, table, report).await?;
    }
    Ok(())
}

/// What a delta applies: what changed between the two desired states, and the foreign
/// changes the kernel made meanwhile that it accepted (IPv6 addresses as the agent wants them).
struct Delta<'c, 'd> {
    changes: &'c Changes<'d>,
    readded: &'c Dirty,
    /// Read sysctls and proxy neighbours again ([`UNWATCHED_RECHECK`]).
    reread_unwatched: bool,
}

/// The suppressions a delta applies: those it adds and those of the addresses that appeared
/// (`added`: device, address), found with a lookup per table a suppression may name (local,
/// or one the agent owns: the screening drops any other).
fn suppressions_to_apply<'d, 'a>(
    added_suppressions: &[&'d LocalRouteSuppression],
    added: impl Iterator<Item = (&'a InterfaceName, IpNet)>,
    new: &'d DesiredSystem,
) -> Vec<&'d LocalRouteSuppression> {
    let mut wanted: BTreeSet<&LocalRouteSuppression> = added_suppressions.iter().copied().collect();
    if new.suppressed_local_routes.is_empty() {
        return wanted.into_iter().collect();
    }
    let tables: Vec<u32> = std::iter::once(LOCAL_TABLE)
        .chain(new.ownership.tables.iter().copied())
        .collect();
    for (dev, addr) in added {
        if addr.prefix_len() != addr.max_prefix_len() {
            continue;
        }
        for &t in &tables {
            let candidate = LocalRouteSuppression {
                table: t,
                dst: addr.addr(),
                dev: dev.clone(),
            };
            if let Some(l) = new.suppressed_local_routes.get(&candidate) {
                wanted.insert(l);
            }
        }
    }
    wanted.into_iter().collect()
}

/// Remove the kernel's local routes `wanted` names, looked up in the mirror one by one.
async fn suppress_these(
    conn: &NetlinkConn,
    view: View<'_>,
    m: &KernelMirror,
    wanted: Vec<&LocalRouteSuppression>,
    table: &LinkTable,
    report: &mut ChangeReport,
) -> Result<(), NetlinkError> {
    let wanted = table.resolve(
        wanted,
        |l| &l.dev,
        validate::describe_suppression,
        class::LOCAL_ROUTES,
        report,
    );
    // After the additions: the local routes of the addresses just added are there by now.
    view.catch_up().await?;
    let mut deletes = Plan::default();
    m.read(|state| {
        for (oif, l) in wanted {
            let local = state
                .routes_at(l.table, IpNet::from(l.dst), 0)
                .filter_map(routes::parse_local)
                .find(|r| r.table == l.table && r.dst == l.dst && r.oif == oif);
            if let Some(r) = local {
                deletes.push(
                    class::LOCAL_ROUTES,
                    Op::Remove,
                    routes::delete_local_request(&r, l.dev.as_str()),
                );
            }
        }
    });
    deletes.apply(conn, report).await
}

/// A foreign route the agent may replace or delete: in a swept table, not the kernel's own nor
/// a routing daemon's, with a destination (upstream's sweep spares default routes).
fn swept(ownership: &Ownership, r: &routes::ObservedRoute) -> bool {
    ownership.swept_tables.contains(&r.identity.table)
        && r.identity.dst.prefix_len() > 0
        && routes::sweepable_protocol(r.protocol)
}

/// A desired route whose identity a route of another protocol (a routing daemon's) holds:
/// reported, never replaced.
fn refuse_replacing(report: &mut ChangeReport, spec: &RouteSpec, protocol: RouteProtocol) {
    report.error(
        class::ROUTES,
        routes::describe(spec),
        format!(
            "a route of protocol {} with the same destination and metric is in the table; not replaced",
            u8::from(protocol)
        ),
    );
}

fn mirror_id(m: &Arc<KernelMirror>) -> usize {
    Arc::as_ptr(m) as usize
}

async fn dump_links(conn: &NetlinkConn) -> Result<LinkTable, NetlinkError> {
    Ok(LinkTable::from_messages(
        &conn.dump("links", links::dump_request()).await?,
    ))
}

/// Where a reconcile reads the kernel's objects: the [`KernelMirror`] (no dumps), or dumps
/// when there is no working mirror. Writes always go through the session's connection.
#[derive(Clone, Copy)]
enum View<'a> {
    Dumps(&'a NetlinkConn),
    Mirror(&'a KernelMirror, Duration, &'a LinkCache),
}

impl View<'_> {
    /// Make the reads that follow see everything the kernel did before this call, the
    /// reconciler's own acknowledged requests included (see [`KernelMirror::barrier`]).
    async fn catch_up(&self) -> Result<(), NetlinkError> {
        match self {
            View::Dumps(_) => Ok(()),
            View::Mirror(m, timeout, _) => m.barrier(*timeout).await,
        }
    }

    async fn links(&self) -> Result<Arc<LinkTable>, NetlinkError> {
        match self {
            View::Dumps(conn) => dump_links(conn).await.map(Arc::new),
            View::Mirror(m, _, cache) => Ok(cache.read(m)),
        }
    }

    async fn addresses(&self, family: AddressFamily) -> Result<Vec<Message>, NetlinkError> {
        match self {
            View::Dumps(conn) => {
                let what = match family {
                    AddressFamily::Inet6 => "ipv6 addresses",
                    _ => "ipv4 addresses",
                };
                conn.dump(what, addresses::dump_request(family)).await
            }
            View::Mirror(m, _, _) => Ok(m.read(|s| s.addresses(family).cloned().collect())),
        }
    }

    async fn rules(&self, family: AddressFamily) -> Result<Vec<Message>, NetlinkError> {
        match self {
            View::Dumps(conn) => {
                let what = match family {
                    AddressFamily::Inet6 => "ipv6 rules",
                    _ => "ipv4 rules",
                };
                conn.dump(what, rules::dump_request(family)).await
            }
            View::Mirror(m, _, _) => Ok(m.read(|s| s.rules(family).cloned().collect())),
        }
    }

    /// The routes of one table (none when the table does not exist yet).
    async fn routes(
        &self,
        family: AddressFamily,
        table: u32,
    ) -> Result<Vec<Message>, NetlinkError> {
        match self {
            View::Dumps(conn) => {
                let name = match family {
                    AddressFamily::Inet6 => "ipv6",
                    _ => "ipv4",
                };
                let what = format!("{name} routes of table {table}");
                match conn.dump(&what, routes::dump_request(family, table)).await {
                    Ok(v) => Ok(v),
                    // A table without any route does not exist yet.
                    Err(NetlinkError::Kernel { errno, .. }) if errno.0 == libc::ENOENT => {
                        Ok(Vec::new())
                    }
                    Err(e) => Err(e),
                }
            }
            View::Mirror(m, _, _) => Ok(m.read(|s| s.routes_of_table(family, table))),
        }
    }

    async fn neighbours(&self, v6: bool) -> Result<Vec<Message>, NetlinkError> {
        match self {
            View::Dumps(conn) => {
                let what = if v6 {
                    "ipv6 neighbours"
                } else {
                    "ipv4 neighbours"
                };
                conn.dump(what, neighbours::dump_request(v6, false)).await
            }
            View::Mirror(m, _, _) => Ok(m.read(|s| s.neighbours(v6).cloned().collect())),
        }
    }
}

async fn reconcile_in(
    s: &Session,
    view: View<'_>,
    desired: &DesiredSystem,
    held: &Held,
    report: &mut ChangeReport,
) -> Result<(), NetlinkError> {
    let conn = &s.conn;
    view.catch_up().await?;
    let mut table = view.links().await?;
    let up_later = reconcile_links(conn, view, desired, &mut table, report).await?;
    reconcile_sysctls(&s.worker, &desired.sysctls, report).await?;

    // Enslaving a link moves its routes: read what the link changes left.
    view.catch_up().await?;
    let a4 = view.addresses(AddressFamily::Inet).await?;
    let a6 = view.addresses(AddressFamily::Inet6).await?;
    let r4 = view.rules(AddressFamily::Inet).await?;
    let r6 = view.rules(AddressFamily::Inet6).await?;
    let tables: BTreeSet<u32> = desired
        .ownership
        .tables
        .iter()
        .chain(&desired.ownership.swept_tables)
        .copied()
        .chain(desired.routes.iter().map(|r| r.table))
        .collect();
    let mut route_dump = Vec::new();
    for table in tables {
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            route_dump.append(&mut view.routes(family, table).await?);
        }
    }
    let n4 = view.neighbours(false).await?;
    let n6 = view.neighbours(true).await?;
    // Proxy entries change without notifications: always dumped (they are few).
    let p4 = conn
        .dump(
            "ipv4 proxy neighbours",
            neighbours::dump_request(false, true),
        )
        .await?;
    let p6 = conn
        .dump(
            "ipv6 proxy neighbours",
            neighbours::dump_request(true, true),
        )
        .await?;

    let mut adds = Plan::default();
    let mut removes = Plan::default();
    let own = &desired.ownership;
    plan_addresses(
        desired,
        held,
        &table,
        a4.iter().chain(&a6),
        &mut adds,
        &mut removes,
        report,
    );
    plan_rules(desired, held, r4.iter().chain(&r6), &mut adds, &mut removes);
    plan_routes(
        desired,
        held,
        &table,
        route_dump.iter(),
        &mut adds,
        &mut removes,
        report,
    );
    plan_neighbours(
        desired,
        held,
        &table,
        n4.iter().chain(&n6),
        &mut adds,
        &mut removes,
        report,
    );
    plan_proxies(
        desired,
        held,
        &table,
        p4.iter().chain(&p6),
        &mut adds,
        &mut removes,
        report,
    );

    // Additions first (so a replaced route never disappears), then the leftovers go.
    adds.apply(conn, report).await?;
    set_up(conn, &table, &up_later, report).await?;
    removes.apply(conn, report).await?;
    // After the additions: an address added in this run has its local route by now.
    suppress_local_routes(conn, view, desired, &table, report).await?;

    // Links last: deleting a link takes its addresses, routes and neighbours with it.
    let desired_names: HashSet<&str> = desired
        .links
        .iter()
        .flat_map(|l| {
            let peer = match &l.kind {
                LinkKind::Veth { peer } => Some(peer.as_str()),
                _ => None,
            };
            std::iter::once(l.name.as_str()).chain(peer)
        })
        // A link dropped from the desired state (invalid, conflicting) is left as it is.
        .chain(held.links.iter().map(String::as_str))
        .collect();
    let mut link_removes = Plan::default();
    let mut stale: Vec<_> = table
        .by_name
        .values()
        .filter(|l| owns_link(own, l, &table) && !desired_names.contains(l.name.as_str()))
        .collect();
    stale.sort_by_key(|l| l.index);
    let mut gone_peers = HashSet::default();
    for l in stale {
        // Deleting one end of a veth pair deletes the other.
        if gone_peers.contains(&l.index) {
            continue;
        }
        if l.kind.as_deref() == Some("veth")
            && let Some(p) = l.parent
        {
            gone_peers.insert(p);
        }
        link_removes.push(
            class::LINKS,
            Op::Remove,
            links::delete_request(l.index, &l.name),
        );
    }
    link_removes.apply(conn, report).await
}

/// Creation in two rounds: the devices a VLAN may sit on, then the VLANs (after the links are
/// read again, so a parent created in the first round is found).
fn creation_rounds(desired: &ObjectSet<LinkSpec>) -> [Vec<&LinkSpec>; 2] {
    let (vlans, others) = desired
        .iter()
        .partition(|l| matches!(l.kind, LinkKind::Vlan { .. }));
    [others, vlans]
}

async fn create_link(
    conn: &NetlinkConn,
    spec: &LinkSpec,
    parent: Option<u32>,
    report: &mut ChangeReport,
) -> Result<bool, NetlinkError> {
    match conn.apply_one(links::create_request(spec, parent)).await {
        Ok(()) => {
            report.count_added(class::LINKS, 1);
            Ok(true)
        }
        Err(NetlinkError::Kernel { op, errno }) if errno.0 == libc::EOPNOTSUPP => {
            let kind = links::kind_name(&spec.kind);
            let e = NetlinkError::MissingKind {
                name: spec.name.to_string(),
                kind: kind.to_owned(),
                fix: links::missing_kind_fix(kind),
            };
            report.error(class::LINKS, op, e);
            Ok(false)
        }
        Err(NetlinkError::Kernel { op, errno }) => {
            report.error(class::LINKS, op, errno);
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Creates and configures the desired links. Returns the links created in this run whose
/// "up" is left for after the addresses (see [`defer_up`]).
async fn reconcile_links(
    conn: &NetlinkConn,
    view: View<'_>,
    desired: &DesiredSystem,
    table: &mut Arc<LinkTable>,
    report: &mut ChangeReport,
) -> Result<HashSet<String>, NetlinkError> {
    let mut created: HashSet<String> = HashSet::default();
    let mut existed: HashSet<String> = HashSet::default();
    let mut stale = false;
    for round in creation_rounds(&desired.links) {
        if stale {
            view.catch_up().await?;
            *table = view.links().await?;
        }
        let before = created.len();
        create_round(
            conn,
            desired,
            round,
            table,
            &mut created,
            &mut existed,
            report,
        )
        .await?;
        stale = created.len() > before;
    }
    if stale {
        view.catch_up().await?;
        *table = view.links().await?;
    }
    let up_later = defer_up(desired, &created);
    set_link_attributes(conn, desired, table, &existed, &up_later, report).await?;
    Ok(up_later)
}

/// Links created in this run that get their addresses before they are set up. On an up
/// device every IPv4 address added also makes the kernel resync the FIB for it (walking the
/// device's routes and nexthops), so 10 000 addresses on a fresh `bgp-nic` go in about a third
/// faster while it is down (docs/netlink-benchmark.md). Only links that nothing else needs up
/// meanwhile qualify: no desired route, neighbour or proxy entry uses them as device (the
/// kernel refuses a route through a down device) and no other link is enslaved to them.
fn defer_up(desired: &DesiredSystem, created: &HashSet<String>) -> HashSet<String> {
    let carries_addresses: HashSet<&str> =
        desired.addresses.iter().map(|a| a.dev.as_str()).collect();
    let needed_up: HashSet<&str> = desired
        .routes
        .iter()
        .filter_map(|r| r.dev.as_ref().map(|d| d.as_str()))
        .chain(desired.neighbours.iter().map(|n| n.dev.as_str()))
        .chain(desired.proxy_neighbours.iter().map(|p| p.dev.as_str()))
        .chain(
            desired
                .links
                .iter()
                .filter_map(|l| l.master.as_ref().map(|m| m.as_str())),
        )
        .collect();
    desired
        .links
        .iter()
        .filter(|l| l.up && created.contains(l.name.as_str()))
        .filter(|l| {
            carries_addresses.contains(l.name.as_str()) && !needed_up.contains(l.name.as_str())
        })
        .map(|l| l.name.to_string())
        .collect()
}

/// Sets up the links whose "up" [`defer_up`] held back.
async fn set_up(
    conn: &NetlinkConn,
    table: &LinkTable,
    names: &HashSet<String>,
    report: &mut ChangeReport,
) -> Result<(), NetlinkError> {
    let mut sets = Plan::default();
    for name in names {
        if let Some(observed) = table.by_name.get(name.as_str())
            && let Some(r) = links::set_request(observed, None, None, false, true)
        {
            // Part of the link's creation, as in set_link_attributes.
            sets.push(class::LINKS, Op::Uncounted, r);
        }
    }
    sets.apply(conn, report).await
}

async fn create_round(
    conn: &NetlinkConn,
    desired: &DesiredSystem,
    round: Vec<&LinkSpec>,
    table: &LinkTable,
    created: &mut HashSet<String>,
    existed: &mut HashSet<String>,
    report: &mut ChangeReport,
) -> Result<(), NetlinkError> {
    for spec in round {
        if created.contains(spec.name.as_str()) {
            continue; // the peer of a veth created just before
        }
        let parent = match &spec.kind {
            LinkKind::Vlan { parent, .. } => match table.index(parent) {
                Some(i) => Some(i),
                None => {
                    report.error(
                        class::LINKS,
                        format!("create link {} of kind vlan", spec.name),
                        format!("parent device {parent} does not exist"),
                    );
                    continue;
                }
            },
            _ => None,
        };
        let made = match table.by_name.get(spec.name.as_str()) {
            // Someone else's device that is not there (yet): nothing to create, and the
            // backend reports what depends on it.
            None if spec.kind == LinkKind::Existing => false,
            None => create_link(conn, spec, parent, report).await?,
            Some(observed) => match links::matches(spec, observed, parent) {
                Ok(()) => {
                    existed.insert(spec.name.to_string());
                    false
                }
                Err(why) if owns_link(&desired.ownership, observed, table) => {
                    // The agent's own device with the wrong parameters: recreate it.
                    let delete = links::delete_request(observed.index, spec.name.as_str());
                    match conn.apply_one(delete).await {
                        Ok(()) => {
                            report.count_removed(class::LINKS, 1);
                            create_link(conn, spec, parent, report).await?
                        }
                        Err(NetlinkError::Kernel { op, errno }) => {
                            report.error(
                                class::LINKS,
                                op,
                                format!("{errno} (to recreate it: {why})"),
                            );
                            false
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(why) => {
                    report.error(
                        class::LINKS,
                        format!("link {}", spec.name),
                        format!("{why}; left as is (not owned by the agent)"),
                    );
                    existed.insert(spec.name.to_string());
                    false
                }
            },
        };
        if made {
            created.insert(spec.name.to_string());
            if let LinkKind::Veth { peer } = &spec.kind {
                created.insert(peer.to_string());
            }
        }
    }
    Ok(())
}

/// Master, MAC and up state of every desired link that exists.
async fn set_link_attributes(
    conn: &NetlinkConn,
    desired: &DesiredSystem,
    table: &LinkTable,
    existed: &HashSet<String>,
    up_later: &HashSet<String>,
    report: &mut ChangeReport,
) -> Result<(), NetlinkError> {
    let mut sets = Plan::default();
    for spec in &desired.links {
        let Some(observed) = table.by_name.get(spec.name.as_str()) else {
            continue;
        };
        let master = match &spec.master {
            Some(m) => match table.index(m) {
                Some(i) => Some(i),
                None => {
                    report.error(
                        class::LINKS,
                        format!("set link {} master {m}", spec.name),
                        format!("master device {m} does not exist"),
                    );
                    None
                }
            },
            None => None,
        };
        let up = spec.up && !up_later.contains(spec.name.as_str());
        // Created in this run (where the kernel ignored the alias given with the creation),
        // or the agent's by name or structure but unmarked (created by an older agent or by
        // upstream's): marked, so it stays recognisable after a restart.
        let mark =
            !existed.contains(spec.name.as_str()) || owns_link(&desired.ownership, observed, table);
        // Setting up a link created in this run is part of its creation, not a change.
        let op = if existed.contains(spec.name.as_str()) {
            Op::Change
        } else {
            Op::Uncounted
        };
        if let Some(r) = links::set_request(observed, master, spec.mac, mark, up) {
            sets.push(class::LINKS, op, r);
        }
        // Port flags exist once the link is a bridge port: after the master set above, which
        // the kernel applies first (the requests are sent in order).
        if let LinkKind::Vxlan {
            neigh_suppress: true,
            ..
        } = spec.kind
            && (observed.master.is_some() || master.is_some())
            && let Some(r) = links::bridge_port_request(observed)
        {
            sets.push(class::LINKS, op, r);
        }
    }
    sets.apply(conn, report).await
}

async fn reconcile_sysctls(
    worker: &NetnsWorker,
    sysctls: &crate::system::ObjectMap<String, String>,
    report: &mut ChangeReport,
) -> Result<(), NetlinkError> {
    if sysctls.is_empty() {
        return Ok(());
    }
    let mut items = Vec::new();
    for (k, v) in sysctls {
        // Validated before: a failure here is impossible, but never panic on it.
        match sysctl::key_path(k) {
            Ok(p) => items.push((k.clone(), p, v.clone())),
            Err(e) => report.error(class::SYSCTLS, k.clone(), e),
        }
    }
    let results = worker
        .run(move || {
            items
                .into_iter()
                .map(|(k, p, v)| {
                    let r = sysctl::ensure(&k, &p, &v);
                    (format!("{k}={v}"), r)
                })
                .collect::<Vec<_>>()
        })
        .await?;
    for (what, r) in results {
        match r {
            Ok(true) => report.count_changed(class::SYSCTLS, 1),
            Ok(false) => {}
            Err(NetlinkError::Sysctl { source, path, .. }) => {
                report.error(class::SYSCTLS, format!("{what} ({path})"), source)
            }
            Err(e) => report.error(class::SYSCTLS, what, e),
        }
    }
    Ok(())
}

fn plan_addresses<'a>(
    desired: &DesiredSystem,
    held: &Held,
    table: &LinkTable,
    dump: impl Iterator<Item = &'a rtnetlink::packet_route::RouteNetlinkMessage>,
    adds: &mut Plan,
    removes: &mut Plan,
    report: &mut ChangeReport,
) {
    let observed: HashSet<(u32, IpNet)> = dump
        .filter_map(addresses::parse)
        .map(|a| (a.index, a.addr))
        .collect();
    let mut wanted: HashSet<(u32, IpNet)> = HashSet::default();
    let resolved = table.resolve(
        &desired.addresses,
        |a| &a.dev,
        |a| format!("add address {} dev {}", a.addr, a.dev),
        class::ADDRESSES,
        report,
    );
    for (i, a) in resolved {
        wanted.insert((i, a.addr));
        if !observed.contains(&(i, a.addr)) {
            adds.push(
                class::ADDRESSES,
                Op::Add,
                addresses::add_request(i, a.dev.as_str(), a.addr),
            );
        }
    }
    // Only host addresses are the agent's (an operator's /24 on bgp-nic stays), except on the
    // devices whose every address is.
    let all_owned = table.indexes(&desired.ownership.all_address_devices);
    let hosts = observed
        .into_iter()
        .filter(|(i, addr)| addr.prefix_len() == addr.max_prefix_len() || all_owned.contains(i));
    let mut owned = table.indexes(&desired.ownership.address_devices);
    owned.extend(all_owned.iter().copied());
    for (i, addr) in stale_on_owned(hosts, &owned, &wanted) {
        if held.addresses.contains(&(table.name_of(i), addr)) {
            continue;
        }
        removes.push(
            class::ADDRESSES,
            Op::Remove,
            addresses::delete_request(i, &table.name_of(i), addr),
        );
    }
}

fn plan_rules<'a>(
    desired: &DesiredSystem,
    held: &Held,
    dump: impl Iterator<Item = &'a rtnetlink::packet_route::RouteNetlinkMessage>,
    adds: &mut Plan,
    removes: &mut Plan,
) {
    let observed: Vec<rules::ObservedRule> = dump.filter_map(rules::parse).collect();
    let present: HashSet<&crate::system::RuleSpec> =
        observed.iter().filter_map(|r| r.spec.as_ref()).collect();
    for r in &desired.rules {
        if !present.contains(r) {
            adds.push(class::RULES, Op::Add, rules::add_request(r));
        }
    }
    let mut kept = HashSet::default();
    for r in &observed {
        if !desired.ownership.tables.contains(&r.table) {
            continue;
        }
        let keep = match &r.spec {
            Some(spec) if held.rules.contains(spec) => true,
            // A duplicate of a kept rule goes too.
            Some(spec) => desired.rules.contains(spec) && kept.insert(spec.clone()),
            None => false,
        };
        if !keep {
            removes.push(class::RULES, Op::Remove, rules::delete_request(r));
        }
    }
}

fn plan_routes<'a>(
    desired: &DesiredSystem,
    held: &Held,
    table: &LinkTable,
    dump: impl Iterator<Item = &'a rtnetlink::packet_route::RouteNetlinkMessage>,
    adds: &mut Plan,
    removes: &mut Plan,
    report: &mut ChangeReport,
) {
    let observed: Vec<routes::ObservedRoute> = dump.filter_map(routes::parse).collect();
    let is_ours = |r: &routes::ObservedRoute| r.protocol == RouteProtocol::Boot;
    let is_swept = |r: &routes::ObservedRoute| swept(&desired.ownership, r);
    let mut present: HashSet<&routes::RouteKey> = HashSet::default();
    // Gateway routes desired without a device match whatever device the kernel resolved.
    let mut present_any_dev: HashSet<routes::RouteKey> = HashSet::default();
    let mut boot_identities: HashSet<&routes::RouteIdentity> = HashSet::default();
    let mut foreign: HashMap<&routes::RouteIdentity, RouteProtocol> = HashMap::default();
    // Swept foreign routes: replaced when a desired route has their identity, deleted otherwise.
    let mut swept_identities: HashSet<&routes::RouteIdentity> = HashSet::default();
    for r in &observed {
        if is_ours(r) {
            boot_identities.insert(&r.identity);
            if let Some(k) = &r.key {
                present.insert(k);
                if k.via.is_some() {
                    present_any_dev.insert(routes::RouteKey {
                        oif: None,
                        ..k.clone()
                    });
                }
            }
        } else if is_swept(r) {
            swept_identities.insert(&r.identity);
        } else {
            foreign.insert(&r.identity, r.protocol);
        }
    }
    // Device routes first: a gateway must be reachable when its route is added.
    let mut ordered: Vec<&RouteSpec> = desired.routes.iter().collect();
    ordered.sort_by_key(|r| r.via.is_some());
    let mut wanted: HashSet<routes::RouteKey> = HashSet::default();
    let mut replaced: HashSet<routes::RouteIdentity> = HashSet::default();
    for spec in ordered {
        let oif = match &spec.dev {
            Some(d) => match table.index(d) {
                Some(i) => Some(i),
                None => {
                    report.error(
                        class::ROUTES,
                        routes::describe(spec),
                        format!("device {d} does not exist"),
                    );
                    continue;
                }
            },
            None => None,
        };
        let key = routes::desired_key(spec, oif);
        wanted.insert(key.clone());
        if present.contains(&key) || (oif.is_none() && present_any_dev.contains(&key)) {
            continue;
        }
        if let Some(proto) = foreign.get(&key.identity) {
            refuse_replacing(report, spec, *proto);
            continue;
        }
        let op = if boot_identities.contains(&key.identity)
            || swept_identities.contains(&key.identity)
        {
            replaced.insert(key.identity.clone());
            Op::Change
        } else {
            Op::Add
        };
        adds.push(class::ROUTES, op, routes::add_request(spec, oif));
    }
    for r in &observed {
        let owned =
            (is_ours(r) && desired.ownership.tables.contains(&r.identity.table)) || is_swept(r);
        if !owned {
            continue;
        }
        let keep = match &r.key {
            Some(k) => {
                wanted.contains(k)
                    || (k.via.is_some()
                        && wanted.contains(&routes::RouteKey {
                            oif: None,
                            ..k.clone()
                        }))
            }
            None => false,
        };
        if !keep && !replaced.contains(&r.identity) && !held.routes.contains(&r.identity) {
            removes.push(class::ROUTES, Op::Remove, routes::delete_request(r));
        }
    }
}

fn plan_neighbours<'a>(
    desired: &DesiredSystem,
    held: &Held,
    table: &LinkTable,
    dump: impl Iterator<Item = &'a rtnetlink::packet_route::RouteNetlinkMessage>,
    adds: &mut Plan,
    removes: &mut Plan,
    report: &mut ChangeReport,
) {
    let observed: HashMap<(u32, IpAddr), neighbours::ObservedNeighbour> = dump
        .filter_map(neighbours::parse)
        .filter(|n| !n.proxy)
        .map(|n| ((n.index, n.ip), n))
        .collect();
    let mut wanted: HashSet<(u32, IpAddr)> = HashSet::default();
    let resolved = table.resolve(
        &desired.neighbours,
        |n| &n.dev,
        |n| format!("replace neighbour {} dev {}", n.ip, n.dev),
        class::NEIGHBOURS,
        report,
    );
    for (i, n) in resolved {
        wanted.insert((i, n.ip));
        let op = match observed.get(&(i, n.ip)) {
            Some(o) if o.permanent && o.lladdr == Some(n.lladdr.0) => continue,
            Some(_) => Op::Change,
            None => Op::Add,
        };
        adds.push(
            class::NEIGHBOURS,
            op,
            neighbours::replace_request(i, n.dev.as_str(), n.ip, n.lladdr),
        );
    }
    // Only permanent entries are the agent's (learned ones belong to the kernel).
    let permanent = observed
        .values()
        .filter(|o| o.permanent)
        .map(|o| (o.index, o.ip));
    let owned = table.indexes(&desired.ownership.neighbour_devices);
    for (i, ip) in stale_on_owned(permanent, &owned, &wanted) {
        if held.neighbours.contains(&(table.name_of(i), ip)) {
            continue;
        }
        removes.push(
            class::NEIGHBOURS,
            Op::Remove,
            neighbours::delete_request(i, &table.name_of(i), ip),
        );
    }
}

fn plan_proxies<'a>(
    desired: &DesiredSystem,
    held: &Held,
    table: &LinkTable,
    dump: impl Iterator<Item = &'a rtnetlink::packet_route::RouteNetlinkMessage>,
    adds: &mut Plan,
    removes: &mut Plan,
    report: &mut ChangeReport,
) {
    let observed: HashSet<(u32, IpAddr)> = dump
        .filter_map(neighbours::parse)
        .map(|n| (n.index, n.ip))
        .collect();
    let mut wanted = HashSet::default();
    let resolved = table.resolve(
        &desired.proxy_neighbours,
        |p| &p.dev,
        |p| format!("add proxy neighbour {} dev {}", p.ip, p.dev),
        class::PROXY_NEIGHBOURS,
        report,
    );
    for (i, p) in resolved {
        wanted.insert((i, p.ip));
        if !observed.contains(&(i, p.ip)) {
            adds.push(
                class::PROXY_NEIGHBOURS,
                Op::Add,
                neighbours::add_proxy_request(i, p.dev.as_str(), p.ip),
            );
        }
    }
    let owned = table.indexes(&desired.ownership.neighbour_devices);
    for (i, ip) in stale_on_owned(observed, &owned, &wanted) {
        if held.proxy_neighbours.contains(&(table.name_of(i), ip)) {
            continue;
        }
        removes.push(
            class::PROXY_NEIGHBOURS,
            Op::Remove,
            neighbours::delete_proxy_request(i, &table.name_of(i), ip),
        );
    }
}

/// Deletes the kernel's local route of each [`crate::system::LocalRouteSuppression`] that
/// exists. Its tables are dumped here, after the additions, and not with the agent's tables:
/// the local table holds one route per address of the host and is read only when a
/// suppression names it. An IPv6 address whose duplicate address detection is still running
/// gets its local route later: the next reconcile removes it.
async fn suppress_local_routes(
    conn: &NetlinkConn,
    view: View<'_>,
    desired: &DesiredSystem,
    table: &LinkTable,
    report: &mut ChangeReport,
) -> Result<(), NetlinkError> {
    if desired.suppressed_local_routes.is_empty() {
        return Ok(());
    }
    let wanted = table.resolve(
        &desired.suppressed_local_routes,
        |l| &l.dev,
        validate::describe_suppression,
        class::LOCAL_ROUTES,
        report,
    );
    let mut dumps: BTreeSet<(u32, bool)> = BTreeSet::new();
    for (_, l) in &wanted {
        dumps.insert((l.table, l.dst.is_ipv6()));
    }
    // After the additions: the local routes of the addresses just added are there by now.
    view.catch_up().await?;
    let mut observed = Vec::new();
    for (t, v6) in dumps {
        let family = if v6 {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        };
        let v = view.routes(family, t).await?;
        observed.extend(v.iter().filter_map(routes::parse_local));
    }
    let present: HashMap<(u32, IpAddr, u32), &routes::ObservedLocalRoute> = observed
        .iter()
        .map(|r| ((r.table, r.dst, r.oif), r))
        .collect();
    let mut deletes = Plan::default();
    for (oif, l) in wanted {
        if let Some(r) = present.get(&(l.table, l.dst, oif)) {
            deletes.push(
                class::LOCAL_ROUTES,
                Op::Remove,
                routes::delete_local_request(r, l.dev.as_str()),
            );
        }
    }
    deletes.apply(conn, report).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suppression(table: u32, last: u8, dev: u8) -> LocalRouteSuppression {
        LocalRouteSuppression {
            table,
            dst: IpAddr::from([10, 0, 0, last]),
            dev: InterfaceName::new(format!("lo-{dev}")).unwrap(),
        }
    }

    /// The interest is made again when anything it is made from differs, and only then.
    #[test]
    fn the_interest_is_made_again_when_an_input_differs() {
        let dev = |n: &str| InterfaceName::new(n).unwrap();
        let mut desired = DesiredSystem::default();
        desired.links.insert(crate::system::LinkSpec {
            name: dev("lo-100"),
            kind: crate::system::LinkKind::Ifb,
            master: None,
            mac: None,
            up: true,
        });
        desired.ownership.address_devices.insert(dev("bgp-nic"));
        desired.ownership.tables.insert(200);
        let table = Arc::new(LinkTable::default());
        let inputs = |d: &'static DesiredSystem, t: &'static Arc<LinkTable>| InterestInputs {
            mirror: 1,
            links_table: t,
            desired: d,
            suppressed: 3,
            own_port: 7,
            strict: false,
        };
        let desired: &'static DesiredSystem = Box::leak(Box::new(desired));
        let table: &'static Arc<LinkTable> = Box::leak(Box::new(table));
        let made = InterestMade::of(&inputs(desired, table));
        assert!(made.same(&inputs(desired, table)));
        // A copy of the same state (not shared): still the same.
        let copy: &'static DesiredSystem = Box::leak(Box::new(DesiredSystem {
            links: desired.links.iter().cloned().collect(),
            ..desired.clone()
        }));
        assert!(made.same(&inputs(copy, table)));
        let other_table: &'static Arc<LinkTable> =
            Box::leak(Box::new(Arc::new(LinkTable::default())));
        assert!(
            !made.same(&inputs(desired, other_table)),
            "another link table"
        );
        let changed = |f: &dyn Fn(&mut DesiredSystem)| -> &'static DesiredSystem {
            let mut d = desired.clone();
            f(&mut d);
            Box::leak(Box::new(d))
        };
        for (what, d) in [
            ("links", changed(&|d| d.links.clear())),
            (
                "address devices",
                changed(&|d| {
                    d.ownership.address_devices.insert(dev("x"));
                }),
            ),
            (
                "all-address devices",
                changed(&|d| {
                    d.ownership.all_address_devices.insert(dev("x"));
                }),
            ),
            (
                "neighbour devices",
                changed(&|d| {
                    d.ownership.neighbour_devices.insert(dev("x"));
                }),
            ),
            (
                "tables",
                changed(&|d| {
                    d.ownership.tables.insert(300);
                }),
            ),
            (
                "swept tables",
                changed(&|d| {
                    d.ownership.swept_tables.insert(300);
                }),
            ),
        ] {
            assert!(!made.same(&inputs(d, table)), "{what}");
        }
        for (what, i) in [
            (
                "mirror",
                InterestInputs {
                    mirror: 2,
                    ..inputs(desired, table)
                },
            ),
            (
                "suppressed devices",
                InterestInputs {
                    suppressed: 4,
                    ..inputs(desired, table)
                },
            ),
            (
                "own port",
                InterestInputs {
                    own_port: 8,
                    ..inputs(desired, table)
                },
            ),
            (
                "strict",
                InterestInputs {
                    strict: true,
                    ..inputs(desired, table)
                },
            ),
        ] {
            assert!(!made.same(&i), "{what}");
        }
    }

    proptest::proptest! {
        /// Counted by difference, the devices are those of the set as it is now, after any
        /// sequence of versions (each derived from the last, or built afresh).
        #[test]
        fn suppression_devices_are_those_of_the_last_set(
            steps in proptest::collection::vec(
                (proptest::bool::ANY, proptest::collection::vec((0u8..20, 0u8..4, proptest::bool::ANY), 0..12)),
                1..10,
            ),
        ) {
            let mut counted = SuppressionDevices::default();
            let mut set: ObjectSet<LocalRouteSuppression> = ObjectSet::new();
            for (afresh, changes) in steps {
                if afresh {
                    set = set.iter().cloned().collect();
                }
                for (last, dev, add) in changes {
                    let l = suppression(LOCAL_TABLE, last, dev);
                    if add {
                        set.insert(l);
                    } else {
                        set.remove(&l);
                    }
                }
                let (devices_before, version_before): (BTreeSet<InterfaceName>, u64) =
                    (counted.devices.keys().cloned().collect(), counted.version);
                counted.update(&set);
                let expected: BTreeSet<&InterfaceName> = set.iter().map(|l| &l.dev).collect();
                let got: BTreeSet<&InterfaceName> = counted.devices.keys().collect();
                // The version moves when the devices do (the mirror's interest is made again;
                // it may also move for a device that left and came back within one update).
                let moved = devices_before.iter().collect::<BTreeSet<_>>() != got;
                proptest::prop_assert!(!moved || counted.version != version_before);
                proptest::prop_assert_eq!(got, expected);
                proptest::prop_assert_eq!(counted.devices.values().sum::<usize>(), set.len());
            }
        }
    }
}
