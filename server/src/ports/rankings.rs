//! [`RankingStore`], the derived rankings (Redis, or the embedded in-process store), and what
//! its reads and publications carry: pages, placements, hourly increments, announcements, the
//! forms a publication writes.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{Fence, RankingKey, StoreError, VersionLife};
use crate::domain::calendar::RankingHour;
use crate::domain::catalog::Segment;
use crate::domain::explain::RecencyClock;
use crate::domain::ranking::PopulationStats;
use crate::domain::snapshot::{Scored, ServedParts, Snapshot};

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

/// What ExplainRank reproduces a version's norms from: the statistics of the organic board
/// it was ranked from. Published with the version, under the same fence, so every version
/// (a recompute's, a live pass's, a control pass's or a withdrawal's, which carry their
/// organic board's) explains as soon as it is served, and no stale writer replaces them.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionStats {
    /// The population's statistics per axis.
    pub stats: PopulationStats,
    /// Where recency was measured from and to.
    pub clock: RecencyClock,
    /// The fingerprint of the scoring profile the organic board was computed with.
    pub profile: String,
    /// When the organic board was computed, Unix microseconds.
    pub computed_at_us: i64,
}

/// A copy published as the next version of its ranking ([`RankingStore::publish_copy`]).
#[derive(Debug, Clone, Copy)]
pub struct Publishing<'a> {
    /// The copy.
    pub copy: &'a Arc<Snapshot>,
    /// The version before it and this replica's copy of that version, when it has one.
    pub previous: Option<(u64, &'a Arc<Snapshot>)>,
    /// The version's statistics (a daily or trending board's).
    pub stats: Option<&'a VersionStats>,
}

impl<'a> Publishing<'a> {
    /// `copy`, with nothing else known.
    pub fn copy(copy: &'a Arc<Snapshot>) -> Self {
        Self { copy, previous: None, stats: None }
    }
}

/// A version as [`RankingStore::version_copy`] gives it.
#[derive(Debug, Clone)]
pub enum VersionCopy {
    /// Its copy.
    Copy(Arc<Snapshot>),
    /// It has this many entries, more than allowed.
    TooLarge(u64),
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

    /// Publishes `publishing.copy`, this replica's copy of a daily, weekly or trending
    /// ranking, like [`RankingStore::publish`] of its entries, in `form`: [`Form::Loadable`]
    /// (a live pass's) leaves a form kept for readers outside the service (the daily
    /// ranking's sorted set, members scored with the packed score) as the last full
    /// publication wrote it; a store with one form publishes it. A store uses what else the
    /// copy holds: the Redis store writes the copy's product index rather than sorting the
    /// entries again, or (in a layout that has them) only what changed against
    /// `publishing.previous` when that is its current version; the in-process store keeps
    /// the copy itself. `publishing.stats`, the version's statistics (a daily or trending
    /// board's), are published with it, readable through [`RankingStore::version_stats`] as
    /// long as the version. (No default: a store that wraps another must pass them on.)
    async fn publish_copy(
        &self,
        key: RankingKey,
        publishing: Publishing<'_>,
        life: VersionLife,
        form: Form,
        fence: &Fence,
    ) -> Result<u64, StoreError>;

    /// Version `version` of `key` as a copy of at most `max` entries, when the store can give
    /// one cheaper than its entries read in chunks: a version stored as the changes after
    /// `held` (a copy of an earlier version) is `held` with them applied. `None`: read it in
    /// chunks.
    async fn version_copy(
        &self,
        _key: RankingKey,
        _version: u64,
        _held: Option<(u64, &Arc<Snapshot>)>,
        _max: u64,
    ) -> Result<Option<VersionCopy>, StoreError> {
        Ok(None)
    }

    /// The statistics published with one version ([`RankingStore::publish_copy`]); `None`
    /// for a version published without them (by an earlier release, or a board that is not
    /// explained) or no longer kept.
    async fn version_stats(&self, key: RankingKey, version: u64) -> Result<Option<VersionStats>, StoreError>;

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
