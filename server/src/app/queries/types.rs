//! What a read asks and answers: request and answer types, the read bounds, the errors.

use chrono::NaiveDate;

use crate::app::invalid::Invalid;
use crate::app::recompute::RecomputeError;
use crate::domain::layout::Breakdown;
use crate::domain::profile::ScoringProfile;
use crate::ports::{RankingKey, Segment, StoreError};

/// Largest page of a top-N read.
pub const MAX_LIMIT: u32 = 1_000;
/// Page size when the request says 0.
pub const DEFAULT_LIMIT: u32 = 10;
/// Most neighbours on each side of a GetRank.
pub const MAX_NEIGHBORS: u32 = 50;
/// Most products of one GetRanks.
pub const MAX_PRODUCT_IDS: usize = 1_000;

pub use crate::domain::board::Window;

/// A ranking as a request names it; empty parts are filled in by [`Queries`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Selector {
    /// Daily or hourly; `None` (unspecified) is daily.
    pub window: Option<Window>,
    /// The day; `None` is today.
    pub date: Option<NaiveDate>,
    /// The hour (hourly window); `None` is the current hour of today.
    pub hour: Option<u32>,
    /// The segment (daily and weekly windows); `None` is the whole ranking.
    pub segment: Option<Segment>,
}

/// A page of a ranking.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopQuery {
    /// Which ranking.
    pub selector: Selector,
    /// Entries skipped from the top.
    pub offset: u32,
    /// Entries wanted; 0 means [`DEFAULT_LIMIT`] (with a page token: the token's size).
    pub limit: u32,
    /// The `next_page_token` of a previous page: the next page of the same version.
    pub page_token: Option<String>,
}

/// One product's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RankQuery {
    /// Which ranking.
    pub selector: Selector,
    /// The product.
    pub product_id: i64,
    /// Entries wanted on each side, 0–[`MAX_NEIGHBORS`].
    pub neighbors: u32,
}

/// Several products' places at once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RanksQuery {
    /// Which ranking.
    pub selector: Selector,
    /// 1–[`MAX_PRODUCT_IDS`] products; a repeated id is answered once.
    pub product_ids: Vec<i64>,
}

/// Which way a mover moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Climbed since the previous period (also what an unspecified direction means).
    #[default]
    Rising,
    /// Fell since the previous period.
    Falling,
}

/// The products that moved most since the previous period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MoversQuery {
    /// Which ranking.
    pub selector: Selector,
    /// Rising or falling.
    pub direction: Direction,
    /// Entries wanted; 0 means [`DEFAULT_LIMIT`].
    pub limit: u32,
    /// RISING: only products ranked at most this now; FALLING: only products ranked at most
    /// this in the previous period; 0 = all.
    pub within_top: u64,
}

/// The movers of a ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct MoversAnswer {
    /// Largest moves first; equal moves by current rank.
    pub entries: Vec<RankedEntry>,
    /// The ranking day.
    pub date: NaiveDate,
    /// The version read.
    pub version: Option<u64>,
}

/// Several products' entries.
#[derive(Debug, Clone, PartialEq)]
pub struct RanksAnswer {
    /// The controls acting on the entries.
    pub controls: EntryControls,
    /// The ranked ones, in request order.
    pub entries: Vec<RankedEntry>,
    /// The ones not ranked, in request order.
    pub missing: Vec<i64>,
    /// Size of the whole ranking.
    pub total: u64,
    /// The version read.
    pub version: Option<u64>,
}

/// One entry of an answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedEntry {
    /// 1-based position.
    pub rank: u64,
    /// The product.
    pub product_id: i64,
    /// Its encoded score.
    pub score: f64,
    /// The decoded score (daily rankings only).
    pub breakdown: Option<Breakdown>,
    /// Competition rank: 1 + entries with a strictly greater score (equal scores share it).
    pub tied_rank: u64,
    /// `100 * rank / total`.
    pub top_percent: f64,
    /// Rank in the same window one period before (the previous day's final ranking, the
    /// previous hour); 0 when the product was not ranked then.
    pub previous_rank: u64,
    /// `previous_rank - organic_rank` when both are above 0, else 0: a control is not a
    /// movement.
    pub rank_change: i64,
    /// Its rank before merchandising controls; 0 when the organic ranking does not hold it
    /// (a pinned product without events). The rank itself for every entry no control moved.
    pub organic_rank: u64,
}

/// The merchandising controls acting on the entries of an answer that any acts on, by
/// product, with each one's organic score: most answers have none, and an entry stays a small
/// `Copy` value without them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EntryControls(Vec<(i64, Vec<String>, f64)>);

impl EntryControls {
    /// The controls acting on `product_id`'s entry, by id.
    pub fn of(&self, product_id: i64) -> &[String] {
        self.0.iter().find(|(p, ..)| *p == product_id).map_or(&[], |(_, ids, _)| ids)
    }

    /// The organic score of `product_id`'s entry when a control acts on it (0: the organic
    /// board lacks it).
    pub fn organic_score(&self, product_id: i64) -> Option<f64> {
        self.0.iter().find(|(p, ..)| *p == product_id).map(|(.., score)| *score)
    }

    /// Notes the controls acting on `product_id` (none: nothing to note).
    pub(super) fn note(&mut self, product_id: i64, ids: &[String], organic_score: f64) {
        if !ids.is_empty() && self.of(product_id).is_empty() {
            self.0.push((product_id, ids.to_vec(), organic_score));
        }
    }
}

/// A page of a ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct TopAnswer {
    /// Entries, best first.
    pub entries: Vec<RankedEntry>,
    /// The controls acting on them.
    pub controls: EntryControls,
    /// Size of the whole ranking.
    pub total: u64,
    /// The ranking day.
    pub date: NaiveDate,
    /// The version read (exact rankings that were built).
    pub version: Option<u64>,
    /// Where the next page starts; `None` on the last page.
    pub next_page_token: Option<String>,
    /// The answer as the transport encoded it, once it has.
    pub encoding: Encoding,
}

/// An answer's encoding on the wire, made by the first caller that sends it and kept with
/// the answer: a kept answer is encoded once however many callers it is sent to, and its
/// encoding goes when it does. Says nothing about the answer: any two compare equal.
#[derive(Clone, Default)]
pub struct Encoding(std::sync::OnceLock<bytes::Bytes>);

impl Encoding {
    /// The kept encoding, or `encode`'s, kept now.
    pub fn get_or_init(&self, encode: impl FnOnce() -> bytes::Bytes) -> bytes::Bytes {
        self.0.get_or_init(encode).clone()
    }
}

impl PartialEq for Encoding {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "Encoding(kept)" } else { "Encoding(none)" })
    }
}

/// One product's entry.
#[derive(Debug, Clone, PartialEq)]
pub struct RankAnswer {
    /// The entry.
    pub entry: RankedEntry,
    /// The controls acting on it and its neighbours.
    pub controls: EntryControls,
    /// Up to `neighbors` entries ranked directly above it, best first.
    pub above: Vec<RankedEntry>,
    /// Up to `neighbors` entries ranked directly below it, best first.
    pub below: Vec<RankedEntry>,
    /// Size of the whole ranking.
    pub total: u64,
    /// The version read (exact rankings).
    pub version: Option<u64>,
}

/// Why a read has no answer.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The request broke a rule.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The product is not in the ranking.
    #[error("product {product_id} is not ranked on {date}")]
    NotRanked {
        /// The product.
        product_id: i64,
        /// The ranking day.
        date: NaiveDate,
    },
    /// A page token names a version that is no longer kept.
    #[error("ranking moved on (version {version} of {date} is no longer kept); start again without page_token")]
    Expired {
        /// The ranking day.
        date: NaiveDate,
        /// The version of the token.
        version: u64,
    },
    /// No statistics are recorded for the served version (a recompute is publishing, or the
    /// version predates the record).
    #[error(
        "no statistics are recorded for version {version} of {date} (a recompute is publishing it, or it was computed before statistics were kept); retry, or Recompute {date}"
    )]
    Unexplained {
        /// The ranking day.
        date: NaiveDate,
        /// The served version.
        version: u64,
    },
    /// The ranking store failed; the read may be retried.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A lost ranking could not be rebuilt (another replica is rebuilding it, or a store
    /// failed); the read may be retried.
    #[error(transparent)]
    Rebuild(#[from] RecomputeError),
}

/// A selector with every part decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    /// The ranking to read.
    pub key: RankingKey,
    /// Its window.
    pub window: Window,
}

impl Resolved {
    /// The ranking day.
    pub fn date(&self) -> NaiveDate {
        self.key.date()
    }

    /// The entry at `index` (0-based) with `above` entries of a strictly greater score;
    /// the facts relative to the whole ranking and the previous period are filled in by
    /// `annotate`.
    /// Exact rankings' scores are taken apart with the scoring profile's layout.
    pub(super) fn entry(
        &self,
        profile: &ScoringProfile,
        index: u64,
        product_id: i64,
        score: f64,
        above: u64,
    ) -> RankedEntry {
        let breakdown = match self.window {
            Window::Daily | Window::Weekly | Window::Trending => profile.layout().decode(score).map(|mut b| {
                b.built_in_axes = profile.has_built_in_axes();
                b
            }),
            Window::Hourly => None,
        };
        RankedEntry {
            rank: index + 1,
            product_id,
            score,
            breakdown,
            tied_rank: above + 1,
            top_percent: 0.0,
            previous_rank: 0,
            rank_change: 0,
            organic_rank: index + 1,
        }
    }
}

/// The page size a request means: 0 is [`DEFAULT_LIMIT`], more than [`MAX_LIMIT`] is refused.
pub(super) fn page_limit(limit: u32) -> Result<u32, Invalid> {
    match limit {
        0 => Ok(DEFAULT_LIMIT),
        n if n > MAX_LIMIT => Err(Invalid::field("limit", format!("must be at most {MAX_LIMIT}, got {n}"))),
        n => Ok(n),
    }
}
