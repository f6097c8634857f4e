//! Dead letters of the Kafka source: invalid records go to the dead-letter topic with the
//! error (`ranking-error`) and their origin (`ranking-source`, topic/partition/offset), and a
//! batch's offsets are stored only once every one of them is delivered.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::message::{BorrowedMessage, Header, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio_util::sync::CancellationToken;

use super::KafkaOptions;
use crate::bus::Backoff;
use crate::bus::repeats::DeadLetterLog;

/// Longest a dead letter may wait in the producer's queue before its delivery counts as
/// failed (and is retried).
const DEAD_LETTER_TIMEOUT: Duration = Duration::from_secs(30);

/// The producer of the dead-letter topic, when there is one: the consumer's extra properties
/// apply to it too, but for the group's own.
pub(super) fn producer(options: &KafkaOptions) -> anyhow::Result<Option<(FutureProducer, String)>> {
    let Some(topic) = &options.dead_letter_topic else { return Ok(None) };
    let mut producer = ClientConfig::new();
    producer
        .set("bootstrap.servers", &options.brokers)
        .set("client.id", "ranking-service-dlq")
        .set("metadata.recovery.strategy", super::RECOVERY)
        .set("message.timeout.ms", DEAD_LETTER_TIMEOUT.as_millis().to_string());
    let consumer_only = ["session.", "group.", "heartbeat.", "partition.assignment"];
    for (k, v) in options.properties.iter().filter(|(k, _)| !consumer_only.iter().any(|p| k.starts_with(p))) {
        producer.set(k, v);
    }
    Ok(Some((producer.create::<FutureProducer>()?, topic.clone())))
}

/// Sends every invalid record to the dead-letter topic with its error and origin, and
/// waits for the deliveries; failed ones are retried with backoff. Without a topic they
/// are logged and skipped.
pub(super) async fn dead_letter(
    dead_letters: Option<&(FutureProducer, String)>,
    invalid: &[(&BorrowedMessage<'_>, &str)],
    log: &DeadLetterLog,
    stop: &CancellationToken,
) -> bool {
    if invalid.is_empty() {
        return true;
    }
    let Some((producer, topic)) = dead_letters else {
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
                let sent = producer.send(record, DEAD_LETTER_TIMEOUT).await.map_err(|(e, _)| e);
                if sent.is_ok() {
                    log.delivered(&origin);
                }
                sent
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
