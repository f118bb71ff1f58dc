//! The `ovn` rendering as a delta (issue 17): on a chassis exposing 30k IPs with MACs, an
//! event that exposes one more renders that IP's binding and announcement, not 30k rows and a
//! 30k-IP set again, and hands the kernel part a set it renders as a delta too.
//!
//! The frame ([`render_frame`]: the router, switches, ports, peers, flows, FDB entries and the
//! reports that are not one IP's; a few objects per mapping and peer) is rendered every time.
//! What an IP renders ([`render_ip`]: its announcement, its `Static_MAC_Binding`, its report)
//! depends on the frame only through whether the side towards OpenStack exists. So the IPs'
//! part is kept between renders with the exposures it came from, and only the IPs that differ
//! between the last exposures and these (found by visiting only what the two versions of the
//! global scope's IP map do not share: [`ip_changes`]) are taken out (rendered again from the
//! old value: the rendering is pure, the same output) and put in; when the side towards
//! OpenStack came or went, the bindings and reports are rendered again for every IP.
//!
//! The announced set (what the kernel part realises: the IPs on bgp-nic) is kept too, and
//! derived from the last one by the same changes, so its IP map shares all but them with the
//! last one the underlay rendering saw: that rendering ([`crate::backends::underlay::incremental`])
//! then finds them by the same walk. An event that changes no announced IP hands on the same
//! set (the same `Arc`). The bindings are a persistent map: the output's rows are a copy of it
//! (one pointer) with the frame's rows put in.
//!
//! The result equals [`super::render::render`] of the same inputs, reports in the same order,
//! which the tests check after every step of random sequences (with the underlay rendering of
//! the announced set, as the backend composes them).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use super::render::{
    ClusterFacts, ClusterSettings, Frame, IpRendering, Mappings, render_frame, render_ip,
};
use crate::exposure::{ExposureSet, ip_changes};
use crate::plugin::Rendered;
use crate::system::{LocalNbDesired, NbRow, NbRowId};

/// The IPs' part of the last render and what it came from.
struct State {
    exposures: Arc<ExposureSet>,
    /// Whether the side towards OpenStack existed (the bindings need it).
    internal: bool,
    /// The IPs to announce, in the global scope only (no bridges, needs or reports).
    announced: Arc<ExposureSet>,
    /// The IPs' `Static_MAC_Binding`s.
    bindings: imbl::OrdMap<NbRowId, NbRow>,
    /// The reports of the IPs that have one.
    skips: BTreeMap<IpAddr, (String, String)>,
}

impl State {
    fn empty(internal: bool) -> Self {
        Self {
            exposures: Arc::new(ExposureSet::default()),
            internal,
            announced: Arc::new(ExposureSet::default()),
            bindings: imbl::OrdMap::new(),
            skips: BTreeMap::new(),
        }
    }

    fn put_in_rows(&mut self, ip: IpAddr, rendering: IpRendering) {
        if let Some((id, row)) = rendering.binding {
            self.bindings.insert(id, row);
        }
        if let Some(skip) = rendering.skip {
            self.skips.insert(ip, skip);
        }
    }

    /// Bring the IPs' part from the last exposures to these; returns how many IPs were
    /// rendered. With `rescan`, the bindings and reports of every IP are rendered again (the
    /// side towards OpenStack came or went); the announced set still follows only the IPs
    /// that changed, as an announcement does not depend on that side.
    fn update(&mut self, exposures: &Arc<ExposureSet>, rescan: bool) -> usize {
        let old = std::mem::replace(&mut self.exposures, exposures.clone());
        let mut rendered = 0;
        if !Arc::ptr_eq(&old, exposures) {
            for change in ip_changes(&old.global().ips, &exposures.global().ips) {
                rendered += 1;
                // Rendered again from the old value: the same output it put in.
                let gone = change.old.map(|e| render_ip(e, self.internal));
                let came = change.new.map(|e| render_ip(e, self.internal));
                let was_announced = gone.as_ref().is_some_and(|g| g.announced.is_some());
                match came.as_ref().and_then(|c| c.announced.as_ref()) {
                    // The same announcement again (only the IP's MAC changed): the announced
                    // set stays the same allocation, and the kernel part finds no change.
                    Some(a) if self.announced.global().ips.get(change.ip) == Some(a) => {}
                    Some(a) => {
                        Arc::make_mut(&mut self.announced)
                            .global_mut()
                            .ips
                            .insert(*change.ip, a.clone());
                    }
                    None if was_announced => {
                        Arc::make_mut(&mut self.announced)
                            .global_mut()
                            .ips
                            .remove(change.ip);
                    }
                    None => {}
                }
                if rescan {
                    continue;
                }
                if let Some(gone) = gone {
                    if let Some((id, _)) = gone.binding {
                        self.bindings.remove(&id);
                    }
                    self.skips.remove(change.ip);
                }
                if let Some(came) = came {
                    self.put_in_rows(*change.ip, came);
                }
            }
        }
        if rescan {
            self.bindings = imbl::OrdMap::new();
            self.skips.clear();
            for (ip, exposed) in &exposures.global().ips {
                let rendering = render_ip(exposed, self.internal);
                self.put_in_rows(*ip, rendering);
            }
            rendered = exposures.global().ips.len();
        }
        rendered
    }
}

/// What the last render did, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderStats {
    /// The IPs' bindings and reports were rendered for every IP (first render, or the side
    /// towards OpenStack came or went).
    pub full: bool,
    /// IPs rendered (a changed one counts once).
    pub ips_rendered: usize,
}

/// The `ovn` rendering, kept between calls; see the module's documentation.
#[derive(Default)]
pub struct IncrementalRender {
    state: Option<State>,
    last: RenderStats,
}

impl IncrementalRender {
    /// What [`super::render::render`] returns for these inputs, the announced set shared with
    /// the last one returned (the same `Arc` when no announced IP changed).
    pub fn render(
        &mut self,
        settings: &ClusterSettings,
        mappings: &Mappings,
        facts: &ClusterFacts,
        exposures: &Arc<ExposureSet>,
    ) -> (Rendered, Arc<ExposureSet>) {
        let Frame {
            mut rendered,
            internal,
        } = render_frame(settings, mappings, facts, exposures);
        let full = self.state.as_ref().is_none_or(|s| s.internal != internal);
        let state = self.state.get_or_insert_with(|| State::empty(internal));
        state.internal = internal;
        let ips_rendered = state.update(exposures, full);
        self.last = RenderStats { full, ips_rendered };

        // The rows: the bindings (most of them) shared, the frame's few put in.
        let mut rows = state.bindings.clone();
        let frame_rows = rendered.system.local_nb.take().unwrap_or_default().rows;
        for (id, row) in frame_rows {
            rows.insert(id, row);
        }
        rendered.system.local_nb = Some(LocalNbDesired { rows });
        // The reports, in a full render's order: the frame's, then the IPs' by address.
        for (row, reason) in state.skips.values() {
            rendered.skip(row.clone(), reason.clone());
        }
        (rendered, state.announced.clone())
    }

    /// What the last [`Self::render`] did.
    pub fn stats(&self) -> RenderStats {
        self.last
    }
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
