//! Change tracking for incremental computations (issue 17): a model stamps each lookup a
//! driver can make with a new generation whenever a row that is (or was) in it changes; a
//! computation that remembers the generations of what it read ([`ReadSet`]) can tell whether
//! its result may have changed without recomputing it.

use std::collections::VecDeque;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::hash::HashMap;

/// Every [`Generations`] starts in an epoch of its own, so results read from one model are
/// never taken as valid for another (a replaced or cloned model).
static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

fn fresh_epoch() -> u64 {
    NEXT_EPOCH.fetch_add(1, Ordering::Relaxed)
}

/// Generations of lookup keys `K`. A key never stamped reads 0; stamps come from one
/// increasing clock, so a key stamped, then read as 0 after the stamps were cleared, cannot be
/// mistaken for unchanged: clearing moves to a new epoch, which every reader compares first.
#[derive(Debug)]
pub(crate) struct Generations<K> {
    clock: u64,
    epoch: u64,
    stamps: HashMap<K, u64>,
    /// The keys of the latest stamps, oldest first: `log[i]` got stamp `log_from + i`. Lets a
    /// reader whose results are current to a clock find what changed since without checking
    /// every result it holds ([`Self::stamped_since`]: the stretched-L2 driver's gateways are
    /// the cloud's, 10k of them). Bounded by the live rows: a reader that fell further behind
    /// checks everything.
    log: VecDeque<K>,
    log_from: u64,
    /// Whether anyone asked for the log ([`Self::stamped_since`]): until then no key is
    /// logged, so a model no cache reads (a tool's, a test's) pays neither a key copy per stamp
    /// nor the memory. A reader's first question finds the log started after its clock and
    /// checks everything, as it would have anyway.
    log_wanted: AtomicBool,
}

impl<K> Default for Generations<K> {
    fn default() -> Self {
        Self {
            clock: 0,
            epoch: fresh_epoch(),
            stamps: HashMap::default(),
            log: VecDeque::new(),
            log_from: 1,
            log_wanted: AtomicBool::new(false),
        }
    }
}

impl<K: Clone> Clone for Generations<K> {
    /// A clone goes its own way from here: its own epoch, so nothing computed against the
    /// original is reused against it.
    fn clone(&self) -> Self {
        Self {
            clock: self.clock,
            epoch: fresh_epoch(),
            stamps: self.stamps.clone(),
            log: self.log.clone(),
            log_from: self.log_from,
            log_wanted: AtomicBool::new(self.log_wanted.load(Ordering::Relaxed)),
        }
    }
}

impl<K: Hash + Eq + Clone> Generations<K> {
    /// A row in `key` changed; `live_rows` is the model's size, which bounds the keys kept.
    pub(crate) fn stamp(&mut self, key: K, live_rows: usize) {
        // Keys of rows long gone (a cloud churns names) are dropped wholesale once they
        // outnumber the live rows; every reader then recomputes once.
        if self.stamps.len() > 4 * live_rows + 4096 {
            self.stamps.clear();
            self.epoch = fresh_epoch();
        }
        // The log keeps the stamps of about one change of every live row (a full download
        // is as many): a reader this far behind checks all it holds, as cheap as a stamp per
        // row it reads.
        if self.log.len() > live_rows + 1024 {
            let drop = self.log.len() / 2;
            self.log.drain(..drop);
            self.log_from += drop as u64;
        }
        self.clock += 1;
        if *self.log_wanted.get_mut() {
            self.log.push_back(key.clone());
        } else {
            // Nothing logged: the log starts after this stamp.
            self.log_from = self.clock + 1;
        }
        self.stamps.insert(key, self.clock);
    }

    /// The last stamp given: what a reader current now passes to [`Self::stamped_since`] next.
    pub(crate) fn clock(&self) -> u64 {
        self.clock
    }

    /// The keys stamped after `clock` (in the same epoch: see [`Self::epoch`]), with repeats;
    /// `None` when some of them are no longer logged.
    pub(crate) fn stamped_since(&self, clock: u64) -> Option<impl Iterator<Item = &K>> {
        self.log_wanted.store(true, Ordering::Relaxed);
        let skip = usize::try_from((clock + 1).checked_sub(self.log_from)?).ok()?;
        (clock <= self.clock).then(|| self.log.iter().skip(skip))
    }

    /// The generation of `key`: it changes whenever what a lookup of `key` returns may have.
    pub(crate) fn get(&self, key: &K) -> u64 {
        self.stamps.get(key).copied().unwrap_or(0)
    }

    /// Changes when every generation read before may have been forgotten.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// How much of a driver's last computation was reused: the roots it is made of (ports bound
/// here, gateways hosted here, their routers, their subnets), and how many of them had to be
/// recomputed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub roots: usize,
    pub recomputed: usize,
}

/// The readers' side: the per-root caches of the SB BGP, NB BGP, EVPN and stretched L2
/// drivers, and the Northbound monitor conditions.
mod reads {
    use std::hash::Hash;

    use super::Generations;
    use crate::hash::HashMap;
    use std::sync::atomic::Ordering;

    /// What one computation read: each lookup with its generation then (the per-root caches of the
    /// SB BGP, NB BGP, EVPN and stretched L2 drivers).
    #[derive(Debug, Clone)]
    pub(crate) struct ReadSet<K> {
        epoch: u64,
        read: Vec<(K, u64)>,
    }

    impl<K: Hash + Eq + Ord + Clone> ReadSet<K> {
        /// `read`: the lookups made, in any order and with repeats.
        pub(crate) fn new(generations: &Generations<K>, mut read: Vec<(K, u64)>) -> Self {
            read.sort_unstable();
            read.dedup();
            Self {
                epoch: generations.epoch(),
                read,
            }
        }

        /// Whether nothing read has changed since.
        pub(crate) fn still_valid(&self, generations: &Generations<K>) -> bool {
            self.epoch == generations.epoch()
                && self.read.iter().all(|(k, g)| generations.get(k) == *g)
        }
    }

    /// Which roots read each key, and the model's clock the roots are current to (issue 17): with
    /// the model's log of the keys it stamped ([`Generations::stamped_since`]), a per-root cache
    /// finds the roots an event may have changed by looking up the keys stamped since its last
    /// computation, instead of checking every root's reads (at 30k exposures on a gateway, the
    /// reads of 30 routers' thousand FIPs each, per event).
    #[derive(Debug)]
    pub(crate) struct Readers<K, R> {
        by_key: HashMap<K, crate::hash::HashSet<R>>,
        /// The epoch and clock of the model the roots are current to.
        current: Option<(u64, u64)>,
    }

    impl<K, R> Default for Readers<K, R> {
        fn default() -> Self {
            Self {
                by_key: HashMap::default(),
                current: None,
            }
        }
    }

    impl<K: Hash + Eq + Ord + Clone, R: Hash + Eq + Clone> Readers<K, R> {
        /// `root` read `read` (its new result's reads; [`Self::remove`] its old ones first).
        pub(crate) fn add(&mut self, root: &R, read: &ReadSet<K>) {
            for (key, _) in &read.read {
                self.by_key
                    .entry(key.clone())
                    .or_default()
                    .insert(root.clone());
            }
        }

        // The EVPN driver's gateways check their reads (a few dozen per event); only the other
        // drivers' caches replace and drop roots here.
        #[cfg_attr(
            not(any(feature = "sb_bgp", feature = "nb_bgp", feature = "stretched_l2")),
            allow(dead_code)
        )]
        /// `root`'s result that read `read` is dropped or replaced.
        pub(crate) fn remove(&mut self, root: &R, read: &ReadSet<K>) {
            for (key, _) in &read.read {
                if let Some(readers) = self.by_key.get_mut(key) {
                    readers.remove(root);
                    if readers.is_empty() {
                        self.by_key.remove(key);
                    }
                }
            }
        }

        // The EVPN driver's gateways check their reads (a few dozen per event); only the other
        // drivers' caches replace and drop roots here.
        #[cfg_attr(
            not(any(feature = "sb_bgp", feature = "nb_bgp", feature = "stretched_l2")),
            allow(dead_code)
        )]
        /// Drop the results in `results` that `keep` refuses (their roots are no longer
        /// here), and their reads. `root_of` names the root of a result's key.
        pub(crate) fn retain<Q, V, S: std::hash::BuildHasher>(
            &mut self,
            results: &mut std::collections::HashMap<Q, V, S>,
            root_of: impl Fn(&Q) -> R,
            read_of: impl Fn(&V) -> &ReadSet<K>,
            mut keep: impl FnMut(&Q) -> bool,
        ) {
            results.retain(|key, result| {
                keep(key) || {
                    self.remove(&root_of(key), read_of(result));
                    false
                }
            });
        }

        /// Every root is forgotten (the cache dropped its results).
        pub(crate) fn clear(&mut self) {
            self.by_key.clear();
            self.current = None;
        }

        /// The roots that read `key`.
        #[cfg(feature = "stretched_l2")]
        pub(crate) fn of(&self, key: &K) -> impl Iterator<Item = &R> {
            self.by_key.get(key).into_iter().flatten()
        }

        /// The keys `generations` stamped since the roots were last current ([`Self::now_current`]),
        /// with repeats; `None` when that cannot be told (the first computation, a new epoch, a log
        /// outrun): then every root is to be checked.
        pub(crate) fn stamped_since_current<'g>(
            &self,
            generations: &'g Generations<K>,
        ) -> Option<impl Iterator<Item = &'g K> + use<'g, K, R>> {
            self.current
                .filter(|(epoch, _)| *epoch == generations.epoch())
                .and_then(|(_, clock)| generations.stamped_since(clock))
        }

        /// The roots that read a key stamped since they were last current, or `None` as
        /// [`Self::stamped_since_current`]. Any other root's reads are unchanged.
        pub(crate) fn stale(
            &self,
            generations: &Generations<K>,
        ) -> Option<crate::hash::HashSet<R>> {
            let mut stale = crate::hash::HashSet::default();
            for key in self.stamped_since_current(generations)? {
                if let Some(readers) = self.by_key.get(key) {
                    stale.extend(readers.iter().cloned());
                }
            }
            Some(stale)
        }

        /// As after the model forgot what changed: the next [`Self::stale`] cannot tell (tests of
        /// the caches' fallback, which checks every root).
        #[cfg(test)]
        pub(crate) fn lose_track(&mut self) {
            self.current = None;
        }

        /// Every root was brought current to `generations`.
        pub(crate) fn now_current(&mut self, generations: &Generations<K>) {
            // From now on the model logs what it stamps, so the next call can tell.
            generations.log_wanted.store(true, Ordering::Relaxed);
            self.current = Some((generations.epoch(), generations.clock()));
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The roots [`Readers::stale`] names are exactly those whose reads are no longer valid,
        /// through random rounds of stamps and roots recomputed, added and dropped; and when it
        /// cannot tell (first round, new epoch, log outrun) it says so.
        #[test]
        fn the_stale_roots_are_those_whose_reads_changed() {
            use proptest::prelude::*;
            use proptest::test_runner::TestRunner;
            // A round: keys stamped, then which roots are recomputed (re-read keys), dropped.
            let round = (
                prop::collection::vec(0u8..12, 0..6),
                prop::collection::vec((0u8..6, prop::collection::vec(0u8..12, 0..4)), 0..3),
                prop::collection::vec(0u8..6, 0..2),
                any::<bool>(),
            );
            let mut runner = TestRunner::default();
            runner
                .run(&prop::collection::vec(round, 1..25), |rounds| {
                    let mut g: Generations<u8> = Generations::default();
                    let mut readers: Readers<u8, u8> = Readers::default();
                    let mut roots: std::collections::BTreeMap<u8, ReadSet<u8>> = Default::default();
                    for (stamps, recompute, drop, flood) in rounds {
                        for k in stamps {
                            g.stamp(k, 4);
                        }
                        if flood {
                            // Outruns the log (live rows 4: about 1028 kept).
                            for _ in 0..1100 {
                                g.stamp(200, 4);
                            }
                        }
                        let stale = readers.stale(&g);
                        let invalid: std::collections::BTreeSet<u8> = roots
                            .iter()
                            .filter(|(_, r)| !r.still_valid(&g))
                            .map(|(k, _)| *k)
                            .collect();
                        match stale {
                            Some(stale) => {
                                let stale: std::collections::BTreeSet<u8> =
                                    stale.into_iter().collect();
                                prop_assert_eq!(&stale, &invalid);
                            }
                            None => prop_assert!(
                                flood || readers.current.is_none(),
                                "unknown although the log holds every stamp"
                            ),
                        }
                        // Bring every root current: the invalid ones recomputed with what they
                        // read before, some recomputed with new reads, some dropped.
                        let mut again: Vec<(u8, Vec<u8>)> = invalid
                            .iter()
                            .map(|r| (*r, roots[r].read.iter().map(|(k, _)| *k).collect()))
                            .collect();
                        again.extend(recompute);
                        for (root, keys) in again {
                            let read =
                                ReadSet::new(&g, keys.iter().map(|k| (*k, g.get(k))).collect());
                            if let Some(old) = roots.remove(&root) {
                                readers.remove(&root, &old);
                            }
                            readers.add(&root, &read);
                            roots.insert(root, read);
                        }
                        for root in drop {
                            if let Some(old) = roots.remove(&root) {
                                readers.remove(&root, &old);
                            }
                        }
                        readers.now_current(&g);
                    }
                    // No reader is kept of a key no root reads.
                    let read: std::collections::BTreeSet<u8> = roots
                        .values()
                        .flat_map(|r| r.read.iter().map(|(k, _)| *k))
                        .collect();
                    let indexed: std::collections::BTreeSet<u8> =
                        readers.by_key.keys().copied().collect();
                    prop_assert_eq!(indexed, read);
                    Ok(())
                })
                .unwrap();
        }
    }
}

pub(crate) use reads::{ReadSet, Readers};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_valid_until_its_key_is_stamped() {
        let mut g: Generations<&str> = Generations::default();
        g.stamp("a", 1);
        let reads = ReadSet::new(&g, vec![("a", g.get(&"a")), ("b", g.get(&"b"))]);
        assert!(reads.still_valid(&g));
        g.stamp("c", 1);
        assert!(reads.still_valid(&g), "an unread key changed");
        g.stamp("b", 1);
        assert!(
            !reads.still_valid(&g),
            "a key read as never stamped changed"
        );
    }

    /// Nothing is logged until someone asks; the first question, about stamps before the
    /// log started, is told it cannot be answered, the next ones are.
    #[test]
    fn the_log_starts_when_first_asked_for() {
        let mut g: Generations<u32> = Generations::default();
        g.stamp(1, 0);
        g.stamp(2, 0);
        assert!(g.log.is_empty(), "logged before anyone asked");
        assert!(g.stamped_since(0).is_none());
        let at = g.clock();
        assert_eq!(g.stamped_since(at).map(Iterator::count), Some(0));
        g.stamp(3, 0);
        let since: Vec<u32> = g.stamped_since(at).unwrap().copied().collect();
        assert_eq!(since, [3]);
        // A clone logs on, as the original does.
        let mut c = g.clone();
        c.stamp(4, 0);
        assert_eq!(c.stamped_since(at).unwrap().count(), 2);
    }

    #[test]
    fn the_keys_stamped_since_a_clock_are_told_while_logged() {
        let mut g: Generations<u32> = Generations::default();
        assert_eq!(g.stamped_since(0).map(Iterator::count), Some(0));
        g.stamp(7, 0);
        g.stamp(8, 0);
        let at = g.clock();
        assert_eq!(g.stamped_since(at).map(Iterator::count), Some(0));
        g.stamp(9, 0);
        g.stamp(7, 0);
        let since: Vec<u32> = g.stamped_since(at).unwrap().copied().collect();
        assert_eq!(since, [9, 7]);
        assert_eq!(g.stamped_since(0).unwrap().count(), 4);
        // Past the live rows (and some), the oldest are forgotten: a reader that far behind
        // is told so, a recent one still gets its keys.
        for k in 0..3000 {
            g.stamp(k, 10);
        }
        let recent = g.clock() - 5;
        assert!(g.stamped_since(at).is_none());
        assert_eq!(g.stamped_since(recent).unwrap().count(), 5);
        assert_eq!(
            g.stamped_since(recent)
                .unwrap()
                .copied()
                .collect::<Vec<_>>(),
            [2995, 2996, 2997, 2998, 2999]
        );
    }

    #[test]
    fn clearing_or_cloning_invalidates_every_read() {
        let mut g: Generations<u32> = Generations::default();
        g.stamp(1, 0);
        let reads = ReadSet::new(&g, vec![(1, g.get(&1))]);
        let copy = g.clone();
        assert!(!reads.still_valid(&copy), "a clone has its own epoch");
        // Past 4 × live + 4096 keys the stamps are forgotten and the epoch moves on.
        for k in 2..5000 {
            g.stamp(k, 0);
        }
        g.stamp(1, 0);
        let reads = ReadSet::new(&g, vec![(1, g.get(&1)), (4999, g.get(&4999))]);
        for k in 5000..9200 {
            g.stamp(k, 0);
        }
        assert_eq!(g.get(&4999), 0, "forgotten");
        assert!(!reads.still_valid(&g));
    }
}
