//! Sticky experiments' metrics: the reads each variant served, the exposures an
//! experiment's analysis counts.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Labels of `ranking_experiment_reads_total`: the experiment (one is configured) and a
/// variant of it (a bounded set: the profiles listed).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExperimentLabels {
    pub experiment: String,
    pub variant: String,
}

/// Every experiment metric.
pub struct ExperimentMetrics {
    /// Reads routed by their `actor_id` to each variant.
    pub reads: Family<ExperimentLabels, Counter>,
}

impl ExperimentMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self { reads: Family::default() };
        registry.register("experiment_reads", "Reads an experiment served from each variant", m.reads.clone());
        m
    }
}
