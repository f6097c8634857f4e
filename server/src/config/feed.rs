//! The ranking feed: its sinks (a Kafka topic, a JetStream subject; each off unless named),
//! how much of each board it follows and how often.

use std::time::Duration;

use clap::Args;

use super::{BusSettings, parse_nonzero_duration};
use crate::app::feed::FeedSettings as Followed;

/// Where the feed goes and what it follows.
#[derive(Debug, Clone, Args)]
pub struct FeedSettings {
    /// The Kafka topic every fed version's records are produced to (idempotent, acks=all, key
    /// = the board); empty: none.
    #[arg(long, env = "RANKING_FEED_KAFKA_TOPIC", value_name = "RANKING_FEED_KAFKA_TOPIC", default_value = "")]
    pub feed_kafka_topic: String,

    /// The feed's Kafka bootstrap servers (default: RANKING_KAFKA_BROKERS).
    #[arg(long, env = "RANKING_FEED_KAFKA_BROKERS", value_name = "RANKING_FEED_KAFKA_BROKERS")]
    pub feed_kafka_brokers: Option<String>,

    /// The JetStream subject prefix of the feed (`<prefix>.<profile>.<window>.<segment or
    /// _all>`); empty: none.
    #[arg(long, env = "RANKING_FEED_NATS_SUBJECT", value_name = "RANKING_FEED_NATS_SUBJECT", default_value = "")]
    pub feed_nats_subject: String,

    /// The feed's NATS server (default: RANKING_NATS_URL).
    #[arg(long, env = "RANKING_FEED_NATS_URL", value_name = "RANKING_FEED_NATS_URL")]
    pub feed_nats_url: Option<String>,

    /// Entries of each board the feed follows, 1-100,000.
    #[arg(long, env = "RANKING_FEED_TOP", value_name = "RANKING_FEED_TOP", default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub feed_top: u32,

    /// At most one fed version per board per this interval (versions between are folded).
    #[arg(long, env = "RANKING_FEED_INTERVAL", value_name = "RANKING_FEED_INTERVAL", default_value = "1s", value_parser = parse_nonzero_duration)]
    pub feed_interval: Duration,

    /// A board is sent whole at least this often (and the JetStream stream the service
    /// creates keeps records twice this long).
    #[arg(long, env = "RANKING_FEED_SNAPSHOT", value_name = "RANKING_FEED_SNAPSHOT", default_value = "1h", value_parser = parse_nonzero_duration)]
    pub feed_snapshot: Duration,
}

impl FeedSettings {
    /// What the feed follows.
    pub fn followed(&self) -> Followed {
        Followed { top: self.feed_top as usize, interval: self.feed_interval, whole_every: self.feed_snapshot }
    }

    /// The Kafka sink's brokers and topic, when the topic is set; brokers are required then.
    pub fn kafka(&self, bus: &BusSettings) -> Result<Option<(String, String)>, String> {
        let topic = self.feed_kafka_topic.trim();
        if topic.is_empty() {
            return Ok(None);
        }
        let brokers = self.feed_kafka_brokers.clone().or_else(|| bus.kafka_brokers.clone());
        match brokers.filter(|b| !b.trim().is_empty()) {
            Some(brokers) => Ok(Some((brokers, topic.to_string()))),
            None => Err("RANKING_FEED_KAFKA_TOPIC needs RANKING_FEED_KAFKA_BROKERS or RANKING_KAFKA_BROKERS".into()),
        }
    }

    /// The JetStream sink's server and subject prefix, when the subject is set.
    pub fn nats(&self, bus: &BusSettings) -> Result<Option<(String, String)>, String> {
        let subject = self.feed_nats_subject.trim();
        if subject.is_empty() {
            return Ok(None);
        }
        if subject.contains(['*', '>', ' ']) || subject.starts_with('.') || subject.ends_with('.') {
            return Err(format!("RANKING_FEED_NATS_SUBJECT {subject:?} is not a subject prefix"));
        }
        let url = self.feed_nats_url.clone().or_else(|| bus.nats_url.clone());
        match url.filter(|u| !u.trim().is_empty()) {
            Some(url) => Ok(Some((url, subject.to_string()))),
            None => Err("RANKING_FEED_NATS_SUBJECT needs RANKING_FEED_NATS_URL or RANKING_NATS_URL".into()),
        }
    }
}
