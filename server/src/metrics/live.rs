//! The live passes' metrics: pass time, rows read, freshness, passes by outcome.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of `ranking_live_passes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `published` (SQL changed: new versions), `unchanged` (nothing to publish), `loaded`
    /// (the day read whole: the first pass of a holder), `busy` (another change of the day
    /// held its lease), `held_elsewhere` (another replica holds the live lease: this one's
    /// turn ran no pass), `failed`.
    pub outcome: &'static str,
}

/// Labels of `ranking_live_phase_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LivePhaseLabels {
    /// `epoch` (advancing the change epoch: the wait for writers of the previous one),
    /// `read` (changed rows, products refreshed, catalog), `rank` (today's daily ranking and
    /// its copy), `publish` (its publication, the weekly ranking's ranking and publication,
    /// segments).
    pub phase: &'static str,
}

/// Every live-pass metric.
pub struct LiveMetrics {
    /// Seconds per pass that published (SQL reads, ranking, publication).
    pub pass_seconds: Histogram,
    /// Metrics rows passes read from SQL (changed rows, and the rows of products whose
    /// earlier days changed), the whole-day reads of `loaded` passes left out.
    pub rows_read: Counter,
    /// Seconds from the write of the newest row a version includes (its transaction's
    /// timestamp, taken just before the commit) to the version's publication.
    pub freshness_seconds: Histogram,
    /// Passes by outcome.
    pub passes: Family<OutcomeLabels, Counter>,
    /// Seconds per phase of the passes that published.
    pub phase_seconds: Family<LivePhaseLabels, Histogram, fn() -> Histogram>,
}

impl LiveMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let live = Self {
            pass_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            rows_read: Counter::default(),
            freshness_seconds: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            passes: Family::default(),
            phase_seconds: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 16))),
        };
        registry.register("live_pass_seconds", "Wall time of a live pass that published", live.pass_seconds.clone());
        registry.register(
            "live_rows_read",
            "Metrics rows live passes read from SQL (not counting whole-day loads)",
            live.rows_read.clone(),
        );
        registry.register(
            "freshness_seconds",
            "Newest row a live version includes written -> the version published",
            live.freshness_seconds.clone(),
        );
        registry.register("live_passes", "Live passes by outcome", live.passes.clone());
        registry.register(
            "live_phase_seconds",
            "Wall time of each phase of a live pass that published",
            live.phase_seconds.clone(),
        );
        live
    }

    /// Records the phases of a pass that published, each `(phase, seconds)`.
    pub fn phases(&self, phases: &[(&'static str, f64)]) {
        for (phase, seconds) in phases {
            self.phase_seconds.get_or_create(&LivePhaseLabels { phase }).observe(*seconds);
        }
    }

    /// Counts a pass of `outcome`.
    pub fn pass(&self, outcome: &'static str) {
        self.passes.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}
