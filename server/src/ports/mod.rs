//! The traits the application needs from the outside world, implemented by `adapters/`.
//!
//! - [`MetricsStore`] (`metrics_store.rs`): the SQL single source of truth, as one port per
//!   concern: [`EventLedger`], [`DayScans`], [`CatalogRows`], [`RunLog`], [`ChangeFeed`];
//!   [`ControlRows`] (`controls.rs`), the merchandising controls; [`HistoryRows`]
//!   (`history.rs`), the kept tops of ended days.
//! - [`RankingStore`]: the derived rankings (Redis, or the embedded in-process store).
//! - [`FeedCursors`] (`feed.rs`): where the ranking feed has got to on each board, and
//!   [`FeedSink`], where its records go.
//! - [`LeaseLock`] (`lease.rs`): mutual exclusion of a day's work across replicas, and the
//!   [`Fence`] its writes carry.
//!
//! Handlers, the ingest path and the recompute depend on these traits only, so a new store
//! plugs in without touching them.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use crate::domain::calendar::RankingHour;
pub use crate::domain::catalog::{CatalogEntry, Segment};
pub use crate::domain::explain::{ProductDay, RecencyClock};
pub use crate::domain::snapshot::Scored;
pub use crate::domain::snapshot::ServedParts;
use crate::domain::snapshot::Snapshot;

mod controls;
mod feed;
mod history;
mod lease;
mod metrics_store;
pub use controls::{ControlRows, DeleteOutcome, PutOutcome};
pub use feed::{FeedBatch, FeedCause, FeedCursor, FeedCursors, FeedSink, pack_top, unpack_top};
pub use history::{HistoryBoard, HistoryRows, Kept};
pub use lease::{Fence, Lease, LeaseLock, day_lease, day_of_lease};
pub use metrics_store::{
    CatalogRows, ChangeFeed, ChangedRow, DailyRow, DatedEvent, DayScans, EventLedger, HourScans, MetricsStore, Outcome,
    RankingRun, RecordRules, Recorded, RunLog,
};

/// The cause of a store failure, kept whole (its own `source()` chain included) and shared,
/// so that an error handed to several waiters still says what went wrong underneath.
pub type Cause = std::sync::Arc<dyn std::error::Error + Send + Sync>;

/// A dependency failed. Every variant means "nothing was confirmed": the caller may retry.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached or refused the operation. The cause is in the message
    /// (callers and logs read it there), not repeated as the error's source.
    #[error("{store} unavailable: {cause}")]
    Unavailable {
        /// Which store (`database`, `ranking store`).
        store: &'static str,
        /// What went wrong underneath.
        cause: Cause,
    },
    /// The operation would pass a bound the operator set (snapshot entries, custom signal
    /// columns): the store is fine, the request is too big for it.
    #[error("{0}")]
    Exceeds(String),
    /// The store answered with data this service cannot interpret.
    #[error("{0}")]
    Corrupt(String),
    /// A change of a day's rankings made under a lease that is no longer held (this replica
    /// stalled past its lease, and another may hold the day now): nothing was changed.
    #[error("lost the lease {lease}: {detail}")]
    LostLease {
        /// The lease.
        lease: String,
        /// What the store knows of the holder now.
        detail: String,
    },
    /// An event of a batch that what is stored refuses (a retraction of another product's
    /// event, of an UNLIKE or a RETRACT, of an event too old): nothing of the batch was
    /// written.
    #[error("event {index}: {field}: {reason}")]
    Refused {
        /// Its place in the batch.
        index: usize,
        /// The field at fault.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

impl StoreError {
    /// The database failed with `cause` (an error, or a message).
    pub fn database(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Unavailable { store: "database", cause: Cause::from(cause.into()) }
    }

    /// The ranking store failed with `cause` (an error, or a message).
    pub fn ranking(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Unavailable { store: "ranking store", cause: Cause::from(cause.into()) }
    }
}

/// Which ranking to read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RankingKey {
    /// The exact daily ranking.
    Daily(NaiveDate),
    /// The exact rolling weekly ranking of the 7 days ending with the date.
    Weekly(NaiveDate),
    /// The daily ranking restricted to a segment's members (same scores, own ranks).
    DailySegment(NaiveDate, Segment),
    /// The weekly ranking restricted to a segment's members.
    WeeklySegment(NaiveDate, Segment),
    /// The exact trending board of the day: hours of counts decayed by a half-life, as of
    /// each version's instant.
    Trending(NaiveDate),
    /// The trending board restricted to a segment's members.
    TrendingSegment(NaiveDate, Segment),
    /// The approximate hourly ranking.
    Hourly(RankingHour),
}

impl RankingKey {
    /// Whether the ranking is exact and replaced whole by a recompute, so that it has
    /// versions (and replicas may serve it from a snapshot); hourly rankings change with
    /// every event and have none.
    pub fn is_versioned(&self) -> bool {
        !matches!(self, Self::Hourly(_))
    }

    /// The ranking a segment ranking restricts (itself for the others).
    pub fn whole(&self) -> RankingKey {
        match self {
            Self::DailySegment(d, _) => Self::Daily(*d),
            Self::WeeklySegment(d, _) => Self::Weekly(*d),
            Self::TrendingSegment(d, _) => Self::Trending(*d),
            other => *other,
        }
    }

    /// The segment, for a segment ranking.
    pub fn segment(&self) -> Option<Segment> {
        match self {
            Self::DailySegment(_, s) | Self::WeeklySegment(_, s) | Self::TrendingSegment(_, s) => Some(*s),
            _ => None,
        }
    }

    /// This ranking restricted to `segment` (`None`: unchanged); `None` when the window has
    /// no segment rankings (hourly).
    pub fn restricted(self, segment: Option<Segment>) -> Option<RankingKey> {
        match (self.whole(), segment) {
            (whole, None) => Some(whole),
            (Self::Daily(d), Some(s)) => Some(Self::DailySegment(d, s)),
            (Self::Weekly(d), Some(s)) => Some(Self::WeeklySegment(d, s)),
            (Self::Trending(d), Some(s)) => Some(Self::TrendingSegment(d, s)),
            _ => None,
        }
    }

    /// The ranking day.
    pub fn date(&self) -> NaiveDate {
        match self {
            Self::Daily(d)
            | Self::Weekly(d)
            | Self::Trending(d)
            | Self::DailySegment(d, _)
            | Self::WeeklySegment(d, _)
            | Self::TrendingSegment(d, _) => *d,
            Self::Hourly(h) => h.date,
        }
    }
}

/// A page of a ranking.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page {
    /// Entries, best first.
    pub entries: Vec<Scored>,
    /// Size of the whole ranking.
    pub total: u64,
    /// The version the page was read from (versioned rankings that were built; `None` for
    /// hourly rankings and for a versioned ranking the store has no trace of).
    pub version: Option<u64>,
}

/// A product found in a ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Found {
    /// 0-based position, best first.
    pub index: u64,
    /// Its score.
    pub score: f64,
    /// Entries with a strictly greater score (its competition rank is this + 1).
    pub above: u64,
}

/// Several products' places in one version of a ranking.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Placements {
    /// One per requested product, in request order; `None` for a product not ranked.
    pub found: Vec<Option<Found>>,
    /// Size of the ranking.
    pub total: u64,
    /// As [`Page::version`].
    pub version: Option<u64>,
}

impl Placements {
    /// The places of `ids` in `ranking`, an in-memory copy of `version`.
    pub fn in_snapshot(ranking: &Snapshot, version: u64, ids: &[i64]) -> Self {
        let found = ids
            .iter()
            .map(|id| {
                ranking.position(*id).map(|(index, e)| Found {
                    index: index as u64,
                    score: e.score,
                    above: ranking.tied_head(index) as u64,
                })
            })
            .collect();
        Self { found, total: ranking.len() as u64, version: Some(version) }
    }
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

/// How long a published version and the one it supersedes live.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VersionLife {
    /// When the new version (the current one) expires.
    pub expire_at: DateTime<Utc>,
    /// How long the superseded version stays readable (page tokens); zero drops it at once.
    /// Of versions superseded in quick succession, only one per
    /// [`VersionLife::superseded_spacing`] is kept that long ([`VersionLife::superseded_life`]).
    pub superseded_for: Duration,
}

/// The longest a version superseded within [`VersionLife::superseded_spacing`] of another is
/// kept: a walk of pages under way when it was superseded goes on for seconds, not minutes.
pub const SUPERSEDED_GRACE: Duration = Duration::from_secs(30);

impl VersionLife {
    /// Superseded versions are kept for the whole `superseded_for` at most once per this
    /// long (a tenth of it): live passes publish a version every `RANKING_LIVE_INTERVAL`, and
    /// keeping each for `RANKING_SNAPSHOT_TTL` would hold 600 copies of a ranking at the
    /// defaults (24 GB at a million products).
    pub fn superseded_spacing(&self) -> Duration {
        self.superseded_for / 10
    }

    /// How long the others are kept: [`SUPERSEDED_GRACE`], or `superseded_for` when shorter.
    pub fn superseded_grace(&self) -> Duration {
        SUPERSEDED_GRACE.min(self.superseded_for)
    }

    /// How long the version this publication supersedes stays readable, given how long the
    /// longest-kept version superseded before it has left (`None`: no superseded version is
    /// kept): the whole `superseded_for`, unless a version kept for all of it was superseded
    /// less than [`VersionLife::superseded_spacing`] ago, then [`VersionLife::superseded_grace`].
    /// (A version kept for the grace only never has more left than that, so the longest-kept
    /// one tells.)
    pub fn superseded_life(&self, longest_left: Option<Duration>) -> Duration {
        match longest_left {
            Some(left) if left + self.superseded_spacing() > self.superseded_for => self.superseded_grace(),
            _ => self.superseded_for,
        }
    }
}

/// A new version of a versioned ranking, as announced to every replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announcement {
    /// The ranking.
    pub key: RankingKey,
    /// Its new current version.
    pub version: u64,
}

/// Announcements of new versions, as long as the subscription lasts; the stream ends when
/// the subscription is lost (the subscriber polls meanwhile and subscribes again).
pub type Announcements = futures_util::stream::BoxStream<'static, Announcement>;

/// The forms a publication writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Every form of the ranking: what replicas load, and a daily ranking's sorted set
    ///.
    Full,
    /// What replicas load and every read of a version uses only (a live pass's daily
    /// ranking).
    Loadable,
}

/// Derived rankings. Equal scores are ordered by descending product id in every read.
///
/// Versioned rankings ([`RankingKey::is_versioned`]) are immutable between publications:
/// every [`RankingStore::publish`] makes a new version with a number greater than every
/// earlier one of that ranking (also after the store was emptied), and readers see one
/// version whole, never a mix.
#[async_trait]
pub trait RankingStore: Send + Sync + 'static {
    /// Publishes `entries` (in ranking order: best first, equal scores by descending product
    /// id) as the new current version of a versioned ranking and announces it; products
    /// absent from `entries` are not in it. The superseded version stays
    /// readable through [`RankingStore::version_page`] for `life.superseded_for`.
    /// Returns the new version. Applied only while `fence`'s lease is held, checked with the
    /// write itself: otherwise nothing is written and the answer is
    /// [`StoreError::LostLease`].
    async fn publish(
        &self,
        key: RankingKey,
        entries: &[Scored],
        life: VersionLife,
        fence: &Fence,
    ) -> Result<u64, StoreError>;

    /// Publishes `copy`, this replica's copy of a daily or weekly ranking, like
    /// [`RankingStore::publish`] of its entries, in `form`: [`Form::Loadable`] (a live pass's)
    /// leaves a form kept for readers outside the service (the daily ranking's sorted set,
    /// members scored with the packed score) as the last full publication wrote it; a store with one form
    /// publishes it. A store uses what else the copy holds: the Redis store writes the copy's
    /// product index rather than sorting the entries again, the in-process store keeps the
    /// copy itself.
    async fn publish_copy(
        &self,
        key: RankingKey,
        copy: &Arc<Snapshot>,
        life: VersionLife,
        _form: Form,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        self.publish(key, &copy.page(0, u64::MAX), life, fence).await
    }

    /// The current version of each versioned ranking, `None` for one that was never
    /// published since the store was last emptied (a lost ranking, told from an empty day).
    async fn versions(&self, keys: &[RankingKey]) -> Result<Vec<Option<u64>>, StoreError>;

    /// A page of one version of a versioned ranking, current or superseded; `None` when
    /// that version is no longer kept.
    async fn version_page(
        &self,
        key: RankingKey,
        version: u64,
        offset: u64,
        limit: u64,
    ) -> Result<Option<Page>, StoreError>;

    /// Entries `start .. start + count` of one version in ranking order, and its size, for
    /// loading a copy of it: the store's cheapest bulk read. `None` when the version is no
    /// longer kept.
    async fn version_chunk(
        &self,
        key: RankingKey,
        version: u64,
        start: u64,
        count: u64,
    ) -> Result<Option<Page>, StoreError> {
        self.version_page(key, version, start, count).await
    }

    /// What one version of a versioned ranking holds beyond its entries when it is a served
    /// board (pins' positions, the annex of its organic board); `None` for an organic board
    /// or a version no longer kept. (No default: a store that wraps another must pass it on.)
    async fn version_served(&self, key: RankingKey, version: u64) -> Result<Option<ServedParts>, StoreError>;

    /// Adds the increments to their hourly rankings and sets their expiry.
    async fn increment_hourly(&self, increments: &[HourlyIncrement]) -> Result<(), StoreError>;

    /// The segments whose rankings were last published with `whole` (a daily or weekly
    /// ranking), as recorded by [`RankingStore::record_segments`].
    async fn published_segments(&self, whole: RankingKey) -> Result<Vec<Segment>, StoreError>;

    /// Records the segments published with `whole`, expiring with it.
    async fn record_segments(
        &self,
        whole: RankingKey,
        segments: &[Segment],
        expire_at: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// Removes `ids` from the hourly rankings of `hours` (those that exist).
    async fn withdraw_hourly(&self, hours: &[RankingHour], ids: &[i64]) -> Result<(), StoreError>;

    /// A page of the current version of a ranking, best first.
    async fn top(&self, key: RankingKey, offset: u64, limit: u64) -> Result<Page, StoreError>;

    /// The places of several products in one version of a ranking (`None`: the current
    /// one), read at once: one `found` per product, in order. For a ranking or version the
    /// store does not hold, every product is `None` and the version `None`.
    async fn placements(
        &self,
        key: RankingKey,
        version: Option<u64>,
        product_ids: &[i64],
    ) -> Result<Placements, StoreError>;

    /// Subscribes to announcements of new versions.
    async fn announcements(&self) -> Result<Announcements, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn life(secs: u64) -> VersionLife {
        VersionLife { expire_at: Utc::now(), superseded_for: Duration::from_secs(secs) }
    }

    #[test]
    fn one_superseded_version_per_tenth_of_the_ttl_is_kept_for_all_of_it() {
        let ttl = life(600);
        assert_eq!(ttl.superseded_life(None), Duration::from_secs(600), "nothing kept");
        // The last version kept whole was superseded 59 s ago, then 61 s ago.
        assert_eq!(ttl.superseded_life(Some(Duration::from_secs(541))), SUPERSEDED_GRACE);
        assert_eq!(ttl.superseded_life(Some(Duration::from_secs(539))), Duration::from_secs(600));
        // Only versions kept for the grace are left.
        assert_eq!(ttl.superseded_life(Some(Duration::from_secs(29))), Duration::from_secs(600));
        // A live pass every second for ten minutes: 10 versions kept whole, 30 for the grace.
        let mut kept: Vec<Duration> = Vec::new();
        let mut most = 0;
        for second in 0..1_200u64 {
            let now = Duration::from_secs(second);
            kept.retain(|until| *until > now);
            let left = kept.iter().max().map(|until| *until - now);
            kept.push(now + ttl.superseded_life(left));
            most = most.max(kept.len());
        }
        assert!((39..=41).contains(&most), "{most} superseded versions at most");
        // Short lives are kept whole, and zero keeps none.
        assert_eq!(life(20).superseded_life(Some(Duration::from_secs(19))), Duration::from_secs(20));
        assert_eq!(life(0).superseded_life(Some(Duration::ZERO)), Duration::ZERO);
    }
}
