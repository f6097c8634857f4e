//! The Kafka source (SPEC §10.1): every replica is a member of one consumer group
//! (`RANKING_KAFKA_GROUP`), so replicas share the partitions and a dead member's partitions
//! move to the others.
//!
//! Offsets follow librdkafka's at-least-once pattern: `enable.auto.offset.store=false`, and
//! after a batch's SQL commit (and its dead letters' delivery) the offset of each of its
//! partitions is stored as *last processed + 1*; the auto-commit (every second) and the
//! revocation commit send what is stored. The pitfalls this is built against:
//!
//! - *an offset that is not last + 1*: one place computes it ([`next_offsets`]), tested;
//! - *committing after a revoke*: every rebalance bumps a generation, and a batch whose
//!   fetch began in an earlier generation stores no offset at all (its records, committed in
//!   SQL, come again to the partition's next owner and are DUPLICATEs); rebalance callbacks
//!   run inside `recv`, on this task, so none can fall between the check and the store;
//! - *assigning twice*: the assignment is left to rdkafka's own rebalance handler; this
//!   context only hooks before it (commit what is stored, drop the lag series);
//! - *an async commit whose failure is never seen*: `commit_callback` logs every failed
//!   commit (the next commit carries the same offsets or later ones).
//!
//! While a batch commits, the next one is gathered, so fetching and committing overlap; a
//! batch is handled only after the one before it, so offsets are stored in fetch order, and
//! the rebalance check above covers the batch gathered meanwhile (its own generation).
//!
//! A database outage holds the batch (and the one gathered behind it) and retries it with
//! backoff without fetching more; an outage longer than `max.poll.interval.ms` makes the
//! member leave the group, and its partitions' uncommitted records go to another member,
//! DUPLICATEs for what this one committed meanwhile. Shutdown: stop fetching, commit what is stored, close the consumer
//! (which leaves the group) off the runtime, within the grace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use super::{Backoff, BatchOptions, Connected, Disposition, Sink};
use crate::app::ingest::Ingest;
use crate::metrics::Metrics;
use crate::metrics::bus::LagLabels;

/// The source's name in metrics and logs.
pub const SOURCE: &str = "kafka";

/// Longest a dead letter may wait in the producer's queue before its delivery counts as
/// failed (and is retried).
const DEAD_LETTER_TIMEOUT: Duration = Duration::from_secs(30);

/// The Kafka source's settings.
#[derive(Debug, Clone)]
pub struct KafkaOptions {
    /// Bootstrap servers, comma-separated.
    pub brokers: String,
    /// Topics consumed.
    pub topics: Vec<String>,
    /// Consumer group of every replica.
    pub group: String,
    /// Where invalid records go; `None`: logged, counted and skipped.
    pub dead_letter_topic: Option<String>,
    /// Extra librdkafka properties, applied last.
    pub properties: Vec<(String, String)>,
    /// Batching.
    pub batch: BatchOptions,
}

/// The consumer's callbacks: rebalances, commits, statistics, errors.
struct Context {
    /// Bumped by every rebalance (see the module doc).
    generation: AtomicU64,
    metrics: Arc<Metrics>,
    connected: Connected,
}

impl ClientContext for Context {
    /// Lag per assigned partition (librdkafka's `consumer_lag`: high watermark − committed
    /// offset; before the group's first commit, high − low watermark), and whether any
    /// broker is up.
    fn stats(&self, stats: Statistics) {
        self.connected.set(stats.brokers.values().any(|b| b.nodeid >= 0 && b.state == "UP"));
        for (topic, t) in &stats.topics {
            for p in t.partitions.values().filter(|p| p.partition >= 0 && p.desired) {
                let lag = if p.consumer_lag >= 0 {
                    p.consumer_lag
                } else if p.hi_offset >= 0 && p.lo_offset >= 0 {
                    p.hi_offset - p.lo_offset
                } else {
                    continue;
                };
                let labels = LagLabels { source: SOURCE, partition: format!("{topic}/{}", p.partition) };
                self.metrics.bus.lag.get_or_create(&labels).set(lag);
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.connected.set(false);
        }
        tracing::warn!(error = %error, reason, "kafka client error");
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if let Rebalance::Revoke(partitions) = rebalance {
            // Everything stored committed in SQL: commit it before the partitions move, so
            // their next owner starts after it.
            match consumer.commit_consumer_state(CommitMode::Sync) {
                Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "commit on revocation failed; the next owner gets those records again")
                }
            }
            for p in partitions.elements() {
                let labels = LagLabels { source: SOURCE, partition: format!("{}/{}", p.topic(), p.partition()) };
                self.metrics.bus.lag.remove(&labels);
            }
        }
        tracing::info!(rebalance = ?rebalance, "kafka rebalance");
    }

    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        match result {
            Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
            Err(e) => {
                tracing::warn!(error = %e, offsets = ?offsets, "kafka offset commit failed; the next commit carries them")
            }
        }
    }
}

/// A fetched batch: its records and the generation its fetch began in.
struct Batch<'c> {
    records: Vec<BorrowedMessage<'c>>,
    generation: u64,
    started: Instant,
}

/// The running source.
pub struct KafkaSource {
    consumer: StreamConsumer<Context>,
    dead_letters: Option<(FutureProducer, String)>,
    sink: Sink,
    batch: BatchOptions,
}

impl KafkaSource {
    /// The consumer (subscribed) and the dead-letter producer; librdkafka connects in the
    /// background, so a broker that is down fails nothing here.
    pub fn new(
        options: KafkaOptions,
        ingest: Arc<Ingest>,
        metrics: Arc<Metrics>,
        connected: Connected,
    ) -> anyhow::Result<Self> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &options.brokers)
            .set("group.id", &options.group)
            .set("client.id", "ranking-service")
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", "1000")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "false")
            .set("statistics.interval.ms", "1000")
            // Bounded prefetch: at most this many KB of records wait in the client per
            // partition queue (librdkafka's default is 64 MB).
            .set("queued.max.messages.kbytes", "16384");
        for (k, v) in &options.properties {
            config.set(k, v);
        }
        let context = Context { generation: AtomicU64::new(0), metrics: metrics.clone(), connected };
        let consumer: StreamConsumer<Context> = config.create_with_context(context)?;
        let topics: Vec<&str> = options.topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics)?;
        let dead_letters = match &options.dead_letter_topic {
            None => None,
            Some(topic) => {
                let mut producer = ClientConfig::new();
                producer
                    .set("bootstrap.servers", &options.brokers)
                    .set("client.id", "ranking-service-dlq")
                    .set("message.timeout.ms", DEAD_LETTER_TIMEOUT.as_millis().to_string());
                for (k, v) in
                    options.properties.iter().filter(|(k, _)| !k.starts_with("session.") && !k.starts_with("group."))
                {
                    producer.set(k, v);
                }
                Some((producer.create::<FutureProducer>()?, topic.clone()))
            }
        };
        let sink = Sink::new(ingest, metrics, options.batch.format, SOURCE);
        Ok(Self { consumer, dead_letters, sink, batch: options.batch })
    }

    /// Consumes until `stop`, then commits what is stored and leaves the group, giving the
    /// close at most `grace`.
    pub async fn run(self, stop: CancellationToken, grace: Duration) {
        let mut backoff = Backoff::default();
        let mut next = self.next_batch(&stop, &mut backoff).await;
        // While a batch commits, the next one is gathered (one batch ahead, no more): the
        // fetch and the commit overlap instead of taking turns. Offsets are still stored in
        // fetch order, since a batch is handled only after the one before it.
        while let Some(batch) = next.take() {
            let (handled, following) = tokio::join!(self.handle(batch, &stop), self.next_batch(&stop, &mut backoff));
            if !handled {
                break;
            }
            next = following;
        }
        let consumer = self.consumer;
        let close = tokio::task::spawn_blocking(move || {
            match consumer.commit_consumer_state(CommitMode::Sync) {
                Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
                Err(e) => tracing::warn!(error = %e, "final kafka commit failed; those records will be redelivered"),
            }
            // Dropping the consumer closes it: its partitions are revoked and it leaves the group.
            drop(consumer);
        });
        match tokio::time::timeout(grace.max(Duration::from_secs(1)), close).await {
            Ok(_) => tracing::info!("kafka source stopped: offsets committed, left the group"),
            Err(_) => {
                tracing::warn!("kafka consumer did not close within the grace; the broker expires its membership")
            }
        }
    }

    /// Waits for a first record, then takes more until the batch is full or its wait is
    /// over. `None` at `stop`.
    async fn next_batch<'c>(&'c self, stop: &CancellationToken, backoff: &mut Backoff) -> Option<Batch<'c>> {
        let first = loop {
            tokio::select! {
                received = self.consumer.recv() => match received {
                    Ok(m) => break m,
                    Err(e) => {
                        tracing::warn!(error = %e, "kafka consume error");
                        if !backoff.wait(stop).await {
                            return None;
                        }
                    }
                },
                () = stop.cancelled() => return None,
            }
        };
        backoff.reset();
        let generation = self.consumer.context().generation.load(Ordering::SeqCst);
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.batch.max_wait;
        let mut bytes = first.payload_len();
        let mut records = vec![first];
        while records.len() < self.batch.max_records && bytes < super::MAX_BATCH_BYTES {
            match tokio::time::timeout_at(deadline, self.consumer.recv()).await {
                Ok(Ok(m)) => {
                    bytes += m.payload_len();
                    records.push(m);
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "kafka consume error");
                    break;
                }
                Err(_) => break,
            }
        }
        Some(Batch { records, generation, started })
    }

    /// Records the batch, dead-letters its invalid records, stores its offsets. False when
    /// `stop` came while it waited for the database or the dead-letter topic: the batch is
    /// abandoned, and what it left unstored is redelivered.
    async fn handle(&self, batch: Batch<'_>, stop: &CancellationToken) -> bool {
        let payloads: Vec<Option<&[u8]>> = batch.records.iter().map(|m| m.payload()).collect();
        let mut backoff = Backoff::default();
        let dispositions = loop {
            match self.sink.record(&payloads).await {
                Ok(d) => break d,
                Err(e) => {
                    tracing::warn!(error = %e, records = payloads.len(), "database unavailable: kafka consumption paused, the batch is retried");
                    if !backoff.wait(stop).await {
                        return false;
                    }
                }
            }
        };
        let invalid: Vec<(&BorrowedMessage<'_>, &str)> = batch
            .records
            .iter()
            .zip(&dispositions)
            .filter_map(|(m, d)| match d {
                Disposition::Invalid(error) => Some((m, error.as_str())),
                Disposition::Recorded(_) => None,
            })
            .collect();
        if !self.dead_letter(&invalid, stop).await {
            return false;
        }
        if self.consumer.context().generation.load(Ordering::SeqCst) == batch.generation {
            if let Err(e) = self
                .consumer
                .store_offsets(&next_offsets(batch.records.iter().map(|m| (m.topic(), m.partition(), m.offset()))))
            {
                tracing::warn!(error = %e, "kafka offsets not stored; the batch's records come again as duplicates");
            }
        } else {
            tracing::info!(
                records = batch.records.len(),
                "rebalance during the batch: no offset stored, its records come again as duplicates"
            );
        }
        self.sink_metrics().batch_seconds.observe(batch.started.elapsed().as_secs_f64());
        true
    }

    fn sink_metrics(&self) -> &crate::metrics::bus::BusMetrics {
        &self.consumer.context().metrics.bus
    }

    /// Sends every invalid record to the dead-letter topic with its error and origin, and
    /// waits for the deliveries; failed ones are retried with backoff. Without a topic they
    /// are logged and skipped.
    async fn dead_letter(&self, invalid: &[(&BorrowedMessage<'_>, &str)], stop: &CancellationToken) -> bool {
        if invalid.is_empty() {
            return true;
        }
        let Some((producer, topic)) = &self.dead_letters else {
            tracing::warn!(
                records = invalid.len(),
                first_error = invalid[0].1,
                "invalid kafka records skipped (no dead-letter topic)"
            );
            return true;
        };
        let mut pending: Vec<usize> = (0..invalid.len()).collect();
        let mut backoff = Backoff::default();
        loop {
            let sends = pending.iter().map(|&i| {
                let (m, error) = invalid[i];
                let origin = format!("{}/{}/{}", m.topic(), m.partition(), m.offset());
                async move {
                    let headers = OwnedHeaders::new()
                        .insert(Header { key: "ranking-error", value: Some(error) })
                        .insert(Header { key: "ranking-source", value: Some(origin.as_str()) });
                    let mut record = FutureRecord::<[u8], [u8]>::to(topic).headers(headers);
                    if let Some(key) = m.key() {
                        record = record.key(key);
                    }
                    if let Some(payload) = m.payload() {
                        record = record.payload(payload);
                    }
                    producer.send(record, DEAD_LETTER_TIMEOUT).await.map_err(|(e, _)| e)
                }
            });
            let results = futures_util::future::join_all(sends).await;
            let failed: Vec<usize> = pending
                .iter()
                .zip(results)
                .filter_map(|(&i, r)| r.err().map(|e| (i, e)))
                .map(|(i, e)| {
                    tracing::warn!(error = %e, topic = %topic, "dead letter not delivered; retried");
                    i
                })
                .collect();
            if failed.is_empty() {
                return true;
            }
            pending = failed;
            if !backoff.wait(stop).await {
                return false;
            }
        }
    }
}

/// The offsets to store after the records at `(topic, partition, offset)` were processed:
/// per partition, the highest offset processed + 1 (Kafka's committed offset is the next
/// record to read, not the last one read).
fn next_offsets<'a>(records: impl Iterator<Item = (&'a str, i32, i64)>) -> TopicPartitionList {
    let mut highest: BTreeMap<(&str, i32), i64> = BTreeMap::new();
    for (topic, partition, offset) in records {
        let e = highest.entry((topic, partition)).or_insert(offset);
        *e = (*e).max(offset);
    }
    let mut tpl = TopicPartitionList::with_capacity(highest.len());
    for ((topic, partition), offset) in highest {
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset + 1))
            .expect("an absolute offset is always valid");
    }
    tpl
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_offset_is_the_highest_processed_plus_one_per_partition() {
        let records = [("t", 0, 10), ("t", 1, 3), ("t", 0, 12), ("t", 0, 11), ("u", 0, 0)];
        let tpl = next_offsets(records.into_iter());
        let stored: Vec<(String, i32, Offset)> =
            tpl.elements().iter().map(|e| (e.topic().to_string(), e.partition(), e.offset())).collect();
        assert_eq!(
            stored,
            vec![
                ("t".into(), 0, Offset::Offset(13)),
                ("t".into(), 1, Offset::Offset(4)),
                ("u".into(), 0, Offset::Offset(1))
            ]
        );
    }
}
