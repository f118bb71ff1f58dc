//! Change tracking for incremental computations (issue 17): a model stamps each lookup a
//! driver can make with a new generation whenever a row that is (or was) in it changes; a
//! computation that remembers the generations of what it read ([`ReadSet`]) can tell whether
//! its result may have changed without recomputing it.

use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl<K> Default for Generations<K> {
    fn default() -> Self {
        Self {
            clock: 0,
            epoch: fresh_epoch(),
            stamps: HashMap::default(),
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
        }
    }
}

impl<K: Hash + Eq> Generations<K> {
    /// A row in `key` changed; `live_rows` is the model's size, which bounds the keys kept.
    pub(crate) fn stamp(&mut self, key: K, live_rows: usize) {
        // Keys of rows long gone (a cloud churns names) are dropped wholesale once they
        // outnumber the live rows; every reader then recomputes once.
        if self.stamps.len() > 4 * live_rows + 4096 {
            self.stamps.clear();
            self.epoch = fresh_epoch();
        }
        self.clock += 1;
        self.stamps.insert(key, self.clock);
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

/// What one computation read: each lookup with its generation then (the per-root caches of the
/// SB BGP, NB BGP, EVPN and stretched L2 drivers).
#[cfg(any(
    feature = "sb_bgp",
    feature = "nb_bgp",
    feature = "evpn",
    feature = "stretched_l2"
))]
#[derive(Debug, Clone)]
pub(crate) struct ReadSet<K> {
    epoch: u64,
    read: Vec<(K, u64)>,
}

#[cfg(any(
    feature = "sb_bgp",
    feature = "nb_bgp",
    feature = "evpn",
    feature = "stretched_l2"
))]
impl<K: Hash + Eq + Ord> ReadSet<K> {
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
        self.epoch == generations.epoch() && self.read.iter().all(|(k, g)| generations.get(k) == *g)
    }
}

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
