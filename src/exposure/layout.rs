//! The drivers' cached IPs laid out as a delta (issue 17): an event that recomputes one root
//! (a port, a gateway) of a chassis exposing 30k IPs changes that root's IPs in the persistent
//! maps of the last set, instead of sorting and building 30k entries again. The next set then
//! shares all but those paths with the last one, which is what lets the stages after the driver
//! (the render, the kernel reconciler) visit only what changed.
//!
//! The result is what [`ExposureScope::expose_ip`](super::ExposureScope::expose_ip) one by one
//! in the order of production gives:
//! of the producers of an IP in a scope, the first in the order of production wins, and a
//! later one of another kind or source is shadowed (once, in the order of production). The
//! order of production is the roots' order, then the IPs' order within a root; the layout keeps
//! each IP's producers sorted by that position, so a root that comes, goes or changes
//! re-decides only the IPs it produces (or produced).
//!
//! A driver hands every root on every call, in order, with the version of its cached result:
//! a root whose version is the one laid last is not looked at (its IPs are not iterated).
//!
//! A root with a new version is compared with its IPs laid last: the common prefix and the
//! common suffix (the same scope and the same exposure: the same allocation, or an equal one)
//! stay, and only the IPs in between are taken out and put in. So a root of 500 VMs of which
//! one changed re-decides that VM's IPs, when its driver kept the others' allocations (the EVPN
//! driver's listing of a subnet does); the cost beyond that is a pointer compare per kept IP
//! (the changed root's IPs are borrowed from the driver and its list here is edited in place:
//! a kept IP costs no reference count).
//! A producer's place within its root is a rank, not an index: ranks are laid out with wide gaps
//! and the IPs put in between two kept ones take ranks in the gap between theirs, so the common
//! suffix keeps its ranks whatever the middle's length (with indices, every IP after a FIP put
//! in the middle of a router's thousands had to be found and moved). Only when a gap is used up
//! is the root laid again with fresh ranks, all its IPs decided again.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::{ExposedIp, ExposureSet, IpMap, ScopeId};
use crate::hash::HashMap;

/// A fresh version for a root's result: unique in the process, so a cached result is told
/// from the one that replaced it without comparing them.
pub fn next_version() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A root's key in the order of production, borrowed from the driver's cache (nothing is
/// allocated for a root that did not change); [`Self::Owned`] is what the layout keeps.
pub trait RootKey {
    type Owned: Ord + Clone + std::fmt::Debug;
    fn to_owned_key(&self) -> Self::Owned;
    fn cmp_owned(&self, owned: &Self::Owned) -> Ordering;
}

/// A root as laid out: its result's version and the IPs it produced, in order, with their ranks
/// (strictly increasing).
#[derive(Debug)]
struct LaidRoot {
    version: u64,
    ips: Vec<Produced>,
    ranks: Vec<u64>,
}

/// Where a producer stands in the order of production: its root, then its rank there.
type Position<K> = (Arc<K>, u64);

/// The gap between two ranks laid out afresh: room for 24 halvings at one place (IPs put in,
/// one at a time, always before the same kept one) before the root is ranked again, and for
/// 2^40 IPs in a root.
const RANK_GAP: u64 = 1 << 24;

/// One IP a root produces: its scope and exposure.
type Produced = (ScopeId, Arc<ExposedIp>);

/// The IPs whose winner and shadows are to be decided again.
type Touched = BTreeSet<(ScopeId, IpAddr)>;

/// An IP's producers, sorted by position.
type Producers<K> = Vec<(Position<K>, Arc<ExposedIp>)>;

/// What the last [`IpLayout::lay`] did, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayoutStats {
    /// Roots whose IPs were taken out or put in (a changed one counts once).
    pub roots_laid: usize,
    /// IPs whose winner and shadows were decided again (a changed root's common prefix and
    /// suffix with its last IPs are not).
    pub ips_decided: usize,
    /// Laid out from scratch (the output had IPs before: see [`IpLayout::lay`]).
    pub from_scratch: bool,
}

/// The producers handed, owned.
fn owned(handed: &[Handed<'_>]) -> Vec<Produced> {
    handed.iter().map(|(s, e)| (*s, Arc::clone(e))).collect()
}

/// The layout kept between calls; see the module's documentation.
#[derive(Debug)]
pub struct IpLayout<K: Ord> {
    roots: BTreeMap<Arc<K>, LaidRoot>,
    producers: HashMap<(ScopeId, IpAddr), Producers<K>>,
    /// The winners, per scope.
    scopes: BTreeMap<ScopeId, IpMap>,
    /// The shadowed producers, by position.
    shadows: BTreeMap<Position<K>, (ScopeId, Arc<ExposedIp>)>,
    /// [`RANK_GAP`]; the tests use a small one, to rank roots again often.
    gap: u64,
    last: LayoutStats,
}

impl<K: Ord> Default for IpLayout<K> {
    fn default() -> Self {
        Self {
            roots: BTreeMap::new(),
            producers: HashMap::default(),
            scopes: BTreeMap::new(),
            shadows: BTreeMap::new(),
            gap: RANK_GAP,
            last: LayoutStats::default(),
        }
    }
}

/// A root that came or changed, with what it produces now (not iterated yet).
struct Arrival<K, I> {
    key: Arc<K>,
    version: u64,
    ips: I,
}

/// A producer as the driver hands it: borrowed, so that a changed root's kept IPs cost no
/// reference count (a router's 30k FIPs, one of them changed).
type Handed<'a> = (ScopeId, &'a Arc<ExposedIp>);

impl<K: Ord + Clone + std::fmt::Debug> IpLayout<K> {
    /// Expose the IPs of `roots` in `out`, as exposing them one by one in this order would.
    /// `roots` come in strictly increasing key order (the order of production), each with its
    /// result's version ([`next_version`]) and its IPs (iterated only when the version is not
    /// the one laid last: one version is one result of one root).
    ///
    /// `out` has no IPs yet, as the drivers lay theirs out last. When it has some (they come
    /// first, as one by one they would), the roots' IPs are exposed one by one after them and
    /// nothing is kept: the next call starts from scratch.
    pub fn lay<'a, Q, I>(
        &mut self,
        roots: impl IntoIterator<Item = (Q, u64, I)>,
        out: &mut ExposureSet,
    ) where
        Q: RootKey<Owned = K>,
        I: IntoIterator<Item = (ScopeId, &'a Arc<ExposedIp>)>,
    {
        if out.scopes.values().any(|s| !s.ips.is_empty()) {
            // The IPs exposed before come first: the roots' join them one by one, in order,
            // and nothing is kept (no driver lays out into such an output; the next call
            // starts afresh). Nothing to compare or decide.
            let (mut roots_laid, mut ips_decided) = (0, 0);
            for (_, _, ips) in roots {
                roots_laid += 1;
                for (scope, e) in ips {
                    out.scope_mut(scope).expose_ip(e.clone());
                    ips_decided += 1;
                }
            }
            *self = Self {
                gap: self.gap,
                last: LayoutStats {
                    roots_laid,
                    ips_decided,
                    from_scratch: true,
                },
                ..Self::default()
            };
            return;
        }
        let (gone, arrivals) = self.compare(roots);
        let mut touched = Touched::new();
        // A changed root is an arrival only (`gone` holds the keys no longer there).
        let roots_laid = arrivals.len() + gone.len();
        for key in gone {
            if let Some(root) = self.roots.remove(&key) {
                self.take_out(&key, &root.ips, &root.ranks, &mut touched);
            }
        }
        for a in arrivals {
            let handed: Vec<Handed<'a>> = a.ips.into_iter().collect();
            // A changed root keeps its key's allocation: its positions stay pointer-equal.
            let (key, mut laid) = match self.roots.remove_entry(&a.key) {
                Some((key, old)) => {
                    let laid = self.lay_again(&key, old, &handed, &mut touched);
                    (key, laid)
                }
                None => {
                    let ips = owned(&handed);
                    let ranks = self.fresh_ranks(ips.len());
                    self.put_in(&a.key, &ips, &ranks, &mut touched);
                    let laid = LaidRoot {
                        version: a.version,
                        ips,
                        ranks,
                    };
                    (a.key, laid)
                }
            };
            laid.version = a.version;
            self.roots.insert(key, laid);
        }
        let ips_decided = touched.len();
        for (scope, ip) in touched {
            self.decide(scope, ip);
        }
        self.last = LayoutStats {
            roots_laid,
            ips_decided,
            from_scratch: false,
        };
        for (scope, ips) in &self.scopes {
            if !ips.is_empty() {
                out.scope_mut(*scope).ips = ips.clone();
            }
        }
        // Each shadow once, as exposing one by one records them (through the scope's index:
        // many shadows, from overlapping tenant networks, cost no search of the list each).
        for (scope, e) in self.shadows.values() {
            out.scope_mut(*scope).shadow(e.clone());
        }
    }

    /// What the last [`Self::lay`] did.
    pub fn stats(&self) -> LayoutStats {
        self.last
    }

    /// A layout whose fresh ranks are `gap` apart (tests: a gap used up after a few edits).
    #[cfg(test)]
    fn with_gap(gap: u64) -> Self {
        Self {
            gap,
            ..Self::default()
        }
    }

    /// The roots laid last that are gone, and those that came or changed (with their IPs).
    fn compare<'a, Q, I>(
        &self,
        roots: impl IntoIterator<Item = (Q, u64, I)>,
    ) -> (Vec<Arc<K>>, Vec<Arrival<K, I>>)
    where
        Q: RootKey<Owned = K>,
        I: IntoIterator<Item = (ScopeId, &'a Arc<ExposedIp>)>,
    {
        let mut gone = Vec::new();
        let mut arrivals = Vec::new();
        let mut old = self.roots.iter().peekable();
        let arrive = |key: &Q, version: u64, ips: I| Arrival {
            key: Arc::new(key.to_owned_key()),
            version,
            ips,
        };
        let mut previous: Option<K> = None;
        for (key, version, ips) in roots {
            // The old roots before this one are gone.
            let same = loop {
                match old.peek() {
                    // One version is one result of one root: the same key, unchanged (the
                    // drivers' contract, checked in debug builds).
                    Some((k, laid)) if laid.version == version => {
                        debug_assert!(
                            key.cmp_owned(k).is_eq(),
                            "version {version} laid under {k:?}, now under another key"
                        );
                        break true;
                    }
                    Some((k, _)) => match key.cmp_owned(k) {
                        Ordering::Greater => {
                            gone.push(Arc::clone(k));
                            old.next();
                        }
                        Ordering::Equal => break false,
                        Ordering::Less => break false,
                    },
                    None => break false,
                }
            };
            if cfg!(debug_assertions) {
                let owned = key.to_owned_key();
                if let Some(p) = &previous {
                    assert!(*p < owned, "roots out of order: {p:?} then {owned:?}");
                }
                previous = Some(owned);
            }
            if same {
                old.next();
                continue;
            }
            arrivals.push(arrive(&key, version, ips));
            if old.peek().is_some_and(|(k, _)| key.cmp_owned(k).is_eq()) {
                old.next();
            }
        }
        gone.extend(old.map(|(k, _)| Arc::clone(k)));
        (gone, arrivals)
    }

    /// Lay a changed root again: only what differs between its old IPs and its new ones is
    /// taken out and put in. The common prefix and the common suffix keep their ranks (and
    /// their places in the root's list, which is edited in place: a kept IP is not copied), and
    /// the IPs in between take ranks in the gap between theirs; when the gap is too narrow, the
    /// root is taken out and put in again with fresh ranks. Returns the root as laid now.
    fn lay_again(
        &mut self,
        key: &Arc<K>,
        mut old: LaidRoot,
        new: &[Handed<'_>],
        touched: &mut Touched,
    ) -> LaidRoot {
        // The same producer: most often the same allocation (a driver that kept what did not
        // change), else an equal one (the position keeps the exposure laid before, as does
        // the root's list).
        let same =
            |(s, e): &Produced, (t, f): &Handed| s == t && (Arc::ptr_eq(e, f) || **e == ***f);
        let prefix = old
            .ips
            .iter()
            .zip(new)
            .take_while(|(o, n)| same(o, n))
            .count();
        let suffix = old.ips[prefix..]
            .iter()
            .rev()
            .zip(new[prefix..].iter().rev())
            .take_while(|(o, n)| same(o, n))
            .count();
        let (old_end, new_end) = (old.ips.len() - suffix, new.len() - suffix);
        // Fresh ranks start at one gap, so the rank below the first is 0.
        let below = prefix.checked_sub(1).map_or(0, |i| old.ranks[i]);
        let above = old.ranks.get(old_end).copied();
        let Some(middle) = self.ranks_between(below, above, new_end - prefix) else {
            self.take_out(key, &old.ips, &old.ranks, touched);
            let ips = owned(new);
            let ranks = self.fresh_ranks(ips.len());
            self.put_in(key, &ips, &ranks, touched);
            return LaidRoot { ips, ranks, ..old };
        };
        self.take_out(
            key,
            &old.ips[prefix..old_end],
            &old.ranks[prefix..old_end],
            touched,
        );
        let put = owned(&new[prefix..new_end]);
        self.put_in(key, &put, &middle, touched);
        old.ips.splice(prefix..old_end, put);
        old.ranks.splice(prefix..old_end, middle);
        old
    }

    /// Ranks for `n` IPs laid out afresh: one gap apart.
    fn fresh_ranks(&self, n: usize) -> Vec<u64> {
        (1..=n as u64).map(|i| i * self.gap).collect()
    }

    /// `n` strictly increasing ranks above `below` and under `above` (no bound: the root's
    /// end, where they are a gap apart), or `None` when they do not fit.
    fn ranks_between(&self, below: u64, above: Option<u64>, n: usize) -> Option<Vec<u64>> {
        let n = n as u64;
        let step = match above {
            Some(above) => (above - below) / (n + 1),
            None => {
                below.checked_add(n.checked_mul(self.gap)?)?;
                self.gap
            }
        };
        (step > 0).then(|| (1..=n).map(|i| below + i * step).collect())
    }

    /// Take a root's producers `ips`, of ranks `ranks`, out of the IPs they produced.
    fn take_out(&mut self, key: &Arc<K>, ips: &[Produced], ranks: &[u64], touched: &mut Touched) {
        for ((scope, e), rank) in ips.iter().zip(ranks) {
            let position = (key.clone(), *rank);
            if let Some(list) = self.producers.get_mut(&(*scope, e.ip)) {
                list.retain(|(p, _)| *p != position);
            }
            // Most layouts have no shadow at all: no lookup of a long key then.
            if !self.shadows.is_empty() {
                self.shadows.remove(&position);
            }
            touched.insert((*scope, e.ip));
        }
    }

    /// Put a root's producers `ips` in the IPs they produce, at ranks `ranks`.
    fn put_in(&mut self, key: &Arc<K>, ips: &[Produced], ranks: &[u64], touched: &mut Touched) {
        for ((scope, e), rank) in ips.iter().zip(ranks) {
            let position = (key.clone(), *rank);
            let list = self.producers.entry((*scope, e.ip)).or_default();
            let at = list.partition_point(|(p, _)| *p < position);
            list.insert(at, (position, e.clone()));
            touched.insert((*scope, e.ip));
        }
    }

    /// Decide an IP's winner and shadows again from its producers.
    fn decide(&mut self, scope: ScopeId, ip: IpAddr) {
        if self.producers.get(&(scope, ip)).is_none_or(Vec::is_empty) {
            self.producers.remove(&(scope, ip));
            if let Some(ips) = self.scopes.get_mut(&scope) {
                ips.remove(&ip);
            }
            return;
        }
        let list = &self.producers[&(scope, ip)];
        let winner = &list[0].1;
        let ips = self.scopes.entry(scope).or_default();
        // Only a different winner touches the map (a write copies its path, and the stages
        // after this one visit what it copied): a root recomputed alike produces equal
        // exposures in new allocations, which leave the map as it was.
        if !ips
            .get(&ip)
            .is_some_and(|w| Arc::ptr_eq(w, winner) || **w == **winner)
        {
            ips.insert(ip, winner.clone());
        }
        for (position, e) in list {
            if !self.shadows.is_empty() {
                self.shadows.remove(position);
            }
            if !Arc::ptr_eq(e, winner) && (e.kind != winner.kind || e.source != winner.source) {
                self.shadows.insert(position.clone(), (scope, e.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ExposureKind;
    use super::super::Vni;
    use super::*;

    /// A test root key: a number.
    struct Key(u8);

    impl RootKey for Key {
        type Owned = u8;
        fn to_owned_key(&self) -> u8 {
            self.0
        }
        fn cmp_owned(&self, owned: &u8) -> Ordering {
            self.0.cmp(owned)
        }
    }

    /// A root's IPs, in order.
    type List = Vec<(ScopeId, Arc<ExposedIp>)>;

    /// One root's result: its version and IPs.
    type Roots = BTreeMap<u8, (u64, List)>;

    fn exposed(b: [u8; 4]) -> (ScopeId, Arc<ExposedIp>) {
        let scope = if b[0].is_multiple_of(4) {
            ScopeId::Evpn(Vni::new(100).unwrap())
        } else {
            ScopeId::Global
        };
        let ip: IpAddr = format!("10.0.0.{}", b[1] % 8).parse().unwrap();
        let kind = [ExposureKind::FloatingIp, ExposureKind::TenantPort][usize::from(b[2] % 2)];
        let mut e = ExposedIp::announced(ip, kind, format!("port-{}", b[3] % 3));
        // A later producer of the same kind and source, with another value, is not shadowed.
        if b[3] & 8 != 0 {
            e.lladdr = Some("fa:16:3e:00:00:01".parse().unwrap());
        }
        (scope, Arc::new(e))
    }

    /// The reference: every root's IPs exposed one by one, in the order of production.
    fn one_by_one(roots: &Roots) -> ExposureSet {
        let mut out = ExposureSet::default();
        for (_, list) in roots.values() {
            for (scope, e) in list {
                out.scope_mut(*scope).expose_ip(e.clone());
            }
        }
        out
    }

    fn lay(layout: &mut IpLayout<u8>, roots: &Roots, out: &mut ExposureSet) {
        layout.lay(
            roots
                .iter()
                .map(|(k, (v, list))| (Key(*k), *v, list.iter().map(|(s, e)| (*s, e)))),
            out,
        );
    }

    /// A root's list edited in its middle: `cut` entries removed at `at` (both taken modulo
    /// what fits) and `ips` put there, every other entry kept as it was (the same allocation).
    /// An inserted entry with bit 6 of its third byte set is a copy of an entry of the list (the
    /// same allocation twice in one root), else a fresh one. Returns the IPs of the entries
    /// removed and put in: all that laying the root again may decide.
    fn edit(list: &mut List, at: u8, cut: u8, ips: &[[u8; 4]]) -> BTreeSet<(ScopeId, IpAddr)> {
        let at = usize::from(at) % (list.len() + 1);
        let cut = usize::from(cut) % (list.len() - at + 1);
        let inserted: Vec<_> = ips
            .iter()
            .map(|b| {
                if b[2] & 0x40 != 0 && !list.is_empty() {
                    list[usize::from(b[1]) % list.len()].clone()
                } else {
                    exposed(*b)
                }
            })
            .collect();
        let changed: Vec<_> = inserted.iter().map(|(s, e)| (*s, e.ip)).collect();
        let removed = list.splice(at..at + cut, inserted);
        removed.map(|(s, e)| (s, e.ip)).chain(changed).collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
        /// After every step of a random sequence (roots coming, going, recomputed with other
        /// IPs, recomputed alike, or recomputed from their last list with entries removed,
        /// replaced or inserted in the middle while the others keep their allocations), the
        /// layout equals exposing the same roots' IPs one by one from scratch: winners, shadows
        /// and their order, in every scope; after a step that only edits a root, no IP beyond
        /// those of the entries removed and put in is decided again (with the real gap between
        /// ranks; the small ones rank roots again after a few edits, which decides all their
        /// IPs). Eight IPs over up to a dozen entries a root give the same IP twice in one
        /// root, and two kinds and three sources give shadows.
        #[test]
        fn layout_equals_one_by_one_after_every_step(
            gap in proptest::sample::select(vec![1u64, 2, 3, 8, RANK_GAP]),
            steps in proptest::collection::vec(
                proptest::collection::vec(
                    (
                        0u8..12,
                        0u8..6,
                        proptest::collection::vec(proptest::prelude::any::<[u8; 4]>(), 0..10),
                        proptest::prelude::any::<(u8, u8)>(),
                    ),
                    1..6,
                ),
                1..12,
            ),
        ) {
            let mut roots = Roots::new();
            let mut layout = IpLayout::with_gap(gap);
            for step in steps {
                let mut bound = None;
                let single = step.len() == 1;
                for (key, action, ips, (at, cut)) in step {
                    match action {
                        0 => {
                            roots.remove(&key);
                        }
                        // Recomputed alike: a new version, the same IPs.
                        1 => {
                            if let Some((v, list)) = roots.get_mut(&key) {
                                *v = next_version();
                                *list = list.iter().map(|(s, e)| (*s, Arc::new((**e).clone()))).collect();
                            }
                        }
                        // Recomputed from its last list, edited in the middle (at most three
                        // entries put in).
                        2 | 3 => {
                            if let Some((v, list)) = roots.get_mut(&key) {
                                *v = next_version();
                                let changed = edit(list, at, cut, &ips[..ips.len().min(3)]);
                                bound = single.then_some(changed);
                            }
                        }
                        _ => {
                            roots.insert(key, (next_version(), ips.into_iter().map(exposed).collect()));
                        }
                    }
                }
                let mut out = ExposureSet::default();
                lay(&mut layout, &roots, &mut out);
                let expected = one_by_one(&roots);
                proptest::prop_assert_eq!(&out, &expected);
                for (id, scope) in &expected.scopes {
                    proptest::prop_assert_eq!(&out.scopes[id].shadowed, &scope.shadowed);
                }
                if let Some(changed) = bound.filter(|_| gap == RANK_GAP) {
                    proptest::prop_assert!(
                        layout.stats().ips_decided <= changed.len(),
                        "decided {:?}, edited {:?}", layout.stats(), changed
                    );
                }
            }
        }
    }

    /// One IP inserted in the middle of a root of 500, the others kept (the same allocations):
    /// that IP is the only one decided again, and the new map shares all but its path with the
    /// last one. The IPs after it keep their ranks (nothing of theirs is touched), and a later
    /// change to them still finds them.
    #[test]
    fn one_ip_inserted_in_a_large_root_decides_one_ip() {
        let tenant = |i: u32| {
            let ip = IpAddr::from([10, 1, (i / 256) as u8, (i % 256) as u8]);
            let e = ExposedIp::announced(ip, ExposureKind::TenantPort, format!("vm{i}"));
            (ScopeId::Global, Arc::new(e))
        };
        let mut roots = Roots::new();
        roots.insert(1, (next_version(), (0..500).map(tenant).collect()));
        let mut layout = IpLayout::default();
        let mut first = ExposureSet::default();
        lay(&mut layout, &roots, &mut first);
        assert_eq!(layout.stats().ips_decided, 500);

        // Each change re-decides one IP, and finds the producers after it at their kept
        // ranks, or the result would differ from one by one: one inserted in the middle;
        // one after it goes; one of another kind comes before a producer of its IP, which is
        // then shadowed; it goes again, and so does the shadow.
        let mut step = |change: &dyn Fn(&mut List)| {
            let (v, list) = roots.get_mut(&1).unwrap();
            *v = next_version();
            change(list);
            let mut out = ExposureSet::default();
            lay(&mut layout, &roots, &mut out);
            let one = LayoutStats {
                roots_laid: 1,
                ips_decided: 1,
                from_scratch: false,
            };
            assert_eq!(layout.stats(), one);
            let expected = one_by_one(&roots);
            assert_eq!(out, expected);
            assert_eq!(out.global().shadowed, expected.global().shadowed);
            out
        };
        let second = step(&|list| list.insert(200, tenant(1000)));
        assert_eq!(first.global().ips.diff(&second.global().ips).count(), 1);
        assert!(
            step(&|list| drop(list.remove(400)))
                .global()
                .shadowed
                .is_empty()
        );
        let fip = |list: &mut List| {
            let mut e = (*list[450].1).clone();
            e.kind = ExposureKind::FloatingIp;
            list.insert(100, (ScopeId::Global, Arc::new(e)));
        };
        assert_eq!(step(&fip).global().shadowed.len(), 1);
        assert!(
            step(&|list| drop(list.remove(100)))
                .global()
                .shadowed
                .is_empty()
        );
    }

    /// IPs put in, one at a time, always before the same kept IP: each takes a rank in the gap
    /// before it and is the only one decided again, until the gap is used up and the root is
    /// ranked afresh (all its IPs decided again); the result is exposing one by one throughout.
    #[test]
    fn a_used_up_gap_ranks_the_root_afresh() {
        let tenant = |i: u8| {
            let ip = IpAddr::from([10, 2, 0, i]);
            let e = ExposedIp::announced(ip, ExposureKind::TenantPort, format!("vm{i}"));
            (ScopeId::Global, Arc::new(e))
        };
        let mut roots = Roots::new();
        roots.insert(1, (next_version(), (0..4).map(tenant).collect()));
        // Ranks 8, 16, 24, 32: three halvings of the gap before the second IP.
        let mut layout = IpLayout::with_gap(8);
        let mut out = ExposureSet::default();
        lay(&mut layout, &roots, &mut out);
        let mut decided = Vec::new();
        for i in 10..15 {
            let (v, list) = roots.get_mut(&1).unwrap();
            *v = next_version();
            list.insert(1, tenant(i));
            let mut out = ExposureSet::default();
            lay(&mut layout, &roots, &mut out);
            assert_eq!(out, one_by_one(&roots));
            decided.push(layout.stats().ips_decided);
        }
        // Ranks 12, 10, 9 fit between 8 and 16; then the gap is used up: 8 IPs ranked afresh
        // (8 apart again), and the next fits once more.
        assert_eq!(decided, [1, 1, 1, 8, 1]);
    }

    /// An unchanged root is not looked at; one more root lays only its IPs, and the new map
    /// shares all but that path with the last one.
    #[test]
    fn one_more_root_lays_only_its_ips() {
        let mut roots = Roots::new();
        for k in 0..200u8 {
            let ip: IpAddr = format!("10.1.{k}.1").parse().unwrap();
            let e = ExposedIp::announced(ip, ExposureKind::TenantPort, format!("p{k}"));
            roots.insert(k, (next_version(), vec![(ScopeId::Global, Arc::new(e))]));
        }
        let mut layout = IpLayout::default();
        let mut first = ExposureSet::default();
        lay(&mut layout, &roots, &mut first);
        assert_eq!(layout.stats().roots_laid, 200);
        let ip: IpAddr = "10.2.0.1".parse().unwrap();
        let e = ExposedIp::announced(ip, ExposureKind::FloatingIp, "fip");
        roots.insert(250, (next_version(), vec![(ScopeId::Global, Arc::new(e))]));
        let mut second = ExposureSet::default();
        lay(&mut layout, &roots, &mut second);
        assert_eq!(
            layout.stats(),
            LayoutStats {
                roots_laid: 1,
                ips_decided: 1,
                from_scratch: false
            }
        );
        let (a, b) = (&first.global().ips, &second.global().ips);
        let diff: Vec<_> = a.diff(b).collect();
        assert_eq!(diff.len(), 1);
        assert_eq!(b.len(), 201);

        // A root recomputed alike (equal exposures, new allocations, a new version) is laid
        // again and leaves the map as it was: the next stages find nothing to visit.
        let (_, list) = &roots[&7];
        let alike: Vec<_> = list
            .iter()
            .map(|(s, e)| (*s, Arc::new((**e).clone())))
            .collect();
        roots.insert(7, (next_version(), alike));
        let mut third = ExposureSet::default();
        lay(&mut layout, &roots, &mut third);
        assert_eq!(layout.stats().roots_laid, 1);
        assert!(third.global().ips.ptr_eq(&second.global().ips));
    }

    /// IPs exposed before the layout come first, as one by one they would.
    #[test]
    fn ips_exposed_before_come_first() {
        let mut roots = Roots::new();
        let (scope, e) = exposed([1, 1, 0, 0]);
        roots.insert(1, (next_version(), vec![(scope, e)]));
        let mut out = ExposureSet::default();
        let (_, before) = exposed([1, 1, 1, 1]);
        out.expose_ip(before.clone());
        let mut layout = IpLayout::default();
        lay(&mut layout, &roots, &mut out);
        assert!(layout.stats().from_scratch);
        assert!(Arc::ptr_eq(&out.global().ips[&before.ip], &before));
        assert_eq!(out.global().shadowed.len(), 1);
    }
}
