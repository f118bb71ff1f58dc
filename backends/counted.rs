//! The rendered state of a delta render, whose objects are counted by their producers.
//!
//! A backend that renders as a delta (issue 17) puts each exposure's objects into its state
//! when the exposure comes and takes them out again when it goes. Two exposures may render the
//! same object (two IPv6 addresses of one subnet proxy the same network; a hostile subnet's rule
//! equal to an IP's): such an object must stay until its last producer is gone, so a second
//! producer is counted rather than inserted again.

use std::collections::BTreeMap;

use crate::system::DesiredSystem;

/// One object of a [`DesiredSystem`] that a single exposure renders, put in and taken out one
/// at a time.
pub(crate) trait SystemObject: Ord + Clone + std::fmt::Debug {
    /// Insert into `system`; false when it was there already.
    fn insert_into(self, system: &mut DesiredSystem) -> bool;

    /// Remove from `system`; false when it was not there.
    fn remove_from(&self, system: &mut DesiredSystem) -> bool;
}

/// A [`DesiredSystem`] whose objects of kind `O` leave only with their last producer.
///
/// The system and the counts are one value so that the counts always describe the system they
/// were taken in.
#[derive(Debug)]
pub(crate) struct CountedSystem<O> {
    system: DesiredSystem,
    /// Producers of an object beyond the first (absent: one producer). Most objects have one
    /// producer, so only the few shared ones cost an entry.
    extra: BTreeMap<O, u32>,
}

impl<O: SystemObject> CountedSystem<O> {
    /// Start from `system`: each object it already holds counts as one producer that is never
    /// taken out (a backend's own objects, which an exposure may render too).
    pub(crate) fn new(system: DesiredSystem) -> Self {
        Self {
            system,
            extra: BTreeMap::new(),
        }
    }

    pub(crate) fn system(&self) -> &DesiredSystem {
        &self.system
    }

    /// One more producer of `object`; true when the object entered the system (it was not
    /// there before).
    pub(crate) fn count_in(&mut self, object: &O) -> bool {
        // Taken by reference: a caller that tells others what entered keeps the object
        // without a second copy. Objects are small and own no heap memory (interface names are
        // inline), so the copies made here are cheap.
        if object.clone().insert_into(&mut self.system) {
            return true;
        }
        *self.extra.entry(object.clone()).or_insert(0) += 1;
        false
    }

    /// One producer less of `object`; true when it was the last one and the object left the
    /// system.
    pub(crate) fn count_out(&mut self, object: &O) -> bool {
        match self.extra.get_mut(object) {
            Some(1) => {
                self.extra.remove(object);
                false
            }
            Some(n) => {
                *n -= 1;
                false
            }
            None => {
                let removed = object.remove_from(&mut self.system);
                // Only what was counted in is counted out: the rendering is pure, so an
                // exposure taken out renders what it put in.
                debug_assert!(removed, "counted out but not in the system: {object:?}");
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::AddressSpec;
    use crate::types::InterfaceName;

    /// The smallest object: an address of the system.
    #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
    struct Address(AddressSpec);

    impl SystemObject for Address {
        fn insert_into(self, system: &mut DesiredSystem) -> bool {
            system.addresses.insert(self.0).is_none()
        }

        fn remove_from(&self, system: &mut DesiredSystem) -> bool {
            system.addresses.remove(&self.0).is_some()
        }
    }

    fn address(a: &str) -> Address {
        Address(AddressSpec {
            dev: InterfaceName::new("bgp-nic").unwrap(),
            addr: a.parse().unwrap(),
        })
    }

    fn has(counted: &CountedSystem<Address>, object: &Address) -> bool {
        counted.system().addresses.contains(&object.0)
    }

    #[test]
    fn an_object_stays_while_a_producer_is_left() {
        let mut counted = CountedSystem::new(DesiredSystem::default());
        let a = address("192.0.2.1/32");
        assert!(counted.count_in(&a), "the first producer brings it in");
        assert!(!counted.count_in(&a), "a second one is counted");
        assert!(!counted.count_in(&a), "and a third");
        assert!(!counted.count_out(&a), "two producers are left");
        assert!(has(&counted, &a));
        assert!(!counted.count_out(&a), "one producer is left");
        assert!(has(&counted, &a));
        assert!(counted.count_out(&a), "it leaves with the last one");
        assert!(!has(&counted, &a));
        assert!(counted.extra.is_empty(), "no count is left behind");
        // Counted again from nothing: one producer brings it in and takes it out.
        assert!(counted.count_in(&a));
        assert!(counted.count_out(&a));
        assert!(counted.system().addresses.is_empty());
    }

    #[test]
    fn objects_are_counted_apart() {
        let mut counted = CountedSystem::new(DesiredSystem::default());
        let (a, b) = (address("192.0.2.1/32"), address("192.0.2.2/32"));
        assert!(counted.count_in(&a));
        assert!(counted.count_in(&b));
        assert!(!counted.count_in(&b));
        assert!(counted.count_out(&a), "b's second producer does not keep a");
        assert!(!counted.count_out(&b));
        assert!(has(&counted, &b));
        assert!(counted.count_out(&b));
        assert!(counted.system().addresses.is_empty());
    }

    #[test]
    fn what_the_system_held_stays() {
        let a = address("192.0.2.1/32");
        let mut system = DesiredSystem::default();
        a.clone().insert_into(&mut system);
        let mut counted = CountedSystem::new(system);
        assert!(!counted.count_in(&a), "it was there: a second producer");
        assert!(!counted.count_out(&a), "the system's own producer is left");
        assert!(has(&counted, &a));
    }
}
