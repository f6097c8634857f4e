//! The storage layout in force and what each live replica reads of it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of `ranking_layout_replica_reads`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplicaLabels {
    /// The replica's announced name.
    pub replica: String,
    /// Its release.
    pub release: String,
}

/// The layout metrics.
pub struct LayoutMetrics {
    /// The layout this replica's publishers write: the newest every live replica reads.
    pub in_force: Gauge,
    /// The newest layout each live replica reads, as this replica last read the announcements
    /// (the series of a replica gone are removed).
    pub replica_reads: Family<ReplicaLabels, Gauge>,
}

impl LayoutMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let layout = Self { in_force: Gauge::default(), replica_reads: Family::default() };
        registry.register(
            "layout_in_force",
            "The ranking store's layout written by this replica's publishers: the newest every live replica reads",
            layout.in_force.clone(),
        );
        registry.register(
            "layout_replica_reads",
            "The newest ranking store layout each live replica announces it reads",
            layout.replica_reads.clone(),
        );
        layout
    }
}
