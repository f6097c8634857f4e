//! What the recomputes did: their time, phases, products, failures, clamped scores and the
//! segment memberships they left out.

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of the recompute's phases.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// `daily` (SQL scans, scores, publication of the daily ranking), `weekly`, `segments`.
    pub phase: &'static str,
}

/// The recomputes' metrics.
pub struct RecomputeMetrics {
    /// Recompute durations, seconds.
    pub seconds: Histogram,
    /// Products in the last recomputed ranking.
    pub products: Gauge,
    /// Failed recomputes.
    pub failures: Counter,
    /// Daily main scores clamped to 2^22 − 1.
    pub scores_clamped: Counter,
    /// Catalog memberships the last recompute left out because of `RANKING_MAX_SEGMENTS`.
    pub segment_memberships_dropped: Gauge,
    /// Seconds each phase of the last successful recompute took.
    pub phase_seconds: Family<PhaseLabels, Gauge<f64, AtomicU64>>,
    /// Unix time of the last successful recompute (0 = none yet).
    last_unix: Gauge<i64, AtomicI64>,
}

impl RecomputeMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self {
            seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            products: Gauge::default(),
            failures: Counter::default(),
            scores_clamped: Counter::default(),
            segment_memberships_dropped: Gauge::default(),
            phase_seconds: Family::default(),
            last_unix: Gauge::default(),
        };
        registry.register("scores_clamped", "Daily main scores clamped to 2^22 - 1", m.scores_clamped.clone());
        registry.register("recompute_duration_seconds", "Recompute wall time", m.seconds.clone());
        registry.register("recompute_products", "Products in the last recomputed ranking", m.products.clone());
        registry.register("recompute_failures", "Failed recomputes", m.failures.clone());
        registry.register(
            "segment_memberships_dropped",
            "Catalog memberships the last recompute left out because of RANKING_MAX_SEGMENTS",
            m.segment_memberships_dropped.clone(),
        );
        registry.register(
            "recompute_phase_seconds",
            "Seconds each phase (daily, weekly, segments) of the last successful recompute took",
            m.phase_seconds.clone(),
        );
        registry.register(
            "last_recompute_timestamp_seconds",
            "Unix time of the last successful recompute",
            m.last_unix.clone(),
        );
        m
    }

    /// Records the phases of a successful recompute.
    pub fn phases(&self, phases: &[(&'static str, f64)]) {
        for (phase, seconds) in phases {
            self.phase_seconds.get_or_create(&PhaseLabels { phase }).set(*seconds);
        }
    }

    /// Records a successful recompute.
    pub fn succeeded(&self, seconds: f64, products: u64) {
        self.seconds.observe(seconds);
        self.products.set(i64::try_from(products).unwrap_or(i64::MAX));
        self.last_unix.set(chrono::Utc::now().timestamp());
    }

    /// Seconds since the last successful recompute, or `None` before the first.
    pub fn seconds_since_last(&self) -> Option<i64> {
        let last = self.last_unix.get();
        (last > 0).then(|| chrono::Utc::now().timestamp() - last)
    }
}
