//! The merchandising controls' metrics: the controls active now by kind, and the passes that
//! serve the boards again when the controls change.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Labels of `ranking_controls_active`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `pin`, `boost` (buries included) or `exclude`.
    pub kind: &'static str,
}

/// Labels of `ranking_control_passes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControlPassLabels {
    /// `published` (boards served again under the controls as they stand), `unchanged` (every
    /// board already was), `busy` (another change of the day held its lease: tried again at
    /// the next poll), `failed`.
    pub outcome: &'static str,
}

/// Labels of `ranking_control_pass_seconds_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControlPhaseLabels {
    /// `read` (a board's current version, held or read from the store), `organic` (its
    /// organic board taken from the served one), `serve` (served under the controls),
    /// `publish` (what changed written to the store), `install` (this replica's copy and the
    /// feed told).
    pub phase: &'static str,
}

/// Every controls metric.
pub struct ControlMetrics {
    /// Stored controls active now, by kind (as this replica last read them).
    pub active: Family<KindLabels, Gauge>,
    /// Control passes by outcome.
    pub passes: Family<ControlPassLabels, Counter>,
    /// Seconds control passes spent on their boards, by phase, summed over the boards (which
    /// are served at once: the sum may exceed a pass's wall time).
    pub phase_seconds: Family<ControlPhaseLabels, Counter<f64, AtomicU64>>,
}

impl ControlMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self { active: Family::default(), passes: Family::default(), phase_seconds: Family::default() };
        for kind in ["pin", "boost", "exclude"] {
            m.active.get_or_create(&KindLabels { kind }).set(0);
        }
        registry.register("controls_active", "Merchandising controls active now, by kind", m.active.clone());
        registry.register(
            "control_passes",
            "Passes serving today's boards again after a change of the merchandising controls, by outcome",
            m.passes.clone(),
        );
        registry.register(
            "control_pass_seconds",
            "Seconds control passes spent serving today's boards again, by phase, summed over the boards",
            m.phase_seconds.clone(),
        );
        m
    }

    /// Adds `spent` to a phase of a control pass's board.
    pub fn phase(&self, phase: &'static str, spent: std::time::Duration) {
        self.phase_seconds.get_or_create(&ControlPhaseLabels { phase }).inc_by(spent.as_secs_f64());
    }

    /// Counts a control pass.
    pub fn pass(&self, outcome: &'static str) {
        self.passes.get_or_create(&ControlPassLabels { outcome }).inc();
    }
}
