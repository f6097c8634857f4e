//! [`MetricsStore`], the SQL single source of truth, as the ports of its concerns, and the values it is given and gives:
//! dated events and their outcomes, a day's rows, a live pass's changed rows, a recompute's
//! record.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use super::{CatalogEntry, ControlRows, ProductDay, StoreError};
use crate::domain::calendar::RankingCalendar;
use crate::domain::explain::RecencyClock;
use crate::domain::live::ProductRow;
use crate::domain::profile::ScoringProfile;
use crate::domain::ranking::PopulationStats;
use crate::domain::retraction::Original;
use crate::domain::trending::HourRow;
use crate::domain::vocabulary::DailyMetrics;
use crate::domain::vocabulary::Event;

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
    /// Its id was already stored (or appeared earlier in the same batch), or it is a second
    /// retraction of the same event; nothing changed.
    Duplicate,
    /// Stored now, after a retraction of it: it counts for nothing.
    Retracted,
}

/// What recording a batch needs of the service's rules.
#[derive(Debug, Clone, Copy)]
pub struct RecordRules<'a> {
    /// The scoring profile: the kind of each custom signal, what a retracted SIGNAL event
    /// took.
    pub profile: &'a ScoringProfile,
    /// The oldest an original may have happened and still be retracted.
    pub retractable_since: DateTime<Utc>,
    /// The zone that cuts time into the hours of the hourly counts.
    pub calendar: RankingCalendar,
}

/// What a batch recorded: one outcome per event, in order, and the originals its
/// retractions took back (with the retraction's batch index), whose points come off the
/// hourly ranking.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recorded {
    /// One per event of the batch.
    pub outcomes: Vec<Outcome>,
    /// `(index of the retraction, the original it took back)`.
    pub withdrawn: Vec<(usize, Original)>,
    /// Events whose signal a per-actor cap did not move (batch indexes): counted events over
    /// their actor's cap, and retractions that freed no counted slot. Their points skip the
    /// hourly ranking.
    pub uncounted: Vec<usize>,
    /// How many events the caps removed, per capped signal (by name).
    pub capped: Vec<(String, u64)>,
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

/// A metrics row as a live pass reads it, and when its last writer wrote it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangedRow {
    /// The row, with its day.
    pub row: ProductRow,
    /// `updated_at` of its last writer, Unix microseconds (just before that commit).
    pub updated_us: i64,
}

/// What the last recompute of a day published, kept in SQL for ExplainRank.
#[derive(Debug, Clone, PartialEq)]
pub struct RankingRun {
    /// The ranking day.
    pub date: NaiveDate,
    /// The version published.
    pub version: u64,
    /// The statistics its norms were computed from (each axis's count is the population).
    pub stats: PopulationStats,
    /// Where recency was measured from and to.
    pub clock: RecencyClock,
    /// When the recompute ran, Unix microseconds.
    pub computed_at_us: i64,
    /// The fingerprint of the scoring profile the version was computed with (empty for a
    /// version recorded before fingerprints were: the built-in profile, the only one then).
    pub profile: String,
    /// The name of the profile whose board it is: empty for the service's own
    /// (`RANKING_PROFILE`), a `RANKING_PROFILES` name for a variant's.
    pub profile_name: String,
}

/// The ledger of events: batches recorded exactly once, the custom signals' places, and
/// retention.
#[async_trait]
pub trait EventLedger: Send + Sync + 'static {
    /// Stores a batch atomically: returns one outcome per event, in order, only after the
    /// transaction committed. Ids repeated inside the batch count once (first wins). A
    /// retraction the stored events refuse fails the whole batch with
    /// [`StoreError::Refused`], naming it.
    async fn record(&self, batch: &[DatedEvent], rules: RecordRules<'_>) -> Result<Recorded, StoreError>;

    /// Gives each custom signal of `names` its place in the store, once and for good (at
    /// start-up, before any event of them is recorded). Refused when there is no place left.
    async fn register_signals(&self, names: &[String]) -> Result<(), StoreError>;

    /// Deletes events that occurred before `events_before` and daily metrics of days before
    /// `days_before`, at most `chunk` rows per statement. Returns the rows deleted.
    async fn prune(&self, events_before: DateTime<Utc>, days_before: NaiveDate, chunk: u32) -> Result<u64, StoreError>;
}

/// The recompute's and ExplainRank's reads of a day's rows: whole days streamed in product
/// order, or one product's rows by key.
#[async_trait]
pub trait DayScans: Send + Sync + 'static {
    /// Visits every metrics row of `date` in ascending product order, streaming (the rows are
    /// never all in memory), with the values of the custom `signals` in their slots. Returns
    /// how many rows were visited.
    async fn scan_day(
        &self,
        date: NaiveDate,
        signals: &[String],
        visit: &mut (dyn FnMut(DailyRow) + Send),
    ) -> Result<u64, StoreError>;

    /// Visits every product with a metrics row in `first ..= last`, in ascending product
    /// order, with its counters summed over those days and its latest `last_event_at`
    /// (one grouped query; the sums saturate at `i64::MAX`). Returns how many were visited.
    async fn scan_days(
        &self,
        first: NaiveDate,
        last: NaiveDate,
        signals: &[String],
        visit: &mut (dyn FnMut(DailyRow) + Send),
    ) -> Result<u64, StoreError>;

    /// One product's rows of the given days (days without a row are left out), by point
    /// lookups of the primary key.
    async fn product_days(
        &self,
        product_id: i64,
        days: &[NaiveDate],
        signals: &[String],
    ) -> Result<Vec<ProductDay>, StoreError>;

    /// For one product and day, the events each capped signal of `caps` (name, per-actor
    /// cap) had over its cap: Σ over the actors of `max(0, events − cap)`, in the order of
    /// `caps`. One lookup of the day's actor rows of the product.
    async fn over_caps(&self, product_id: i64, date: NaiveDate, caps: &[(String, u32)])
    -> Result<Vec<u64>, StoreError>;
}

/// The catalog: products' segments and hidden flags.
#[async_trait]
pub trait CatalogRows: Send + Sync + 'static {
    /// Replaces the catalog rows of the entries' products, atomically.
    async fn update_catalog(&self, entries: &[CatalogEntry]) -> Result<(), StoreError>;

    /// Which of `ids` (at most one batch's products) the catalog hides.
    async fn hidden_among(&self, ids: &[i64]) -> Result<Vec<i64>, StoreError>;

    /// Every product the catalog hides, in ascending order.
    async fn hidden_products(&self) -> Result<Vec<i64>, StoreError>;

    /// Visits every catalog row in ascending product order, streaming.
    async fn scan_catalog(&self, visit: &mut (dyn FnMut(CatalogEntry) + Send)) -> Result<u64, StoreError>;

    /// The catalog rows of `ids` (at most a page's), in ascending product order.
    async fn catalog_entries(&self, ids: &[i64]) -> Result<Vec<CatalogEntry>, StoreError>;
}

/// What each recompute published (for ExplainRank), and the profiles versions were computed
/// with.
#[async_trait]
pub trait RunLog: Send + Sync + 'static {
    /// Replaces the record of the day's last recompute.
    async fn record_run(&self, run: &RankingRun) -> Result<(), StoreError>;

    /// The record of the day's last recompute of the board of profile `profile_name` (empty:
    /// the service's own), if any.
    async fn ranking_run(&self, date: NaiveDate, profile_name: &str) -> Result<Option<RankingRun>, StoreError>;

    /// Keeps the canonical text of the profile of `fingerprint` (once per fingerprint).
    async fn record_profile(&self, fingerprint: &str, body: &str) -> Result<(), StoreError>;

    /// The canonical text of the profile of `fingerprint`, when it was recorded.
    async fn stored_profile(&self, fingerprint: &str) -> Result<Option<String>, StoreError>;
}

/// The live pass's reads: the change epoch advanced, and the rows written since.
#[async_trait]
pub trait ChangeFeed: Send + Sync + 'static {
    /// Advances the change epoch and returns the new one, after every write transaction that
    /// read an earlier one has ended: rows stamped with an epoch below it are all committed.
    async fn advance_epoch(&self) -> Result<i64, StoreError>;

    /// Visits every metrics row of `first ..= last` written with an epoch of `epochs`
    /// (through an index of the epoch: rows proportional to the rows changed), any order.
    async fn scan_changes(
        &self,
        epochs: std::ops::Range<i64>,
        first: NaiveDate,
        last: NaiveDate,
        signals: &[String],
        visit: &mut (dyn FnMut(ChangedRow) + Send),
    ) -> Result<u64, StoreError>;

    /// Visits every metrics row of `products` in `first ..= last` (by primary key), any order.
    async fn scan_products(
        &self,
        products: &[i64],
        first: NaiveDate,
        last: NaiveDate,
        signals: &[String],
        visit: &mut (dyn FnMut(ChangedRow) + Send),
    ) -> Result<u64, StoreError>;

    /// Whether a catalog row was written with an epoch of `epochs`.
    async fn catalog_changed(&self, epochs: std::ops::Range<i64>) -> Result<bool, StoreError>;
}

/// The hours of the trending board: the hourly metrics rows of the last seven days.
#[async_trait]
pub trait HourScans: Send + Sync + 'static {
    /// Visits every hourly metrics row of the days `first ..= last`, any order; with
    /// `epochs`, only those written with an epoch of them (through the epoch index: rows
    /// proportional to the rows changed). Returns how many were visited.
    async fn scan_hours(
        &self,
        first: NaiveDate,
        last: NaiveDate,
        epochs: Option<std::ops::Range<i64>>,
        signals: &[String],
        visit: &mut (dyn FnMut(HourRow) + Send),
    ) -> Result<u64, StoreError>;

    /// One product's hourly rows of the days `first ..= last`, any order (a primary-key
    /// lookup per day).
    async fn product_hours(
        &self,
        product_id: i64,
        first: NaiveDate,
        last: NaiveDate,
        signals: &[String],
    ) -> Result<Vec<HourRow>, StoreError>;
}

/// The SQL single source of truth: every port above, which one store serves. A component
/// that needs one concern takes that port alone.
pub trait MetricsStore:
    EventLedger + DayScans + HourScans + CatalogRows + RunLog + ChangeFeed + ControlRows + super::HistoryRows
{
}

impl<T> MetricsStore for T where
    T: EventLedger + DayScans + HourScans + CatalogRows + RunLog + ChangeFeed + ControlRows + super::HistoryRows
{
}
