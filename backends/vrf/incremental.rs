//! The EVPN rendering as a delta (issue 17): on a gateway whose VRF holds 30k tenant
//! addresses, an event that binds one VM renders that VM's objects, not 60k objects again.
//!
//! What is not one IP's (the VRFs, bridges, VXLAN devices and FRR stanzas, the ports towards
//! OVS, the subnets' routes and flows, the scopes' routes) is a few objects per scope and
//! attachment, rendered as a full render makes it ([`frame_pass`]), again only when what it is
//! rendered from changed ([`FrameInputs`]: the scope's parameters, subnets, routes and gateway
//! MACs; the settings, facts and bridges for every scope): a gateway with 60 VRFs does not
//! render 60 FRR stanzas per event. Each scope's IPs are rendered against its [`ScopeFrame`]
//! (its table, its ports, whether tenant addresses go on `lo-<vni>`); their objects are kept
//! between renders with the exposures they came from. When a scope's frame is what it was, only the IPs that differ between the last
//! exposures and these are taken out (rendered again from the old value: the rendering is pure
//! and the frame unchanged, so the same objects) or put in, found by visiting only what the two
//! versions of the scope's IP map do not share; when its frame changed, its IPs are all
//! rendered again. Two IPs may render the same object (two IPv6 addresses of one /64 proxy the
//! same network address; a device made the agent's by both): such an object is counted, and
//! leaves only with its last producer.
//!
//! The output is kept too: while no frame changes, the last one follows the IPs' objects that
//! came and went (one that went stays when a frame has it as well), so an event costs what it
//! changed, not a merge of every scope's frame.
//!
//! The result equals [`super::render::render`] of the same inputs, reports in the same order,
//! which the tests check after every step of random sequences.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use super::render::{
    Facts, FrameInputs, FramePass, IpObject, IpSink, ScopeFrame, VrfSettings, frame_pass, merge,
    render_base, render_global_skip, render_ip, render_retained,
};
use crate::backends::counted::{CountedSystem, SystemObject};
use crate::caps::frr::values::Vni;
use crate::exposure::BridgeWiring;
use crate::exposure::{ExposedIp, ExposureSet, IpMap, ScopeId, ip_changes};
use crate::plugin::Rendered;
use crate::system::DesiredSystem;
use crate::types::InterfaceName;

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
    /// Each EVPN scope's frame its IPs were last rendered against (`None`: the scope was not
    /// realised, its IPs render nothing).
    frames: BTreeMap<Vni, Option<ScopeFrame>>,
    /// The IPs' objects only.
    counted: CountedSystem<IpObject>,
    /// The reports of the IPs that have one, in a full render's order.
    skips: BTreeMap<(Vni, IpAddr), (String, &'static str)>,
    /// What the last update put in `counted` (`true`) or took out of it.
    transitions: Vec<(IpObject, bool)>,
    /// IPs the last update rendered (a changed one counts once).
    last_rendered: usize,
}

impl State {
    fn empty() -> Self {
        Self {
            exposures: Arc::new(ExposureSet::default()),
            frames: BTreeMap::new(),
            counted: CountedSystem::new(DesiredSystem::default()),
            skips: BTreeMap::new(),
            transitions: Vec::new(),
            last_rendered: 0,
        }
    }

    fn put_in(&mut self, frame: &ScopeFrame, ip: &ExposedIp) {
        let mut r = Recorded::default();
        render_ip(frame, ip, &mut r);
        for object in r.objects {
            if self.counted.count_in(&object) {
                self.transitions.push((object, true));
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
            if self.counted.count_out(&object) {
                self.transitions.push((object, false));
            }
        }
        self.skips.remove(&(frame.vni, ip.ip));
    }

    /// Bring the IPs' objects from the last exposures to these, under the frames of
    /// `frames` (each scope's current one).
    fn update(
        &mut self,
        frames: &BTreeMap<Vni, (FrameInputs, FramePass)>,
        exposures: &Arc<ExposureSet>,
    ) {
        self.transitions.clear();
        let old = std::mem::replace(&mut self.exposures, exposures.clone());
        let empty = IpMap::new();
        let ips_of = |set: &'_ ExposureSet, vni: Vni| -> IpMap {
            // A copy of a persistent map is one pointer: it shares the tree.
            set.scopes
                .get(&ScopeId::Evpn(vni))
                .map_or_else(|| empty.clone(), |s| s.ips.clone())
        };
        let gone: Vec<Vni> = self
            .frames
            .keys()
            .filter(|v| !frames.contains_key(v))
            .copied()
            .collect();
        let mut rendered = 0;
        for vni in gone {
            if let Some(Some(frame)) = self.frames.remove(&vni) {
                for ip in ips_of(&old, vni).values() {
                    self.take_out(&frame, ip);
                }
            }
        }
        for (vni, (_, pass)) in frames {
            let new_frame = pass.frame.as_ref().ok().map(|f| &f.frame);
            let (old_ips, new_ips) = (ips_of(&old, *vni), ips_of(exposures, *vni));
            match self.frames.get(vni) {
                Some(old_frame) if old_frame.as_ref() == new_frame => {
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
                }
                old_frame => {
                    if let Some(frame) = old_frame.cloned().flatten() {
                        for ip in old_ips.values() {
                            self.take_out(&frame, ip);
                        }
                    }
                    if let Some(frame) = new_frame {
                        rendered += new_ips.len();
                        for ip in new_ips.values() {
                            self.put_in(frame, ip);
                        }
                    }
                    self.frames.insert(*vni, new_frame.cloned());
                }
            }
        }
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
    /// Scopes whose frame was rendered (the others' were kept).
    pub frames_rendered: usize,
}

/// What every scope's frame is rendered from.
type FrameContext = (VrfSettings, Facts, BTreeMap<InterfaceName, BridgeWiring>);

/// The frames' part of the output: what is not the IPs'.
struct FramesPart {
    /// The base (ownership of what outlives a scope), every realised scope's frame and the
    /// retained VRFs.
    system: DesiredSystem,
    /// The retained VRFs that could not be rendered, reported last.
    retained_skips: Vec<(String, String)>,
}

/// The EVPN rendering, kept between calls; see the module's documentation.
#[derive(Default)]
pub struct IncrementalRender {
    state: Option<State>,
    /// Each EVPN scope's frame, with what it was rendered from.
    frames: BTreeMap<Vni, (FrameInputs, FramePass)>,
    frame_context: Option<FrameContext>,
    /// The union of the frames, while no frame changes.
    frames_part: Option<FramesPart>,
    /// The last output's objects: the IPs' and the frames'.
    output: Option<DesiredSystem>,
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
        let same_context = self
            .frame_context
            .as_ref()
            .is_some_and(|(s, f, b)| s == settings && f == facts && *b == exposures.bridges);
        if !same_context {
            self.frames.clear();
            self.frame_context = Some((settings.clone(), facts.clone(), exposures.bridges.clone()));
        }
        // Each scope's frame: kept while what it is rendered from is the same.
        let scopes_before = self.frames.len();
        self.frames
            .retain(|vni, _| exposures.scopes.contains_key(&ScopeId::Evpn(*vni)));
        let mut frames_changed = !same_context || self.frames.len() != scopes_before;
        let mut frames_rendered = 0;
        for (id, scope) in &exposures.scopes {
            let ScopeId::Evpn(vni) = id else { continue };
            if self
                .frames
                .get(vni)
                .is_some_and(|(inputs, _)| inputs.matches(scope))
            {
                continue;
            }
            let pass = frame_pass(settings, facts, exposures, id, scope)
                .expect("an EVPN scope has a frame");
            self.frames.insert(*vni, (FrameInputs::of(scope), pass));
            frames_rendered += 1;
            frames_changed = true;
        }

        let full = self.state.is_none();
        let state = self.state.get_or_insert_with(State::empty);
        state.update(&self.frames, exposures);
        self.last = RenderStats {
            full,
            ips_rendered: state.last_rendered,
            frames_rendered,
        };

        // The objects: the frames' part is rebuilt when a frame changed; otherwise the last
        // output follows the IPs' objects that came and went (one that went stays when a frame
        // has it too).
        let output = match (self.output.take(), &self.frames_part) {
            (Some(mut output), Some(part)) if !frames_changed => {
                for (object, came) in &state.transitions {
                    if *came {
                        object.clone().insert_into(&mut output);
                    } else if !object.is_in(&part.system) {
                        object.remove_from(&mut output);
                    }
                }
                output
            }
            _ => {
                let part = frames_part(settings, facts, exposures, &self.frames);
                // The IPs' objects are most of the state: the frames' few are added to a copy
                // of them (which shares their trees), not the other way round.
                let mut output = state.counted.system().clone();
                merge(&mut output, part.system.clone());
                self.frames_part = Some(part);
                output
            }
        };
        self.output = Some(output.clone());

        // The reports, in a full render's order.
        let mut out = Rendered {
            system: output,
            ..Rendered::default()
        };
        render_global_skip(exposures, &mut out);
        for (vni, (_, pass)) in &self.frames {
            for (row, reason) in &pass.before_ips {
                out.skip(row.clone(), reason.clone());
            }
            match &pass.frame {
                Ok(framed) => {
                    let first = (*vni, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
                    for (_, (row, reason)) in state
                        .skips
                        .range(first..)
                        .take_while(|((v, _), _)| v == vni)
                    {
                        out.skip(row.clone(), *reason);
                    }
                    for (row, reason) in &framed.after_ips {
                        out.skip(row.clone(), reason.clone());
                    }
                }
                Err(why) => out.skip(ScopeId::Evpn(*vni).to_string(), why.clone()),
            }
        }
        if let Some(part) = &self.frames_part {
            for (row, reason) in &part.retained_skips {
                out.skip(row.clone(), reason.clone());
            }
        }
        out
    }

    /// What the last [`Self::render`] did.
    pub fn stats(&self) -> RenderStats {
        self.last
    }
}

/// The union of the base, the realised scopes' frames and the retained VRFs.
fn frames_part(
    settings: &VrfSettings,
    facts: &Facts,
    exposures: &ExposureSet,
    frames: &BTreeMap<Vni, (FrameInputs, FramePass)>,
) -> FramesPart {
    let mut scratch = Rendered::default();
    render_base(facts, exposures, &mut scratch.system);
    let mut rendered_vnis = BTreeSet::new();
    for (vni, (_, pass)) in frames {
        if let Ok(framed) = &pass.frame {
            merge(&mut scratch.system, framed.system.clone());
            rendered_vnis.insert(*vni);
        }
    }
    render_retained(settings, facts, &rendered_vnis, &mut scratch);
    FramesPart {
        system: scratch.system,
        retained_skips: scratch
            .skipped
            .into_iter()
            .map(|s| (s.row, s.reason))
            .collect(),
    }
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
