//! Recording events: validation, the durable SQL commit, then the approximate hourly
//! increments.
//!
//! Single events go through a group commit: concurrent `RecordEvent` calls are queued and
//! written by a few workers as shared batches, so many callers cost few transactions. Each
//! caller still gets its answer only after the transaction holding its event committed.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::invalid::Invalid;
use super::policy::Policy;
use crate::domain::calendar::RankingHour;
use crate::domain::event::{AcceptWindow, RawEvent};
use crate::metrics::Metrics;
use crate::metrics::shoppers::SignalLabels;
use crate::ports::{
    CatalogRows, DatedEvent, EventLedger, HourlyIncrement, Outcome, RankingStore, RecordRules, Recorded, StoreError,
};

/// Largest `RecordEvents` batch.
pub const MAX_BATCH: usize = 10_000;

/// Most single events one group-commit transaction takes.
const MAX_GROUP: usize = 1_000;

/// Why events were not recorded.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The request broke a rule; nothing of it was written.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The database failed; nothing was confirmed and the call may be retried.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The server is stopping and takes no more events; the call may be retried elsewhere.
    #[error("the server is shutting down")]
    ShuttingDown,
}

/// A single event waiting for a group commit.
struct Pending {
    event: DatedEvent,
    /// The outcome, or what the stored events refuse in it.
    reply: oneshot::Sender<Result<Result<Outcome, Invalid>, StoreError>>,
}

/// The ingest path.
pub struct Ingest {
    ledger: Arc<dyn EventLedger>,
    catalog: Arc<dyn CatalogRows>,
    rankings: Arc<dyn RankingStore>,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
    queue: mpsc::Sender<Pending>,
}

/// The receiving end of the single-event queue, until [`GroupCommit::spawn`] hands it to
/// the workers.
pub struct GroupCommit {
    ingest: std::sync::Weak<Ingest>,
    rx: mpsc::Receiver<Pending>,
}

impl Ingest {
    /// The ingest path and its group commit, whose workers are started separately (so that
    /// building the application spawns nothing).
    pub fn new(
        ledger: Arc<dyn EventLedger>,
        catalog: Arc<dyn CatalogRows>,
        rankings: Arc<dyn RankingStore>,
        policy: Arc<Policy>,
        metrics: Arc<Metrics>,
    ) -> (Arc<Self>, GroupCommit) {
        let (queue, rx) = mpsc::channel(MAX_GROUP * 4);
        let ingest = Arc::new(Self { ledger, catalog, rankings, policy, metrics, queue });
        let group_commit = GroupCommit { ingest: Arc::downgrade(&ingest), rx };
        (ingest, group_commit)
    }

    /// The accept window now.
    fn window(&self) -> AcceptWindow {
        AcceptWindow { now: self.policy.now(), accept_days: self.policy.accept_days }
    }

    fn validate(&self, raw: RawEvent) -> Result<DatedEvent, Invalid> {
        let event = raw.validate(self.window(), &self.policy.profile)?;
        let date = self.policy.calendar.day_of(event.occurred_at);
        Ok(DatedEvent { event, date })
    }

    /// Records one event through the group commit.
    pub async fn record_one(&self, raw: RawEvent) -> Result<Outcome, IngestError> {
        let event = self.validate(raw).map_err(|e| {
            self.metrics.ingest.rejected.inc();
            e.within("event")
        })?;
        let (reply, answer) = oneshot::channel();
        self.queue.send(Pending { event, reply }).await.map_err(|_| IngestError::ShuttingDown)?;
        let outcome = answer.await.map_err(|_| IngestError::ShuttingDown)??;
        outcome.map_err(|refused| IngestError::Invalid(refused.within("event")))
    }

    /// Records a batch atomically: every event is validated first, and one malformed event
    /// rejects the whole batch.
    pub async fn record_batch(&self, raw: Vec<RawEvent>) -> Result<Vec<Outcome>, IngestError> {
        let refuse = |e: Invalid| {
            self.metrics.ingest.rejected.inc();
            IngestError::Invalid(e)
        };
        if raw.is_empty() {
            return Err(refuse(Invalid::field("events", "at least 1 event is required")));
        }
        if raw.len() > MAX_BATCH {
            return Err(refuse(Invalid::field(
                "events",
                format!("at most {MAX_BATCH} events per batch, got {}", raw.len()),
            )));
        }
        let batch = raw
            .into_iter()
            .enumerate()
            .map(|(i, r)| self.validate(r).map_err(|e| e.within_element("events", i)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(refuse)?;
        match self.commit(&batch).await {
            Err(StoreError::Refused { index, field, reason }) => {
                Err(refuse(Invalid::field(field, reason).within_element("events", index)))
            }
            other => other.map_err(IngestError::Store),
        }
    }

    /// Records a batch of independent records (the event bus's): each is
    /// validated on its own, the valid ones commit in one transaction through the same
    /// batch path as [`Ingest::record_batch`], and an invalid one is returned as its
    /// error without holding the others back. A record that did not even decode comes in
    /// as its error. On a store failure nothing of the batch is committed.
    pub async fn record_independent(
        &self,
        records: Vec<Result<RawEvent, Invalid>>,
    ) -> Result<Vec<Result<Outcome, Invalid>>, StoreError> {
        debug_assert!(records.len() <= MAX_BATCH, "the bus batch is bounded by its settings");
        // The valid events in record order; each record keeps only whether it was one.
        let mut valid = Vec::with_capacity(records.len());
        let checked: Vec<Result<(), Invalid>> =
            records.into_iter().map(|r| r.and_then(|raw| self.validate(raw)).map(|event| valid.push(event))).collect();
        let mut outcomes = self.commit_each(valid).await?.into_iter();
        Ok(checked
            .into_iter()
            .map(|r| r.and_then(|_| outcomes.next().expect("the store answers one outcome per event")))
            .collect())
    }

    /// Commits events that do not depend on each other (a group commit's, a bus batch's): a
    /// retraction the stored events refuse is answered with its refusal, and the others are
    /// committed without it (one more transaction per refusal, at most one per event).
    async fn commit_each(&self, batch: Vec<DatedEvent>) -> Result<Vec<Result<Outcome, Invalid>>, StoreError> {
        let mut refused: Vec<Option<Invalid>> = vec![None; batch.len()];
        loop {
            let live: Vec<usize> = (0..batch.len()).filter(|i| refused[*i].is_none()).collect();
            let events: Vec<DatedEvent> = live.iter().map(|i| batch[*i].clone()).collect();
            let outcomes = if events.is_empty() { Ok(Vec::new()) } else { self.commit(&events).await };
            match outcomes {
                Ok(outcomes) => {
                    let mut outcomes = outcomes.into_iter();
                    return Ok(refused
                        .into_iter()
                        .map(|r| match r {
                            Some(invalid) => Err(invalid),
                            None => Ok(outcomes.next().expect("the store answers one outcome per event")),
                        })
                        .collect());
                }
                Err(StoreError::Refused { index, field, reason }) => {
                    self.metrics.ingest.rejected.inc();
                    refused[live[index]] = Some(Invalid::field(field, reason));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Commits a validated batch, then adds its points to the hourly rankings: the accepted
    /// events', and the negative of what each retraction took back, in the retraction's hour.
    async fn commit(&self, batch: &[DatedEvent]) -> Result<Vec<Outcome>, StoreError> {
        let retractable_since = self.window().oldest();
        let rules = RecordRules { profile: &self.policy.profile, retractable_since, calendar: self.policy.calendar };
        let Recorded { outcomes, withdrawn, uncounted, capped } = self.ledger.record(batch, rules).await?;
        let duplicates = outcomes.iter().filter(|o| **o == Outcome::Duplicate).count();
        self.metrics.ingest.accepted.inc_by((outcomes.len() - duplicates) as u64);
        self.metrics.ingest.duplicate.inc_by(duplicates as u64);
        for (signal, n) in capped {
            self.metrics.shoppers.capped.get_or_create(&SignalLabels { signal }).inc_by(n);
        }
        let profile = &self.policy.profile;
        // Sorted by the store: the events a cap kept from counting add (or take) no points.
        let counts = |i: usize| uncounted.binary_search(&i).is_err();
        let points = batch
            .iter()
            .enumerate()
            .zip(&outcomes)
            .filter(|((i, _), o)| **o == Outcome::Accepted && counts(*i))
            .map(|((_, e), _)| (e.event.product_id, e.event.occurred_at, profile.hourly_points(&e.event)))
            .chain(withdrawn.iter().filter(|(i, _)| counts(*i)).map(|(i, original)| {
                (original.product_id, batch[*i].event.occurred_at, -profile.hourly_points(&original.event()))
            }))
            .filter(|(_, _, points)| *points != 0.0)
            .collect::<Vec<_>>();
        self.increment_hourly(&points).await;
        Ok(outcomes)
    }

    /// Hourly rankings are an approximation: a failed increment is logged and counted, never
    /// retried and never turned into an error for a caller whose event is already committed.
    /// Hidden products get none (their events still count in SQL). `points`: product, when,
    /// points.
    async fn increment_hourly(&self, points: &[(i64, DateTime<Utc>, f64)]) {
        if points.is_empty() {
            return;
        }
        let mut products: Vec<i64> = points.iter().map(|(product, _, _)| *product).collect();
        products.sort_unstable();
        products.dedup();
        let hidden: HashSet<i64> = match self.catalog.hidden_among(&products).await {
            Ok(hidden) => hidden.into_iter().collect(),
            Err(e) => {
                self.metrics.ingest.hourly_increment_failures.inc_by(points.len() as u64);
                tracing::warn!(error = %e, "could not read hidden products; hourly increments skipped");
                return;
            }
        };
        let mut sums: BTreeMap<(RankingHour, i64), f64> = BTreeMap::new();
        for (product, at, p) in points.iter().filter(|(product, _, _)| !hidden.contains(product)) {
            let hour = self.policy.calendar.hour_of(*at);
            *sums.entry((hour, *product)).or_default() += p;
        }
        let increments: Vec<HourlyIncrement> = sums
            .into_iter()
            .map(|((hour, product_id), delta)| HourlyIncrement {
                hour,
                product_id,
                delta,
                expire_at: self.policy.hourly_expiry(hour),
            })
            .collect();
        if let Err(e) = self.rankings.increment_hourly(&increments).await {
            self.metrics.ingest.hourly_increment_failures.inc_by(increments.len() as u64);
            tracing::warn!(error = %e, increments = increments.len(), "hourly increment failed; the daily ranking is unaffected");
        }
    }
}

impl GroupCommit {
    /// Starts `workers` workers on `tracker`. They stop when `stop` is cancelled (after the
    /// gRPC server has finished its calls, so no caller is left waiting) or when the last
    /// `Ingest` is dropped.
    pub fn spawn(self, workers: usize, tracker: &TaskTracker, stop: CancellationToken) {
        let rx = Arc::new(Mutex::new(self.rx));
        for _ in 0..workers.max(1) {
            let worker = GroupCommitWorker { ingest: self.ingest.clone(), rx: rx.clone(), stop: stop.clone() };
            tracker.spawn(worker.run());
        }
    }
}

/// Drains the single-event queue into shared transactions.
struct GroupCommitWorker {
    /// Weak, so dropping the last `Ingest` stops the workers.
    ingest: std::sync::Weak<Ingest>,
    rx: Arc<Mutex<mpsc::Receiver<Pending>>>,
    stop: CancellationToken,
}

impl GroupCommitWorker {
    async fn run(self) {
        loop {
            let mut group = Vec::new();
            {
                let mut rx = tokio::select! {
                    rx = self.rx.lock() => rx,
                    () = self.stop.cancelled() => return,
                };
                let first = tokio::select! {
                    // A queued event is committed even when the stop comes at the same time.
                    biased;
                    first = rx.recv() => first,
                    () = self.stop.cancelled() => None,
                };
                match first {
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
            match ingest.commit_each(events).await {
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
