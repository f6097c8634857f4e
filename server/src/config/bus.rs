//! The event-bus sources: Kafka and NATS JetStream, each off unless its
//! address is set, and the batching both share.

use std::num::NonZeroUsize;
use std::time::Duration;

use clap::Args;

use super::parse_nonzero_duration;
use crate::bus::BatchOptions;
use crate::bus::decode::Format;
use crate::bus::jetstream::JetStreamOptions;
use crate::bus::kafka::KafkaOptions;

/// Kafka and JetStream consumption.
#[derive(Debug, Clone, Args)]
pub struct BusSettings {
    /// Kafka bootstrap servers, comma-separated; unset: no Kafka source.
    #[arg(long, env = "RANKING_KAFKA_BROKERS", value_name = "RANKING_KAFKA_BROKERS")]
    pub kafka_brokers: Option<String>,

    /// Kafka topics to consume, comma-separated.
    #[arg(long, env = "RANKING_KAFKA_TOPICS", value_name = "RANKING_KAFKA_TOPICS", default_value = "shopper-events")]
    pub kafka_topics: String,

    /// Kafka consumer group shared by every replica.
    #[arg(long, env = "RANKING_KAFKA_GROUP", value_name = "RANKING_KAFKA_GROUP", default_value = "ranking-service")]
    pub kafka_group: String,

    /// Dead-letter topic of invalid records; empty: invalid records are logged, counted and
    /// skipped.
    #[arg(
        long,
        env = "RANKING_KAFKA_DLQ_TOPIC",
        value_name = "RANKING_KAFKA_DLQ_TOPIC",
        default_value = "shopper-events.dlq"
    )]
    pub kafka_dlq_topic: String,

    /// Static membership: this replica's `group.instance.id`, so that a replica restarted
    /// within `session.timeout.ms` gets its partitions back without a rebalance of the other
    /// members. Unset: the host name (a Kubernetes pod's name); empty: dynamic membership.
    /// Every replica of a group needs its own.
    #[arg(long, env = "RANKING_KAFKA_INSTANCE_ID", value_name = "RANKING_KAFKA_INSTANCE_ID")]
    pub kafka_instance_id: Option<String>,

    /// Extra librdkafka properties, `key=value,…` (security.protocol, sasl.*, ssl.*,
    /// session.timeout.ms, …), applied to the consumer and the dead-letter producer last.
    #[arg(
        long,
        env = "RANKING_KAFKA_CONFIG",
        value_name = "RANKING_KAFKA_CONFIG",
        default_value = "",
        hide_env_values = true
    )]
    pub kafka_config: String,

    /// NATS server URL; unset: no JetStream source.
    #[arg(long, env = "RANKING_NATS_URL", value_name = "RANKING_NATS_URL")]
    pub nats_url: Option<String>,

    /// JetStream stream the events are in.
    #[arg(long, env = "RANKING_NATS_STREAM", value_name = "RANKING_NATS_STREAM", default_value = "SHOPPER_EVENTS")]
    pub nats_stream: String,

    /// Durable pull consumer shared by every replica (created when missing).
    #[arg(
        long,
        env = "RANKING_NATS_CONSUMER",
        value_name = "RANKING_NATS_CONSUMER",
        default_value = "ranking-service"
    )]
    pub nats_consumer: String,

    /// Dead-letter subject of invalid records (published through JetStream: a stream must
    /// capture it); empty: invalid records are logged, counted and terminated.
    #[arg(
        long,
        env = "RANKING_NATS_DLQ_SUBJECT",
        value_name = "RANKING_NATS_DLQ_SUBJECT",
        default_value = "shopper.events.dlq"
    )]
    pub nats_dlq_subject: String,

    /// Encoding of the records: `json` (proto3 JSON mapping) or `protobuf`.
    #[arg(long, env = "RANKING_BUS_FORMAT", value_name = "RANKING_BUS_FORMAT", default_value = "json")]
    pub bus_format: Format,

    /// Records per transaction at most (1-10000).
    #[arg(long, env = "RANKING_BUS_BATCH", value_name = "RANKING_BUS_BATCH", default_value = "5000", value_parser = parse_batch)]
    pub bus_batch: NonZeroUsize,

    /// Longest wait to fill a batch after its first record.
    #[arg(long, env = "RANKING_BUS_BATCH_WAIT", value_name = "RANKING_BUS_BATCH_WAIT", default_value = "100ms", value_parser = parse_nonzero_duration)]
    pub bus_batch_wait: Duration,
}

impl BusSettings {
    fn batch(&self) -> BatchOptions {
        BatchOptions { format: self.bus_format, max_records: self.bus_batch.get(), max_wait: self.bus_batch_wait }
    }

    /// The Kafka source's options, when it is configured.
    pub fn kafka(&self) -> Result<Option<KafkaOptions>, String> {
        let Some(brokers) = self.kafka_brokers.as_deref().filter(|b| !b.trim().is_empty()) else { return Ok(None) };
        let topics = list(&self.kafka_topics);
        if topics.is_empty() {
            return Err("RANKING_KAFKA_TOPICS: at least one topic is required".into());
        }
        let properties = properties(&self.kafka_config).map_err(|e| format!("RANKING_KAFKA_CONFIG: {e}"))?;
        Ok(Some(KafkaOptions {
            brokers: brokers.to_string(),
            topics,
            group: self.kafka_group.clone(),
            dead_letter_topic: Some(self.kafka_dlq_topic.trim().to_string()).filter(|t| !t.is_empty()),
            instance_id: instance_id(self.kafka_instance_id.as_deref(), host_name),
            properties,
            batch: self.batch(),
        }))
    }

    /// The JetStream source's options, when it is configured.
    pub fn jetstream(&self) -> Option<JetStreamOptions> {
        let url = self.nats_url.as_deref().filter(|u| !u.trim().is_empty())?;
        Some(JetStreamOptions {
            url: url.to_string(),
            stream: self.nats_stream.clone(),
            consumer: self.nats_consumer.clone(),
            dead_letter_subject: Some(self.nats_dlq_subject.trim().to_string()).filter(|s| !s.is_empty()),
            batch: self.batch(),
        })
    }
}

fn parse_batch(s: &str) -> Result<NonZeroUsize, String> {
    match s.parse::<usize>() {
        Ok(n @ 1..=crate::app::ingest::MAX_BATCH) => Ok(NonZeroUsize::new(n).expect("n >= 1")),
        _ => Err(format!("{s:?}: expected 1-{}", crate::app::ingest::MAX_BATCH)),
    }
}

/// The group instance id: the one set (none when set empty), else the host name.
fn instance_id(set: Option<&str>, host_name: impl FnOnce() -> Option<String>) -> Option<String> {
    match set.map(str::trim) {
        Some("") => None,
        Some(id) => Some(id.to_string()),
        None => host_name(),
    }
}

/// The host name as the kernel has it (a Kubernetes pod's name), else `HOSTNAME`.
pub(crate) fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

fn list(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect()
}

/// `key=value,…` into pairs; a key without `=` is refused rather than guessed at.
fn properties(s: &str) -> Result<Vec<(String, String)>, String> {
    list(s)
        .into_iter()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
            _ => Err(format!("{:?} is not key=value", pair)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_kafka_properties_are_pairs() {
        assert_eq!(
            properties("security.protocol=SASL_SSL, sasl.mechanism=PLAIN,").expect("accepted"),
            vec![("security.protocol".into(), "SASL_SSL".into()), ("sasl.mechanism".into(), "PLAIN".into())]
        );
        assert!(properties("session.timeout.ms").expect_err("refused").contains("not key=value"));
        assert!(properties("").expect("accepted").is_empty());
    }

    #[test]
    fn the_instance_id_is_the_host_name_unless_set() {
        let host = || Some("ranking-0".to_string());
        assert_eq!(instance_id(None, host), Some("ranking-0".into()));
        assert_eq!(instance_id(Some(" replica-a "), host), Some("replica-a".into()));
        assert_eq!(instance_id(Some(""), host), None, "empty: dynamic membership");
        assert_eq!(instance_id(None, || None), None);
    }

    #[test]
    fn batch_is_bounded_by_the_ingest_batch() {
        assert_eq!(parse_batch("10000").expect("accepted").get(), 10_000);
        assert!(parse_batch("0").is_err());
        assert!(parse_batch("10001").is_err());
    }
}
