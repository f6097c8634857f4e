//! The feed's Kafka sink: an idempotent producer (acks = all), each record keyed by its board
//! so that a board's records keep their order on one partition. A batch's records are queued
//! at once and awaited together; a record not acknowledged within the delivery timeout fails
//! the batch, which the feeder sends again.

use std::time::Duration;

use async_trait::async_trait;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::{board_key, board_name, records};
use crate::ports::{FeedBatch, FeedSink, StoreError};

/// Longest a record may wait for its acknowledgement before the batch counts as failed.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The Kafka sink.
pub struct KafkaFeed {
    producer: FutureProducer,
    topic: String,
}

impl KafkaFeed {
    /// A producer of `topic` on `brokers` (it connects when it first sends).
    pub fn new(brokers: &str, topic: &str) -> Result<Self, String> {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("client.id", "ranking-feed")
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("message.timeout.ms", DELIVERY_TIMEOUT.as_millis().to_string())
            .create::<FutureProducer>()
            .map_err(|e| format!("RANKING_FEED_KAFKA_TOPIC: {e}"))?;
        Ok(Self { producer, topic: topic.to_string() })
    }
}

fn failed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable { store: "feed (kafka)", cause: std::sync::Arc::new(std::io::Error::other(e.to_string())) }
}

#[async_trait]
impl FeedSink for KafkaFeed {
    fn name(&self) -> &'static str {
        "kafka"
    }

    async fn send(&self, batch: &FeedBatch) -> Result<(), StoreError> {
        let key = board_name(&board_key(batch.board, &batch.profile));
        let mut deliveries = Vec::new();
        for record in records(batch) {
            let queued = FutureRecord::to(&self.topic).key(key.as_bytes()).payload(&record.bytes);
            deliveries.push(self.producer.send_result(queued).map_err(|(e, _)| failed(e))?);
        }
        for delivery in deliveries {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => return Err(failed(e)),
                Err(_) => return Err(failed("the producer dropped a record")),
            }
        }
        Ok(())
    }
}
