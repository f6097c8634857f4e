//! A Kafka consumer's membership of its group, as librdkafka's callbacks report it:
//! rebalances (what was assigned and revoked, and when, so that a batch fetched before a
//! revocation stores no offset for the partitions it lost), commits, lag per partition and
//! whether any broker answers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::statistics::Statistics;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use super::{Batch, SOURCE};
use crate::bus::Connected;
use crate::metrics::Metrics;
use crate::metrics::bus::{LagLabels, MoveLabels};

/// One consumer's callbacks (rebalances, commits, statistics, errors) and what they keep.
pub(super) struct Membership {
    /// Bumped by every revocation (see the module doc).
    generation: AtomicU64,
    /// The generation of each partition's latest revocation: a batch fetched before it stores
    /// no offset for that partition. One entry per partition ever revoked, so bounded by the
    /// subscribed topics' partitions.
    revoked: Mutex<HashMap<(String, i32), u64>>,
    pub(super) metrics: Arc<Metrics>,
    connected: Connected,
    /// Per partition with records to consume and no fetch under way: since when, and whether
    /// that was told. Bounded by the assigned partitions.
    waiting: Mutex<HashMap<(String, i32), (std::time::Instant, bool)>>,
}

/// A partition's fetch as librdkafka's statistics report it.
#[derive(Clone, Copy)]
struct Fetch<'a> {
    partition: i32,
    /// `active` while fetching; `offset-query`, `validate-epoch-wait`… while it waits.
    state: &'a str,
    leader: i32,
}

/// How long a partition may have records to consume and no fetch under way before it is
/// told (logged with librdkafka's fetch state, and counted): a leader change or a broker
/// restart takes seconds, not this long.
const STALL: std::time::Duration = std::time::Duration::from_secs(30);

impl ClientContext for Membership {
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
                let fetch = Fetch { partition: p.partition, state: &p.fetch_state, leader: p.leader };
                self.watch_fetch(topic, fetch, lag, std::time::Instant::now());
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

/// Records' places: topic, partition, offset.
pub(super) type Offsets<'b> = Vec<(&'b str, i32, i64)>;

impl Membership {
    /// A fresh one: no revocation seen yet.
    pub(super) fn new(metrics: Arc<Metrics>, connected: Connected) -> Self {
        Self {
            generation: AtomicU64::new(0),
            revoked: Mutex::new(HashMap::new()),
            metrics,
            connected,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Tells a partition that has had records to consume (`lag`) and no fetch under way
    /// (librdkafka's fetch state other than `active`) for longer than [`STALL`]: once per
    /// such episode, logged with the state and the leader, and counted.
    fn watch_fetch(&self, topic: &str, p: Fetch<'_>, lag: i64, now: std::time::Instant) {
        let key = (topic.to_string(), p.partition);
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if p.state == "active" || lag <= 0 {
            waiting.remove(&key);
            return;
        }
        let (since, told) = waiting.entry(key).or_insert((now, false));
        if !*told && now.duration_since(*since) >= STALL {
            *told = true;
            self.metrics
                .bus
                .partitions_stalled
                .get_or_create(&crate::metrics::bus::SourceLabels { source: SOURCE })
                .inc();
            tracing::warn!(
                topic,
                partition = p.partition,
                fetch_state = %p.state,
                leader = p.leader,
                lag,
                waited_s = now.duration_since(*since).as_secs(),
                "a partition with records to consume has fetched none for a while"
            );
        }
    }

    /// The generation now; a batch remembers the one its fetch began in.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The batch's records whose partition was not revoked since its fetch began (as
    /// topic, partition, offset), and the first offset of each partition that was (its
    /// records' offsets are not stored).
    pub(super) fn still_owned<'b>(&self, batch: &'b Batch<'_>) -> (Offsets<'b>, Offsets<'b>) {
        let mut kept = Vec::with_capacity(batch.records.len());
        if self.generation() == batch.generation {
            kept.extend(batch.records.iter().map(|m| (m.topic(), m.partition(), m.offset())));
            return (kept, Vec::new());
        }
        let revoked = self.revoked.lock().unwrap_or_else(|e| e.into_inner());
        let mut moved: Offsets<'b> = Vec::new();
        for m in &batch.records {
            let since = revoked.get(&(m.topic().to_string(), m.partition())).copied().unwrap_or(0);
            if since > batch.generation {
                match moved.iter_mut().find(|(t, p, _)| *t == m.topic() && *p == m.partition()) {
                    Some(first) => first.2 = first.2.min(m.offset()),
                    None => moved.push((m.topic(), m.partition(), m.offset())),
                }
            } else {
                kept.push((m.topic(), m.partition(), m.offset()));
            }
        }
        (kept, moved)
    }
}

impl ConsumerContext for Membership {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
            {
                let mut revoked = self.revoked.lock().unwrap_or_else(|e| e.into_inner());
                for p in partitions.elements() {
                    revoked.insert((p.topic().to_string(), p.partition()), generation);
                }
            }
            // Everything stored committed in SQL: commit it before the partitions move, so
            // their next owner starts after it. Not when the assignment is already lost (the
            // session timed out): the group has moved on, the commit would be refused, and a
            // synchronous one waits on a coordinator the group is still looking for (seen
            // blocking this consumer for good after a broker restart).
            if consumer.assignment_lost() {
                tracing::warn!(
                    "partitions lost with the group session; the next owner gets their uncommitted records again"
                );
            } else {
                match consumer.commit_consumer_state(CommitMode::Sync) {
                    Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "commit on revocation failed; the next owner gets those records again")
                    }
                }
            }
            for p in partitions.elements() {
                let labels = LagLabels { source: SOURCE, partition: format!("{}/{}", p.topic(), p.partition()) };
                self.metrics.bus.lag.remove(&labels);
            }
        }
        let (change, moved) = match rebalance {
            Rebalance::Assign(partitions) => ("assigned", partitions.count()),
            Rebalance::Revoke(partitions) => ("revoked", partitions.count()),
            Rebalance::Error(_) => ("error", 0),
        };
        if moved > 0 {
            self.metrics
                .bus
                .partitions_moved
                .get_or_create(&MoveLabels { source: SOURCE, change })
                .inc_by(moved as u64);
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

/// The offsets to store after the records at `(topic, partition, offset)` were processed:
/// per partition, the highest offset processed + 1 (Kafka's committed offset is the next
/// record to read, not the last one read).
pub(super) fn next_offsets<'a>(records: impl Iterator<Item = (&'a str, i32, i64)>) -> TopicPartitionList {
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
