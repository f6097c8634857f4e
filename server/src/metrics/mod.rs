//! Service metrics in the Prometheus registry served on `RANKING_METRICS_LISTEN`, one type
//! per part of the service.
//!
//! Counters are plain atomics: recording them on the hot path costs a few nanoseconds.

use prometheus_client::registry::Registry;

pub mod bus;
pub mod connections;
pub mod controls;
pub mod experiments;
pub mod feed;
pub mod grpc;
pub mod ingest;
pub mod layout;
pub mod leases;
pub mod live;
pub mod phases;
pub mod recompute;
pub mod shoppers;
pub mod stores;
pub mod watch;

pub use grpc::{GrpcCodeLabels, GrpcLabels, GrpcServerMetrics, RpcLabels};
pub use stores::{SqlLimitLabels, StoreLabels};

/// Every metric the service exports.
pub struct Metrics {
    registry: Registry,
    /// The unprefixed registry of the standard families ([`Metrics::grpc`]).
    standard: Registry,
    /// The go-grpc-prometheus families.
    pub grpc: GrpcServerMetrics,
    /// Calls by method and status code, and their latency.
    pub rpc: grpc::RpcMetrics,
    /// What the ingest path did with events.
    pub ingest: ingest::IngestMetrics,
    /// Recomputes.
    pub recompute: recompute::RecomputeMetrics,
    /// WatchTopN.
    pub watch: watch::WatchMetrics,
    /// Connections and calls in flight.
    pub connections: connections::ConnectionMetrics,
    /// This replica's copies, the ranking store's reachability, SQL session limits.
    pub stores: stores::StoreMetrics,
    /// Live passes.
    pub live: live::LiveMetrics,
    /// Merchandising controls and their passes.
    pub controls: controls::ControlMetrics,
    /// The per-shopper caps' metrics.
    pub shoppers: shoppers::ShopperMetrics,
    /// The storage layout in force and each live replica's.
    pub layout: layout::LayoutMetrics,
    /// What the day leases refused.
    pub leases: leases::LeaseMetrics,
    /// Event-bus sources.
    pub bus: bus::BusMetrics,
    /// The ranking feed.
    pub feed: feed::FeedMetrics,
    /// Sticky experiments.
    pub experiments: experiments::ExperimentMetrics,
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
        Self {
            ingest: ingest::IngestMetrics::registered(&mut registry),
            recompute: recompute::RecomputeMetrics::registered(&mut registry),
            watch: watch::WatchMetrics::registered(&mut registry),
            connections: connections::ConnectionMetrics::registered(&mut registry),
            stores: stores::StoreMetrics::registered(&mut registry),
            live: live::LiveMetrics::registered(&mut registry),
            controls: controls::ControlMetrics::registered(&mut registry),
            shoppers: shoppers::ShopperMetrics::registered(&mut registry),
            leases: leases::LeaseMetrics::registered(&mut registry),
            layout: layout::LayoutMetrics::registered(&mut registry),
            bus: bus::BusMetrics::registered(&mut registry),
            feed: feed::FeedMetrics::registered(&mut registry),
            experiments: experiments::ExperimentMetrics::registered(&mut registry),
            rpc: grpc::RpcMetrics::registered(&mut registry),
            registry,
            standard,
            grpc,
        }
    }

    /// A registry with every metric registered, the standard gRPC families without series
    /// until calls come (the server uses [`Metrics::with_rpcs`]).
    pub fn new() -> Self {
        Self::with_rpcs(&[])
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
        let since = self.recompute.seconds_since_last().unwrap_or(-1);
        out.insert_str(
            0,
            &format!(
                "# HELP ranking_seconds_since_last_recompute Seconds since the last successful recompute (-1: none yet).\n\
                 # TYPE ranking_seconds_since_last_recompute gauge\nranking_seconds_since_last_recompute {since}\n"
            ),
        );
        out.insert_str(0, &self.stores.render_snapshot_versions());
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
