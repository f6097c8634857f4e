//! The Kafka source: every replica is a member of one consumer group
//! (`RANKING_KAFKA_GROUP`), so replicas share the partitions and a dead member's partitions
//! move to the others.
//!
//! Offsets follow librdkafka's at-least-once pattern: `enable.auto.offset.store=false`, and
//! after a batch's SQL commit (and its dead letters' delivery) the offset of each of its
//! partitions is stored as *last processed + 1*; the auto-commit (every second) and the
//! revocation commit send what is stored; a batch with dead letters commits at once. The pitfalls this is built against:
//!
//! - *an offset that is not last + 1*: one place computes it ([`next_offsets`]), tested;
//! - *committing after a revoke*: every revocation bumps a generation and marks the partitions
//!   it took with it; a batch stores no offset for a partition revoked since its fetch began
//!   (those records, committed in SQL, come again to the partition's next owner and are
//!   DUPLICATEs; when that owner is this consumer again, whose fetch position is already past
//!   them, the partition is sought back to them), and stores the others' as usual; rebalance callbacks run inside `recv`, on
//!   this task, so none can fall between the check and the store;
//! - *assigning twice*: the assignment is left to rdkafka's own rebalance handler (eager or
//!   incremental, as the protocol is); [`Membership`] only hooks before it (commit what is stored, drop the lag series);
//! - *an async commit whose failure is never seen*: `commit_callback` logs every failed
//!   commit (the next commit carries the same offsets or later ones).
//!
//! Membership is built for replicas that come and go: the `cooperative-sticky` assignor moves
//! only the partitions that must move when a member joins or leaves (the others keep
//! consuming through the rebalance), and static membership (`group.instance.id`, the host
//! name unless set) gives a replica restarted within `session.timeout.ms` its partitions back
//! without a rebalance at all. A static member does not leave the group when it closes: its
//! partitions wait for it until the session times out.
//!
//! While a batch commits, the next one is gathered, so fetching and committing overlap; a
//! batch is handled only after the one before it, so offsets are stored in fetch order, and
//! the rebalance check above covers the batch gathered meanwhile (its own generation).
//!
//! A database outage holds the batch (and the one gathered behind it) and retries it with
//! backoff without fetching more; an outage longer than `max.poll.interval.ms` makes the
//! member leave the group, and its partitions' uncommitted records go to another member,
//! DUPLICATEs for what this one committed meanwhile.
//!
//! A fatal client error (a static member fenced after its session was lost while a broker
//! failed over, say) ends that consumer for good: the source drops it and joins the group
//! with a new one, after backoff. Shutdown: stop fetching, commit what is stored, close the
//! consumer off the runtime, within the grace.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::producer::FutureProducer;
use rdkafka::topic_partition_list::Offset;
use tokio_util::sync::CancellationToken;

use super::{Backoff, BatchOptions, Connected, Disposition, Sink};
use crate::app::ingest::Ingest;
use crate::bus::repeats::DeadLetterLog;
use crate::metrics::Metrics;
use membership::{Membership, next_offsets};

mod dead_letters;
mod membership;

/// The source's name in metrics and logs.
pub const SOURCE: &str = "kafka";

/// What the clients do when every known broker is down. librdkafka's default since 2.10,
/// `rebootstrap`, forgets the brokers and starts over from the bootstrap list, and was seen
/// never reconnecting after a one-broker cluster restarted (one restart in three); `none`
/// keeps reconnecting to the brokers it knows, as clients did before.
pub(crate) const RECOVERY: &str = "none";

/// Longest one wait for the consumer's queue. librdkafka wakes a waiting reader only when
/// its queue turns from empty to non-empty, and ops it serves inside a poll (outdated
/// fetches, statistics) can leave the reader asleep on a queue that never emptied: seen after
/// a broker restart, with the group's revocation waiting in the queue for good. A wait that
/// ends polls the queue again.
const QUEUE_WAIT: Duration = Duration::from_millis(250);

/// The pause after an error the consumer's queue gave instead of a record. Short and fixed:
/// librdkafka retries by itself and makes its error events at its own reconnect pace, and
/// the events of an outage wait in the queue ahead of the records fetched after it. A wait
/// growing with each event (up to 5 s) once held a drain behind a backlog of a dead group
/// coordinator's connection errors, served one every few seconds, for minutes after the
/// broker was back.
const ERROR_PAUSE: Duration = Duration::from_millis(20);

/// Longest a seek back of a partition waits for the client.
const SEEK_TIMEOUT: Duration = Duration::from_secs(1);

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
    /// Static membership's `group.instance.id`; `None`: dynamic membership.
    pub instance_id: Option<String>,
    /// Extra librdkafka properties, applied last.
    pub properties: Vec<(String, String)>,
    /// Batching.
    pub batch: BatchOptions,
}

/// A fetched batch: its records and the generation its fetch began in.
struct Batch<'c> {
    records: Vec<BorrowedMessage<'c>>,
    generation: u64,
    started: Instant,
}

/// What ended a consumer's run.
enum Ended {
    /// `stop`: the source shuts down.
    Stopped,
    /// A fatal client error (its code and librdkafka's reason): this consumer can do
    /// nothing more.
    Fatal(RDKafkaErrorCode, String),
}

/// What a wait for the next batch gave.
enum Fetched<'c> {
    Batch(Batch<'c>),
    Ended(Ended),
}

/// The consumer, with its membership callbacks.
type GroupConsumer = StreamConsumer<Membership>;

/// How to make a subscribed consumer, again after a fatal error.
struct Subscription {
    config: ClientConfig,
    topics: Vec<String>,
    metrics: Arc<Metrics>,
    connected: Connected,
}

impl Subscription {
    fn instance_id(&self) -> Option<&str> {
        self.config.get("group.instance.id")
    }

    fn consumer(&self) -> anyhow::Result<GroupConsumer> {
        let membership = Membership::new(self.metrics.clone(), self.connected.clone());
        let consumer: GroupConsumer = self.config.create_with_context(membership)?;
        let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics)?;
        Ok(consumer)
    }
}

/// The running source.
pub struct KafkaSource {
    subscription: Subscription,
    consumer: GroupConsumer,
    worker: Worker,
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
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("statistics.interval.ms", "1000")
            .set("metadata.recovery.strategy", RECOVERY)
            // Bounded prefetch: at most this many KB of records wait in the client per
            // partition queue (librdkafka's default is 64 MB).
            .set("queued.max.messages.kbytes", "16384");
        if let Some(id) = &options.instance_id {
            config.set("group.instance.id", id);
        }
        for (k, v) in &options.properties {
            config.set(k, v);
        }
        let subscription = Subscription { config, topics: options.topics.clone(), metrics: metrics.clone(), connected };
        let consumer = subscription.consumer()?;
        let dead_letters = dead_letters::producer(&options)?;
        let dead_letter_log = DeadLetterLog::new(metrics.clone(), SOURCE);
        let sink = Sink::new(ingest, metrics, options.batch.format, SOURCE);
        let worker = Worker { dead_letters, dead_letter_log, sink, batch: options.batch };
        Ok(Self { subscription, consumer, worker })
    }

    /// Consumes until `stop`, then commits what is stored and closes the consumer, giving the
    /// close at most `grace`. A consumer ended by a fatal error is replaced by a new one.
    pub async fn run(self, stop: CancellationToken, grace: Duration) {
        let Self { subscription, mut consumer, worker } = self;
        let mut backoff = Backoff::default();
        loop {
            let (code, reason) = match worker.consume(&consumer, &stop).await {
                Ended::Stopped => break,
                Ended::Fatal(code, reason) => (code, reason),
            };
            if code == RDKafkaErrorCode::FencedInstanceId {
                // Also what a replica sees when another one runs with its instance id (two
                // replicas on one host, both defaulting to its name): they fence each other
                // in turn until one is given an id of its own.
                tracing::error!(
                    reason,
                    instance_id = subscription.instance_id().unwrap_or_default(),
                    "kafka consumer fenced; a new one joins the group (if this repeats, another replica has the same RANKING_KAFKA_INSTANCE_ID)"
                );
            } else {
                tracing::error!(reason, "kafka consumer failed for good; a new one joins the group");
            }
            // Closing a failed consumer may block on the brokers: off the runtime, not awaited.
            drop(tokio::task::spawn_blocking(move || drop(consumer)));
            consumer = loop {
                if !backoff.wait(&stop).await {
                    return;
                }
                match subscription.consumer() {
                    Ok(fresh) => break fresh,
                    Err(e) => tracing::warn!(error = %e, "kafka consumer not created; retried"),
                }
            };
        }
        close(consumer, grace).await;
    }
}

/// Commits what is stored and closes the consumer (a dynamic member leaves the group, a
/// static one keeps its partitions until its session times out), off the runtime.
async fn close(consumer: GroupConsumer, grace: Duration) {
    let close = tokio::task::spawn_blocking(move || {
        match consumer.commit_consumer_state(CommitMode::Sync) {
            Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
            Err(e) => tracing::warn!(error = %e, "final kafka commit failed; those records will be redelivered"),
        }
        drop(consumer);
    });
    match tokio::time::timeout(grace.max(Duration::from_secs(1)), close).await {
        Ok(_) => tracing::info!("kafka source stopped: offsets committed, consumer closed"),
        Err(_) => tracing::warn!("kafka consumer did not close within the grace; the broker expires its membership"),
    }
}

/// What consumes: the batches' sink and the dead-letter producer.
struct Worker {
    dead_letters: Option<(FutureProducer, String)>,
    dead_letter_log: DeadLetterLog,
    sink: Sink,
    batch: BatchOptions,
}

impl Worker {
    /// Consumes with `consumer` until `stop` or a fatal error.
    async fn consume(&self, consumer: &GroupConsumer, stop: &CancellationToken) -> Ended {
        let mut next = self.next_batch(consumer, stop).await;
        // While a batch commits, the next one is gathered (one batch ahead, no more): the
        // fetch and the commit overlap instead of taking turns. Offsets are still stored in
        // fetch order, since a batch is handled only after the one before it.
        loop {
            let batch = match next {
                Fetched::Batch(batch) => batch,
                Fetched::Ended(ended) => return ended,
            };
            let (handled, following) =
                tokio::join!(self.handle(consumer, batch, stop), self.next_batch(consumer, stop));
            if !handled {
                return Ended::Stopped;
            }
            next = following;
        }
    }

    /// Waits for a first record, then takes more until the batch is full or its wait is
    /// over. An error in the queue is logged and passed after [`ERROR_PAUSE`].
    async fn next_batch<'c>(&self, consumer: &'c GroupConsumer, stop: &CancellationToken) -> Fetched<'c> {
        let first = loop {
            if let Some((code, reason)) = consumer.client().fatal_error() {
                return Fetched::Ended(Ended::Fatal(code, reason));
            }
            tokio::select! {
                received = tokio::time::timeout(QUEUE_WAIT, consumer.recv()) => match received {
                    Err(_) => {}
                    Ok(Ok(m)) => break m,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "kafka consume error");
                        tokio::select! {
                            () = tokio::time::sleep(ERROR_PAUSE) => {}
                            () = stop.cancelled() => return Fetched::Ended(Ended::Stopped),
                        }
                    }
                },
                () = stop.cancelled() => return Fetched::Ended(Ended::Stopped),
            }
        };
        let generation = consumer.context().generation();
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.batch.max_wait;
        let mut bytes = first.payload_len();
        let mut records = vec![first];
        while records.len() < self.batch.max_records && bytes < super::MAX_BATCH_BYTES {
            match tokio::time::timeout_at(deadline, consumer.recv()).await {
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
        Fetched::Batch(Batch { records, generation, started })
    }

    /// Records the batch, dead-letters its invalid records, stores its offsets. False when
    /// `stop` came while it waited for the database or the dead-letter topic: the batch is
    /// abandoned, and what it left unstored is redelivered.
    async fn handle(&self, consumer: &GroupConsumer, batch: Batch<'_>, stop: &CancellationToken) -> bool {
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
        if !dead_letters::dead_letter(self.dead_letters.as_ref(), &invalid, &self.dead_letter_log, stop).await {
            return false;
        }
        let (kept, moved) = consumer.context().still_owned(&batch);
        if !kept.is_empty()
            && let Err(e) = consumer.store_offsets(&next_offsets(kept.into_iter()))
        {
            tracing::warn!(error = %e, "kafka offsets not stored; the batch's records come again as duplicates");
        }
        // A batch that dead-lettered commits its offsets now rather than at the next
        // auto-commit: a replica killed in that second would leave its partitions' next owner
        // to dead-letter the same records again (each carries its `ranking-source`, so a
        // consumer can drop a repeat, but a repeat should be the exception).
        if !invalid.is_empty()
            && let Err(e) = consumer.commit_consumer_state(CommitMode::Async)
            && !matches!(e, KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset))
        {
            tracing::warn!(error = %e, "kafka commit after dead letters failed; the auto-commit sends the same offsets");
        }
        // A partition revoked during the batch and assigned back to this consumer since would
        // never give its records again (its fetch position is past them): it is sought back to
        // the batch's first record of it, which comes again (a DUPLICATE) and is stored then.
        // A partition now another consumer's starts there from the committed offset anyway.
        if !moved.is_empty() {
            let owned = consumer.assignment().unwrap_or_default();
            for (topic, partition, first) in &moved {
                if owned.find_partition(topic, *partition).is_some()
                    && let Err(e) = consumer.seek(topic, *partition, Offset::Offset(*first), SEEK_TIMEOUT)
                {
                    tracing::warn!(error = %e, topic, partition, "kafka seek back failed; the partition's records after it wait for its next owner");
                }
            }
            tracing::info!(
                partitions = moved.len(),
                "partitions revoked during the batch: their offsets are not stored, those records come again as duplicates"
            );
        }
        consumer.context().metrics.bus.batch_seconds.observe(batch.started.elapsed().as_secs_f64());
        true
    }
}
