//! The NATS JetStream source: one durable pull consumer
//! (`RANKING_NATS_CONSUMER`, explicit acks) on the stream, shared by every replica, so each
//! fetch of each replica gets messages no other replica holds.
//!
//! A fetch asks for up to `RANKING_BUS_BATCH` messages and waits at most
//! `RANKING_BUS_BATCH_WAIT`; the batch is recorded in one transaction, during which every
//! message gets `AckKind::Progress` every third of its ack wait, so a long commit is not
//! mistaken for a dead consumer. Then each message is acked, or, when invalid, published to
//! the dead-letter subject and terminated (`Term`: never redelivered). A database failure
//! naks the whole batch with the backoff's delay (`Nak(Some(delay))`) and waits as long
//! before fetching again: nothing is lost and nothing spins. A replica killed with messages
//! unacked has them redelivered after the ack wait; what it committed is DUPLICATE then.
//!
//! While a batch commits, the next one is fetched (one batch ahead, no more) and the acks and
//! dead letters of the batch before it go out, so fetching, committing and acknowledging
//! overlap; a batch is only ever acknowledged after its own commit. With nothing to overlap
//! them with (an empty pull, a failure, the shutdown) the acks go out at once. A batch
//! fetched at shutdown is naked at once for another replica.
//!
//! A pull is read by [`pulls::read_pull`]: until the server ends it, or past its expiry once
//! nothing more arrives (the end of a pull does not always reach the client).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};
use async_nats::jetstream::{self, AckKind, Message};
use tokio_util::sync::CancellationToken;

mod pulls;

use self::pulls::{Pulled, read_pull};
use super::{Backoff, BatchOptions, Connected, Disposition, Sink};
use crate::app::ingest::Ingest;
use crate::bus::repeats::DeadLetterLog;
use crate::metrics::Metrics;
use crate::metrics::bus::LagLabels;

/// The source's name in metrics and logs.
pub const SOURCE: &str = "jetstream";

/// Ack wait of the consumer this source creates (an existing consumer keeps its own).
const ACK_WAIT: Duration = Duration::from_secs(30);

/// Dead-letter publications of a batch in flight at once.
const DEAD_LETTERS_IN_FLIGHT: usize = 1_000;

/// The JetStream source's settings.
#[derive(Debug, Clone)]
pub struct JetStreamOptions {
    /// NATS server URL.
    pub url: String,
    /// Stream of the events.
    pub stream: String,
    /// Durable pull consumer.
    pub consumer: String,
    /// Where invalid records go; `None`: logged, counted and terminated.
    pub dead_letter_subject: Option<String>,
    /// Batching.
    pub batch: BatchOptions,
}

/// The source, until it runs.
pub struct JetStreamSource {
    options: JetStreamOptions,
    sink: Sink,
    metrics: Arc<Metrics>,
    dead_letter_log: DeadLetterLog,
    connected: Connected,
}

impl JetStreamSource {
    /// The source; it connects when it runs.
    pub fn new(options: JetStreamOptions, ingest: Arc<Ingest>, metrics: Arc<Metrics>, connected: Connected) -> Self {
        let sink = Sink::new(ingest, metrics.clone(), options.batch.format, SOURCE);
        let dead_letter_log = DeadLetterLog::new(metrics.clone(), SOURCE);
        Self { options, sink, metrics, connected, dead_letter_log }
    }

    /// Connects (and reconnects, by the client), then consumes until `stop`: one [`Step`]
    /// after another.
    pub async fn run(self, stop: CancellationToken) {
        let Some(client) = self.connect(&stop).await else { return };
        let context = jetstream::new(client.clone());
        let mut carry = Carry { unsettled: None, backoff: Backoff::default() };
        let mut step = Step::Bind;
        while !matches!(step, Step::Stop) {
            step = self.step(step, &mut carry, &context, &stop).await;
        }
        self.settle(&context, carry.unsettled.take()).await;
        // Acks are written by the client's connection task: flush them before leaving.
        if tokio::time::timeout(Duration::from_secs(5), client.flush()).await.is_err() {
            tracing::warn!("nats flush at shutdown timed out; unflushed acks mean redeliveries");
        }
        tracing::info!("jetstream source stopped");
    }

    /// The client, connected (it reconnects by itself from then on), or `None` at `stop` or
    /// when the URL cannot be used.
    async fn connect(&self, stop: &CancellationToken) -> Option<async_nats::Client> {
        let connected = self.connected.clone();
        let connect = async_nats::ConnectOptions::new()
            .name("ranking-service")
            .retry_on_initial_connect()
            .event_callback(move |event| {
                let connected = connected.clone();
                async move {
                    match event {
                        async_nats::Event::Connected => connected.set(true),
                        async_nats::Event::Disconnected | async_nats::Event::Closed => connected.set(false),
                        other => tracing::warn!(event = %other, "nats event"),
                    }
                }
            })
            .connect(self.options.url.as_str());
        let client = tokio::select! {
            client = connect => match client {
                Ok(client) => client,
                Err(e) => {
                    tracing::error!(error = %e, "RANKING_NATS_URL: cannot connect; the JetStream source is off");
                    return None;
                }
            },
            () = stop.cancelled() => return None,
        };
        if client.connection_state() == async_nats::connection::State::Connected {
            self.connected.set(true);
        }
        Some(client)
    }

    /// One step of the consumer loop, and the step after it.
    async fn step(
        &self,
        step: Step,
        carry: &mut Carry,
        context: &jetstream::Context,
        stop: &CancellationToken,
    ) -> Step {
        match step {
            Step::Bind if stop.is_cancelled() => Step::Stop,
            Step::Bind => match self.consumer(context).await {
                Ok(consumer) => Step::Pull(consumer),
                Err(e) => {
                    tracing::warn!(error = %e, stream = %self.options.stream, "jetstream consumer unavailable; retried");
                    Step::Retry
                }
            },
            Step::Pull(consumer) => {
                // Nothing to overlap the acks with: they go out before the pull waits.
                self.settle(context, carry.unsettled.take()).await;
                let fetched = self.fetch(&consumer, stop).await;
                Step::after(consumer, fetched)
            }
            Step::Handle(consumer, batch) => {
                // While a batch commits, the next one is fetched (one batch ahead, no more)
                // and the one before it is acknowledged: the three overlap.
                let progress_every = progress_interval(consumer.cached_info().config.ack_wait);
                let (handled, next, ()) = tokio::join!(
                    self.handle(batch, progress_every, stop, &mut carry.backoff),
                    self.fetch(&consumer, stop),
                    self.settle(context, carry.unsettled.take())
                );
                match handled {
                    Handled::Committed(settlement) => carry.unsettled = Some(settlement),
                    Handled::Naked => {}
                    Handled::Stopped => {
                        if let Fetched::Batch(next) = next {
                            release(&next).await;
                        }
                        return Step::Stop;
                    }
                }
                Step::after(consumer, next)
            }
            Step::Retry => {
                self.settle(context, carry.unsettled.take()).await;
                if carry.backoff.wait(stop).await { Step::Bind } else { Step::Stop }
            }
            Step::Stop => Step::Stop,
        }
    }

    /// One pull of up to a batch, waiting at most the batch wait; updates the lag. At
    /// `stop`, what was pulled is released (naked) for another replica at once.
    async fn fetch(&self, consumer: &PullConsumer, stop: &CancellationToken) -> Fetched {
        let fetch = consumer
            .batch()
            .max_messages(self.options.batch.max_records)
            .max_bytes(super::MAX_BATCH_BYTES)
            .expires(self.options.batch.max_wait)
            .messages();
        let messages = tokio::select! {
            fetched = fetch => match fetched {
                Ok(messages) => messages,
                Err(e) => {
                    tracing::warn!(error = %e, "jetstream fetch failed; retried");
                    return Fetched::Failed;
                }
            },
            () = stop.cancelled() => return Fetched::Stopped,
        };
        let batch = match read_pull(messages, self.options.batch.max_wait, stop).await {
            Pulled::Batch(batch) => batch,
            Pulled::Stopped(batch) => {
                release(&batch).await;
                return Fetched::Stopped;
            }
        };
        let labels = LagLabels { source: SOURCE, partition: self.options.stream.clone() };
        let pending = batch.last().and_then(|m| m.info().ok().map(|i| i.pending)).unwrap_or(0);
        self.metrics.bus.lag.get_or_create(&labels).set(i64::try_from(pending).unwrap_or(i64::MAX));
        Fetched::Batch(batch)
    }

    /// The durable pull consumer, created with explicit acks when missing.
    async fn consumer(&self, context: &jetstream::Context) -> Result<PullConsumer, async_nats::Error> {
        let stream = context.get_stream(&self.options.stream).await?;
        let config = pull::Config {
            durable_name: Some(self.options.consumer.clone()),
            ack_policy: AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_ack_pending: max_ack_pending(self.options.batch.max_records),
            ..Default::default()
        };
        Ok(stream.get_or_create_consumer(&self.options.consumer, config).await?)
    }

    /// Records one batch: committed (to be settled), or naked after a database failure and
    /// its backoff waited out.
    async fn handle(
        &self,
        batch: Vec<Message>,
        progress_every: Duration,
        stop: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Handled {
        let started = Instant::now();
        let payloads: Vec<Option<&[u8]>> = batch.iter().map(|m| Some(m.payload.as_ref())).collect();
        let recorded = {
            let record = std::pin::pin!(self.sink.record(&payloads));
            let mut progress = tokio::time::interval_at(tokio::time::Instant::now() + progress_every, progress_every);
            let mut record = record;
            loop {
                tokio::select! {
                    result = &mut record => break result,
                    _ = progress.tick() => {
                        futures_util::future::join_all(batch.iter().map(|m| m.ack_with(AckKind::Progress))).await;
                    }
                }
            }
        };
        let dispositions = match recorded {
            Ok(d) => d,
            Err(e) => {
                let delay = backoff.next_delay();
                tracing::warn!(error = %e, records = batch.len(), delay = ?delay, "database unavailable: jetstream batch naked with a delay");
                futures_util::future::join_all(batch.iter().map(|m| m.ack_with(AckKind::Nak(Some(delay))))).await;
                return tokio::select! {
                    () = tokio::time::sleep(delay) => Handled::Naked,
                    () = stop.cancelled() => Handled::Stopped,
                };
            }
        };
        backoff.reset();
        Handled::Committed(Settlement { batch, dispositions, started })
    }

    /// Acks a committed batch's messages, dead-letters (then terminates) its invalid ones.
    async fn settle(&self, context: &jetstream::Context, settlement: Option<Settlement>) {
        let Some(Settlement { batch, dispositions, started }) = settlement else { return };
        // Invalid records first, side by side: a dead letter waits for the stream's ack. In
        // slices, since the client refuses publications beyond its in-flight bound (5,000)
        // rather than queueing them.
        let invalid: Vec<(usize, &str)> = dispositions
            .iter()
            .enumerate()
            .filter_map(|(i, d)| match d {
                Disposition::Invalid(error) => Some((i, error.as_str())),
                Disposition::Recorded(_) => None,
            })
            .collect();
        let mut dead_lettered = Vec::with_capacity(invalid.len());
        for slice in invalid.chunks(DEAD_LETTERS_IN_FLIGHT) {
            let sends = slice.iter().map(|&(i, error)| self.dead_letter(context, &batch[i], error));
            dead_lettered.extend(slice.iter().map(|&(i, _)| i).zip(futures_util::future::join_all(sends).await));
        }
        // Then every message in order, one after the other: an ack only hands a few bytes
        // to the connection's queue, cheaper awaited in turn than as thousands of futures.
        let mut dead_lettered = dead_lettered.into_iter().peekable();
        for (i, m) in batch.iter().enumerate() {
            let kind = match dead_lettered.next_if(|(at, _)| *at == i) {
                Some((_, kind)) => kind,
                None => AckKind::Ack,
            };
            if let Err(e) = m.ack_with(kind).await {
                tracing::warn!(error = %e, "jetstream ack not sent; the message is redelivered (a DUPLICATE)");
            }
        }
        self.metrics.bus.batch_seconds.observe(started.elapsed().as_secs_f64());
    }

    /// Publishes an invalid message to the dead-letter subject (through JetStream, waiting
    /// for the stream's ack) and answers how to acknowledge it: `Term` once it is there (or
    /// when there is no subject), a delayed `Nak` when the publication failed.
    async fn dead_letter(&self, context: &jetstream::Context, m: &Message, error: &str) -> AckKind {
        let Some(subject) = &self.options.dead_letter_subject else {
            tracing::warn!(error, "invalid jetstream record terminated (no dead-letter subject)");
            return AckKind::Term;
        };
        let origin = match m.info() {
            Ok(info) => format!("{}/{}", info.stream, info.stream_sequence),
            Err(_) => format!("{}/?", self.options.stream),
        };
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("ranking-error", error);
        headers.insert("ranking-source", origin.as_str());
        let published =
            async { context.publish_with_headers(subject.clone(), headers, m.payload.clone()).await?.await };
        match published.await {
            Ok(_) => {
                self.dead_letter_log.delivered(&origin);
                AckKind::Term
            }
            Err(e) => {
                tracing::warn!(error = %e, subject = %subject, "dead letter not published; the record is naked and retried");
                AckKind::Nak(Some(Duration::from_secs(5)))
            }
        }
    }
}

/// How often a committing batch says it is in progress: a third of the consumer's own ack
/// wait (an existing consumer keeps its own, which may be far shorter than [`ACK_WAIT`]).
fn progress_interval(ack_wait: Duration) -> Duration {
    if ack_wait.is_zero() { ACK_WAIT / 3 } else { (ack_wait / 3).max(Duration::from_millis(100)) }
}

/// Messages delivered and not yet acknowledged that the consumer this source creates allows
/// (an existing consumer keeps its own). Each replica holds up to three batches unacked: one
/// committing, the next one fetched, the one before being acknowledged; a killed replica's
/// wait out the ack wait. A consumer at its bound stops delivering, and its pulls end late
/// (as [`pull_deadline`] describes): room for 16 replicas' batches.
fn max_ack_pending(max_records: usize) -> i64 {
    i64::try_from(max_records.saturating_mul(3 * 16)).unwrap_or(i64::MAX).max(1_000)
}

/// Where the consumer loop is between two steps.
enum Step {
    /// Look up (or create) the durable consumer: at start, and after a failure.
    Bind,
    /// Acknowledge what is committed, then pull a batch.
    Pull(PullConsumer),
    /// Commit a pulled batch while pulling the next and acknowledging the one before.
    Handle(PullConsumer, Vec<Message>),
    /// Acknowledge what is committed, wait out the backoff, bind again.
    Retry,
    /// Leave: `stop` came.
    Stop,
}

impl Step {
    /// The step after a pull.
    fn after(consumer: PullConsumer, fetched: Fetched) -> Self {
        match fetched {
            Fetched::Batch(batch) if batch.is_empty() => Self::Pull(consumer),
            Fetched::Batch(batch) => Self::Handle(consumer, batch),
            Fetched::Failed => Self::Retry,
            Fetched::Stopped => Self::Stop,
        }
    }
}

/// What the consumer loop carries from one step to the next.
struct Carry {
    /// A committed batch whose acks have not gone out yet (at most one).
    unsettled: Option<Settlement>,
    /// The wait before the next try after a failure.
    backoff: Backoff,
}

/// What became of a batch handed to the sink.
enum Handled {
    /// Committed; its messages are acknowledged by [`JetStreamSource::settle`].
    Committed(Settlement),
    /// Not committed (the database failed): naked with a delay, which was waited out.
    Naked,
    /// Not committed, naked, and `stop` came during the wait.
    Stopped,
}

/// A committed batch and what became of each of its messages, until they are acknowledged.
struct Settlement {
    batch: Vec<Message>,
    dispositions: Vec<Disposition>,
    /// When its handling began (`ranking_bus_batch_seconds` runs to its last ack).
    started: Instant,
}

/// What a pull brought.
enum Fetched {
    Batch(Vec<Message>),
    /// Failed; the consumer is looked up again after a backoff.
    Failed,
    Stopped,
}

/// Hands messages back unprocessed (`Nak` without delay): another replica gets them now
/// rather than after the ack wait. A nak that is not sent only delays them to the ack wait.
async fn release(batch: &[Message]) {
    futures_util::future::join_all(batch.iter().map(|m| m.ack_with(AckKind::Nak(None)))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_follows_the_consumers_own_ack_wait() {
        assert_eq!(progress_interval(Duration::from_secs(2)), Duration::from_nanos(666_666_666));
        assert_eq!(progress_interval(Duration::from_secs(30)), Duration::from_secs(10));
        assert_eq!(progress_interval(Duration::from_millis(30)), Duration::from_millis(100));
        assert_eq!(progress_interval(Duration::ZERO), ACK_WAIT / 3);
    }

    #[test]
    fn the_consumer_has_room_for_replicas() {
        assert_eq!(max_ack_pending(5_000), 240_000);
        assert_eq!(max_ack_pending(1), 1_000);
        assert_eq!(max_ack_pending(usize::MAX), i64::MAX);
    }
}
