//! What differs between two desired states, class by class: one merge of each pair of ordered
//! sets, shared by the screening of a delta ([`super::validate::screen_delta`]) and its
//! application (the reconciler's `apply_delta`), which each walked every class twice before.

use std::collections::BTreeSet;

use crate::merge::{Side, differences, keyed};
use crate::system::{
    AddressSpec, DesiredSystem, NeighbourSpec, ProxyNeighbourSpec, RouteSpec, RuleSpec,
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

/// One merge of two ordered sets.
fn sides<'d, T: Ord>(old: &'d BTreeSet<T>, new: &'d BTreeSet<T>) -> Sides<'d, T> {
    let mut out = Sides::default();
    for side in differences(old.iter().map(keyed), new.iter().map(keyed)) {
        match side {
            Side::Old(element, ()) => out.removed.push(element),
            Side::New(element, ()) => out.added.push(element),
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
            let s = sides(&old, &new);
            proptest::prop_assert_eq!(s.added, new.difference(&old).collect::<Vec<_>>());
            proptest::prop_assert_eq!(s.removed, old.difference(&new).collect::<Vec<_>>());
        }
    }
}
