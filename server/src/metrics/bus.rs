//! The event-bus sources' metrics: records by source and outcome, dead letters, lag per
//! partition, batch time, whether each source is connected, partitions moved by rebalances.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of `ranking_bus_records_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecordLabels {
    /// `kafka` or `jetstream`.
    pub source: &'static str,
    /// `accepted`, `duplicate` or `invalid`; `unavailable`: in a batch the store could not
    /// take, to be tried again (counted once per attempt).
    pub outcome: &'static str,
}

/// Labels of `ranking_bus_dead_letters_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeadLetterLabels {
    /// `kafka` or `jetstream`.
    pub source: &'static str,
    /// `first`, or `again`: this replica had dead-lettered the same record before.
    pub delivery: &'static str,
}

/// Labels of `ranking_bus_lag_records`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LagLabels {
    /// `kafka` or `jetstream`.
    pub source: &'static str,
    /// Kafka: `topic/partition` of a partition assigned to this replica; JetStream: the
    /// stream. Bounded by the topics' partitions, which the operator sets, never a caller.
    pub partition: String,
}

/// Labels of `ranking_bus_connected`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// `kafka` or `jetstream`.
    pub source: &'static str,
}

/// Labels of `ranking_bus_partitions_moved_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MoveLabels {
    /// `kafka`.
    pub source: &'static str,
    /// `assigned` or `revoked`.
    pub change: &'static str,
}

/// Every bus metric.
pub struct BusMetrics {
    /// Records by source and outcome.
    pub records: Family<RecordLabels, Counter>,
    /// Records delivered to the dead-letter destination, first time or again.
    pub dead_letters: Family<DeadLetterLabels, Counter>,
    /// Records not yet consumed: Kafka high watermark − committed offset, JetStream pending.
    pub lag: Family<LagLabels, Gauge>,
    /// Seconds per batch, from its first record to its offsets stored / messages acked.
    pub batch_seconds: Histogram,
    /// 1 while the source is connected to its bus.
    pub connected: Family<SourceLabels, Gauge>,
    /// Partitions assigned to or revoked from this replica by group rebalances (a
    /// cooperative rebalance revokes only those that move).
    pub partitions_moved: Family<MoveLabels, Counter>,
    /// Kafka partitions seen with records to consume and no fetch under way for longer than
    /// a stall (each episode once): librdkafka left them waiting, after a leader change say.
    pub partitions_stalled: Family<SourceLabels, Counter>,
}

impl BusMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let bus = Self {
            records: Family::default(),
            dead_letters: Family::default(),
            lag: Family::default(),
            batch_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            connected: Family::default(),
            partitions_moved: Family::default(),
            partitions_stalled: Family::default(),
        };
        registry.register("bus_records", "Event-bus records by source and outcome", bus.records.clone());
        registry.register(
            "bus_dead_letters",
            "Records delivered to the dead-letter destination: first, or again by this replica",
            bus.dead_letters.clone(),
        );
        registry.register(
            "bus_lag_records",
            "Records not yet consumed (Kafka: high watermark - committed offset; JetStream: pending)",
            bus.lag.clone(),
        );
        registry.register(
            "bus_batch_seconds",
            "Event-bus batch: first record to offsets stored / acked",
            bus.batch_seconds.clone(),
        );
        registry.register("bus_connected", "1 while the source is connected to its bus", bus.connected.clone());
        registry.register(
            "bus_partitions_moved",
            "Partitions assigned to or revoked from this replica by consumer-group rebalances",
            bus.partitions_moved.clone(),
        );
        registry.register(
            "bus_partitions_stalled",
            "Kafka partitions that had records to consume and fetched none for 30 s (logged with their fetch state)",
            bus.partitions_stalled.clone(),
        );
        bus
    }

    /// Counts `n` records of `source` with `outcome`.
    pub fn count(&self, source: &'static str, outcome: &'static str, n: u64) {
        if n > 0 {
            self.records.get_or_create(&RecordLabels { source, outcome }).inc_by(n);
        }
    }
}
