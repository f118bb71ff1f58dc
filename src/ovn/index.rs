//! Ordered index entries of the OVN models: readers walk them in a deterministic order
//! (exposures and their "first producer wins" rule must not depend on hash order) without
//! sorting per event.

use std::collections::BTreeSet;

use crate::hash::HashMap;

/// Add `item` to the entry `key` of `index`.
pub(crate) fn insert<T: Ord>(index: &mut HashMap<String, BTreeSet<T>>, key: &str, item: T) {
    index.entry(key.to_owned()).or_default().insert(item);
}

/// Take `item` out of the entry `key` of `index`, and the entry out once empty.
pub(crate) fn remove<T: Ord>(index: &mut HashMap<String, BTreeSet<T>>, key: &str, item: &T) {
    if let Some(set) = index.get_mut(key) {
        set.remove(item);
        if set.is_empty() {
            index.remove(key);
        }
    }
}
