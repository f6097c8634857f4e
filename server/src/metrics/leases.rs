//! What the day leases refused: changes of a day's rankings made after their writer's lease
//! was gone.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Labels of `ranking_fenced_writes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The work whose write was refused: `recompute`, `live_pass` or `withdrawal`.
    pub kind: &'static str,
}

/// The leases' metrics.
pub struct LeaseMetrics {
    /// Writes refused because the writer no longer held the day's lease.
    pub fenced_writes: Family<KindLabels, Counter>,
}

impl LeaseMetrics {
    /// The metrics, registered in `registry`, with a zero series for every kind.
    pub fn registered(registry: &mut Registry) -> Self {
        let leases = Self { fenced_writes: Family::default() };
        for kind in ["recompute", "live_pass", "withdrawal"] {
            drop(leases.fenced_writes.get_or_create(&KindLabels { kind }));
        }
        registry.register(
            "fenced_writes",
            "Changes of a day's rankings refused because their writer no longer held the day's lease",
            leases.fenced_writes.clone(),
        );
        leases
    }
}
