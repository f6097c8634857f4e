//! What the ingest path did with the events it was given.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

/// The ingest path's metrics.
pub struct IngestMetrics {
    /// Events stored for the first time.
    pub accepted: Counter,
    /// Events whose id was already stored.
    pub duplicate: Counter,
    /// Requests refused by validation (one per rejected request).
    pub rejected: Counter,
    /// Hourly increments lost to a ranking-store failure.
    pub hourly_increment_failures: Counter,
}

impl IngestMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self {
            accepted: Counter::default(),
            duplicate: Counter::default(),
            rejected: Counter::default(),
            hourly_increment_failures: Counter::default(),
        };
        registry.register("events_accepted", "Events stored for the first time", m.accepted.clone());
        registry.register("events_duplicate", "Events whose id was already stored", m.duplicate.clone());
        registry.register("events_rejected", "Requests refused by validation", m.rejected.clone());
        registry.register(
            "hourly_increment_failures",
            "Hourly ranking increments lost to a ranking-store failure",
            m.hourly_increment_failures.clone(),
        );
        m
    }
}
