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

pub mod bus;
pub mod leases;
pub mod live;
pub mod phases;
pub mod shoppers;

/// Labels of per-RPC metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// gRPC method name, e.g. `GetTopN`.
    pub method: &'static str,
    /// gRPC status code name, e.g. `Ok`, `InvalidArgument`.
    pub code: &'static str,
}

/// Labels of the go-grpc-prometheus families without a code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    /// `unary`, `server_stream`, `bidi_stream` (`unknown` for a path that is no RPC).
    pub grpc_type: &'static str,
    /// The full service name, `ranking.v1.RankingService`.
    pub grpc_service: &'static str,
    /// The method, `GetTopN`.
    pub grpc_method: &'static str,
}

/// Labels of `grpc_server_handled_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcCodeLabels {
    /// As [`GrpcLabels::grpc_type`].
    pub grpc_type: &'static str,
    /// As [`GrpcLabels::grpc_service`].
    pub grpc_service: &'static str,
    /// As [`GrpcLabels::grpc_method`].
    pub grpc_method: &'static str,
    /// The status code in Go's names: `OK`, `Canceled`, `InvalidArgument`, …
    pub grpc_code: &'static str,
}

/// The go-grpc-prometheus server families, unprefixed, so that existing gRPC
/// dashboards and alerts read this service as they read any Go gRPC server.
pub struct GrpcServerMetrics {
    /// `grpc_server_started_total`: calls started.
    pub started: Family<GrpcLabels, Counter>,
    /// `grpc_server_handled_total`: calls finished, by code.
    pub handled: Family<GrpcCodeLabels, Counter>,
    /// `grpc_server_msg_received_total`: request messages read.
    pub msg_received: Family<GrpcLabels, Counter>,
    /// `grpc_server_msg_sent_total`: response messages sent.
    pub msg_sent: Family<GrpcLabels, Counter>,
    /// `grpc_server_handling_seconds`: from the call's start to its end.
    pub handling_seconds: Family<GrpcLabels, Histogram>,
}

impl GrpcServerMetrics {
    /// The families registered in `registry`, with a zero series for every RPC of the
    /// table (and `handled` with code OK), so that rates and dashboards show every method
    /// from the first scrape on, as go-grpc-prometheus's `InitializeMetrics` does.
    fn registered(registry: &mut Registry, rpcs: &[GrpcLabels]) -> Self {
        let metrics = Self {
            started: Family::default(),
            handled: Family::default(),
            msg_received: Family::default(),
            msg_sent: Family::default(),
            // go-grpc-prometheus's default buckets (Prometheus's DefBuckets).
            handling_seconds: Family::new_with_constructor(|| {
                Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
            }),
        };
        for labels in rpcs {
            drop(metrics.started.get_or_create(labels));
            drop(metrics.msg_received.get_or_create(labels));
            drop(metrics.msg_sent.get_or_create(labels));
            drop(metrics.handling_seconds.get_or_create(labels));
            let ok = GrpcCodeLabels {
                grpc_type: labels.grpc_type,
                grpc_service: labels.grpc_service,
                grpc_method: labels.grpc_method,
                grpc_code: "OK",
            };
            drop(metrics.handled.get_or_create(&ok));
        }
        registry.register(
            "grpc_server_started",
            "Total number of RPCs started on the server.",
            metrics.started.clone(),
        );
        registry.register(
            "grpc_server_handled",
            "Total number of RPCs completed on the server, regardless of success or failure.",
            metrics.handled.clone(),
        );
        registry.register(
            "grpc_server_msg_received",
            "Total number of RPC stream messages received on the server.",
            metrics.msg_received.clone(),
        );
        registry.register(
            "grpc_server_msg_sent",
            "Total number of gRPC stream messages sent by the server.",
            metrics.msg_sent.clone(),
        );
        registry.register(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
            metrics.handling_seconds.clone(),
        );
        metrics
    }
}

/// Labels of a store's reachability.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    /// `ranking` (Redis, or the in-process store).
    pub store: &'static str,
}

/// Labels of the statements a SQL session limit refused.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SqlLimitLabels {
    /// `lock_wait` (a lock waited for as long as `RANKING_SQL_TX_TIMEOUT`) or
    /// `idle_transaction` (this session's transaction idled that long and was rolled back).
    pub limit: &'static str,
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
    /// The unprefixed registry of the standard families ([`Metrics::grpc`]).
    standard: Registry,
    /// The go-grpc-prometheus families.
    pub grpc: GrpcServerMetrics,
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
    /// Idle connections closed to make room for a new one at the cap.
    pub connections_evicted: Counter,
    /// Snapshot versions installed on this replica.
    pub snapshot_loads: Counter,
    /// Versions not held in memory because they would exceed `RANKING_SNAPSHOT_MAX_ENTRIES`.
    pub snapshot_oversize: Counter,
    /// The version of today's snapshot per window (rendered with its age).
    snapshot_versions: std::sync::Mutex<std::collections::BTreeMap<&'static str, u64>>,
    /// 1 while this replica's last poll of a store succeeded, 0 after it failed.
    pub store_reachable: Family<StoreLabels, Gauge>,
    /// SQL statements refused by a session limit (`RANKING_SQL_TX_TIMEOUT`).
    pub sql_limits: Family<SqlLimitLabels, Counter>,
    /// Live passes.
    pub live: live::LiveMetrics,
    /// The per-shopper caps' metrics.
    pub shoppers: shoppers::ShopperMetrics,
    /// What the day leases refused.
    pub leases: leases::LeaseMetrics,
    /// Event-bus sources.
    pub bus: bus::BusMetrics,
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
    /// A registry with every metric registered; the standard gRPC families get a zero series
    /// for each of `rpcs`.
    pub fn with_rpcs(rpcs: &[GrpcLabels]) -> Self {
        let mut standard = Registry::default();
        let grpc = GrpcServerMetrics::registered(&mut standard, rpcs);
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
        let connections_evicted = Counter::default();
        let snapshot_loads = Counter::default();
        let snapshot_oversize = Counter::default();
        let store_reachable = Family::<StoreLabels, Gauge>::default();
        let sql_limits = Family::<SqlLimitLabels, Counter>::default();
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
            "connections_evicted",
            "Idle connections closed to make room for a new one at RANKING_MAX_CONNECTIONS",
            connections_evicted.clone(),
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
        registry.register(
            "store_reachable",
            "1 while this replica's last poll of the store succeeded (the ranking store: every 500 ms), 0 after it failed",
            store_reachable.clone(),
        );
        registry.register(
            "sql_limits_hit",
            "SQL statements refused by a session limit of RANKING_SQL_TX_TIMEOUT: a lock waited for that long \
             (lock_wait), or this replica's transaction idled that long and was rolled back (idle_transaction)",
            sql_limits.clone(),
        );
        let live = live::LiveMetrics::registered(&mut registry);
        let shoppers = shoppers::ShopperMetrics::registered(&mut registry);
        let leases = leases::LeaseMetrics::registered(&mut registry);
        let bus = bus::BusMetrics::registered(&mut registry);
        registry.register("rpc_calls", "gRPC calls by method and code", rpc_calls.clone());
        registry.register("rpc_duration_seconds", "gRPC call latency by method and code", rpc_seconds.clone());
        Self {
            registry,
            standard,
            grpc,
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
            connections_evicted,
            snapshot_loads,
            snapshot_oversize,
            snapshot_versions: Default::default(),
            store_reachable,
            sql_limits,
            live,
            shoppers,
            leases,
            bus,
            rpc_calls,
            rpc_seconds,
        }
    }

    /// A registry with every metric registered, the standard gRPC families without series
    /// until calls come (the server uses [`Metrics::with_rpcs`]).
    pub fn new() -> Self {
        Self::with_rpcs(&[])
    }

    /// Records the phases of a successful recompute.
    pub fn recompute_phases(&self, phases: &[(&'static str, f64)]) {
        for (phase, seconds) in phases {
            self.recompute_phase_seconds.get_or_create(&PhaseLabels { phase }).set(*seconds);
        }
    }

    /// Records a successful recompute.
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
        use prometheus_client::encoding::text;
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = text::encode_registry(&mut out, &self.registry);
        let _ = text::encode_registry(&mut out, &self.standard);
        if let Some(bytes) = resident_bytes() {
            out.push_str(&format!(
                "# HELP process_resident_memory_bytes Resident memory size in bytes.\n\
                 # TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {bytes}\n"
            ));
        }
        let _ = text::encode_eof(&mut out);
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

/// This process's resident memory (Linux: `/proc/self/statm`, in pages of 4 KiB), the
/// standard `process_resident_memory_bytes` of Prometheus clients.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
