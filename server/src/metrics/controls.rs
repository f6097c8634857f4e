//! The merchandising controls' metrics: the controls active now by kind, and the passes that
//! serve the boards again when the controls change.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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

/// Every controls metric.
pub struct ControlMetrics {
    /// Stored controls active now, by kind (as this replica last read them).
    pub active: Family<KindLabels, Gauge>,
    /// Control passes by outcome.
    pub passes: Family<ControlPassLabels, Counter>,
}

impl ControlMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self { active: Family::default(), passes: Family::default() };
        for kind in ["pin", "boost", "exclude"] {
            m.active.get_or_create(&KindLabels { kind }).set(0);
        }
        registry.register("controls_active", "Merchandising controls active now, by kind", m.active.clone());
        registry.register(
            "control_passes",
            "Passes serving today's boards again after a change of the merchandising controls, by outcome",
            m.passes.clone(),
        );
        m
    }

    /// Counts a control pass.
    pub fn pass(&self, outcome: &'static str) {
        self.passes.get_or_create(&ControlPassLabels { outcome }).inc();
    }
}
