//! A mirror of the kernel's links, addresses, routes (every table), rules, neighbours and proxy
//! neighbours, kept current by the kernel's own change notifications instead of dumps: one full
//! dump, then the rtnetlink multicast groups, the way routing daemons keep their view (holo's
//! interface manager, FRR's zebra).
//!
//! Ordering, the whole argument for correctness:
//! - The monitor socket joins the groups before anything is dumped, and one task reads it and
//!   owns the state, so events are applied in the kernel's order.
//! - A (re)sync buffers every event read while the dump runs (on a second socket), builds a
//!   fresh mirror from the dump, replays the buffered events on top and swaps it in. Every
//!   event is "this key now has this value" or "this key is gone", so replaying events the
//!   dump already reflects is harmless, and a key changed during the dump ends with its last
//!   event: nothing is lost or counted twice.
//! - An overflow (`ENOBUFS`: the kernel dropped notifications) or a change the kernel does not
//!   report (a link going down or away flushes its IPv4 routes silently) starts a resync.
//! - [`KernelMirror::barrier`] sends a request on the monitor socket itself: its answer is
//!   queued behind every notification of what the kernel did before, so once the task reads it
//!   the mirror includes the caller's own acknowledged changes (the "apply, then re-read"
//!   sequencing a reconciler reading from the mirror needs).
//!
//! Not mirrored, because the kernel changes them without notifications: proxy neighbours
//! (users re-read them: they are few) and the kernel's own `NOARP`/`INCOMPLETE` neighbour
//! entries (never the agent's). Next-hop liveness flags of IPv4 routes (`linkdown`) also change
//! silently with the carrier.

// Unsafe code allowed in this file only: registering the monitor socket's fd with tokio.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkBuffer, NetlinkMessage, NetlinkPayload,
};
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use rtnetlink::packet_route::neighbour::{NeighbourAttribute, NeighbourFlags, NeighbourState};
use rtnetlink::packet_route::route::{RouteAttribute, RouteMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::sys::protocols::NETLINK_ROUTE;
use rtnetlink::sys::{Socket, SocketAddr};
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

use super::conn::{NetlinkConn, REQUEST_TIMEOUT};
use super::netns::{NetnsTarget, NetnsWorker};
use super::{NetlinkError, addresses, links, neighbours, rules};

/// The rtnetlink groups the mirror follows.
const GROUPS: [libc::c_uint; 8] = [
    libc::RTNLGRP_LINK,
    libc::RTNLGRP_IPV4_IFADDR,
    libc::RTNLGRP_IPV6_IFADDR,
    libc::RTNLGRP_IPV4_ROUTE,
    libc::RTNLGRP_IPV6_ROUTE,
    libc::RTNLGRP_IPV4_RULE,
    libc::RTNLGRP_IPV6_RULE,
    libc::RTNLGRP_NEIGH,
];

/// Receive buffer of the monitor socket: a burst of 100k route changes fits.
const MONITOR_RCVBUF: libc::c_int = 32 << 20;
/// Wait before retrying a failed dump.
const RETRY: Duration = Duration::from_millis(200);

/// The identity of one kernel object: two messages with the same key describe the same object
/// (the later one replaces the earlier). Addresses are kept as text: the key is only compared.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKey {
    Link(u32),
    Address {
        family: u8,
        index: u32,
        prefix_len: u8,
        local: String,
    },
    /// What the kernel keeps unique within a table: IPv4 (dst, tos, priority), IPv6 (dst,
    /// src, metric, and the next hop: IPv6 keeps a route per device under one prefix and
    /// metric, fe80::/64 on every link). IPv4 routes added with `NLM_F_APPEND` under one key
    /// are not told apart.
    Route {
        family: u8,
        table: u32,
        dst_len: u8,
        dst: String,
        src_len: u8,
        src: String,
        tos: u8,
        priority: u32,
        /// IPv6 only: `oif` and gateway (0 and empty for IPv4).
        oif: u32,
        gateway: String,
    },
    /// Rules have no identity but their whole content (the kernel refuses exact duplicates).
    Rule(String),
    Neighbour {
        family: u8,
        index: u32,
        proxy: bool,
        dst: String,
    },
}

impl ObjectKey {
    /// The key of a route message's object, or `None` for another message.
    fn of(message: &RouteNetlinkMessage) -> Option<ObjectKey> {
        use RouteNetlinkMessage as M;
        match message {
            M::NewLink(m) | M::DelLink(m) => {
                // The bridge's per-port messages (AF_BRIDGE) describe the same ifindex as the
                // link itself: not a link of their own.
                (m.header.interface_family != AddressFamily::Bridge)
                    .then_some(ObjectKey::Link(m.header.index))
            }
            M::NewAddress(m) | M::DelAddress(m) => {
                let mut local = String::new();
                let mut address = String::new();
                for a in &m.attributes {
                    match a {
                        AddressAttribute::Local(ip) => local = ip.to_string(),
                        AddressAttribute::Address(ip) => address = ip.to_string(),
                        _ => {}
                    }
                }
                // IPv6 has no IFA_LOCAL: IFA_ADDRESS is the address.
                if local.is_empty() {
                    local = address;
                }
                Some(ObjectKey::Address {
                    family: u8::from(m.header.family),
                    index: m.header.index,
                    prefix_len: m.header.prefix_len,
                    local,
                })
            }
            M::NewRoute(m) | M::DelRoute(m) => Some(route_key(m)),
            M::NewRule(m) | M::DelRule(m) => {
                Some(ObjectKey::Rule(format!("{:?}{:?}", m.header, m.attributes)))
            }
            M::NewNeighbour(m) | M::DelNeighbour(m) => {
                // Bridge forwarding entries (AF_BRIDGE) are not neighbours of the reconciler;
                // proxy entries change without any notification (seen on 6.18): not mirrored.
                if !matches!(m.header.family, AddressFamily::Inet | AddressFamily::Inet6)
                    || m.header.flags.contains(NeighbourFlags::Proxy)
                {
                    return None;
                }
                let dst = m
                    .attributes
                    .iter()
                    .find_map(|a| match a {
                        NeighbourAttribute::Destination(d) => Some(format!("{d:?}")),
                        _ => None,
                    })
                    .unwrap_or_default();
                Some(ObjectKey::Neighbour {
                    family: u8::from(m.header.family),
                    index: m.header.ifindex,
                    proxy: m.header.flags.contains(NeighbourFlags::Proxy),
                    dst,
                })
            }
            _ => None,
        }
    }

    /// The first key of `table`'s routes of `family`, for range reads.
    fn first_route_of(family: AddressFamily, table: u32) -> ObjectKey {
        ObjectKey::Route {
            family: u8::from(family),
            table,
            dst_len: 0,
            dst: String::new(),
            src_len: 0,
            src: String::new(),
            tos: 0,
            priority: 0,
            oif: 0,
            gateway: String::new(),
        }
    }

    /// The same key without its IPv6 next hop: the routes a replace may have replaced.
    fn without_next_hop(&self) -> Option<(u8, u32, u8, &str, u8, &str, u32)> {
        match self {
            ObjectKey::Route {
                family,
                table,
                dst_len,
                dst,
                src_len,
                src,
                priority,
                ..
            } => Some((*family, *table, *dst_len, dst, *src_len, src, *priority)),
            _ => None,
        }
    }
}

fn route_table(m: &RouteMessage) -> u32 {
    m.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(m.header.table))
}

fn route_key(m: &RouteMessage) -> ObjectKey {
    let mut dst = String::new();
    let mut src = String::new();
    let mut priority = 0;
    let mut oif = 0;
    let mut gateway = String::new();
    let v6 = m.header.address_family == AddressFamily::Inet6;
    for a in &m.attributes {
        match a {
            RouteAttribute::Destination(d) => dst = format!("{d:?}"),
            RouteAttribute::Source(s) => src = format!("{s:?}"),
            RouteAttribute::Priority(p) => priority = *p,
            RouteAttribute::Oif(i) if v6 => oif = *i,
            RouteAttribute::Gateway(g) if v6 => gateway = format!("{g:?}"),
            _ => {}
        }
    }
    ObjectKey::Route {
        family: u8::from(m.header.address_family),
        table: route_table(m),
        dst_len: m.header.destination_prefix_length,
        dst,
        src_len: m.header.source_prefix_length,
        src,
        tos: m.header.tos,
        priority,
        oif,
        gateway,
    }
}

fn is_delete(message: &RouteNetlinkMessage) -> bool {
    use RouteNetlinkMessage as M;
    matches!(
        message,
        M::DelLink(_) | M::DelAddress(_) | M::DelRoute(_) | M::DelRule(_) | M::DelNeighbour(_)
    )
}

/// A neighbour entry the kernel creates without a notification: multicast and broadcast
/// entries (`NOARP`) and resolutions in progress (`INCOMPLETE`, notified once they resolve or
/// fail). Never the agent's (its entries are permanent): left out of the mirror, and an entry
/// turning into one of these leaves it.
fn unnotified_neighbour(message: &RouteNetlinkMessage) -> bool {
    matches!(message, RouteNetlinkMessage::NewNeighbour(m)
        if matches!(m.header.state, NeighbourState::Noarp | NeighbourState::Incomplete))
}

fn is_up(m: &LinkMessage) -> bool {
    m.header.flags.contains(LinkFlags::Up)
}

/// The content of a message that an event and a dump of the same object agree on: counters,
/// timers and cache ages (statistics, bridge timers, `*_CACHEINFO`) change without any event
/// and are left out. Used to compare the mirror with a fresh dump.
pub fn comparable(message: &RouteNetlinkMessage) -> Option<String> {
    use RouteNetlinkMessage as M;
    let mut out = String::new();
    match message {
        M::NewLink(m) => {
            let _ = write!(out, "{} {:?}", m.header.index, m.header.flags);
            for a in &m.attributes {
                match a {
                    LinkAttribute::IfName(_)
                    | LinkAttribute::Address(_)
                    | LinkAttribute::Controller(_)
                    | LinkAttribute::Mtu(_)
                    | LinkAttribute::IfAlias(_)
                    | LinkAttribute::Link(_)
                    | LinkAttribute::OperState(_) => {
                        let _ = write!(out, " {a:?}");
                    }
                    LinkAttribute::LinkInfo(info) => {
                        for i in info {
                            if let LinkInfo::Kind(k) = i {
                                let _ = write!(out, " {k:?}");
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        M::NewAddress(m) => {
            let _ = write!(out, "{:?}", m.header);
            for a in &m.attributes {
                if !matches!(a, AddressAttribute::CacheInfo(_)) {
                    let _ = write!(out, " {a:?}");
                }
            }
        }
        M::NewRoute(m) => {
            let _ = write!(out, "{:?}", m.header);
            for a in &m.attributes {
                if !matches!(a, RouteAttribute::CacheInfo(_) | RouteAttribute::Expires(_)) {
                    let _ = write!(out, " {a:?}");
                }
            }
        }
        M::NewRule(m) => {
            let _ = write!(out, "{:?} {:?}", m.header, m.attributes);
        }
        M::NewNeighbour(m) => {
            let _ = write!(out, "{:?}", m.header);
            for a in &m.attributes {
                if !matches!(
                    a,
                    NeighbourAttribute::CacheInfo(_) | NeighbourAttribute::Probes(_)
                ) {
                    let _ = write!(out, " {a:?}");
                }
            }
        }
        _ => return None,
    }
    Some(out)
}

/// Counters of every mirror and kernel reconcile of the process, for the metrics (one agent
/// has one of each; tests with several sum them).
#[derive(Debug, Default)]
pub struct KernelStats {
    /// Notifications applied.
    pub events: std::sync::atomic::AtomicU64,
    /// Of which changes in the reconciler's interest made by someone else.
    pub foreign: std::sync::atomic::AtomicU64,
    /// Full resyncs after the first sync.
    pub resyncs: std::sync::atomic::AtomicU64,
    /// Overflows of a monitor socket.
    pub overflows: std::sync::atomic::AtomicU64,
    /// Kernel reconciles applied as a delta / planned in full from the mirror / by dumps.
    pub deltas: std::sync::atomic::AtomicU64,
    pub full_plans: std::sync::atomic::AtomicU64,
    pub by_dumps: std::sync::atomic::AtomicU64,
}

pub static KERNEL_STATS: KernelStats = KernelStats {
    events: std::sync::atomic::AtomicU64::new(0),
    foreign: std::sync::atomic::AtomicU64::new(0),
    resyncs: std::sync::atomic::AtomicU64::new(0),
    overflows: std::sync::atomic::AtomicU64::new(0),
    deltas: std::sync::atomic::AtomicU64::new(0),
    full_plans: std::sync::atomic::AtomicU64::new(0),
    by_dumps: std::sync::atomic::AtomicU64::new(0),
};

fn count(counter: &std::sync::atomic::AtomicU64, n: u64) {
    counter.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
}

/// Every object of the mirror, by key.
#[derive(Default, Clone)]
pub struct MirrorState {
    objects: BTreeMap<ObjectKey, RouteNetlinkMessage>,
    /// Changes whenever a link comes, changes or goes (unique in the process, also across
    /// states from different dumps): what the links were parsed into is reused while it is the
    /// same, so a reconcile does not parse every link of a chassis with many VRFs (issue 17).
    links_version: u64,
}

/// A fresh [`MirrorState::links_version`].
fn next_links_version() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// What one event did to the mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    Ignored,
    Changed,
    /// The kernel changed more than it reported: the mirror must be read afresh.
    NeedsResync,
}

impl MirrorState {
    fn from_dump(messages: Vec<RouteNetlinkMessage>) -> Self {
        let mut s = Self {
            links_version: next_links_version(),
            ..Self::default()
        };
        for m in messages {
            s.apply(m, false);
        }
        s
    }

    /// Apply one event; `replace` is its `NLM_F_REPLACE` flag (the kernel sets it on the
    /// notification of a route that replaced another).
    fn apply(&mut self, message: RouteNetlinkMessage, replace: bool) -> Applied {
        let Some(key) = ObjectKey::of(&message) else {
            return Applied::Ignored;
        };
        if matches!(key, ObjectKey::Link(_)) {
            self.links_version = next_links_version();
        }
        // An IPv6 route replaced by one through another next hop is not reported deleted:
        // the replacement's notification says it.
        if replace
            && let ObjectKey::Route { family, .. } = &key
            && *family == u8::from(AddressFamily::Inet6)
            && let Some(prefix) = key.without_next_hop()
        {
            let replaced: Vec<ObjectKey> = self
                .objects
                .keys()
                .filter(|k| k.without_next_hop() == Some(prefix))
                .cloned()
                .collect();
            for k in replaced {
                self.objects.remove(&k);
            }
        }
        if is_delete(&message) || unnotified_neighbour(&message) {
            self.objects.remove(&key);
            return match &key {
                // A link deleted takes its IPv4 routes with it, unreported.
                ObjectKey::Link(_) => Applied::NeedsResync,
                // So does the last IPv4 address of a device going (the kernel disables IPv4
                // there and flushes the routes through it without a notification).
                ObjectKey::Address { family, index, .. }
                    if *family == u8::from(AddressFamily::Inet)
                        && !self.has_ipv4_address(*index) =>
                {
                    Applied::NeedsResync
                }
                _ => Applied::Changed,
            };
        }
        let went_down = match (&message, self.objects.get(&key)) {
            (RouteNetlinkMessage::NewLink(new), Some(RouteNetlinkMessage::NewLink(old))) => {
                is_up(old) && !is_up(new)
            }
            _ => false,
        };
        self.objects.insert(key, message);
        // A link set down loses its IPv4 routes, unreported.
        if went_down {
            Applied::NeedsResync
        } else {
            Applied::Changed
        }
    }

    fn has_ipv4_address(&self, index: u32) -> bool {
        let family = u8::from(AddressFamily::Inet);
        let start = ObjectKey::Address {
            family,
            index,
            prefix_len: 0,
            local: String::new(),
        };
        self.objects.range(start..).next().is_some_and(|(k, _)| {
            matches!(k, ObjectKey::Address { family: f, index: i, .. } if *f == family && *i == index)
        })
    }

    /// Every object, comparable with another state ([`comparable`]).
    pub fn comparable_view(&self) -> BTreeMap<ObjectKey, String> {
        self.objects
            .iter()
            .filter_map(|(k, m)| comparable(m).map(|c| (k.clone(), c)))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The routes of `family` in `table`, as a per-table dump would list them.
    pub fn routes_of_table(&self, family: AddressFamily, table: u32) -> Vec<RouteNetlinkMessage> {
        let start = ObjectKey::first_route_of(family, table);
        self.objects
            .range(start..)
            .take_while(|(k, _)| {
                matches!(k, ObjectKey::Route { family: f, table: t, .. }
                    if *f == u8::from(family) && *t == table)
            })
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// Every object, in key order.
    pub fn messages(&self) -> impl Iterator<Item = &RouteNetlinkMessage> {
        self.objects.values()
    }

    /// The routes of `table` with this destination and priority (every next hop of IPv6),
    /// the kernel's identity of a route: what a route added with these would replace.
    pub fn routes_at(
        &self,
        table: u32,
        dst: ipnet::IpNet,
        priority: u32,
    ) -> impl Iterator<Item = &RouteNetlinkMessage> {
        use rtnetlink::packet_route::route::RouteAddress;
        let family = u8::from(match dst {
            ipnet::IpNet::V4(_) => AddressFamily::Inet,
            ipnet::IpNet::V6(_) => AddressFamily::Inet6,
        });
        // As `route_key` writes it: no Destination attribute for a default route.
        let text = match dst {
            _ if dst.prefix_len() == 0 => String::new(),
            ipnet::IpNet::V4(n) => format!("{:?}", RouteAddress::Inet(n.network())),
            ipnet::IpNet::V6(n) => format!("{:?}", RouteAddress::Inet6(n.network())),
        };
        let key = |oif, gateway: String| ObjectKey::Route {
            family,
            table,
            dst_len: dst.prefix_len(),
            dst: text.clone(),
            src_len: 0,
            src: String::new(),
            tos: 0,
            priority,
            oif,
            gateway,
        };
        let (start, end) = (
            key(0, String::new()),
            key(u32::MAX, "\u{10ffff}".to_owned()),
        );
        self.objects.range(start..=end).map(|(_, m)| m)
    }

    /// Tells the links of this state from those of any other state that differs in them
    /// (see the field).
    pub fn links_version(&self) -> u64 {
        self.links_version
    }

    /// Every link, as a link dump lists them.
    pub fn links(&self) -> impl Iterator<Item = &RouteNetlinkMessage> {
        self.objects
            .range(ObjectKey::Link(0)..=ObjectKey::Link(u32::MAX))
            .map(|(_, m)| m)
    }

    /// The addresses of `family`, as an address dump lists them.
    pub fn addresses(&self, family: AddressFamily) -> impl Iterator<Item = &RouteNetlinkMessage> {
        let f = u8::from(family);
        let start = ObjectKey::Address {
            family: f,
            index: 0,
            prefix_len: 0,
            local: String::new(),
        };
        self.objects
            .range(start..)
            .take_while(
                move |(k, _)| matches!(k, ObjectKey::Address { family, .. } if *family == f),
            )
            .map(|(_, m)| m)
    }

    /// The rules of `family`, as a rule dump lists them.
    pub fn rules(&self, family: AddressFamily) -> impl Iterator<Item = &RouteNetlinkMessage> {
        self.objects
            .range(ObjectKey::Rule(String::new())..)
            .take_while(|(k, _)| matches!(k, ObjectKey::Rule(_)))
            .map(|(_, m)| m)
            .filter(
                move |m| matches!(m, RouteNetlinkMessage::NewRule(r) if r.header.family == family),
            )
    }

    /// The neighbours (not proxies) of IPv4 or IPv6, as a neighbour dump lists them, less the
    /// kernel's own `NOARP`/`INCOMPLETE` entries.
    pub fn neighbours(&self, v6: bool) -> impl Iterator<Item = &RouteNetlinkMessage> {
        let f = u8::from(if v6 {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        });
        let start = ObjectKey::Neighbour {
            family: f,
            index: 0,
            proxy: false,
            dst: String::new(),
        };
        self.objects
            .range(start..)
            .take_while(
                move |(k, _)| matches!(k, ObjectKey::Neighbour { family, .. } if *family == f),
            )
            .map(|(_, m)| m)
    }
}

/// How far the mirror is, for whoever awaits changes (the host loop repairing foreign
/// changes promptly).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MirrorStatus {
    /// The mirror holds a complete view (the first sync is done).
    pub synced: bool,
    /// Events applied since the start.
    pub events: u64,
    /// Of which removals (a route, address, ... deleted).
    pub removals: u64,
    /// Full resyncs after the first sync (overflows, unreported changes, requests).
    pub resyncs: u64,
    /// Complete syncs installed, the first included (see [`KernelMirror::resync`]).
    pub syncs: u64,
    /// Changes in the reader's [`Interest`] not caused by its own requests (see
    /// [`KernelMirror::take_dirty`]).
    pub foreign: u64,
    /// Overflows of the monitor socket seen.
    pub overflows: u64,
}

/// Options of [`KernelMirror::start`].
#[derive(Debug, Clone)]
pub struct MirrorOptions {
    /// Receive buffer of the monitor socket, in bytes.
    pub rcvbuf: libc::c_int,
}

impl Default for MirrorOptions {
    fn default() -> Self {
        Self {
            rcvbuf: MONITOR_RCVBUF,
        }
    }
}

struct Shared {
    state: RwLock<MirrorState>,
    status: watch::Sender<MirrorStatus>,
    /// The highest barrier sequence number whose answer the mirror has caught up with.
    caught_up: watch::Sender<u32>,
    next_barrier: std::sync::atomic::AtomicU32,
    /// A resync asked for by [`KernelMirror::resync`].
    resync: tokio::sync::Notify,
    interest: RwLock<Interest>,
    dirty: std::sync::Mutex<Dirty>,
}

/// What the reader (the reconciler) owns, so that the mirror can tell it which changes were
/// made by others: its netlink port (its own requests' notifications carry it), and the tables
/// and devices whose objects it manages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interest {
    pub own_port: u32,
    /// Routes of these tables (the agent's, `proto boot`, and any that replaced one of
    /// them), rules pointing to them.
    pub tables: std::collections::HashSet<u32>,
    /// Tables whose foreign routes the agent sweeps: every route a routing daemon or the
    /// kernel does not own.
    pub swept_tables: std::collections::HashSet<u32>,
    /// Every route of `tables` matters, whatever its protocol (the reader's last state was
    /// not fully applied: a conflicting route going away must be seen).
    pub strict: bool,
    /// Addresses, permanent neighbours and the link itself, by ifindex.
    pub devices: std::collections::HashSet<u32>,
    /// Devices whose kernel local routes the reader suppresses, by ifindex: a local route
    /// the kernel adds there is recorded ([`Dirty::local_routes`]). The kernel adds an IPv6
    /// address's local route from a work queue, after the address: possibly after the
    /// reconcile that added the address looked for it.
    pub local_route_devices: std::collections::HashSet<u32>,
}

/// Changes in the [`Interest`] made by someone else since the last [`KernelMirror::take_dirty`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirty {
    /// Foreign changes of links, addresses, routes, rules and permanent neighbours.
    pub objects: u64,
    /// IPv6 address events (ifindex, address, present now): the kernel sends every one of them
    /// as its own (port 0), so the reader compares them with what it asked for.
    pub v6_addresses: Vec<(u32, ipnet::IpNet, bool)>,
    /// Kernel local routes added on [`Interest::local_route_devices`]: (table, destination,
    /// ifindex), for the reader to remove those it suppresses.
    pub local_routes: Vec<(u32, std::net::IpAddr, u32)>,
}

impl Dirty {
    pub fn is_empty(&self) -> bool {
        self.objects == 0 && self.v6_addresses.is_empty() && self.local_routes.is_empty()
    }
}

/// How [`foreign_change`] classifies an event.
enum Foreign {
    No,
    Object,
    V6Address(u32, ipnet::IpNet),
    LocalRoute(u32, std::net::IpAddr, u32),
}

/// Whether an event is a change of something in `interest` made by someone else. Called
/// before the event is applied (a neighbour's previous state is needed).
fn foreign_change(
    state: &MirrorState,
    interest: &Interest,
    message: &RouteNetlinkMessage,
    port: u32,
) -> Foreign {
    use RouteNetlinkMessage as M;
    let v6_address = matches!(message, M::NewAddress(a) | M::DelAddress(a)
        if a.header.family == AddressFamily::Inet6);
    if port != 0 && port == interest.own_port {
        return Foreign::No;
    }
    let Some(key) = ObjectKey::of(message) else {
        return Foreign::No;
    };
    match (&key, message) {
        (ObjectKey::Link(i), _) if interest.devices.contains(i) => Foreign::Object,
        (ObjectKey::Address { index, .. }, M::NewAddress(a) | M::DelAddress(a))
            if interest.devices.contains(index) =>
        {
            if v6_address && port == 0 {
                // Parsed as a dump message would be (the kind does not matter here).
                match addresses::parse(&M::NewAddress(a.clone())) {
                    Some(o) => Foreign::V6Address(o.index, o.addr),
                    None => Foreign::No,
                }
            } else {
                Foreign::Object
            }
        }
        (ObjectKey::Route { .. }, M::NewRoute(_))
            if !interest.local_route_devices.is_empty()
                && let Some(l) = super::routes::parse_local(message)
                && interest.local_route_devices.contains(&l.oif) =>
        {
            Foreign::LocalRoute(l.table, l.dst, l.oif)
        }
        (ObjectKey::Route { table, .. }, M::NewRoute(r) | M::DelRoute(r)) => {
            use rtnetlink::packet_route::route::RouteProtocol;
            let protocol = r.header.protocol;
            let was_boot = matches!(state.objects.get(&key),
                Some(M::NewRoute(old)) if old.header.protocol == RouteProtocol::Boot);
            let relevant = if interest.swept_tables.contains(table) {
                super::routes::sweepable_protocol(protocol) || was_boot
            } else if interest.tables.contains(table) {
                // A routing daemon's routes (an EVPN VRF's BGP routes) churn on their own;
                // the kernel's own (of addresses) are never the reader's.
                protocol == RouteProtocol::Boot
                    || was_boot
                    || (interest.strict && protocol != RouteProtocol::Kernel)
            } else {
                false
            };
            if relevant {
                Foreign::Object
            } else {
                Foreign::No
            }
        }
        (ObjectKey::Rule(_), M::NewRule(r) | M::DelRule(r)) => {
            // Parsed as a dump message would be (the kind does not matter here).
            let table = rules::parse(&M::NewRule(r.clone())).map(|r| r.table);
            if table
                .is_some_and(|t| interest.tables.contains(&t) || interest.swept_tables.contains(&t))
            {
                Foreign::Object
            } else {
                Foreign::No
            }
        }
        (ObjectKey::Neighbour { index, .. }, M::NewNeighbour(n) | M::DelNeighbour(n))
            if interest.devices.contains(index) =>
        {
            // Only permanent entries are the reader's; learned ones churn on their own.
            let permanent = |m: &RouteNetlinkMessage| matches!(m, M::NewNeighbour(n) if n.header.state == NeighbourState::Permanent);
            let was = state.objects.get(&key).is_some_and(permanent);
            if was || n.header.state == NeighbourState::Permanent {
                Foreign::Object
            } else {
                Foreign::No
            }
        }
        _ => Foreign::No,
    }
}

/// The kernel view of one namespace, current without dumps. See the module documentation.
pub struct KernelMirror {
    shared: Arc<Shared>,
    monitor: Arc<AsyncFd<Socket>>,
    netns: String,
    conn: NetlinkConn,
    task: tokio::task::AbortHandle,
    _worker: Arc<NetnsWorker>,
}

impl Drop for KernelMirror {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every class the mirror holds, dumped afresh over `conn`.
pub async fn dump_everything(conn: &NetlinkConn) -> Result<MirrorState, NetlinkError> {
    let mut all = conn.dump("links", links::dump_request()).await?;
    for (family, name) in [
        (AddressFamily::Inet, "ipv4"),
        (AddressFamily::Inet6, "ipv6"),
    ] {
        let v6 = family == AddressFamily::Inet6;
        all.extend(
            conn.dump(
                &format!("{name} addresses"),
                addresses::dump_request(family),
            )
            .await?,
        );
        let mut every_table = RouteMessage::default();
        every_table.header.address_family = family;
        all.extend(
            conn.dump(
                &format!("{name} routes of every table"),
                RouteNetlinkMessage::GetRoute(every_table),
            )
            .await?,
        );
        all.extend(
            conn.dump(&format!("{name} rules"), rules::dump_request(family))
                .await?,
        );
        all.extend(
            conn.dump(
                &format!("{name} neighbours"),
                neighbours::dump_request(v6, false),
            )
            .await?,
        );
    }
    Ok(MirrorState::from_dump(all))
}

impl KernelMirror {
    /// Subscribe, dump and keep following the kernel of `target`. Returns at once; see
    /// [`Self::synced`].
    pub async fn start(target: NetnsTarget, options: MirrorOptions) -> Result<Self, NetlinkError> {
        let netns = target.describe();
        let worker = tokio::task::spawn_blocking(move || NetnsWorker::spawn(target))
            .await
            .map_err(|e| NetlinkError::WorkerGone(e.to_string()))??;
        let rcvbuf = options.rcvbuf;
        let socket = worker
            .run(move || -> std::io::Result<Socket> {
                let mut sock = Socket::new(NETLINK_ROUTE)?;
                sock.bind_auto()?;
                super::conn::set_rcvbuf_force(&sock, rcvbuf)?;
                sock.set_cap_ack(true)?;
                for g in GROUPS {
                    sock.add_membership(g)?;
                }
                sock.set_non_blocking(true)?;
                Ok(sock)
            })
            .await?
            .map_err(|source| NetlinkError::Socket {
                netns: netns.clone(),
                source,
            })?;
        // SAFETY: the Socket owns its fd and keeps it open, unchanged, until it is dropped
        // with the AsyncFd.
        let monitor = unsafe { AsyncFd::register(socket) }.map_err(|e| NetlinkError::Socket {
            netns: netns.clone(),
            source: e.into_parts().1,
        })?;
        let monitor = Arc::new(monitor);
        let conn = NetlinkConn::open(&worker, REQUEST_TIMEOUT).await?;
        let shared = Arc::new(Shared {
            state: RwLock::new(MirrorState::default()),
            status: watch::channel(MirrorStatus::default()).0,
            caught_up: watch::channel(0).0,
            next_barrier: std::sync::atomic::AtomicU32::new(1),
            resync: tokio::sync::Notify::new(),
            interest: RwLock::new(Interest::default()),
            dirty: std::sync::Mutex::new(Dirty::default()),
        });
        let worker = Arc::new(worker);
        let task = tokio::spawn(follow(
            monitor.clone(),
            worker.clone(),
            conn.clone(),
            shared.clone(),
            netns.clone(),
        ))
        .abort_handle();
        Ok(Self {
            shared,
            monitor,
            netns,
            conn,
            task,
            _worker: worker,
        })
    }

    /// Changes of [`MirrorStatus`]: await `changed()` on it to react to kernel events.
    pub fn status(&self) -> watch::Receiver<MirrorStatus> {
        self.shared.status.subscribe()
    }

    /// False once the monitor task has ended (its socket failed): the mirror no longer
    /// follows the kernel and must be replaced.
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Wait for the first complete view.
    pub async fn synced(&self) {
        let mut s = self.status();
        let _ = s.wait_for(|s| s.synced).await;
    }

    /// Wait until the mirror reflects everything the kernel did before this call (its own
    /// acknowledged requests included), within `timeout`.
    pub async fn barrier(&self, timeout: Duration) -> Result<(), NetlinkError> {
        let seq = self
            .shared
            .next_barrier
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let op = "mirror barrier".to_owned();
        let mut caught_up = self.shared.caught_up.subscribe();
        let message = barrier_request(seq);
        let mut buf = vec![0u8; message.buffer_len()];
        message.serialize(&mut buf);
        self.monitor
            .get_ref()
            .send_to(&buf, &SocketAddr::new(0, 0), 0)
            .map_err(|source| NetlinkError::Socket {
                netns: self.netns.clone(),
                source,
            })?;
        match tokio::time::timeout(timeout, caught_up.wait_for(|c| *c >= seq)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(self.lost(format!("{op}: the monitor task is gone"))),
            Err(_) => Err(self.lost(format!("{op}: not caught up within {timeout:?}"))),
        }
    }

    /// Replace the mirror by a fresh dump (with the events read meanwhile replayed on top) and
    /// wait until it is installed, within `timeout`: the drift repair of last resort, should
    /// the kernel ever change something without telling.
    pub async fn resync(&self, timeout: Duration) -> Result<(), NetlinkError> {
        let mut status = self.status();
        let before = status.borrow().syncs;
        self.shared.resync.notify_one();
        match tokio::time::timeout(timeout, status.wait_for(|s| s.syncs > before)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(self.lost("resync: the monitor task is gone".to_owned())),
            Err(_) => Err(self.lost(format!("resync not done within {timeout:?}"))),
        }
    }

    fn lost(&self, detail: String) -> NetlinkError {
        NetlinkError::MirrorLost {
            netns: self.netns.clone(),
            detail,
        }
    }

    /// Tell the mirror what the reader owns (see [`Interest`]); cheap when unchanged.
    pub fn set_interest(&self, interest: Interest) {
        let same = *self
            .shared
            .interest
            .read()
            .unwrap_or_else(|e| e.into_inner())
            == interest;
        if !same {
            *self
                .shared
                .interest
                .write()
                .unwrap_or_else(|e| e.into_inner()) = interest;
        }
    }

    /// The foreign changes in the interest since the last call, cleared. Resyncs are not in
    /// it: compare [`MirrorStatus::syncs`].
    pub fn take_dirty(&self) -> Dirty {
        std::mem::take(&mut *self.shared.dirty.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The foreign changes held for the next [`Self::take_dirty`], left in place.
    pub fn peek_dirty(&self) -> Dirty {
        self.shared
            .dirty
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Put changes taken with [`Self::take_dirty`] back, for the next reader.
    pub fn restore_dirty(&self, taken: Dirty) {
        let mut dirty = self.shared.dirty.lock().unwrap_or_else(|e| e.into_inner());
        dirty.objects += taken.objects;
        dirty.v6_addresses.extend(taken.v6_addresses);
        dirty.local_routes.extend(taken.local_routes);
    }

    /// Read the mirror.
    pub fn read<T>(&self, f: impl FnOnce(&MirrorState) -> T) -> T {
        f(&self.shared.state.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// A fresh full dump, on the mirror's dump socket (for comparisons and the periodic drift
    /// repair).
    pub async fn fresh_dump(&self) -> Result<MirrorState, NetlinkError> {
        dump_everything(&self.conn).await
    }
}

/// An `RTM_GETLINK` of an ifindex that cannot exist, answered with an error carrying `seq`.
fn barrier_request(seq: u32) -> NetlinkMessage<RouteNetlinkMessage> {
    let mut link = LinkMessage::default();
    link.header.index = i32::MAX as u32;
    let mut m = NetlinkMessage::from(RouteNetlinkMessage::GetLink(link));
    m.header.flags = NLM_F_REQUEST | NLM_F_ACK;
    m.header.sequence_number = seq;
    m.finalize();
    m
}

/// What the monitor socket delivered.
enum Received {
    Messages(Vec<NetlinkMessage<RouteNetlinkMessage>>),
    Overflow,
}

async fn receive(monitor: &AsyncFd<Socket>) -> std::io::Result<Received> {
    loop {
        let mut guard = monitor.readable().await?;
        match guard.try_io(|s| s.get_ref().recv_from_full()) {
            Ok(Ok((datagram, _))) => return Ok(Received::Messages(decode(&datagram))),
            Ok(Err(e)) if e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(Received::Overflow),
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => continue,
        }
    }
}

fn decode(datagram: &[u8]) -> Vec<NetlinkMessage<RouteNetlinkMessage>> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < datagram.len() {
        let Ok(buf) = NetlinkBuffer::new_checked(&datagram[offset..]) else {
            break;
        };
        let len = buf.length() as usize;
        if len == 0 {
            break;
        }
        match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&datagram[offset..offset + len]) {
            Ok(m) => out.push(m),
            Err(e) => tracing::warn!(error = %e, "undecodable netlink notification skipped"),
        }
        offset += (len + 3) & !3;
    }
    out
}

/// One thing read from the monitor socket, classified.
enum Event {
    /// An object's message, whether it carries `NLM_F_REPLACE`, and the netlink port of the
    /// socket whose request caused it (0: the kernel itself, and every IPv6 address event).
    Object(RouteNetlinkMessage, bool, u32),
    /// The answer to barrier request `seq`.
    Barrier(u32),
}

fn events(messages: Vec<NetlinkMessage<RouteNetlinkMessage>>) -> Vec<Event> {
    messages
        .into_iter()
        .filter_map(|m| match m.payload {
            NetlinkPayload::InnerMessage(inner) => Some(Event::Object(
                inner,
                m.header.flags & NLM_F_REPLACE != 0,
                m.header.port_number,
            )),
            NetlinkPayload::Error(_) if m.header.sequence_number != 0 => {
                Some(Event::Barrier(m.header.sequence_number))
            }
            _ => None,
        })
        .collect()
}

/// The monitor task: sync, follow, resync when needed. Ends only when the socket fails.
async fn follow(
    monitor: Arc<AsyncFd<Socket>>,
    worker: Arc<NetnsWorker>,
    mut conn: NetlinkConn,
    shared: Arc<Shared>,
    netns: String,
) {
    let mut first = true;
    'sync: loop {
        // Barriers sent before the dump starts are satisfied by it.
        let sent_before = shared
            .next_barrier
            .load(std::sync::atomic::Ordering::Relaxed)
            .wrapping_sub(1);
        let mut buffered: Vec<(RouteNetlinkMessage, bool)> = Vec::new();
        let mut barriers_seen = 0u32;
        let dump_conn = conn.clone();
        let dump = dump_everything(&dump_conn);
        tokio::pin!(dump);
        let fresh = loop {
            tokio::select! {
                r = &mut dump => break r,
                r = receive(&monitor) => match r {
                    Ok(Received::Messages(ms)) => for e in events(ms) {
                        match e {
                            Event::Object(m, replace, _) => buffered.push((m, replace)),
                            Event::Barrier(s) => barriers_seen = barriers_seen.max(s),
                        }
                    },
                    Ok(Received::Overflow) => {
                        shared.status.send_modify(|s| s.overflows += 1);
                        count(&KERNEL_STATS.overflows, 1);
                        tracing::warn!(%netns, "netlink monitor overflowed during a sync: starting again");
                        continue 'sync;
                    }
                    Err(e) => {
                        tracing::error!(%netns, error = %e, "netlink monitor socket failed: the mirror stops");
                        return;
                    }
                },
            }
        };
        let mut state = match fresh {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%netns, error = %e, "mirror dump failed: retrying");
                tokio::time::sleep(RETRY).await;
                // A timed out or overflowed dump socket stays unusable: open another.
                if e.ends_session() {
                    match NetlinkConn::open(&worker, REQUEST_TIMEOUT).await {
                        Ok(c) => conn = c,
                        Err(e) => {
                            tracing::warn!(%netns, error = %e, "cannot reopen the mirror's dump socket")
                        }
                    }
                }
                continue 'sync;
            }
        };
        let mut again = false;
        for (m, replace) in buffered {
            again |= state.apply(m, replace) == Applied::NeedsResync;
        }
        *shared.state.write().unwrap_or_else(|e| e.into_inner()) = state;
        shared.status.send_modify(|s| {
            s.synced = true;
            s.syncs += 1;
            if !first {
                count(&KERNEL_STATS.resyncs, 1);
                s.resyncs += 1;
            }
        });
        first = false;
        shared
            .caught_up
            .send_modify(|c| *c = (*c).max(sent_before).max(barriers_seen));
        if again {
            continue 'sync;
        }
        // Following.
        loop {
            let received = tokio::select! {
                r = receive(&monitor) => r,
                _ = shared.resync.notified() => {
                    tracing::debug!(%netns, "netlink mirror: resync asked for");
                    continue 'sync;
                }
            };
            let ms = match received {
                Ok(Received::Messages(ms)) => ms,
                Ok(Received::Overflow) => {
                    shared.status.send_modify(|s| s.overflows += 1);
                    count(&KERNEL_STATS.overflows, 1);
                    tracing::warn!(%netns, "netlink monitor overflowed: resync");
                    continue 'sync;
                }
                Err(e) => {
                    tracing::error!(%netns, error = %e, "netlink monitor socket failed: the mirror stops");
                    return;
                }
            };
            let mut resync = false;
            let mut barrier = None;
            let (mut events_n, mut removals, mut foreign) = (0, 0, 0);
            {
                let mut state = shared.state.write().unwrap_or_else(|e| e.into_inner());
                let interest = shared.interest.read().unwrap_or_else(|e| e.into_inner());
                let mut dirty = shared.dirty.lock().unwrap_or_else(|e| e.into_inner());
                for e in events(ms) {
                    match e {
                        Event::Object(m, replace, port) => {
                            let removal = is_delete(&m);
                            match foreign_change(&state, &interest, &m, port) {
                                Foreign::No => {}
                                Foreign::Object => {
                                    dirty.objects += 1;
                                    foreign += 1;
                                }
                                Foreign::V6Address(index, addr) => {
                                    dirty.v6_addresses.push((index, addr, !removal));
                                    foreign += 1;
                                }
                                Foreign::LocalRoute(table, dst, oif) => {
                                    dirty.local_routes.push((table, dst, oif));
                                    foreign += 1;
                                }
                            }
                            match state.apply(m, replace) {
                                Applied::Ignored => {}
                                Applied::Changed => {
                                    events_n += 1;
                                    removals += u64::from(removal);
                                }
                                Applied::NeedsResync => {
                                    events_n += 1;
                                    removals += u64::from(removal);
                                    resync = true;
                                }
                            }
                        }
                        Event::Barrier(s) => barrier = Some(s),
                    }
                }
            }
            if events_n > 0 {
                count(&KERNEL_STATS.events, events_n);
                count(&KERNEL_STATS.foreign, foreign);
                shared.status.send_modify(|s| {
                    s.events += events_n;
                    s.removals += removals;
                    s.foreign += foreign;
                });
            }
            if resync {
                // The barrier, if any, is released by the resync.
                continue 'sync;
            }
            if let Some(b) = barrier {
                shared.caught_up.send_modify(|c| *c = (*c).max(b));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(table: u32, dst: std::net::Ipv4Addr, len: u8, prio: u32) -> RouteNetlinkMessage {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet;
        m.header.destination_prefix_length = len;
        m.attributes.push(RouteAttribute::Table(table));
        m.attributes.push(RouteAttribute::Destination(
            rtnetlink::packet_route::route::RouteAddress::Inet(dst),
        ));
        m.attributes.push(RouteAttribute::Priority(prio));
        RouteNetlinkMessage::NewRoute(m)
    }

    fn with_protocol(
        m: RouteNetlinkMessage,
        protocol: rtnetlink::packet_route::route::RouteProtocol,
    ) -> RouteNetlinkMessage {
        let RouteNetlinkMessage::NewRoute(mut r) = m else {
            unreachable!()
        };
        r.header.protocol = protocol;
        RouteNetlinkMessage::NewRoute(r)
    }

    fn is_foreign(f: Foreign) -> bool {
        !matches!(f, Foreign::No)
    }

    #[test]
    fn which_route_changes_of_others_matter_to_the_reconciler() {
        use rtnetlink::packet_route::route::RouteProtocol;
        let bgp = RouteProtocol::from(186u8);
        let interest = Interest {
            own_port: 77,
            tables: [200].into(),
            swept_tables: [300].into(),
            devices: Default::default(),
            local_route_devices: Default::default(),
            strict: false,
        };
        let mut s = MirrorState::default();
        let ours = with_protocol(route(200, [10, 0, 0, 1].into(), 32, 0), RouteProtocol::Boot);
        // The reconciler's own request: never foreign.
        assert!(!is_foreign(foreign_change(&s, &interest, &ours, 77)));
        // A route of the agent's protocol added by hand: foreign.
        assert!(is_foreign(foreign_change(&s, &interest, &ours, 5)));
        s.apply(ours, false);
        // A routing daemon's route of its own in an owned table churns on its own...
        let daemon = with_protocol(route(200, [10, 0, 0, 2].into(), 32, 0), bgp);
        assert!(!is_foreign(foreign_change(&s, &interest, &daemon, 5)));
        // ...unless it replaces one of the agent's (same identity),
        let replacing = with_protocol(route(200, [10, 0, 0, 1].into(), 32, 0), bgp);
        assert!(is_foreign(foreign_change(&s, &interest, &replacing, 5)));
        // or the last state was not applied in full (a conflict may have cleared).
        let strict = Interest {
            strict: true,
            ..interest.clone()
        };
        assert!(is_foreign(foreign_change(&s, &strict, &daemon, 5)));
        // The kernel's own routes never matter; nor do tables the reconciler does not own.
        let kernel = with_protocol(
            route(200, [10, 0, 0, 3].into(), 32, 0),
            RouteProtocol::Kernel,
        );
        assert!(!is_foreign(foreign_change(&s, &strict, &kernel, 0)));
        let elsewhere = with_protocol(route(254, [10, 0, 0, 4].into(), 32, 0), RouteProtocol::Boot);
        assert!(!is_foreign(foreign_change(&s, &interest, &elsewhere, 5)));
        // In a swept table every route the agent may sweep matters, a daemon's does not.
        let stray = with_protocol(
            route(300, [10, 0, 0, 5].into(), 32, 0),
            RouteProtocol::Static,
        );
        assert!(is_foreign(foreign_change(&s, &interest, &stray, 5)));
        let daemon_swept = with_protocol(route(300, [10, 0, 0, 6].into(), 32, 0), bgp);
        assert!(!is_foreign(foreign_change(&s, &interest, &daemon_swept, 5)));
    }

    #[test]
    fn a_later_event_replaces_and_a_delete_removes_the_same_object() {
        let mut s = MirrorState::default();
        let r = route(200, [10, 0, 0, 0].into(), 24, 0);
        assert_eq!(s.apply(r.clone(), false), Applied::Changed);
        assert_eq!(s.apply(r.clone(), false), Applied::Changed);
        assert_eq!(s.len(), 1);
        // Another metric is another route.
        s.apply(route(200, [10, 0, 0, 0].into(), 24, 5), false);
        assert_eq!(s.len(), 2);
        let RouteNetlinkMessage::NewRoute(m) = r else {
            unreachable!()
        };
        assert_eq!(
            s.apply(RouteNetlinkMessage::DelRoute(m), false),
            Applied::Changed
        );
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn routes_of_a_table_are_read_by_range_and_only_that_table() {
        let mut s = MirrorState::default();
        for t in [199, 200, 201] {
            for i in 0..3u8 {
                s.apply(route(t, [10, 0, i, 0].into(), 24, 0), false);
            }
        }
        assert_eq!(s.routes_of_table(AddressFamily::Inet, 200).len(), 3);
        assert!(s.routes_of_table(AddressFamily::Inet6, 200).is_empty());
        assert!(s.routes_of_table(AddressFamily::Inet, 7).is_empty());
    }

    #[test]
    fn a_link_going_down_or_away_asks_for_a_resync() {
        let mut s = MirrorState::default();
        let mut up = LinkMessage::default();
        up.header.index = 5;
        up.header.flags = LinkFlags::Up;
        assert_eq!(
            s.apply(RouteNetlinkMessage::NewLink(up.clone()), false),
            Applied::Changed
        );
        let mut down = up.clone();
        down.header.flags = LinkFlags::empty();
        assert_eq!(
            s.apply(RouteNetlinkMessage::NewLink(down.clone()), false),
            Applied::NeedsResync
        );
        assert_eq!(
            s.apply(RouteNetlinkMessage::DelLink(down), false),
            Applied::NeedsResync
        );
        // The bridge's port messages are not links of their own.
        let mut port = up;
        port.header.interface_family = AddressFamily::Bridge;
        assert_eq!(
            s.apply(RouteNetlinkMessage::DelLink(port), false),
            Applied::Ignored
        );
    }

    /// The parsed links are reused while this version is the same: it must move with every
    /// link that comes, changes or goes, and with nothing else; and two dumps never share one.
    #[test]
    fn the_links_version_moves_with_the_links_only() {
        let mut s = MirrorState::from_dump(Vec::new());
        let v0 = s.links_version();
        s.apply(route(200, [10, 0, 0, 0].into(), 24, 0), false);
        assert_eq!(s.links_version(), v0, "a route is not a link");
        let mut link = LinkMessage::default();
        link.header.index = 5;
        link.header.flags = LinkFlags::Up;
        s.apply(RouteNetlinkMessage::NewLink(link.clone()), false);
        let v1 = s.links_version();
        assert_ne!(v1, v0);
        let mut renamed = link.clone();
        renamed
            .attributes
            .push(LinkAttribute::IfName("lo-100".into()));
        s.apply(RouteNetlinkMessage::NewLink(renamed), false);
        let v2 = s.links_version();
        assert_ne!(v2, v1, "a link changed");
        s.apply(RouteNetlinkMessage::DelLink(link), false);
        assert_ne!(s.links_version(), v2, "a link gone");
        assert_ne!(
            MirrorState::from_dump(Vec::new()).links_version(),
            MirrorState::from_dump(Vec::new()).links_version()
        );
    }
}
