//! The underlay rendering as a delta (issue 17): an event that exposes one more IP on a gateway
//! already exposing 30k renders that IP's objects, not 120k objects again.
//!
//! The rendered state is kept between renders with the exposures it came from. A new exposure
//! set is compared with the last one key by key (a merge of two ordered maps: comparisons, no
//! allocation); an exposure that went or changed has its objects taken out (rendered again
//! from the old value: the rendering is pure and its context unchanged, so the same objects),
//! one that came or changed has its objects put in. Two exposures may render the same object
//! (two IPv6 addresses of one subnet proxy the same network; a hostile subnet's rule equal to
//! an IP's): such an object is counted, and leaves only with its last producer.
//!
//! What is not one exposure's (the VRF and NIC, the bridges, ownership, the tables and whether
//! routes are redistributed) is rendered every time (a few objects per bridge); when it differs
//! from the last render, everything is rendered again. The result equals
//! [`super::render::render`] of the same inputs, which the tests check after every step of
//! random sequences.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::exposure::{ExposedSubnet, ExposureSet};
use crate::plugin::Rendered;
use crate::system::DesiredSystem;

use super::render::{
    Facts, ItemContext, Object, Sink, UnderlaySettings, render_base, render_ip, render_route,
    render_subnet,
};

/// One exposure's objects and skips, recorded to be added or taken out.
#[derive(Default)]
struct Recorded {
    objects: Vec<Object>,
    skips: Vec<(String, String)>,
}

impl Sink for Recorded {
    fn object(&mut self, object: Object) {
        self.objects.push(object);
    }

    fn skip(&mut self, row: &str, reason: String) {
        self.skips.push((row.to_owned(), reason));
    }
}

/// Which exposure a skip belongs to, ordered as a full render reports them: IPs, then routes,
/// then subnets, each in its map's order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ItemKey {
    Ip(IpAddr),
    Route(IpNet),
    Subnet(ExposedSubnet),
}

/// The last render and what it came from.
struct State {
    base: Rendered,
    context: ItemContext,
    exposures: Arc<ExposureSet>,
    system: DesiredSystem,
    /// Producers of an object beyond the first (absent: one producer).
    extra: BTreeMap<Object, u32>,
    /// The skips of the exposures that have some.
    skips: BTreeMap<ItemKey, Vec<(String, String)>>,
}

impl State {
    fn add(&mut self, key: ItemKey, recorded: Recorded) {
        for object in recorded.objects {
            if let Err(object) = insert(&mut self.system, object) {
                *self.extra.entry(object).or_insert(0) += 1;
            }
        }
        if !recorded.skips.is_empty() {
            self.skips.insert(key, recorded.skips);
        }
    }

    fn take_out(&mut self, key: &ItemKey, recorded: Recorded) {
        for object in recorded.objects {
            match self.extra.get_mut(&object) {
                Some(1) => {
                    self.extra.remove(&object);
                }
                Some(n) => *n -= 1,
                None => {
                    object.remove_from(&mut self.system);
                }
            }
        }
        self.skips.remove(key);
    }
}

/// Insert `object`, or give it back when it is there already.
fn insert(system: &mut DesiredSystem, object: Object) -> Result<(), Object> {
    // Rendered objects are small; cloning one to count a second producer is rare.
    let copy = object.clone();
    if object.insert_into(system) {
        Ok(())
    } else {
        Err(copy)
    }
}

/// What the last render did, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderStats {
    /// Rendered from scratch (first render, or what every exposure depends on changed).
    pub full: bool,
    /// Exposures whose objects were added or taken out (a changed one counts once).
    pub exposures_rendered: usize,
}

/// The underlay rendering, kept between calls; see the module's documentation.
#[derive(Default)]
pub struct IncrementalRender {
    state: Option<State>,
    last: RenderStats,
}

impl IncrementalRender {
    /// What [`super::render::render`] returns for these inputs.
    pub fn render(
        &mut self,
        settings: &UnderlaySettings,
        facts: &Facts,
        exposures: &Arc<ExposureSet>,
    ) -> Rendered {
        let base = render_base(settings, facts, exposures);
        let context = ItemContext::of(facts, exposures);
        let reusable = self
            .state
            .as_ref()
            .is_some_and(|s| s.base == base && s.context == context);
        if reusable {
            let state = self.state.as_mut().expect("checked above");
            let rendered = update(state, settings, exposures);
            state.exposures = exposures.clone();
            self.last = RenderStats {
                full: false,
                exposures_rendered: rendered,
            };
        } else {
            self.state = Some(from_scratch(settings, base, context, exposures));
            let global = exposures.global();
            self.last = RenderStats {
                full: true,
                exposures_rendered: global.ips.len() + global.routes.len() + global.subnets.len(),
            };
        }
        let state = self.state.as_ref().expect("set above");
        let mut out = Rendered {
            system: state.system.clone(),
            ..Rendered::default()
        };
        for (row, reason) in state.base.skipped.iter().map(|s| (&s.row, &s.reason)) {
            out.skip(row.clone(), reason.clone());
        }
        for (row, reason) in state.skips.values().flatten() {
            out.skip(row.clone(), reason.clone());
        }
        out
    }

    /// What the last [`Self::render`] did.
    pub fn stats(&self) -> RenderStats {
        self.last
    }
}

fn from_scratch(
    settings: &UnderlaySettings,
    base: Rendered,
    context: ItemContext,
    exposures: &Arc<ExposureSet>,
) -> State {
    let mut state = State {
        system: DesiredSystem::default(),
        base,
        context,
        exposures: exposures.clone(),
        extra: BTreeMap::new(),
        skips: BTreeMap::new(),
    };
    // The base's objects are counted like an exposure's: an exposure may render one of them.
    let base = &state.base.system;
    state.system = DesiredSystem {
        addresses: Default::default(),
        rules: Default::default(),
        routes: Default::default(),
        neighbours: Default::default(),
        proxy_neighbours: Default::default(),
        ..base.clone()
    };
    let mut objects = Vec::new();
    objects.extend(base.addresses.iter().cloned().map(Object::Address));
    objects.extend(base.rules.iter().cloned().map(Object::Rule));
    objects.extend(base.routes.iter().cloned().map(Object::Route));
    objects.extend(base.neighbours.iter().cloned().map(Object::Neighbour));
    objects.extend(
        base.proxy_neighbours
            .iter()
            .cloned()
            .map(Object::ProxyNeighbour),
    );
    for object in objects {
        if let Err(object) = insert(&mut state.system, object) {
            *state.extra.entry(object).or_insert(0) += 1;
        }
    }
    let global = exposures.global();
    for exposed in global.ips.values() {
        let mut r = Recorded::default();
        render_ip(settings, &state.context.tables, exposed, &mut r);
        state.add(ItemKey::Ip(exposed.ip), r);
    }
    for route in global.routes.values() {
        let mut r = Recorded::default();
        render_route(settings, state.context.redistributes_kernel, route, &mut r);
        state.add(ItemKey::Route(route.prefix), r);
    }
    for subnet in &global.subnets {
        let mut r = Recorded::default();
        render_subnet(settings, &state.context.tables, subnet, &mut r);
        state.add(ItemKey::Subnet(subnet.clone()), r);
    }
    state
}

/// One side of a merge of two ordered collections.
enum Side<'a, K, V> {
    Old(&'a K, &'a V),
    New(&'a K, &'a V),
}

/// The entries that differ between two maps ordered by key: removed or changed ones as `Old`,
/// added or changed ones as `New`. Equal entries cost one comparison.
fn differences<'a, K: Ord + 'a, V: PartialEq + 'a>(
    old: impl IntoIterator<Item = (&'a K, &'a V)>,
    new: impl IntoIterator<Item = (&'a K, &'a V)>,
) -> Vec<Side<'a, K, V>> {
    let mut out = Vec::new();
    let (mut old, mut new) = (old.into_iter().peekable(), new.into_iter().peekable());
    loop {
        match (old.peek(), new.peek()) {
            (None, None) => return out,
            (Some(&(k, v)), None) => {
                out.push(Side::Old(k, v));
                old.next();
            }
            (None, Some(&(k, v))) => {
                out.push(Side::New(k, v));
                new.next();
            }
            (Some(&(ko, vo)), Some(&(kn, vn))) => match ko.cmp(kn) {
                std::cmp::Ordering::Less => {
                    out.push(Side::Old(ko, vo));
                    old.next();
                }
                std::cmp::Ordering::Greater => {
                    out.push(Side::New(kn, vn));
                    new.next();
                }
                std::cmp::Ordering::Equal => {
                    if vo != vn {
                        out.push(Side::Old(ko, vo));
                        out.push(Side::New(kn, vn));
                    }
                    old.next();
                    new.next();
                }
            },
        }
    }
}

/// Apply what differs between the exposures `state` was rendered from and `exposures`;
/// returns how many exposures were rendered.
fn update(state: &mut State, settings: &UnderlaySettings, exposures: &Arc<ExposureSet>) -> usize {
    let last = state.exposures.clone();
    if Arc::ptr_eq(&last, exposures) {
        return 0;
    }
    let (old, new) = (last.global(), exposures.global());
    let mut rendered = 0;
    let tables = state.context.tables.clone();
    for side in differences(&old.ips, &new.ips) {
        rendered += 1;
        let mut r = Recorded::default();
        match side {
            Side::Old(ip, exposed) => {
                render_ip(settings, &tables, exposed, &mut r);
                state.take_out(&ItemKey::Ip(*ip), r);
            }
            Side::New(ip, exposed) => {
                render_ip(settings, &tables, exposed, &mut r);
                state.add(ItemKey::Ip(*ip), r);
            }
        }
    }
    let redistributes = state.context.redistributes_kernel;
    for side in differences(&old.routes, &new.routes) {
        rendered += 1;
        let mut r = Recorded::default();
        match side {
            Side::Old(prefix, route) => {
                render_route(settings, redistributes, route, &mut r);
                state.take_out(&ItemKey::Route(*prefix), r);
            }
            Side::New(prefix, route) => {
                render_route(settings, redistributes, route, &mut r);
                state.add(ItemKey::Route(*prefix), r);
            }
        }
    }
    // Subnets are a set: a changed subnet is one removed and one added.
    let keyed = |s| (s, &());
    for side in differences(old.subnets.iter().map(keyed), new.subnets.iter().map(keyed)) {
        rendered += 1;
        let mut r = Recorded::default();
        match side {
            Side::Old(subnet, ()) => {
                render_subnet(settings, &tables, subnet, &mut r);
                state.take_out(&ItemKey::Subnet(subnet.clone()), r);
            }
            Side::New(subnet, ()) => {
                render_subnet(settings, &tables, subnet, &mut r);
                state.add(ItemKey::Subnet(subnet.clone()), r);
            }
        }
    }
    rendered
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
