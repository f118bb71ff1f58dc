//! The EVPN rendering as a delta (issue 17): on a gateway whose VRF holds 30k tenant
//! addresses, an event that binds one VM renders that VM's objects, not 60k objects again.
//!
//! What is not one IP's (the VRFs, bridges, VXLAN devices and FRR stanzas, the ports towards
//! OVS, the subnets' routes and flows, the scopes' routes) is a few objects per scope and
//! attachment: it is rendered every time, as a full render makes it ([`frame_pass`]). Each
//! scope's IPs are rendered against its [`ScopeFrame`] (its table, its ports, whether tenant
//! addresses go on `lo-<vni>`); their objects are kept between renders with the exposures they
//! came from. When a scope's frame is what it was, only the IPs that differ between the last
//! exposures and these are taken out (rendered again from the old value: the rendering is pure
//! and the frame unchanged, so the same objects) or put in, found by visiting only what the two
//! versions of the scope's IP map do not share; when its frame changed, its IPs are all
//! rendered again. Two IPs may render the same object (two IPv6 addresses of one /64 proxy the
//! same network address; a device made the agent's by both): such an object is counted, and
//! leaves only with its last producer.
//!
//! The result equals [`super::render::render`] of the same inputs, reports in the same order,
//! which the tests check after every step of random sequences.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use super::render::{
    Facts, IpObject, IpSink, ScopeFrame, VrfSettings, frame_pass, merge, render_base,
    render_global_skip, render_ip, render_retained,
};
use crate::caps::frr::values::Vni;
use crate::exposure::{ExposedIp, ExposureSet, IpMap, ScopeId, ip_changes};
use crate::plugin::Rendered;
use crate::system::DesiredSystem;

/// One IP's objects and report, recorded to be added or taken out.
#[derive(Default)]
struct Recorded {
    objects: Vec<IpObject>,
    skip: Option<(String, &'static str)>,
}

impl IpSink for Recorded {
    fn object(&mut self, object: IpObject) {
        self.objects.push(object);
    }

    fn skip(&mut self, row: String, reason: &'static str) {
        self.skip = Some((row, reason));
    }
}

/// The IPs' objects of the last render and what they came from.
struct State {
    exposures: Arc<ExposureSet>,
    /// Each EVPN scope's frame as last rendered (`None`: the scope was not realised, its IPs
    /// render nothing).
    frames: BTreeMap<Vni, Option<ScopeFrame>>,
    /// The IPs' objects only.
    system: DesiredSystem,
    /// Producers of an object beyond the first (absent: one producer).
    extra: BTreeMap<IpObject, u32>,
    /// The reports of the IPs that have one, in a full render's order.
    skips: BTreeMap<(Vni, IpAddr), (String, &'static str)>,
    /// IPs the last update rendered (a changed one counts once).
    last_rendered: usize,
}

impl State {
    fn empty() -> Self {
        Self {
            exposures: Arc::new(ExposureSet::default()),
            frames: BTreeMap::new(),
            system: DesiredSystem::default(),
            extra: BTreeMap::new(),
            skips: BTreeMap::new(),
            last_rendered: 0,
        }
    }

    fn put_in(&mut self, frame: &ScopeFrame, ip: &ExposedIp) {
        let mut r = Recorded::default();
        render_ip(frame, ip, &mut r);
        for object in r.objects {
            // A copy is kept only to count a second producer.
            let copy = object.clone();
            if !object.insert_into(&mut self.system) {
                *self.extra.entry(copy).or_insert(0) += 1;
            }
        }
        if let Some(skip) = r.skip {
            self.skips.insert((frame.vni, ip.ip), skip);
        }
    }

    fn take_out(&mut self, frame: &ScopeFrame, ip: &ExposedIp) {
        let mut r = Recorded::default();
        render_ip(frame, ip, &mut r);
        for object in r.objects {
            match self.extra.get_mut(&object) {
                Some(1) => {
                    self.extra.remove(&object);
                }
                Some(n) => *n -= 1,
                None => object.remove_from(&mut self.system),
            }
        }
        self.skips.remove(&(frame.vni, ip.ip));
    }

    /// Bring the IPs' objects from the last exposures and frames to these.
    fn update(&mut self, frames: BTreeMap<Vni, Option<ScopeFrame>>, exposures: &Arc<ExposureSet>) {
        let old_frames = std::mem::take(&mut self.frames);
        let old = std::mem::replace(&mut self.exposures, exposures.clone());
        let empty = IpMap::new();
        let ips_of = |set: &'_ ExposureSet, vni: Vni| -> Option<IpMap> {
            set.scopes.get(&ScopeId::Evpn(vni)).map(|s| s.ips.clone())
        };
        let vnis: BTreeSet<Vni> = old_frames.keys().chain(frames.keys()).copied().collect();
        let mut rendered = 0;
        for vni in vnis {
            let old_frame = old_frames.get(&vni).and_then(Option::as_ref);
            let new_frame = frames.get(&vni).and_then(Option::as_ref);
            // A copy of a persistent map is one pointer: it shares the tree.
            let old_ips = ips_of(&old, vni).unwrap_or_else(|| empty.clone());
            let new_ips = ips_of(exposures, vni).unwrap_or_else(|| empty.clone());
            if old_frame == new_frame {
                let Some(frame) = new_frame else { continue };
                for change in ip_changes(&old_ips, &new_ips) {
                    rendered += 1;
                    if let Some(gone) = change.old {
                        self.take_out(frame, gone);
                    }
                    if let Some(came) = change.new {
                        self.put_in(frame, came);
                    }
                }
            } else {
                if let Some(frame) = old_frame {
                    for ip in old_ips.values() {
                        self.take_out(frame, ip);
                    }
                }
                if let Some(frame) = new_frame {
                    rendered += new_ips.len();
                    for ip in new_ips.values() {
                        self.put_in(frame, ip);
                    }
                }
            }
        }
        self.frames = frames;
        self.last_rendered = rendered;
    }
}

/// What the last render did, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderStats {
    /// Rendered from scratch (the first render).
    pub full: bool,
    /// IPs whose objects were added or taken out (a changed one counts once).
    pub ips_rendered: usize,
}

/// The EVPN rendering, kept between calls; see the module's documentation.
#[derive(Default)]
pub struct IncrementalRender {
    state: Option<State>,
    last: RenderStats,
}

impl IncrementalRender {
    /// What [`super::render::render`] returns for these inputs.
    pub fn render(
        &mut self,
        settings: &VrfSettings,
        facts: &Facts,
        exposures: &Arc<ExposureSet>,
    ) -> Rendered {
        let mut out = Rendered::default();
        render_global_skip(exposures, &mut out);
        render_base(facts, exposures, &mut out.system);
        let mut passes = Vec::new();
        let mut frames = BTreeMap::new();
        for (id, scope) in &exposures.scopes {
            let (ScopeId::Evpn(vni), Some(pass)) =
                (id, frame_pass(settings, facts, exposures, id, scope))
            else {
                continue;
            };
            frames.insert(*vni, pass.frame.as_ref().ok().map(|f| f.frame.clone()));
            passes.push((id, *vni, pass));
        }
        let full = self.state.is_none();
        let state = self.state.get_or_insert_with(State::empty);
        state.update(frames, exposures);
        self.last = RenderStats {
            full,
            ips_rendered: state.last_rendered,
        };

        let mut rendered_vnis = BTreeSet::new();
        for (id, vni, pass) in passes {
            for (row, reason) in pass.before_ips {
                out.skip(row, reason);
            }
            match pass.frame {
                Ok(framed) => {
                    let first = (vni, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
                    for (_, (row, reason)) in state
                        .skips
                        .range(first..)
                        .take_while(|((v, _), _)| *v == vni)
                    {
                        out.skip(row.clone(), *reason);
                    }
                    for (row, reason) in framed.after_ips {
                        out.skip(row, reason);
                    }
                    merge(&mut out.system, framed.system);
                    rendered_vnis.insert(vni);
                }
                Err(why) => out.skip(id.to_string(), why),
            }
        }
        render_retained(settings, facts, &rendered_vnis, &mut out);
        // The IPs' objects are most of the state: the frames' few are added to a copy of them
        // (which shares their trees), not the other way round.
        let frames_system = std::mem::replace(&mut out.system, state.system.clone());
        merge(&mut out.system, frames_system);
        out
    }

    /// What the last [`Self::render`] did.
    pub fn stats(&self) -> RenderStats {
        self.last
    }
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
