//! The test buses: Apache Kafka (`RANKING_TEST_KAFKA`, one broker started by `make test`
//! through `scripts/kafka-broker.sh`; `RANKING_TEST_KAFKA_CLUSTER`, three brokers, for the
//! fault tests) and NATS JetStream (`RANKING_TEST_NATS`). Every test gets topics / streams, a group / consumer and a
//! dead-letter destination of its own; [`TestBus`] publishes to them, reads the dead
//! letters back and gives the server the flags (or environment) that point it at them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, stream};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use super::rand_u64;

mod read;
mod servers;
use read::kafka_dead_letters;
pub use read::{partition_records, stream_messages};
pub use servers::{KafkaCluster, ThrowawayBroker, ThrowawayNats};

/// Partitions of a test topic.
pub const PARTITIONS: i32 = 4;

/// The test Kafka's bootstrap address, when `make test` (or the caller) set one.
pub fn test_kafka() -> Option<String> {
    std::env::var("RANKING_TEST_KAFKA").ok().filter(|s| !s.is_empty())
}

/// The three-broker Kafka cluster of the fault tests, when `make test` started one
/// (`RANKING_TEST_KAFKA_CLUSTER`, its bootstrap list, and `RANKING_TEST_KAFKA_CLUSTER_DIR`,
/// the data folder `scripts/kafka-broker.sh` kills and restarts its brokers by).
pub fn test_kafka_cluster() -> Option<KafkaCluster> {
    let bootstrap = std::env::var("RANKING_TEST_KAFKA_CLUSTER").ok().filter(|s| !s.is_empty())?;
    let dir = std::env::var("RANKING_TEST_KAFKA_CLUSTER_DIR")
        .expect("RANKING_TEST_KAFKA_CLUSTER_DIR names the cluster's data folder (make test sets both)");
    Some(KafkaCluster { bootstrap, dir: dir.into() })
}

/// The test NATS URL, when set.
pub fn test_nats() -> Option<String> {
    std::env::var("RANKING_TEST_NATS").ok().filter(|s| !s.is_empty())
}

/// A dead letter read back: payload, `ranking-error`, `ranking-source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub payload: Vec<u8>,
    pub error: String,
    pub source: String,
}

/// One test's destinations on one bus.
pub enum TestBus {
    Kafka { brokers: String, topic: String, dead_letters: String, group: String },
    JetStream { url: String, stream: String, subject: String, dead_letters: String, consumer: String },
}

/// Where a test topic's partitions live.
#[derive(Clone, Copy)]
enum Placement {
    /// The single test broker.
    OneBroker,
    /// All three brokers of the cluster, led by `leader` when one is given.
    Cluster { leader: Option<i32> },
}

impl TestBus {
    /// A fresh topic of [`PARTITIONS`] partitions and its dead-letter topic on `brokers`.
    pub async fn kafka(brokers: &str) -> Self {
        Self::kafka_placed(brokers, Placement::OneBroker).await
    }

    /// The same on the three-broker cluster, every partition on all three brokers; with a
    /// `leader`, that node leads every partition of the topic.
    pub async fn kafka_on_cluster(cluster: &KafkaCluster, leader: Option<i32>) -> Self {
        Self::kafka_placed(&cluster.bootstrap, Placement::Cluster { leader }).await
    }

    async fn kafka_placed(brokers: &str, placement: Placement) -> Self {
        let id = rand_u64();
        let topic = format!("events-{id:016x}");
        let dead_letters = format!("{topic}.dlq");
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client");
        let replicas: Vec<i32> = match placement {
            Placement::Cluster { leader: Some(leader) } => {
                std::iter::once(leader).chain((1..=3).filter(|n| *n != leader)).collect()
            }
            _ => Vec::new(),
        };
        let assignment: Vec<&[i32]> = (0..PARTITIONS).map(|_| replicas.as_slice()).collect();
        let (replication, factor) = match placement {
            Placement::OneBroker => (TopicReplication::Fixed(1), 1),
            Placement::Cluster { leader: None } => (TopicReplication::Fixed(3), 3),
            Placement::Cluster { leader: Some(_) } => (TopicReplication::Variable(&assignment), 3),
        };
        let topics = [
            NewTopic::new(&topic, PARTITIONS, replication),
            NewTopic::new(&dead_letters, 1, TopicReplication::Fixed(factor)),
        ];
        // A broker just started on a loaded machine may answer metadata before its controller
        // can create topics: a timed-out request is sent again, and a topic the first attempt
        // created after all counts as created.
        let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(60)));
        let mut attempts = 0;
        let created = loop {
            attempts += 1;
            match admin.create_topics(&topics, &options).await {
                Err(rdkafka::error::KafkaError::AdminOp(RDKafkaErrorCode::OperationTimedOut)) if attempts < 3 => {}
                created => break created.expect("CreateTopics"),
            }
        };
        for result in created {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err(e) => panic!("topic created: {e:?}"),
            }
        }
        Self::Kafka { brokers: brokers.to_string(), topic, dead_letters, group: format!("group-{id:016x}") }
    }

    /// A fresh stream and dead-letter stream on `url`, and the durable consumer created
    /// ahead with a short ack wait, so a killed replica's messages come back within seconds.
    pub async fn jetstream(url: &str) -> Self {
        let id = rand_u64();
        let (stream, subject) = (format!("EV_{id:016x}"), format!("ev.{id:016x}"));
        let (dlq_stream, dead_letters) = (format!("DLQ_{id:016x}"), format!("dlq.{id:016x}"));
        let consumer = format!("ranking-{id:016x}");
        let js = jetstream::new(async_nats::connect(url).await.expect("nats connects"));
        for (name, subject) in [(&stream, &subject), (&dlq_stream, &dead_letters)] {
            js.create_stream(stream::Config {
                name: name.clone(),
                subjects: vec![subject.clone()],
                ..Default::default()
            })
            .await
            .expect("stream created");
        }
        let config = pull::Config {
            durable_name: Some(consumer.clone()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(2),
            max_ack_pending: 100_000,
            ..Default::default()
        };
        js.get_stream(&stream).await.expect("stream").create_consumer(config).await.expect("consumer created");
        Self::JetStream { url: url.to_string(), stream, subject, dead_letters, consumer }
    }

    /// The topic or stream the events are published on.
    pub fn name(&self) -> &str {
        match self {
            Self::Kafka { topic, .. } => topic,
            Self::JetStream { stream, .. } => stream,
        }
    }

    /// Deletes this bus's topic or stream and its dead-letter one (a broker keeps them
    /// otherwise), trying each: the first failure, if any. A topic already gone counts as
    /// deleted.
    pub async fn delete(&self) -> Result<(), String> {
        let mut failed = None;
        match self {
            Self::Kafka { brokers, topic, dead_letters, .. } => {
                let admin: AdminClient<DefaultClientContext> =
                    ClientConfig::new().set("bootstrap.servers", brokers).create().map_err(|e| e.to_string())?;
                let results = admin
                    .delete_topics(&[topic.as_str(), dead_letters.as_str()], &AdminOptions::new())
                    .await
                    .map_err(|e| e.to_string())?;
                failed = results
                    .into_iter()
                    .find_map(|r| r.err().filter(|(_, e)| *e != RDKafkaErrorCode::UnknownTopicOrPartition))
                    .map(|(t, e)| format!("{t}: {e}"));
            }
            Self::JetStream { url, stream, dead_letters, .. } => {
                let js = jetstream::new(async_nats::connect(url).await.map_err(|e| e.to_string())?);
                let dead_letter_stream = js.stream_by_subject(dead_letters.as_str()).await;
                let streams = match dead_letter_stream {
                    Ok(name) => vec![stream.clone(), name],
                    Err(e) => {
                        failed = Some(format!("the stream of {dead_letters}: {e}"));
                        vec![stream.clone()]
                    }
                };
                for name in streams {
                    if let Err(e) = js.delete_stream(&name).await {
                        failed.get_or_insert(format!("{name}: {e}"));
                    }
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Deletes this bus's topics or streams at the end of a test that passed, so that the
    /// machine's brokers do not keep every run's; a failure is reported, not asserted (what
    /// the test checked is done by then). A test that fails leaves its bus to look at.
    pub async fn discard(self) {
        if let Err(e) = self.delete().await {
            eprintln!("test bus not deleted: {e}");
        }
    }

    /// The server's flags for this bus (batches of `batch` records).
    pub fn flags(&self, batch: usize) -> Vec<String> {
        self.envs(batch).into_iter().map(|(k, v)| format!("--{}={v}", flag_of(k))).collect()
    }

    /// The same as environment variables, for a server process.
    pub fn envs(&self, batch: usize) -> Vec<(&'static str, String)> {
        let mut envs = vec![("RANKING_BUS_BATCH", batch.to_string()), ("RANKING_BUS_BATCH_WAIT", "50ms".to_string())];
        // Every replica a static member of its own (they share the host name).
        let instance = format!("replica-{:016x}", rand_u64());
        match self {
            Self::Kafka { brokers, topic, dead_letters, group } => envs.extend([
                ("RANKING_KAFKA_BROKERS", brokers.clone()),
                ("RANKING_KAFKA_TOPICS", topic.clone()),
                ("RANKING_KAFKA_GROUP", group.clone()),
                ("RANKING_KAFKA_DLQ_TOPIC", dead_letters.clone()),
                ("RANKING_KAFKA_INSTANCE_ID", instance),
                // A killed member's partitions move after 6 s instead of 45 s.
                ("RANKING_KAFKA_CONFIG", "session.timeout.ms=6000,heartbeat.interval.ms=500".to_string()),
            ]),
            Self::JetStream { url, stream, dead_letters, consumer, .. } => envs.extend([
                ("RANKING_NATS_URL", url.clone()),
                ("RANKING_NATS_STREAM", stream.clone()),
                ("RANKING_NATS_CONSUMER", consumer.clone()),
                ("RANKING_NATS_DLQ_SUBJECT", dead_letters.clone()),
            ]),
        }
        envs
    }

    /// Publishes `records` (key, payload) in order, each acknowledged by the broker.
    pub async fn publish(&self, records: &[(String, Vec<u8>)]) {
        self.try_publish(records).await.expect("every record acknowledged by the broker");
    }

    /// [`TestBus::publish`], answering a broker that is away with its error (some records
    /// may have been stored: publishing them again is a redelivery).
    pub async fn try_publish(&self, records: &[(String, Vec<u8>)]) -> Result<(), String> {
        match self {
            Self::Kafka { brokers, topic, .. } => {
                let producer: FutureProducer = ClientConfig::new()
                    .set("bootstrap.servers", brokers)
                    .set("linger.ms", "5")
                    .create()
                    .map_err(|e| e.to_string())?;
                let sends = records.iter().map(|(key, payload)| {
                    producer.send(FutureRecord::to(topic).key(key).payload(payload), Duration::from_secs(30))
                });
                for sent in futures_util::future::join_all(sends).await {
                    sent.map_err(|(e, _)| e.to_string())?;
                }
            }
            Self::JetStream { url, subject, .. } => {
                let client = async_nats::connect(url).await.map_err(|e| e.to_string())?;
                let js = jetstream::new(client);
                // The client holds 5,000 unacknowledged publications at most.
                for chunk in records.chunks(1_000) {
                    let mut acks = Vec::with_capacity(chunk.len());
                    for (_, payload) in chunk {
                        acks.push(
                            js.publish(subject.clone(), payload.clone().into()).await.map_err(|e| e.to_string())?,
                        );
                    }
                    for ack in acks {
                        ack.await.map_err(|e| e.to_string())?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The JetStream durable consumer's messages delivered but not acknowledged, those not
    /// delivered yet, and its ack floor (the stream sequence up to which every message is
    /// acknowledged).
    pub async fn unacknowledged(&self) -> (usize, u64, u64) {
        let Self::JetStream { url, stream, consumer, .. } = self else { panic!("a JetStream bus") };
        let js = jetstream::new(async_nats::connect(url).await.expect("nats connects"));
        let stream = js.get_stream(stream).await.expect("stream");
        let mut consumer = stream.get_consumer::<pull::Config>(consumer).await.expect("the service's consumer");
        let info = consumer.info().await.expect("consumer info");
        (info.num_ack_pending, info.num_pending, info.ack_floor.stream_sequence)
    }

    /// Every dead letter so far.
    pub async fn dead_letters(&self) -> Vec<DeadLetter> {
        match self {
            Self::Kafka { brokers, dead_letters, .. } => kafka_dead_letters(brokers, dead_letters).await,
            Self::JetStream { url, dead_letters, .. } => {
                let stream_name = format!("DLQ_{}", dead_letters.trim_start_matches("dlq."));
                stream_messages(url, &stream_name)
                    .await
                    .into_iter()
                    .map(|m| {
                        let header = |name: &str| {
                            m.headers
                                .as_ref()
                                .and_then(|h| h.get(name))
                                .map(|v| v.as_str().to_string())
                                .unwrap_or_default()
                        };
                        DeadLetter {
                            payload: m.payload.to_vec(),
                            error: header("ranking-error"),
                            source: header("ranking-source"),
                        }
                    })
                    .collect()
            }
        }
    }

    /// Kafka: the group as its coordinator describes it: its state and, per member's group
    /// instance id (the part of the member id before the coordinator's `-uuid`), the
    /// partitions of this bus's topic assigned to it. A coordinator that cannot describe it
    /// now (still loading the group after a broker came back, or moving) answers as the state
    /// `not described: <why>` with no members, so a caller waiting for a state asks again.
    pub fn group_assignment(&self) -> (String, BTreeMap<String, BTreeSet<i32>>) {
        let Self::Kafka { brokers, topic, group, .. } = self else { panic!("a Kafka bus") };
        let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", brokers).create().expect("consumer");
        let list = match consumer.fetch_group_list(Some(group), Duration::from_secs(30)) {
            Ok(list) => list,
            Err(e) => return (format!("not described: {e}"), BTreeMap::new()),
        };
        let Some(info) = list.groups().first() else { return (String::new(), BTreeMap::new()) };
        let members = info
            .members()
            .iter()
            .map(|m| {
                let instance = m.id().rsplitn(6, '-').last().unwrap_or_default().to_string();
                let partitions = m.assignment().map(|a| assigned_partitions(a, topic)).unwrap_or_default();
                (instance, partitions)
            })
            .collect();
        (info.state().to_string(), members)
    }

    /// Kafka: the node coordinating this bus's group: the leader of the partition of
    /// `__consumer_offsets` the group's name falls in (Java's `String.hashCode`, its absolute
    /// value, modulo the partitions), as the brokers' metadata has it now.
    /// `None` before any group has used the cluster (the topic does not exist yet).
    pub fn coordinator(&self) -> Option<i32> {
        let Self::Kafka { brokers, group, .. } = self else { panic!("a Kafka bus") };
        let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", brokers).create().expect("consumer");
        let metadata =
            consumer.fetch_metadata(Some("__consumer_offsets"), Duration::from_secs(30)).expect("offsets metadata");
        let partitions = metadata.topics()[0].partitions();
        if partitions.is_empty() {
            return None;
        }
        let hash = group.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
        // Kafka's `Utils.abs`: the absolute value, with i32::MIN taken as 0.
        let hash = if hash == i32::MIN { 0 } else { hash.abs() };
        let index = hash % partitions.len() as i32;
        partitions.iter().find(|p| p.id() == index).map(|p| p.leader())
    }

    /// Kafka: the leader node of each partition, as the brokers' metadata has it.
    pub fn leaders(&self) -> Vec<i32> {
        let Self::Kafka { brokers, topic, .. } = self else { panic!("a Kafka bus") };
        let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", brokers).create().expect("consumer");
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(30)).expect("metadata");
        metadata.topics()[0].partitions().iter().map(|p| p.leader()).collect()
    }

    /// Kafka: the group's committed offset and the high watermark of every partition.
    pub fn committed_and_high(&self) -> Vec<(i64, i64)> {
        let Self::Kafka { brokers, topic, group, .. } = self else { panic!("a Kafka bus") };
        let consumer: BaseConsumer =
            ClientConfig::new().set("bootstrap.servers", brokers).set("group.id", group).create().expect("consumer");
        let mut tpl = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            tpl.add_partition(topic, p);
        }
        let committed = consumer.committed_offsets(tpl, Duration::from_secs(30)).expect("committed offsets");
        (0..PARTITIONS)
            .map(|p| {
                let c = match committed.find_partition(topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    _ => -1,
                };
                let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(30)).expect("watermarks");
                (c, high)
            })
            .collect()
    }
}

/// The partitions of `topic` in a consumer protocol assignment (version: i16, then an array
/// of topic: string, partitions: array of i32; user data after it is left alone).
fn assigned_partitions(bytes: &[u8], topic: &str) -> BTreeSet<i32> {
    let mut at = 2; // the version
    let mut take = |n: usize| -> &[u8] {
        let s = &bytes[at..at + n];
        at += n;
        s
    };
    let i32_of = |b: &[u8]| i32::from_be_bytes(b.try_into().expect("4 bytes"));
    let mut out = BTreeSet::new();
    let topics = i32_of(take(4));
    for _ in 0..topics.max(0) {
        let len = i16::from_be_bytes(take(2).try_into().expect("2 bytes")) as usize;
        let name = String::from_utf8_lossy(take(len)).into_owned();
        let count = i32_of(take(4));
        for _ in 0..count.max(0) {
            let partition = i32_of(take(4));
            if name == topic {
                out.insert(partition);
            }
        }
    }
    out
}

fn flag_of(env: &str) -> String {
    env.trim_start_matches("RANKING_").to_ascii_lowercase().replace('_', "-")
}
