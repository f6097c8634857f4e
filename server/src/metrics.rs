//! Service metrics in the Prometheus registry served on `RANKING_METRICS_LISTEN`.
//!
//! Counters are plain atomics: recording them on the hot path costs a few nanoseconds.

use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of per-RPC metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// gRPC method name, e.g. `GetTopN`.
    pub method: &'static str,
    /// gRPC status code name, e.g. `Ok`, `InvalidArgument`.
    pub code: &'static str,
}

/// Labels of the recompute's phases.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// `daily` (SQL scans, scores, publication of the daily ranking), `weekly`, `segments`.
    pub phase: &'static str,
}

/// Every metric the service exports.
pub struct Metrics {
    registry: Registry,
    /// Events stored for the first time.
    pub events_accepted: Counter,
    /// Events whose id was already stored.
    pub events_duplicate: Counter,
    /// Requests refused by validation (one per rejected request).
    pub events_rejected: Counter,
    /// Hourly increments lost to a ranking-store failure.
    pub hourly_increment_failures: Counter,
    /// Daily main scores clamped to 2^22 − 1.
    pub scores_clamped: Counter,
    /// Recompute durations, seconds.
    pub recompute_seconds: Histogram,
    /// Products in the last recomputed ranking.
    pub recompute_products: Gauge,
    /// Failed recomputes.
    pub recompute_failures: Counter,
    /// Catalog memberships the last recompute left out because of `RANKING_MAX_SEGMENTS`.
    pub segment_memberships_dropped: Gauge,
    /// WatchTopN streams open.
    pub watch_streams: Gauge,
    /// WatchTopN messages sent.
    pub watch_messages: Counter,
    /// States a slow WatchTopN reader never saw (it got a later one instead).
    pub watch_skipped: Counter,
    /// Seconds each phase of the last successful recompute took.
    pub recompute_phase_seconds: Family<PhaseLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// Unix time of the last successful recompute (0 = none yet).
    last_recompute_unix: Gauge<i64, AtomicI64>,
    /// GetTopN pages fetched from Redis (calls beyond this shared a fetch).
    pub top_fetches: Counter,
    /// Calls admitted and not finished.
    pub calls_in_flight: Gauge,
    /// Open gRPC connections.
    pub connections_open: Gauge,
    /// Connections closed at once because `RANKING_MAX_CONNECTIONS` were open.
    pub connections_refused: Counter,
    /// Connections closed by the handshake or idle timeout.
    pub connections_timed_out: Counter,
    /// Snapshot versions installed on this replica.
    pub snapshot_loads: Counter,
    /// Versions not held in memory because they would exceed `RANKING_SNAPSHOT_MAX_ENTRIES`.
    pub snapshot_oversize: Counter,
    /// The version of today's snapshot per window (rendered with its age).
    snapshot_versions: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
    /// Calls by method and status code.
    pub rpc_calls: Family<RpcLabels, Counter>,
    /// Call latency by method and status code, seconds.
    pub rpc_seconds: Family<RpcLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ranking");
        let events_accepted = Counter::default();
        let events_duplicate = Counter::default();
        let events_rejected = Counter::default();
        let hourly_increment_failures = Counter::default();
        let scores_clamped = Counter::default();
        let recompute_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let recompute_products = Gauge::default();
        let recompute_failures = Counter::default();
        let watch_streams = Gauge::default();
        let segment_memberships_dropped = Gauge::default();
        let watch_messages = Counter::default();
        let watch_skipped = Counter::default();
        let recompute_phase_seconds = Family::<PhaseLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let last_recompute_unix = Gauge::<i64, AtomicI64>::default();
        let top_fetches = Counter::default();
        let calls_in_flight = Gauge::default();
        let connections_open = Gauge::default();
        let connections_refused = Counter::default();
        let connections_timed_out = Counter::default();
        let snapshot_loads = Counter::default();
        let snapshot_oversize = Counter::default();
        let rpc_calls = Family::<RpcLabels, Counter>::default();
        let rpc_seconds = Family::<RpcLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 18))
        });

        registry.register("events_accepted", "Events stored for the first time", events_accepted.clone());
        registry.register("events_duplicate", "Events whose id was already stored", events_duplicate.clone());
        registry.register("events_rejected", "Requests refused by validation", events_rejected.clone());
        registry.register(
            "hourly_increment_failures",
            "Hourly ranking increments lost to a ranking-store failure",
            hourly_increment_failures.clone(),
        );
        registry.register("scores_clamped", "Daily main scores clamped to 2^22 - 1", scores_clamped.clone());
        registry.register("recompute_duration_seconds", "Recompute wall time", recompute_seconds.clone());
        registry.register("recompute_products", "Products in the last recomputed ranking", recompute_products.clone());
        registry.register("recompute_failures", "Failed recomputes", recompute_failures.clone());
        registry.register("watch_streams", "WatchTopN streams open", watch_streams.clone());
        registry.register(
            "segment_memberships_dropped",
            "Catalog memberships the last recompute left out because of RANKING_MAX_SEGMENTS",
            segment_memberships_dropped.clone(),
        );
        registry.register("watch_messages", "WatchTopN messages sent", watch_messages.clone());
        registry.register(
            "watch_skipped",
            "States a slow WatchTopN reader never saw (it got a later one instead)",
            watch_skipped.clone(),
        );
        registry.register(
            "recompute_phase_seconds",
            "Seconds each phase (daily, weekly, segments) of the last successful recompute took",
            recompute_phase_seconds.clone(),
        );
        registry.register(
            "last_recompute_timestamp_seconds",
            "Unix time of the last successful recompute",
            last_recompute_unix.clone(),
        );
        registry.register(
            "top_fetches",
            "GetTopN pages fetched from Redis; GetTopN calls beyond this shared a fetch",
            top_fetches.clone(),
        );
        registry.register("calls_in_flight", "gRPC calls admitted and not finished", calls_in_flight.clone());
        registry.register("connections_open", "Open gRPC connections", connections_open.clone());
        registry.register(
            "connections_refused",
            "Connections closed on accept because RANKING_MAX_CONNECTIONS were open",
            connections_refused.clone(),
        );
        registry.register(
            "connections_timed_out",
            "Connections closed by the handshake or idle timeout",
            connections_timed_out.clone(),
        );
        registry.register(
            "snapshot_loads",
            "Ranking versions installed in this replica's memory",
            snapshot_loads.clone(),
        );
        registry.register(
            "snapshot_oversize",
            "Ranking versions read from Redis because they exceed RANKING_SNAPSHOT_MAX_ENTRIES",
            snapshot_oversize.clone(),
        );
        registry.register("rpc_calls", "gRPC calls by method and code", rpc_calls.clone());
        registry.register("rpc_duration_seconds", "gRPC call latency by method and code", rpc_seconds.clone());
        Self {
            registry,
            events_accepted,
            events_duplicate,
            events_rejected,
            hourly_increment_failures,
            scores_clamped,
            recompute_seconds,
            recompute_products,
            recompute_failures,
            recompute_phase_seconds,
            watch_streams,
            segment_memberships_dropped,
            watch_messages,
            watch_skipped,
            last_recompute_unix,
            top_fetches,
            calls_in_flight,
            connections_open,
            connections_refused,
            connections_timed_out,
            snapshot_loads,
            snapshot_oversize,
            snapshot_versions: Default::default(),
            rpc_calls,
            rpc_seconds,
        }
    }

    /// Records a successful recompute.
    /// Records the phases of a successful recompute.
    pub fn recompute_phases(&self, phases: &[(&'static str, f64)]) {
        for (phase, seconds) in phases {
            self.recompute_phase_seconds.get_or_create(&PhaseLabels { phase }).set(*seconds);
        }
    }

    pub fn recompute_succeeded(&self, seconds: f64, products: u64) {
        self.recompute_seconds.observe(seconds);
        self.recompute_products.set(i64::try_from(products).unwrap_or(i64::MAX));
        self.last_recompute_unix.set(chrono::Utc::now().timestamp());
    }

    /// Seconds since the last successful recompute, or `None` before the first.
    pub fn seconds_since_last_recompute(&self) -> Option<i64> {
        let last = self.last_recompute_unix.get();
        (last > 0).then(|| chrono::Utc::now().timestamp() - last)
    }

    /// Records the version of today's snapshot of `window` (`None`: none held).
    pub fn snapshot_serving(&self, window: &'static str, version: Option<u64>) {
        let mut versions = self.snapshot_versions.lock().unwrap_or_else(|e| e.into_inner());
        match version {
            Some(v) => versions.insert(window, v),
            None => versions.remove(window),
        };
    }

    /// Records one finished RPC.
    pub fn rpc_finished(&self, method: &'static str, code: &'static str, seconds: f64) {
        let labels = RpcLabels { method, code };
        self.rpc_calls.get_or_create(&labels).inc();
        self.rpc_seconds.get_or_create(&labels).observe(seconds);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        let since = self.seconds_since_last_recompute().unwrap_or(-1);
        out.insert_str(
            0,
            &format!(
                "# HELP ranking_seconds_since_last_recompute Seconds since the last successful recompute (-1: none yet).\n\
                 # TYPE ranking_seconds_since_last_recompute gauge\nranking_seconds_since_last_recompute {since}\n"
            ),
        );
        let versions = self.snapshot_versions.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if !versions.is_empty() {
            // A version is its publication time in Unix milliseconds, so its age needs no
            // other record; it keeps growing while Redis is unreachable.
            let now_ms = chrono::Utc::now().timestamp_millis() as f64;
            let mut text = String::from(
                "# HELP ranking_snapshot_version Version of today's ranking served from memory.\n\
                 # TYPE ranking_snapshot_version gauge\n",
            );
            for (window, v) in &versions {
                text.push_str(&format!("ranking_snapshot_version{{window=\"{window}\"}} {v}\n"));
            }
            text.push_str(
                "# HELP ranking_snapshot_age_seconds Seconds since the served version of today's ranking was published.\n\
                 # TYPE ranking_snapshot_age_seconds gauge\n",
            );
            for (window, v) in &versions {
                let age = ((now_ms - *v as f64) / 1000.0).max(0.0);
                text.push_str(&format!("ranking_snapshot_age_seconds{{window=\"{window}\"}} {age:.3}\n"));
            }
            out.insert_str(0, &text);
        }
        out
    }
}
