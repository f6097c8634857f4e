//! The test buses: Apache Kafka (`RANKING_TEST_KAFKA`, one broker started by `make test`
//! through `scripts/kafka-broker.sh`; `RANKING_TEST_KAFKA_CLUSTER`, three brokers, for the
//! fault tests) and NATS JetStream (`RANKING_TEST_NATS`). Every test gets topics / streams, a group / consumer and a
//! dead-letter destination of its own; [`TestBus`] publishes to them, reads the dead
//! letters back and gives the server the flags (or environment) that point it at them.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, stream};
use futures_util::StreamExt;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use super::rand_u64;

/// Partitions of a test topic.
pub const PARTITIONS: i32 = 4;

/// The test Kafka's bootstrap address, when `make test` (or the caller) set one.
pub fn test_kafka() -> Option<String> {
    std::env::var("RANKING_TEST_KAFKA").ok().filter(|s| !s.is_empty())
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

impl TestBus {
    /// A fresh topic of [`PARTITIONS`] partitions and its dead-letter topic on `brokers`.
    pub async fn kafka(brokers: &str) -> Self {
        let id = rand_u64();
        let topic = format!("events-{id:016x}");
        let dead_letters = format!("{topic}.dlq");
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client");
        let topics = [
            NewTopic::new(&topic, PARTITIONS, TopicReplication::Fixed(1)),
            NewTopic::new(&dead_letters, 1, TopicReplication::Fixed(1)),
        ];
        let created = admin.create_topics(&topics, &AdminOptions::new()).await.expect("CreateTopics");
        for result in created {
            result.expect("topic created");
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
        match self {
            Self::Kafka { brokers, topic, dead_letters, group } => envs.extend([
                ("RANKING_KAFKA_BROKERS", brokers.clone()),
                ("RANKING_KAFKA_TOPICS", topic.clone()),
                ("RANKING_KAFKA_GROUP", group.clone()),
                ("RANKING_KAFKA_DLQ_TOPIC", dead_letters.clone()),
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
        match self {
            Self::Kafka { brokers, topic, .. } => {
                let producer: FutureProducer = ClientConfig::new()
                    .set("bootstrap.servers", brokers)
                    .set("linger.ms", "5")
                    .create()
                    .expect("producer");
                let sends = records.iter().map(|(key, payload)| {
                    producer.send(FutureRecord::to(topic).key(key).payload(payload), Duration::from_secs(30))
                });
                for sent in futures_util::future::join_all(sends).await {
                    sent.map_err(|(e, _)| e).expect("record delivered");
                }
            }
            Self::JetStream { url, subject, .. } => {
                let js = jetstream::new(async_nats::connect(url).await.expect("nats connects"));
                // The client holds 5,000 unacknowledged publications at most.
                for chunk in records.chunks(1_000) {
                    let mut acks = Vec::with_capacity(chunk.len());
                    for (_, payload) in chunk {
                        acks.push(js.publish(subject.clone(), payload.clone().into()).await.expect("published"));
                    }
                    for ack in acks {
                        ack.await.expect("stored by the stream");
                    }
                }
            }
        }
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
                let js = jetstream::new(async_nats::connect(url).await.expect("nats connects"));
                let stream_name = format!("DLQ_{}", dead_letters.trim_start_matches("dlq."));
                let mut stream = js.get_stream(&stream_name).await.expect("dead-letter stream");
                let count = stream.info().await.expect("stream info").state.messages as usize;
                if count == 0 {
                    return Vec::new();
                }
                let reader = stream.create_consumer(pull::Config::default()).await.expect("reader");
                // One pull may deliver fewer than asked: pull again until all `count` are read
                // (a pull that brings nothing ends the read with what it has).
                let mut out = Vec::new();
                while out.len() < count {
                    let before = out.len();
                    let mut batch = reader
                        .batch()
                        .max_messages(count - out.len())
                        .expires(Duration::from_secs(2))
                        .messages()
                        .await
                        .expect("fetch");
                    while let Some(Ok(m)) = batch.next().await {
                        let header = |name: &str| {
                            m.headers
                                .as_ref()
                                .and_then(|h| h.get(name))
                                .map(|v| v.as_str().to_string())
                                .unwrap_or_default()
                        };
                        out.push(DeadLetter {
                            payload: m.payload.to_vec(),
                            error: header("ranking-error"),
                            source: header("ranking-source"),
                        });
                    }
                    if out.len() == before {
                        break;
                    }
                }
                out
            }
        }
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

fn flag_of(env: &str) -> String {
    env.trim_start_matches("RANKING_").to_ascii_lowercase().replace('_', "-")
}

async fn kafka_dead_letters(brokers: &str, topic: &str) -> Vec<DeadLetter> {
    let brokers = brokers.to_string();
    let topic = topic.to_string();
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .set("group.id", format!("reader-{:016x}", rand_u64()))
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let (low, high) = consumer.fetch_watermarks(&topic, 0, Duration::from_secs(30)).expect("watermarks");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Offset(low)).expect("offset");
        consumer.assign(&tpl).expect("assign");
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while (out.len() as i64) < high - low && std::time::Instant::now() < deadline {
            let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) else { continue };
            let header = |name: &str| {
                m.headers()
                    .and_then(|h| h.iter().find(|h| h.key == name).and_then(|h| h.value))
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default()
            };
            out.push(DeadLetter {
                payload: m.payload().unwrap_or_default().to_vec(),
                error: header("ranking-error"),
                source: header("ranking-source"),
            });
        }
        out
    })
    .await
    .expect("reader task")
}

/// A broker of one test (Apache Kafka on a free port and a data directory of its own,
/// through `scripts/kafka-broker.sh`), for tests that stop and restart it.
pub struct ThrowawayBroker {
    port: u16,
    dir: std::path::PathBuf,
}

impl ThrowawayBroker {
    fn script() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka-broker.sh")
    }

    /// Starts one (the jars are resolved once per machine by the script).
    pub fn start() -> Self {
        let port = super::free_port();
        let dir = std::env::temp_dir().join(format!("rk-kafka-{port}-{:x}", rand_u64()));
        let me = Self { port, dir };
        me.restart();
        me
    }

    /// Its bootstrap address.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills it (its data stays).
    pub fn stop(&self) {
        let status = std::process::Command::new(Self::script()).arg("stop").arg(&self.dir).status().expect("script");
        assert!(status.success(), "broker stops");
        // Wait until the port is free, so the restart binds it again.
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("broker on {} did not stop", self.port);
    }

    /// Starts it again on the same port and data.
    pub fn restart(&self) {
        let status = std::process::Command::new(Self::script())
            .args(["start", &self.port.to_string()])
            .arg(&self.dir)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("script");
        assert!(status.success(), "broker starts");
    }
}

impl Drop for ThrowawayBroker {
    fn drop(&mut self) {
        let _ = std::process::Command::new(Self::script()).arg("stop").arg(&self.dir).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A NATS server with JetStream of one test (Debian's `nats-server` on a free port, its
/// store in a directory of its own), for tests that stop and restart it.
pub struct ThrowawayNats {
    port: u16,
    dir: std::path::PathBuf,
    child: std::sync::Mutex<Option<std::process::Child>>,
}

impl ThrowawayNats {
    /// Starts one, or `None` when `nats-server` is not installed.
    pub fn start() -> Option<Self> {
        let port = super::free_port();
        let dir = std::env::temp_dir().join(format!("rk-nats-{port}-{:x}", rand_u64()));
        std::fs::create_dir_all(&dir).ok()?;
        let me = Self { port, dir, child: std::sync::Mutex::new(None) };
        me.restart_checked().then_some(me)
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn restart_checked(&self) -> bool {
        let child = std::process::Command::new("/usr/sbin/nats-server")
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(&self.dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let Ok(child) = child else { return false };
        *self.child.lock().expect("child") = Some(child);
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    /// Kills it (its store stays).
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().expect("child").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and store.
    pub fn restart(&self) {
        assert!(self.restart_checked(), "nats-server restarts");
    }
}

impl Drop for ThrowawayNats {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
