//! Recording events: validation, the durable SQL commit, then the approximate hourly
//! increments.
//!
//! Single events go through a group commit: concurrent `RecordEvent` calls are queued and
//! written by a few workers as shared batches, so many callers cost few transactions. Each
//! caller still gets its answer only after the transaction holding its event committed.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::domain::calendar::{RankingCalendar, RankingHour};
use crate::domain::event::{AcceptWindow, Event, EventKind, FieldError, RawEvent};
use crate::domain::score::Weights;
use crate::metrics::Metrics;
use crate::ports::{DatedEvent, HourlyIncrement, MetricsStore, Outcome, RankingStore, StoreError};

/// Largest `RecordEvents` batch.
pub const MAX_BATCH: usize = 10_000;

/// Most single events one group-commit transaction takes.
const MAX_GROUP: usize = 1_000;

/// Why events were not recorded.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// An event broke a rule; nothing of the request was written.
    #[error("{}{error}", index.map(|i| format!("events[{i}].")).unwrap_or_default())]
    Invalid {
        /// Position in the batch (`None` for a single event).
        index: Option<usize>,
        /// The broken rule.
        error: FieldError,
    },
    /// The batch is larger than [`MAX_BATCH`].
    #[error("events: at most {MAX_BATCH} events per batch, got {0}")]
    TooLarge(usize),
    /// The database failed; nothing was confirmed and the call may be retried.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Settings of the ingest path.
#[derive(Debug, Clone, Copy)]
pub struct IngestRules {
    /// Ranking days and hours.
    pub calendar: RankingCalendar,
    /// Hourly increment weights.
    pub weights: Weights,
    /// Oldest accepted event age in days.
    pub accept_days: u32,
}

/// A single event waiting for a group commit.
struct Pending {
    event: DatedEvent,
    reply: oneshot::Sender<Result<Outcome, StoreError>>,
}

/// The ingest path.
pub struct Ingest {
    store: Arc<dyn MetricsStore>,
    rankings: Arc<dyn RankingStore>,
    rules: IngestRules,
    metrics: Arc<Metrics>,
    queue: mpsc::Sender<Pending>,
}

impl Ingest {
    /// Starts `workers` group-commit workers; they stop when the `Ingest` is dropped.
    pub fn start(
        store: Arc<dyn MetricsStore>,
        rankings: Arc<dyn RankingStore>,
        rules: IngestRules,
        metrics: Arc<Metrics>,
        workers: usize,
    ) -> Arc<Self> {
        let (queue, rx) = mpsc::channel(MAX_GROUP * 4);
        let ingest = Arc::new(Self { store, rankings, rules, metrics, queue });
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..workers.max(1) {
            let worker = GroupCommitWorker { ingest: Arc::downgrade(&ingest), rx: rx.clone() };
            tokio::spawn(worker.run());
        }
        ingest
    }

    fn validate(&self, raw: RawEvent) -> Result<DatedEvent, FieldError> {
        let window = AcceptWindow { now: Utc::now(), accept_days: self.rules.accept_days };
        let event = raw.validate(window)?;
        let date = self.rules.calendar.day_of(event.occurred_at);
        Ok(DatedEvent { event, date })
    }

    /// Records one event through the group commit.
    pub async fn record_one(&self, raw: RawEvent) -> Result<Outcome, IngestError> {
        let event = self.validate(raw).map_err(|error| {
            self.metrics.events_rejected.inc();
            IngestError::Invalid { index: None, error }
        })?;
        let (reply, answer) = oneshot::channel();
        self.queue.send(Pending { event, reply }).await.map_err(|_| StoreError::database("ingest is shutting down"))?;
        let outcome = answer.await.map_err(|_| StoreError::database("ingest worker stopped"))??;
        Ok(outcome)
    }

    /// Records a batch atomically: every event is validated first, and one malformed event
    /// rejects the whole batch.
    pub async fn record_batch(&self, raw: Vec<RawEvent>) -> Result<Vec<Outcome>, IngestError> {
        if raw.len() > MAX_BATCH {
            self.metrics.events_rejected.inc_by(raw.len() as u64);
            return Err(IngestError::TooLarge(raw.len()));
        }
        let batch = raw
            .into_iter()
            .enumerate()
            .map(|(i, r)| self.validate(r).map_err(|error| IngestError::Invalid { index: Some(i), error }))
            .collect::<Result<Vec<_>, _>>()
            .inspect_err(|_| {
                self.metrics.events_rejected.inc();
            })?;
        self.commit(&batch).await.map_err(IngestError::Store)
    }

    /// Commits a validated batch, then adds the accepted events to the hourly rankings.
    async fn commit(&self, batch: &[DatedEvent]) -> Result<Vec<Outcome>, StoreError> {
        let outcomes = self.store.record(batch).await?;
        let accepted: Vec<&Event> =
            batch.iter().zip(&outcomes).filter(|(_, o)| **o == Outcome::Accepted).map(|(e, _)| &e.event).collect();
        self.metrics.events_accepted.inc_by(accepted.len() as u64);
        self.metrics.events_duplicate.inc_by((outcomes.len() - accepted.len()) as u64);
        self.increment_hourly(&accepted).await;
        Ok(outcomes)
    }

    /// Hourly rankings are an approximation: a failed increment is logged and counted, never
    /// retried and never turned into an error for a caller whose event is already committed.
    async fn increment_hourly(&self, accepted: &[&Event]) {
        if accepted.is_empty() {
            return;
        }
        let mut sums: BTreeMap<(RankingHour, i64), f64> = BTreeMap::new();
        for e in accepted {
            let hour = self.rules.calendar.hour_of(e.occurred_at);
            *sums.entry((hour, e.product_id)).or_default() += hourly_points(&self.rules.weights, e);
        }
        let increments: Vec<HourlyIncrement> = sums
            .into_iter()
            .map(|((hour, product_id), delta)| HourlyIncrement {
                hour,
                product_id,
                delta,
                expire_at: self.rules.calendar.hour_end(hour) + chrono::Duration::hours(2),
            })
            .collect();
        if let Err(e) = self.rankings.increment_hourly(&increments).await {
            self.metrics.hourly_increment_failures.inc_by(increments.len() as u64);
            tracing::warn!(error = %e, increments = increments.len(), "hourly increment failed; the daily ranking is unaffected");
        }
    }
}

/// Points one fresh event adds to its hourly ranking.
fn hourly_points(weights: &Weights, e: &Event) -> f64 {
    match e.kind {
        EventKind::View => weights.view,
        EventKind::Like => weights.like,
        EventKind::Unlike => -weights.like,
        EventKind::Order => weights.order_points(e.amount),
    }
}

/// Drains the single-event queue into shared transactions.
struct GroupCommitWorker {
    /// Weak, so dropping the last `Ingest` stops the workers.
    ingest: std::sync::Weak<Ingest>,
    rx: Arc<Mutex<mpsc::Receiver<Pending>>>,
}

impl GroupCommitWorker {
    async fn run(self) {
        loop {
            let mut group = Vec::new();
            {
                let mut rx = self.rx.lock().await;
                match rx.recv().await {
                    Some(first) => group.push(first),
                    None => return,
                }
                while group.len() < MAX_GROUP {
                    match rx.try_recv() {
                        Ok(p) => group.push(p),
                        Err(_) => break,
                    }
                }
            }
            let Some(ingest) = self.ingest.upgrade() else { return };
            let (events, replies): (Vec<_>, Vec<_>) = group.into_iter().map(|p| (p.event, p.reply)).unzip();
            match ingest.commit(&events).await {
                Ok(outcomes) => {
                    for (reply, outcome) in replies.into_iter().zip(outcomes) {
                        // The caller may have given up (deadline); its event is committed anyway.
                        let _ = reply.send(Ok(outcome));
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
        }
    }
}
