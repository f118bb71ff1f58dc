//! The stretched-L2 routes laid out as a delta (issue 17), as [`crate::exposure::IpLayout`]
//! lays out the other drivers' IPs: an event that recomputes one gateway of a cloud of 10k
//! re-decides the route attempts that gateway makes (or made) and those whose outcome depends
//! on them, and changes those prefixes in the persistent route map of the last set, instead of
//! replaying every gateway's steps into a fresh set.
//!
//! The result is what replaying every gateway's steps in order gives (the first route of a
//! prefix stays, a later clash is reported; see `announce` in the tests). The order of
//! production is the gateways' order, then the steps' order within a gateway: a *position*.
//! Whether an attempt at a position is announced, and the skip it reports when not, depend only
//! on what is announced at its two prefixes (its subnet's and its gateway network's) before it:
//! the route of the first announced attempt at that prefix with an earlier position (a later
//! announced one agreed with it). So each prefix keeps its producers sorted by position, and
//! the announced ones among them; when the first announced one of a prefix changes, only the
//! attempts after it whose view of the prefix changed are decided again, in the order of
//! production (an attempt's outcome depends on earlier ones only, so each is decided once).
//!
//! A gateway whose version is the one laid last is not looked at (its steps are not iterated).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::Arc;

use ipnet::IpNet;

use super::compute::{RouteAttempt, Step, TABLE};
use crate::exposure::{ExposedRoute, ExposureSet, ListIndex, RootKey, RouteMap, SkippedRow};
use crate::hash::HashMap;
use crate::ovn::sb::model::Uuid;

/// A gateway's key in the order of production: `chassisredirect_ports()`'s order, by logical
/// port name then uuid.
pub(crate) type GatewayKey = (String, Uuid);

/// Where a step stands in the order of production: its gateway, then its index there.
type Position = (Arc<GatewayKey>, u32);

/// A gateway that came or changed: its key, its result's version and its steps.
type Arrival = (Arc<GatewayKey>, u64, Arc<[Step]>);

/// A gateway as laid out: its result's version and its steps.
#[derive(Debug)]
struct LaidGateway {
    version: u64,
    steps: Arc<[Step]>,
}

/// A route attempt as laid out, and whether it is announced now.
#[derive(Debug)]
struct LaidAttempt {
    attempt: Arc<RouteAttempt>,
    announced: bool,
}

/// The attempts that make routes at one prefix, by position: as their subnet, as their
/// gateway's network, and those announced (of either role).
#[derive(Debug, Default)]
struct Producers {
    as_subnet: BTreeSet<Position>,
    as_link: BTreeSet<Position>,
    announced: BTreeSet<Position>,
}

impl Producers {
    fn is_empty(&self) -> bool {
        self.as_subnet.is_empty() && self.as_link.is_empty() && self.announced.is_empty()
    }
}

/// What the last [`RouteLayout::lay`] did, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteLayoutStats {
    /// Gateways whose steps were taken out or put in (a changed one counts once).
    pub gateways_laid: usize,
    /// Route attempts decided again.
    pub attempts_decided: usize,
}

/// The layout kept between calls; see the module's documentation.
#[derive(Debug, Default)]
pub(crate) struct RouteLayout {
    gateways: BTreeMap<Arc<GatewayKey>, LaidGateway>,
    attempts: BTreeMap<Position, LaidAttempt>,
    prefixes: HashMap<IpNet, Producers>,
    /// The routes announced: each prefix's first announced attempt's route there.
    routes: RouteMap,
    /// The skips reported, by position (a skip step's, or a clash of a route attempt).
    skips: BTreeMap<Position, (String, String)>,
    /// `skips` as the set's list (recorded once each, in order), built again only when they
    /// changed: a flood of bad rows costs its list's copy per event, not its recording.
    skipped: Vec<SkippedRow>,
    skip_index: ListIndex,
    skips_changed: bool,
    /// The attempts to decide again, in the order of production.
    pending: BTreeSet<Position>,
    /// The prefixes whose first announced attempt (or its route) may have changed.
    touched: BTreeSet<IpNet>,
    last: RouteLayoutStats,
}

/// The route an attempt makes at `prefix`: its subnet's or its gateway network's.
fn route_at(attempt: &RouteAttempt, prefix: IpNet) -> &ExposedRoute {
    if attempt.subnet.prefix == prefix {
        &attempt.subnet
    } else {
        &attempt.link
    }
}

/// What an attempt in the role of a gateway network sees of an earlier route at its prefix:
/// only whether it is routed (via, and from where, for the report).
fn link_view(route: &ExposedRoute) -> Option<(IpAddr, &str)> {
    route.via.map(|v| (v, route.source.as_str()))
}

fn index(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

impl RouteLayout {
    /// Put the routes and skips of `gateways` in `out`, as replaying their steps in this order
    /// would. `gateways` come in strictly increasing key order, each with its result's version
    /// ([`crate::exposure::next_version`]) and steps (iterated only when the version is not the
    /// one laid last).
    pub(crate) fn lay<'a, Q>(
        &mut self,
        gateways: impl IntoIterator<Item = (Q, u64, &'a Arc<[Step]>)>,
        out: &mut ExposureSet,
    ) where
        Q: RootKey<Owned = GatewayKey>,
    {
        let (gone, arrivals) = self.compare(gateways);
        self.apply(gone, arrivals, out);
    }

    /// As [`Self::lay`], told what changed instead of handed every gateway: `gone`, the keys
    /// (as laid) of the gateways that went or changed their key; `arrivals`, the gateways
    /// that came or changed, with their key, version and steps.
    pub(crate) fn lay_changes(
        &mut self,
        gone: Vec<GatewayKey>,
        arrivals: Vec<(GatewayKey, u64, Arc<[Step]>)>,
        out: &mut ExposureSet,
    ) {
        let gone = gone.into_iter().map(Arc::new).collect();
        let arrivals = arrivals
            .into_iter()
            .map(|(key, version, steps)| (Arc::new(key), version, steps))
            .collect();
        self.apply(gone, arrivals, out);
    }

    fn apply(&mut self, gone: Vec<Arc<GatewayKey>>, arrivals: Vec<Arrival>, out: &mut ExposureSet) {
        let gateways_laid = gone.len() + arrivals.len();
        for key in gone {
            if let Some(laid) = self.gateways.remove(&key) {
                self.take_out(&key, &laid.steps);
            }
        }
        for (key, version, steps) in arrivals {
            // A changed gateway keeps its key's allocation: its positions stay pointer-equal.
            let key = match self.gateways.remove_entry(&key) {
                Some((key, old)) => {
                    self.take_out(&key, &old.steps);
                    key
                }
                None => key,
            };
            self.put_in(&key, &steps);
            self.gateways.insert(key, LaidGateway { version, steps });
        }
        let mut attempts_decided = 0;
        while let Some(position) = self.pending.pop_first() {
            attempts_decided += 1;
            self.decide(position);
        }
        for prefix in std::mem::take(&mut self.touched) {
            self.publish(prefix);
        }
        self.last = RouteLayoutStats {
            gateways_laid,
            attempts_decided,
        };
        let global = out.global_mut();
        if global.routes.is_empty() {
            global.routes = self.routes.clone();
        } else {
            // Not what the driver does (its set has no routes before): kept correct anyway.
            for (prefix, route) in &self.routes {
                global
                    .routes
                    .entry(*prefix)
                    .or_insert_with(|| route.clone());
            }
        }
        if std::mem::take(&mut self.skips_changed) {
            let mut list = ExposureSet::default();
            for (row, reason) in self.skips.values() {
                list.skip(TABLE, row.clone(), reason.clone());
            }
            self.skipped = list.skipped;
            self.skip_index = list.skip_index;
        }
        if out.skipped.is_empty() {
            out.skipped = self.skipped.clone();
            out.skip_index = self.skip_index.clone();
        } else {
            for s in &self.skipped {
                out.skip(&s.table, s.row.clone(), s.reason.clone());
            }
        }
    }

    /// What the last [`Self::lay`] did.
    pub(crate) fn stats(&self) -> RouteLayoutStats {
        self.last
    }

    /// The gateways laid last that are gone, and those that came or changed (with their steps).
    fn compare<'a, Q>(
        &self,
        gateways: impl IntoIterator<Item = (Q, u64, &'a Arc<[Step]>)>,
    ) -> (Vec<Arc<GatewayKey>>, Vec<Arrival>)
    where
        Q: RootKey<Owned = GatewayKey>,
    {
        let mut gone = Vec::new();
        let mut arrivals = Vec::new();
        let mut old = self.gateways.iter().peekable();
        for (key, version, steps) in gateways {
            // The old gateways before this one are gone.
            let same = loop {
                match old.peek() {
                    // One version is one result of one gateway (the key was read with it).
                    Some((_, laid)) if laid.version == version => break true,
                    Some((k, _)) if key.cmp_owned(k).is_gt() => {
                        gone.push(Arc::clone(k));
                        old.next();
                    }
                    _ => break false,
                }
            };
            if same {
                old.next();
                continue;
            }
            arrivals.push((Arc::new(key.to_owned_key()), version, Arc::clone(steps)));
            if old.peek().is_some_and(|(k, _)| key.cmp_owned(k).is_eq()) {
                old.next();
            }
        }
        gone.extend(old.map(|(k, _)| Arc::clone(k)));
        (gone, arrivals)
    }

    /// Take a gateway's steps out: its skips go, its announced attempts leave their prefixes
    /// (the attempts after them that saw them are decided again).
    fn take_out(&mut self, key: &Arc<GatewayKey>, steps: &[Step]) {
        for (i, step) in steps.iter().enumerate() {
            let position = (key.clone(), index(i));
            if self.skips.remove(&position).is_some() {
                self.skips_changed = true;
            }
            let Step::Route(attempt) = step else {
                continue;
            };
            let (subnet, link) = (attempt.subnet.prefix, attempt.link.prefix);
            if self.attempts.get(&position).is_some_and(|a| a.announced) {
                // While the attempt is still there: it may be the route others saw.
                self.announce(subnet, &position, false);
                self.announce(link, &position, false);
            }
            self.attempts.remove(&position);
            self.pending.remove(&position);
            if let Some(p) = self.prefixes.get_mut(&subnet) {
                p.as_subnet.remove(&position);
            }
            if let Some(p) = self.prefixes.get_mut(&link) {
                p.as_link.remove(&position);
            }
            self.touched.insert(subnet);
            self.touched.insert(link);
        }
    }

    /// Put a gateway's steps in: its skips are reported, its attempts are decided.
    fn put_in(&mut self, key: &Arc<GatewayKey>, steps: &[Step]) {
        for (i, step) in steps.iter().enumerate() {
            let position = (key.clone(), index(i));
            match step {
                Step::Skip(row, reason) => {
                    self.skips.insert(position, (row.clone(), reason.clone()));
                    self.skips_changed = true;
                }
                Step::Route(attempt) => {
                    let producers = self.prefixes.entry(attempt.subnet.prefix).or_default();
                    producers.as_subnet.insert(position.clone());
                    let producers = self.prefixes.entry(attempt.link.prefix).or_default();
                    producers.as_link.insert(position.clone());
                    self.attempts.insert(
                        position.clone(),
                        LaidAttempt {
                            attempt: attempt.clone(),
                            announced: false,
                        },
                    );
                    self.pending.insert(position);
                }
            }
        }
    }

    /// The route announced at `prefix` before `position`: the first announced attempt's.
    fn seen(&self, prefix: IpNet, position: &Position) -> Option<&ExposedRoute> {
        let first = self
            .prefixes
            .get(&prefix)?
            .announced
            .range((Unbounded, Excluded(position)))
            .next()?;
        Some(route_at(&self.attempts[first].attempt, prefix))
    }

    /// Whether the attempt at `position` is announced, or else the skip it reports: the rule
    /// of a replay in order ([`RouteAttempt::clash`]), from what is announced at its prefixes
    /// before it.
    fn outcome(&self, attempt: &RouteAttempt, position: &Position) -> Result<(), (String, String)> {
        attempt.clash(|prefix| self.seen(prefix, position))
    }

    /// Decide the attempt at `position` again from what is announced before it.
    fn decide(&mut self, position: Position) {
        let Some(laid) = self.attempts.get(&position) else {
            return;
        };
        let attempt = laid.attempt.clone();
        let was = laid.announced;
        let outcome = self.outcome(&attempt, &position);
        let announced = outcome.is_ok();
        match outcome {
            Err(skip) => {
                if self.skips.get(&position) != Some(&skip) {
                    self.skips.insert(position.clone(), skip);
                    self.skips_changed = true;
                }
            }
            Ok(()) => {
                if self.skips.remove(&position).is_some() {
                    self.skips_changed = true;
                }
            }
        }
        if announced != was {
            if let Some(laid) = self.attempts.get_mut(&position) {
                laid.announced = announced;
            }
            // Announced (now or before): its two prefixes differ.
            self.announce(attempt.subnet.prefix, &position, announced);
            self.announce(attempt.link.prefix, &position, announced);
        }
    }

    /// The attempt at `position` is announced at `prefix` (`on`) or no longer is. When that
    /// changes the prefix's first announced attempt, the attempts after it whose view of the
    /// prefix changed are decided again: those up to the later of the two first ones see a
    /// route instead of none or none instead of one; those after it see the other's route,
    /// which matters to an attempt routing this prefix when the routes differ, and to one
    /// whose gateway network it is only when their nexthops or sources differ.
    fn announce(&mut self, prefix: IpNet, position: &Position, on: bool) {
        self.touched.insert(prefix);
        let Some(producers) = self.prefixes.get_mut(&prefix) else {
            return;
        };
        let before = producers.announced.first().cloned();
        if on {
            producers.announced.insert(position.clone());
        } else {
            producers.announced.remove(position);
        }
        let after = producers.announced.first().cloned();
        if before == after {
            return;
        }
        let route = |p: &Option<Position>| {
            p.as_ref()
                .map(|p| route_at(&self.attempts[p].attempt, prefix))
        };
        let (old, new) = (route(&before), route(&after));
        let (first, later) = match (&before, &after) {
            (Some(a), Some(b)) => (a.min(b), Some(a.max(b))),
            (Some(a), None) | (None, Some(a)) => (a, None),
            (None, None) => return,
        };
        let producers = &self.prefixes[&prefix];
        let between = (Excluded(first), later.map_or(Unbounded, Included));
        let mut again: Vec<&Position> = producers
            .as_subnet
            .range::<Position, _>(between)
            .chain(producers.as_link.range::<Position, _>(between))
            .collect();
        if let (Some(later), Some(old), Some(new)) = (later, old, new) {
            let beyond = (Excluded(later), Unbounded);
            if old != new {
                again.extend(producers.as_subnet.range::<Position, _>(beyond));
            }
            if link_view(old) != link_view(new) {
                again.extend(producers.as_link.range::<Position, _>(beyond));
            }
        }
        let again: Vec<Position> = again.into_iter().cloned().collect();
        self.pending.extend(again);
    }

    /// Write `prefix`'s route in the map as its first announced attempt makes it, or take it
    /// out; only a different route touches the map (a write copies its path, and the stages
    /// after the driver visit what it copied).
    fn publish(&mut self, prefix: IpNet) {
        let first = self.prefixes.get(&prefix).and_then(|p| p.announced.first());
        match first {
            Some(first) => {
                let route = route_at(&self.attempts[first].attempt, prefix);
                if self.routes.get(&prefix) != Some(route) {
                    self.routes.insert(prefix, route.clone());
                }
            }
            None => {
                self.routes.remove(&prefix);
            }
        }
        if self.prefixes.get(&prefix).is_some_and(Producers::is_empty) {
            self.prefixes.remove(&prefix);
        }
    }
}
