//! Event-bus ingestion: shopper events consumed from Kafka ([`kafka`]) and NATS
//! JetStream ([`jetstream`]), beside the gRPC ingestion.
//!
//! At-least-once in, exactly-once effect: a record is acknowledged to its bus (Kafka offset
//! stored and committed, JetStream message acked) only after the SQL transaction holding it
//! committed or after it went to the dead-letter destination, and a redelivered record is a
//! DUPLICATE by its `event_id`. Both sources batch records into one transaction through
//! [`Ingest::record_independent`], the batch path of RecordEvents in which an invalid record
//! holds nothing back ([`Sink`]).
//!
//! Each source is one task on the service's tracker: it stops fetching when the shutdown
//! starts, finishes or abandons its batch (abandoned = redelivered), acknowledges what
//! committed and leaves its group. `ranking.bus` in grpc.health is SERVING while every
//! configured source is connected ([`BusHealth`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::app::ingest::Ingest;
use crate::app::invalid::Invalid;
use crate::metrics::Metrics;
use crate::ports::{Outcome, StoreError};

pub mod decode;
pub mod jetstream;
pub mod kafka;
pub mod repeats;

/// The grpc.health service name of the bus sources.
pub const HEALTH_SERVICE: &str = "ranking.bus";

/// Payload bytes a batch holds at most, whatever the record count: a producer sending
/// records of a megabyte cannot make a 5,000-record batch hold gigabytes.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// How records are batched (`RANKING_BUS_FORMAT`, `RANKING_BUS_BATCH`, `RANKING_BUS_BATCH_WAIT`).
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    /// Encoding of the payloads.
    pub format: decode::Format,
    /// Records per transaction at most (≤ the ingest batch bound).
    pub max_records: usize,
    /// Longest wait to fill a batch after its first record.
    pub max_wait: Duration,
}

/// What became of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Committed now, or found committed before.
    Recorded(Outcome),
    /// Not an event: goes to the dead-letter destination with this `ranking-error`.
    Invalid(String),
}

/// Decodes a batch's payloads and records them, counting the outcomes under the source's
/// name. Shared by both sources so that they cannot differ in what a record means.
pub struct Sink {
    ingest: Arc<Ingest>,
    metrics: Arc<Metrics>,
    format: decode::Format,
    source: &'static str,
}

impl Sink {
    /// The sink of `source` (`kafka`, `jetstream`).
    pub fn new(ingest: Arc<Ingest>, metrics: Arc<Metrics>, format: decode::Format, source: &'static str) -> Self {
        Self { ingest, metrics, format, source }
    }

    /// One transaction for the valid records (an absent payload is an invalid record); on a
    /// store failure nothing was committed and the batch may be retried as it is.
    pub async fn record(&self, payloads: &[Option<&[u8]>]) -> Result<Vec<Disposition>, StoreError> {
        let decoded = payloads
            .iter()
            .map(|p| match p {
                Some(payload) => decode::decode(self.format, payload),
                None => Err(Invalid::field("record", "has no payload")),
            })
            .collect();
        let results = match self.ingest.record_independent(decoded).await {
            Ok(results) => results,
            Err(e) => {
                self.metrics.bus.count(self.source, "unavailable", payloads.len() as u64);
                return Err(e);
            }
        };
        let mut counts = [0u64; 3];
        let dispositions: Vec<Disposition> = results
            .into_iter()
            .map(|r| match r {
                Ok(outcome) => {
                    counts[if outcome == Outcome::Duplicate { 1 } else { 0 }] += 1;
                    Disposition::Recorded(outcome)
                }
                Err(invalid) => {
                    counts[2] += 1;
                    Disposition::Invalid(invalid.message())
                }
            })
            .collect();
        let bus = &self.metrics.bus;
        bus.count(self.source, "accepted", counts[0]);
        bus.count(self.source, "duplicate", counts[1]);
        bus.count(self.source, "invalid", counts[2]);
        Ok(dispositions)
    }
}

/// Exponential backoff of a source waiting for a dependency: 100 ms doubling to 5 s (each
/// delay stretched by up to its own length at random, so replicas refused together do not
/// come back together), so an outage costs a few attempts a minute and a blip 100–200 ms.
#[derive(Debug)]
pub struct Backoff {
    delays: backon::ExponentialBackoff,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { delays: Self::delays() }
    }
}

impl Backoff {
    const MIN: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(5);

    fn delays() -> backon::ExponentialBackoff {
        use backon::BackoffBuilder;
        backon::ExponentialBuilder::default()
            .with_min_delay(Self::MIN)
            .with_max_delay(Self::MAX)
            .with_jitter()
            .without_max_times()
            .build()
    }

    /// The wait before the next attempt; each call doubles the next one.
    pub fn next_delay(&mut self) -> Duration {
        self.delays.next().unwrap_or(Self::MAX)
    }

    /// After a success.
    pub fn reset(&mut self) {
        self.delays = Self::delays();
    }

    /// Sleeps the next delay; false when `stop` came first.
    pub async fn wait(&mut self, stop: &CancellationToken) -> bool {
        let delay = self.next_delay();
        tokio::select! {
            () = tokio::time::sleep(delay) => true,
            () = stop.cancelled() => false,
        }
    }
}

/// Whether each configured source is connected; `ranking.bus` follows their conjunction.
#[derive(Clone)]
pub struct BusHealth {
    sources: Vec<(&'static str, watch::Receiver<bool>)>,
}

/// A source's side of [`BusHealth`]: set from any thread (librdkafka's callbacks included).
#[derive(Clone)]
pub struct Connected {
    source: &'static str,
    sender: Arc<watch::Sender<bool>>,
    metrics: Arc<Metrics>,
}

impl Connected {
    /// Records whether the source is connected now.
    pub fn set(&self, connected: bool) {
        self.metrics
            .bus
            .connected
            .get_or_create(&crate::metrics::bus::SourceLabels { source: self.source })
            .set(i64::from(connected));
        self.sender.send_if_modified(|c| std::mem::replace(c, connected) != connected);
    }
}

impl BusHealth {
    fn new() -> Self {
        Self { sources: Vec::new() }
    }

    /// A new source, disconnected until it says otherwise.
    fn source(&mut self, source: &'static str, metrics: Arc<Metrics>) -> Connected {
        let (sender, receiver) = watch::channel(false);
        self.sources.push((source, receiver));
        let connected = Connected { source, sender: Arc::new(sender), metrics };
        connected.set(false);
        connected
    }

    /// Keeps `ranking.bus` in `health` equal to "every source connected" until `stop`.
    async fn report(mut self, health: HealthReporter, stop: CancellationToken) {
        loop {
            let all = self.sources.iter_mut().all(|(_, r)| *r.borrow_and_update());
            let status = if all { ServingStatus::Serving } else { ServingStatus::NotServing };
            health.set_service_status(HEALTH_SERVICE, status).await;
            let changed = futures_util::future::select_all(self.sources.iter_mut().map(|(_, r)| Box::pin(r.changed())));
            tokio::select! {
                (result, _, _) = changed => if result.is_err() { return },
                () = stop.cancelled() => return,
            }
        }
    }
}

/// The configured sources, built (a Kafka client configuration that librdkafka refuses
/// fails here) but not yet running.
pub struct BusSources {
    kafka: Option<kafka::KafkaSource>,
    jetstream: Option<jetstream::JetStreamSource>,
    health: BusHealth,
}

impl BusSources {
    /// The sources of `kafka` and `jetstream`, when set, recording through `ingest`.
    pub fn build(
        kafka: Option<kafka::KafkaOptions>,
        jetstream: Option<jetstream::JetStreamOptions>,
        ingest: Arc<Ingest>,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let mut health = BusHealth::new();
        let kafka = match kafka {
            Some(options) => {
                let connected = health.source(kafka::SOURCE, metrics.clone());
                Some(kafka::KafkaSource::new(options, ingest.clone(), metrics.clone(), connected)?)
            }
            None => None,
        };
        let jetstream = jetstream.map(|options| {
            let connected = health.source(jetstream::SOURCE, metrics.clone());
            jetstream::JetStreamSource::new(options, ingest, metrics, connected)
        });
        Ok(Self { kafka, jetstream, health })
    }

    /// Whether any source is configured.
    pub fn is_empty(&self) -> bool {
        self.kafka.is_none() && self.jetstream.is_none()
    }

    /// Starts every source and the health reporter on `tasks`; they stop at `stop`, each
    /// within `grace` (what is left of a source's shutdown after it is abandoned).
    pub fn spawn(self, tasks: &TaskTracker, health: HealthReporter, stop: CancellationToken, grace: Duration) {
        if self.is_empty() {
            return;
        }
        tasks.spawn(self.health.report(health, stop.clone()));
        if let Some(kafka) = self.kafka {
            tasks.spawn(kafka.run(stop.clone(), grace));
        }
        if let Some(jetstream) = self.jetstream {
            tasks.spawn(jetstream.run(stop));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        let mut b = Backoff::default();
        let bases = [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000];
        for base in bases {
            let delay = b.next_delay().as_millis() as u64;
            assert!((base..2 * base).contains(&delay), "{delay} ms for a base of {base} ms");
        }
        b.reset();
        assert!(b.next_delay() < Duration::from_millis(200));
    }
}
