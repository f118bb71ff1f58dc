//! What differs between two desired states, class by class: one merge of each pair of ordered
//! sets, shared by the screening of a delta ([`super::validate::screen_delta`]) and its
//! application (the reconciler's `apply_delta`), which each walked every class twice before.

use imbl::ordset::DiffItem;

use crate::system::{
    AddressSpec, DesiredSystem, LocalRouteSuppression, NeighbourSpec, ObjectSet,
    ProxyNeighbourSpec, RouteSpec, RuleSpec,
};

/// The objects of one class only the new state has (in its order) and only the old one had.
pub(crate) struct Sides<'d, T> {
    pub added: Vec<&'d T>,
    pub removed: Vec<&'d T>,
}

impl<T> Default for Sides<'_, T> {
    fn default() -> Self {
        Self {
            added: Vec::new(),
            removed: Vec::new(),
        }
    }
}

/// What differs between two versions of a class: the parts of their trees they share (all but
/// the paths the render changed, when one is derived from the other) are not visited.
fn sides<'d, T: Ord + Clone>(old: &'d ObjectSet<T>, new: &'d ObjectSet<T>) -> Sides<'d, T> {
    let mut out = Sides::default();
    for item in old.diff(new) {
        match item {
            DiffItem::Add(element) => out.added.push(element),
            DiffItem::Remove(element) => out.removed.push(element),
        }
    }
    out
}

/// What differs between an old and a new desired state, for the classes a delta applies.
#[derive(Default)]
pub(crate) struct Changes<'d> {
    pub addresses: Sides<'d, AddressSpec>,
    pub rules: Sides<'d, RuleSpec>,
    pub routes: Sides<'d, RouteSpec>,
    pub neighbours: Sides<'d, NeighbourSpec>,
    pub proxy_neighbours: Sides<'d, ProxyNeighbourSpec>,
    pub local_routes: Sides<'d, LocalRouteSuppression>,
}

impl<'d> Changes<'d> {
    pub(crate) fn between(old: &'d DesiredSystem, new: &'d DesiredSystem) -> Self {
        if std::ptr::eq(old, new) {
            return Self::default();
        }
        Self {
            addresses: sides(&old.addresses, &new.addresses),
            rules: sides(&old.rules, &new.rules),
            routes: sides(&old.routes, &new.routes),
            neighbours: sides(&old.neighbours, &new.neighbours),
            proxy_neighbours: sides(&old.proxy_neighbours, &new.proxy_neighbours),
            local_routes: sides(&old.suppressed_local_routes, &new.suppressed_local_routes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A merge gives what the two set differences give, in their order.
        #[test]
        fn sides_are_the_two_differences(
            old in proptest::collection::btree_set(0u8..40, 0..30),
            new in proptest::collection::btree_set(0u8..40, 0..30),
        ) {
            let (o, n): (ObjectSet<u8>, ObjectSet<u8>) =
                (old.iter().copied().collect(), new.iter().copied().collect());
            let s = sides(&o, &n);
            proptest::prop_assert_eq!(s.added, new.difference(&old).collect::<Vec<_>>());
            proptest::prop_assert_eq!(s.removed, old.difference(&new).collect::<Vec<_>>());
        }

        /// A version derived from another by a few changes (sharing most of its tree, as the
        /// render's next state does) gives the same differences as two unrelated sets.
        #[test]
        fn sides_of_a_derived_version(
            old in proptest::collection::btree_set(0u16..3000, 0..2000),
            changes in proptest::collection::vec((0u16..3000, proptest::bool::ANY), 0..20),
        ) {
            let o: ObjectSet<u16> = old.iter().copied().collect();
            let mut n = o.clone();
            let mut new = old.clone();
            for (e, add) in changes {
                if add {
                    n.insert(e);
                    new.insert(e);
                } else {
                    n.remove(&e);
                    new.remove(&e);
                }
            }
            let s = sides(&o, &n);
            proptest::prop_assert_eq!(s.added, new.difference(&old).collect::<Vec<_>>());
            proptest::prop_assert_eq!(s.removed, old.difference(&new).collect::<Vec<_>>());
        }
    }
}
