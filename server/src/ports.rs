//! The traits the application needs from the outside world, implemented by `adapters/`.
//!
//! - [`MetricsStore`]: the SQL single source of truth (events ledger and metrics).
//! - [`RankingStore`]: the derived rankings (Redis, or the embedded in-process store).
//! - [`LeaseLock`]: mutual exclusion of recomputes across replicas.
//!
//! Handlers, the ingest path and the recompute depend on these traits only, so a new store
//! plugs in without touching them.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use crate::domain::calendar::RankingHour;
use crate::domain::event::Event;
use crate::domain::score::DailyMetrics;

/// A dependency failed. Every variant means "nothing was confirmed": the caller may retry.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached or refused the operation.
    #[error("{store} unavailable: {detail}")]
    Unavailable {
        /// Which store (`database`, `ranking store`).
        store: &'static str,
        /// What went wrong, for the caller and the log.
        detail: String,
    },
    /// The store answered with data this service cannot interpret.
    #[error("{0}")]
    Corrupt(String),
}

impl StoreError {
    /// The database failed.
    pub fn database(detail: impl ToString) -> Self {
        Self::Unavailable { store: "database", detail: detail.to_string() }
    }

    /// The ranking store failed.
    pub fn ranking(detail: impl ToString) -> Self {
        Self::Unavailable { store: "ranking store", detail: detail.to_string() }
    }
}

/// A validated event with the ranking day it counts towards (its `occurred_at` in
/// `RANKING_TZ`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatedEvent {
    /// The event.
    pub event: Event,
    /// The ranking day.
    pub date: NaiveDate,
}

/// What recording did with one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Stored now.
    Accepted,
    /// Its id was already stored (or appeared earlier in the same batch); nothing changed.
    Duplicate,
}

/// One `product_daily_metrics` row as the recompute needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DailyRow {
    /// The product.
    pub product_id: i64,
    /// The day's counters.
    pub metrics: DailyMetrics,
    /// Latest `occurred_at` that day, Unix microseconds.
    pub last_event_us: i64,
}

/// The SQL single source of truth.
#[async_trait]
pub trait MetricsStore: Send + Sync + 'static {
    /// Stores a batch atomically: returns one outcome per event, in order, only after the
    /// transaction committed. Ids repeated inside the batch count once (first wins).
    async fn record(&self, batch: &[DatedEvent]) -> Result<Vec<Outcome>, StoreError>;

    /// Visits every metrics row of `date` in ascending product order, streaming (the rows are
    /// never all in memory). Returns how many rows were visited.
    async fn scan_day(&self, date: NaiveDate, visit: &mut (dyn FnMut(DailyRow) + Send)) -> Result<u64, StoreError>;

    /// Deletes events that occurred before `events_before` and daily metrics of days before
    /// `days_before`, at most `chunk` rows per statement. Returns the rows deleted.
    async fn prune(&self, events_before: DateTime<Utc>, days_before: NaiveDate, chunk: u32) -> Result<u64, StoreError>;
}

/// Which ranking to read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RankingKey {
    /// The exact daily ranking.
    Daily(NaiveDate),
    /// The approximate hourly ranking.
    Hourly(RankingHour),
}

/// A product and its score in a ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The product.
    pub product_id: i64,
    /// Its score.
    pub score: f64,
}

/// A page of a ranking.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page {
    /// Entries, best first.
    pub entries: Vec<Scored>,
    /// Size of the whole ranking.
    pub total: u64,
}

/// A product's place in a ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placement {
    /// 0-based position, best first.
    pub index: u64,
    /// Its score.
    pub score: f64,
}

/// One hourly increment after a commit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HourlyIncrement {
    /// Which hour.
    pub hour: RankingHour,
    /// The product.
    pub product_id: i64,
    /// Points to add (negative for UNLIKE).
    pub delta: f64,
    /// When the hourly key should disappear.
    pub expire_at: DateTime<Utc>,
}

/// Derived rankings. Equal scores are ordered by descending product id in every read.
#[async_trait]
pub trait RankingStore: Send + Sync + 'static {
    /// Replaces the daily ranking of `date` as a whole: readers see the old ranking or the
    /// new one, never a mix, and products absent from `entries` disappear.
    async fn replace_daily(
        &self,
        date: NaiveDate,
        entries: &[Scored],
        expire_at: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Adds the increments to their hourly rankings and sets their expiry.
    async fn increment_hourly(&self, increments: &[HourlyIncrement]) -> Result<(), StoreError>;

    /// A page of a ranking, best first.
    async fn top(&self, key: RankingKey, offset: u64, limit: u64) -> Result<Page, StoreError>;

    /// One product's place and the size of the ranking.
    async fn placement(&self, key: RankingKey, product_id: i64) -> Result<(Option<Placement>, u64), StoreError>;

    /// Whether the ranking exists: for a daily ranking, whether a recompute has written it
    /// (possibly empty) since the store was last emptied, so a lost ranking can be told
    /// from a day without products.
    async fn exists(&self, key: RankingKey) -> Result<bool, StoreError>;
}

/// Proof of holding a lease; released with [`LeaseLock::release`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Lock name.
    pub name: String,
    /// Random token that identifies this holder.
    pub token: String,
}

/// Time-bounded locks shared by every replica.
#[async_trait]
pub trait LeaseLock: Send + Sync + 'static {
    /// Takes the lease when nobody holds it; `None` when somebody does. The lease expires
    /// by itself after `ttl`, so a crashed holder cannot block the others forever.
    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<Option<Lease>, StoreError>;

    /// Gives the lease back if it is still ours.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;
}
