//! The underlay rendering as a delta (issue 17): an event that exposes one more IP on a gateway
//! already exposing 30k renders that IP's objects, not 120k objects again.
//!
//! The rendered state is kept between renders with the exposures it came from. A new exposure
//! set is compared with the last one key by key (the IPs by the nodes their persistent maps do
//! not share, the rest by a merge of two ordered maps); an exposure that went or changed has its objects taken out (rendered again
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

use super::merge::{Side, differences, keyed};
use crate::backends::counted::CountedSystem;
use crate::exposure::{ExposedIp, ExposedRoute, ExposedSubnet, ExposureSet, ip_changes};
use crate::plugin::Rendered;

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

/// One exposure of the global scope, under its key there.
#[derive(Clone, Copy)]
enum Item<'a> {
    Ip(&'a IpAddr, &'a ExposedIp),
    Route(&'a IpNet, &'a ExposedRoute),
    Subnet(&'a ExposedSubnet),
}

impl Item<'_> {
    fn key(self) -> ItemKey {
        match self {
            Item::Ip(ip, _) => ItemKey::Ip(*ip),
            Item::Route(prefix, _) => ItemKey::Route(*prefix),
            Item::Subnet(subnet) => ItemKey::Subnet(subnet.clone()),
        }
    }

    /// Its objects and skips, as a full render makes them.
    fn render(self, settings: &UnderlaySettings, context: &ItemContext) -> Recorded {
        let mut r = Recorded::default();
        match self {
            Item::Ip(_, exposed) => render_ip(settings, &context.tables, exposed, &mut r),
            Item::Route(_, route) => {
                render_route(settings, context.redistributes_kernel, route, &mut r)
            }
            Item::Subnet(subnet) => render_subnet(settings, &context.tables, subnet, &mut r),
        }
        r
    }
}

/// The last render and what it came from.
struct State {
    base: Rendered,
    context: ItemContext,
    exposures: Arc<ExposureSet>,
    /// The base's objects and the exposures'.
    counted: CountedSystem<Object>,
    /// The skips of the exposures that have some.
    skips: BTreeMap<ItemKey, Vec<(String, String)>>,
}

impl State {
    fn put_in(&mut self, settings: &UnderlaySettings, item: Item<'_>) {
        let recorded = item.render(settings, &self.context);
        for object in &recorded.objects {
            self.counted.count_in(object);
        }
        if !recorded.skips.is_empty() {
            self.skips.insert(item.key(), recorded.skips);
        }
    }

    /// Take out what `item` put in: rendered again, the same objects (the rendering is pure
    /// and its context unchanged).
    fn take_out(&mut self, settings: &UnderlaySettings, item: Item<'_>) {
        for object in &item.render(settings, &self.context).objects {
            self.counted.count_out(object);
        }
        self.skips.remove(&item.key());
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
        match self.state.as_mut() {
            Some(state) if state.base == base && state.context == context => {
                let rendered = update(state, settings, exposures);
                self.last = RenderStats {
                    full: false,
                    exposures_rendered: rendered,
                };
            }
            _ => {
                let global = exposures.global();
                self.last = RenderStats {
                    full: true,
                    exposures_rendered: global.ips.len()
                        + global.routes.len()
                        + global.subnets.len(),
                };
                self.state = Some(from_scratch(settings, base, context, exposures));
            }
        }
        let state = self.state.as_ref().expect("set above");
        let mut out = Rendered {
            system: state.counted.system().clone(),
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

/// Every exposure of the global scope, in a full render's order.
fn items(exposures: &ExposureSet) -> impl Iterator<Item = Item<'_>> {
    let global = exposures.global();
    let ips = global.ips.iter().map(|(ip, e)| Item::Ip(ip, e));
    let routes = global.routes.iter().map(|(p, r)| Item::Route(p, r));
    ips.chain(routes)
        .chain(global.subnets.iter().map(Item::Subnet))
}

fn from_scratch(
    settings: &UnderlaySettings,
    base: Rendered,
    context: ItemContext,
    exposures: &Arc<ExposureSet>,
) -> State {
    // The base's objects each count as one producer that stays while the state lives (a base
    // that changes renders everything again): an exposure that renders one of them too and
    // goes leaves it in place.
    let mut state = State {
        counted: CountedSystem::new(base.system.clone()),
        base,
        context,
        exposures: exposures.clone(),
        skips: BTreeMap::new(),
    };
    for item in items(exposures) {
        state.put_in(settings, item);
    }
    state
}

/// Apply what differs between the exposures `state` was rendered from and `exposures`;
/// returns how many exposures were rendered.
fn update(state: &mut State, settings: &UnderlaySettings, exposures: &Arc<ExposureSet>) -> usize {
    let last = std::mem::replace(&mut state.exposures, exposures.clone());
    if Arc::ptr_eq(&last, exposures) {
        return 0;
    }
    let (old, new) = (last.global(), exposures.global());
    // The IPs (tens of thousands) through their maps' shared structure: only the paths the
    // driver changed are visited; an IP in both is compared through its value (`Arc`s of
    // unchanged IPs are the same allocation: compared by pointer). The subnets (a few per
    // router) merged by their key.
    let ips = ip_changes(&old.ips, &new.ips).flat_map(|c| {
        [
            c.old.map(|e| (false, Item::Ip(c.ip, e))),
            c.new.map(|e| (true, Item::Ip(c.ip, e))),
        ]
    });
    // The routes too (the stretched-L2 driver announces one per router of the cloud): a
    // persistent map, whose versions share all but what the driver changed.
    let routes = old.routes.diff(&new.routes).flat_map(|d| match d {
        imbl::ordmap::DiffItem::Add(p, r) => [None, Some(Side::New(p, r))],
        imbl::ordmap::DiffItem::Remove(p, r) => [Some(Side::Old(p, r)), None],
        imbl::ordmap::DiffItem::Update { old, new } => {
            [Some(Side::Old(old.0, old.1)), Some(Side::New(new.0, new.1))]
        }
    });
    let subnets = differences(old.subnets.iter().map(keyed), new.subnets.iter().map(keyed));
    let sides = ips
        .flatten()
        .chain(routes.flatten().map(|side| match side {
            Side::Old(p, r) => (false, Item::Route(p, r)),
            Side::New(p, r) => (true, Item::Route(p, r)),
        }))
        .chain(subnets.into_iter().map(|side| match side {
            Side::Old(s, ()) => (false, Item::Subnet(s)),
            Side::New(s, ()) => (true, Item::Subnet(s)),
        }));
    let mut rendered = 0;
    for (added, item) in sides {
        rendered += 1;
        if added {
            state.put_in(settings, item);
        } else {
            state.take_out(settings, item);
        }
    }
    rendered
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
