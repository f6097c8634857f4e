//! The ranking feed's metrics: records sent by sink and kind, the lag from a publication to
//! its closing record acknowledged, and the boards whose latest version is not fed yet.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of `ranking_feed_records_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FeedRecordLabels {
    /// `kafka` or `jetstream`.
    pub sink: &'static str,
    /// `change` or `version`.
    pub kind: &'static str,
}

/// Labels of `ranking_feed_failures_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FeedSinkLabels {
    /// `kafka`, `jetstream`, or `cursor` (the ranking store refused the cursor).
    pub sink: &'static str,
}

/// Every feed metric.
pub struct FeedMetrics {
    /// Records acknowledged by each sink.
    pub records: Family<FeedRecordLabels, Counter>,
    /// Seconds from a version's publication to its closing record acknowledged by every sink.
    pub lag_seconds: Histogram,
    /// Boards whose latest version this replica published is not fed yet (a sink down, or
    /// waiting for the next feed interval).
    pub behind_versions: Gauge,
    /// Feeds of a board that failed and are tried again.
    pub failures: Family<FeedSinkLabels, Counter>,
}

impl FeedMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self {
            records: Family::default(),
            lag_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            behind_versions: Gauge::default(),
            failures: Family::default(),
        };
        registry.register("feed_records", "Ranking feed records acknowledged, by sink and kind", m.records.clone());
        registry.register(
            "feed_lag_seconds",
            "Ranking feed: a version's publication to its closing record acknowledged",
            m.lag_seconds.clone(),
        );
        registry.register(
            "feed_behind_versions",
            "Boards whose latest version published here is not fed yet",
            m.behind_versions.clone(),
        );
        registry.register("feed_failures", "Feeds of a board that failed and are tried again", m.failures.clone());
        m
    }
}
