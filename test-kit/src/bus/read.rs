//! What the tests read back from the buses: a Kafka topic's records (the dead letters among
//! them), a JetStream stream's messages.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull};
use futures_util::StreamExt;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};

use super::DeadLetter;
use crate::rand_u64;

pub(super) async fn kafka_dead_letters(brokers: &str, topic: &str) -> Vec<DeadLetter> {
    partition_records(brokers, topic)
        .await
        .into_iter()
        .map(|m| {
            let header = |name: &str| {
                m.headers()
                    .and_then(|h| h.iter().find(|h| h.key == name).and_then(|h| h.value))
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default()
            };
            DeadLetter {
                payload: m.payload().unwrap_or_default().to_vec(),
                error: header("ranking-error"),
                source: header("ranking-source"),
            }
        })
        .collect()
}

/// Every message of the JetStream stream `name`, in order (as many as it held when the read
/// began).
pub async fn stream_messages(url: &str, name: &str) -> Vec<async_nats::Message> {
    let js = jetstream::new(async_nats::connect(url).await.expect("nats connects"));
    let mut stream = js.get_stream(name).await.expect("stream");
    let count = stream.info().await.expect("stream info").state.messages as usize;
    if count == 0 {
        return Vec::new();
    }
    // Unacknowledged: a consumer with acknowledgements stops delivering at its
    // max_ack_pending (1,000), and a long run writes more than that.
    let config = pull::Config { ack_policy: jetstream::consumer::AckPolicy::None, ..Default::default() };
    let reader = stream.create_consumer(config).await.expect("reader");
    // One pull may deliver fewer than asked: pull again until all `count` are read (a pull
    // that brings nothing ends the read with what it has).
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
            out.push(m.message);
        }
        if out.len() == before {
            break;
        }
    }
    out
}

/// Every record of partition 0 of `topic`, in order (as many as its watermarks said when the
/// read began; a minute at most).
pub async fn partition_records(brokers: &str, topic: &str) -> Vec<rdkafka::message::OwnedMessage> {
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
            out.push(m.detach());
        }
        out
    })
    .await
    .expect("reader task")
}
