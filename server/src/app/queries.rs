//! The read side: which ranking a request means and the page or placement it gets.
//!
//! Every read rule lives here: an unspecified date is today in the ranking time zone, an
//! hourly read of another day names its hour, a page holds 1–[`MAX_LIMIT`] entries (0 means
//! [`DEFAULT_LIMIT`]), a product id is ≥ 1. Reads touch the ranking store only, never SQL.
//!
//! The daily rankings of today and yesterday are answered from this replica's in-memory
//! copy of their current version ([`Snapshots`]) when it holds one; other rankings, and
//! these while no copy is held, are read from the ranking store. Every answer of an exact
//! ranking carries the version it was read from, and a GetTopN page carries a
//! [`PageToken`] for the next page of that same version.
//!
//! A daily ranking of a retained day that is missing from the store without ever having
//! been written there since (Redis restarted empty or was flushed) is rebuilt at once by the
//! lease-guarded recompute, and the read answers from the rebuilt ranking: an empty store
//! is never served as an empty home page until the next scheduler tick. Concurrent reads of
//! the same day share one rebuild.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use chrono::{DateTime, NaiveDate, Utc};
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};

use super::invalid::Invalid;
use super::page_token::PageToken;
use super::policy::Policy;
use super::recompute::Recompute;
use super::snapshots::{Held, Snapshots};
use crate::domain::calendar::RankingHour;
use crate::domain::encoding::{EncodedScore, ScoreBreakdown};
use crate::ports::{Page, Placements, RankingKey, RankingStore, Segment, StoreError};

/// Largest page of a top-N read.
pub const MAX_LIMIT: u32 = 1_000;
/// Page size when the request says 0.
pub const DEFAULT_LIMIT: u32 = 10;
/// Most neighbours on each side of a GetRank.
pub const MAX_NEIGHBORS: u32 = 50;
/// Most products of one GetRanks.
pub const MAX_PRODUCT_IDS: usize = 1_000;

/// Which ranking a read asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Window {
    /// The exact daily ranking (also what an unspecified window means).
    #[default]
    Daily,
    /// The approximate hourly ranking.
    Hourly,
    /// The exact rolling ranking of the 7 days ending with the date.
    Weekly,
}

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
    pub breakdown: Option<ScoreBreakdown>,
    /// Competition rank: 1 + entries with a strictly greater score (equal scores share it).
    pub tied_rank: u64,
    /// `100 * rank / total`.
    pub top_percent: f64,
    /// Rank in the same window one period before (the previous day's final ranking, the
    /// previous hour); 0 when the product was not ranked then.
    pub previous_rank: u64,
    /// `previous_rank - rank` when `previous_rank > 0`, else 0.
    pub rank_change: i64,
}

/// A page of a ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct TopAnswer {
    /// Entries, best first.
    pub entries: Vec<RankedEntry>,
    /// Size of the whole ranking.
    pub total: u64,
    /// The ranking day.
    pub date: NaiveDate,
    /// The version read (exact rankings that were built).
    pub version: Option<u64>,
    /// Where the next page starts; `None` on the last page.
    pub next_page_token: Option<String>,
    /// The answer as encoded for the wire, made once by the transport: a kept answer is
    /// sent unchanged to every caller of its page until the next version.
    pub encoded: OnceLock<Bytes>,
}

/// One product's entry.
#[derive(Debug, Clone, PartialEq)]
pub struct RankAnswer {
    /// The entry.
    pub entry: RankedEntry,
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

    fn entry(&self, index: u64, product_id: i64, score: f64) -> RankedEntry {
        let breakdown = match self.window {
            Window::Daily | Window::Weekly => EncodedScore(score).decode(),
            Window::Hourly => None,
        };
        let rank = index + 1;
        RankedEntry {
            rank,
            product_id,
            score,
            breakdown,
            tied_rank: rank,
            top_percent: 0.0,
            previous_rank: 0,
            rank_change: 0,
        }
    }
}

/// A rebuild of a lost daily ranking, shared by the reads waiting for it.
type Rebuild = Shared<BoxFuture<'static, Result<(), StoreError>>>;

/// The read service.
pub struct Queries {
    rankings: Arc<dyn RankingStore>,
    snapshots: Arc<Snapshots>,
    policy: Arc<Policy>,
    recompute: Arc<Recompute>,
    /// Rebuilds under way, by day; an entry lives while its rebuild runs.
    rebuilds: Arc<Mutex<HashMap<NaiveDate, Rebuild>>>,
    /// Answers of pages of held copies, which never change for a given pair of versions.
    answers: Answers,
}

/// What a page answered from held copies depends on: the ranking and its version, the
/// previous period's held version (its ranks annotate the entries), the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct AnswerKey {
    key: RankingKey,
    version: u64,
    previous: u64,
    offset: u64,
    limit: u32,
}

/// Most answers kept; when full, all are dropped (the hot pages come back at once).
const MAX_ANSWERS: usize = 1_024;

/// Answers of the most asked pages (the home page's top 20 …), so that the thousands of
/// identical reads between two versions cost a lookup and a copy.
#[derive(Default)]
struct Answers(Mutex<HashMap<AnswerKey, Arc<TopAnswer>>>);

impl Answers {
    /// The key of a page when the ranking, and the previous period's when there is one, are
    /// both held copies; `None` otherwise (such answers are not kept).
    fn key(&self, snapshots: &Snapshots, key: RankingKey, offset: u64, limit: u32) -> Option<AnswerKey> {
        let version = snapshots.get(key)?.version;
        let previous = match previous_period(key) {
            Some(previous) if snapshots.absent(previous) => 0,
            Some(previous) => snapshots.get(previous)?.version,
            None => 0,
        };
        Some(AnswerKey { key, version, previous, offset, limit })
    }

    fn get(&self, key: &AnswerKey) -> Option<Arc<TopAnswer>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned()
    }

    fn put(&self, key: AnswerKey, answer: &Arc<TopAnswer>) {
        let mut answers = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if answers.len() >= MAX_ANSWERS {
            answers.clear();
        }
        answers.insert(key, answer.clone());
    }
}

impl Queries {
    /// Reads from `snapshots`, else `rankings`, under `policy`; lost daily rankings are
    /// rebuilt by `recompute`.
    pub fn new(
        rankings: Arc<dyn RankingStore>,
        snapshots: Arc<Snapshots>,
        policy: Arc<Policy>,
        recompute: Arc<Recompute>,
    ) -> Self {
        Self { rankings, snapshots, policy, recompute, rebuilds: Arc::default(), answers: Answers::default() }
    }

    /// When the store has no version of a daily ranking, makes sure it is not a lost one:
    /// if its day is retained, rebuilds it (sharing a rebuild under way) and returns `true`
    /// so the caller reads again.
    async fn rebuilt_if_lost(&self, resolved: &Resolved, version: Option<u64>) -> Result<bool, StoreError> {
        let (RankingKey::Daily(date) | RankingKey::Weekly(date)) = resolved.key.whole() else { return Ok(false) };
        let today = self.policy.today(self.policy.now());
        if version.is_some() || self.policy.check_recomputable(date, today).is_err() {
            return Ok(false);
        }
        // A segment without ranked members has no ranking at all: it reads as empty while the
        // whole ranking it restricts is there.
        if resolved.key.segment().is_some()
            && self.rankings.versions(&[resolved.key.whole()]).await?.first().copied().flatten().is_some()
        {
            return Ok(false);
        }
        let rebuild = {
            let mut rebuilds = self.rebuilds.lock().unwrap_or_else(|e| e.into_inner());
            rebuilds
                .entry(date)
                .or_insert_with(|| {
                    let (recompute, rebuilds) = (self.recompute.clone(), self.rebuilds.clone());
                    async move {
                        tracing::warn!(%date, "daily ranking missing from the ranking store; rebuilding it now");
                        let result = recompute.run(date).await.map(|_| ()).map_err(|e| match e {
                            super::recompute::RecomputeError::Store(s) => s,
                            other => StoreError::ranking(other),
                        });
                        rebuilds.lock().unwrap_or_else(|e| e.into_inner()).remove(&date);
                        result
                    }
                    .boxed()
                    .shared()
                })
                .clone()
        };
        rebuild.await?;
        Ok(true)
    }

    /// The current instant by the policy's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.policy.now()
    }

    /// Decides the ranking a selector means at `now`.
    pub fn resolve(&self, selector: Selector, now: DateTime<Utc>) -> Result<Resolved, Invalid> {
        let current = self.policy.calendar.hour_of(now);
        let date = selector.date.unwrap_or(current.date);
        if let Some(hour) = selector.hour
            && hour > 23
        {
            return Err(Invalid::field("hour", format!("must be 0-23, got {hour}")));
        }
        let window = selector.window.unwrap_or_default();
        let key = match window {
            Window::Daily => RankingKey::Daily(date),
            Window::Weekly => RankingKey::Weekly(date),
            Window::Hourly => {
                let hour = match selector.hour {
                    Some(h) => h,
                    None if date == current.date => current.hour,
                    None => {
                        return Err(Invalid::field(
                            "hour",
                            "required for WINDOW_HOURLY when a date other than today is given",
                        ));
                    }
                };
                RankingKey::Hourly(RankingHour { date, hour })
            }
        };
        let key = key.restricted(selector.segment).ok_or_else(|| {
            Invalid::field("segment", "segments have daily and weekly rankings only, not WINDOW_HOURLY")
        })?;
        Ok(Resolved { key, window })
    }

    /// The ranking and first entry a page token continues from, after checking that the
    /// request's own selector (where given) names the same ranking.
    fn continued(&self, query: &TopQuery, token: &str) -> Result<(Resolved, PageToken), Invalid> {
        let token = PageToken::decode(token)?;
        if query.offset != 0 {
            return Err(Invalid::field("offset", "must be 0 with page_token (the token holds the position)"));
        }
        let s = query.selector;
        let (window, hour) = match token.key {
            RankingKey::Daily(_) => (Window::Daily, None),
            RankingKey::Weekly(_) | RankingKey::WeeklySegment(..) => (Window::Weekly, None),
            RankingKey::DailySegment(..) => (Window::Daily, None),
            RankingKey::Hourly(h) => (Window::Hourly, Some(h.hour)),
        };
        let differs = s.window.is_some_and(|w| w != window)
            || s.segment.is_some_and(|seg| Some(seg) != token.key.segment())
            || s.date.is_some_and(|d| d != token.key.date())
            || s.hour.is_some_and(|h| Some(h) != hour);
        if differs {
            return Err(Invalid::field("page_token", "was issued for another ranking than the one requested"));
        }
        Ok((Resolved { key: token.key, window }, token))
    }

    /// A page of one version: from the held copy when it is that version, else from the
    /// store, which may have dropped it.
    async fn version_page(
        &self,
        resolved: &Resolved,
        version: u64,
        offset: u64,
        limit: u64,
    ) -> Result<Page, QueryError> {
        if let Some(held) = self.snapshots.get(resolved.key).filter(|h| h.version == version) {
            return Ok(held_page(&held.ranking, version, offset, limit));
        }
        self.rankings
            .version_page(resolved.key, version, offset, limit)
            .await?
            .ok_or(QueryError::Expired { date: resolved.date(), version })
    }

    /// A page of the current version of a ranking.
    async fn current_page(&self, resolved: &Resolved, offset: u64, limit: u64) -> Result<Page, QueryError> {
        if let Some(held) = self.snapshots.get(resolved.key) {
            return Ok(held_page(&held.ranking, held.version, offset, limit));
        }
        let page = self.rankings.top(resolved.key, offset, limit).await?;
        if self.rebuilt_if_lost(resolved, page.version).await? {
            if let Some(held) = self.snapshots.get(resolved.key) {
                return Ok(held_page(&held.ranking, held.version, offset, limit));
            }
            return Ok(self.rankings.top(resolved.key, offset, limit).await?);
        }
        Ok(page)
    }

    /// A page of a ranking, best first, and the token of the next page.
    pub async fn top(&self, query: TopQuery) -> Result<Arc<TopAnswer>, QueryError> {
        if query.limit > MAX_LIMIT {
            return Err(Invalid::field("limit", format!("must be at most {MAX_LIMIT}, got {}", query.limit)).into());
        }
        let (resolved, offset, limit, page) = match query.page_token.as_deref() {
            Some(token) => {
                let (resolved, token) = self.continued(&query, token)?;
                let limit = match query.limit {
                    0 => token.limit.clamp(1, MAX_LIMIT),
                    n => n,
                };
                let page = match resolved.key.is_versioned() {
                    true => self.version_page(&resolved, token.version, token.offset, u64::from(limit)).await?,
                    false => self.rankings.top(resolved.key, token.offset, u64::from(limit)).await?,
                };
                (resolved, token.offset, limit, page)
            }
            None => {
                let limit = if query.limit == 0 { DEFAULT_LIMIT } else { query.limit };
                let resolved = self.resolve(query.selector, self.policy.now())?;
                let offset = u64::from(query.offset);
                let cached = self.answers.key(&self.snapshots, resolved.key, offset, limit);
                if let Some(answer) = cached.and_then(|k| self.answers.get(&k)) {
                    return Ok(answer);
                }
                let page = self.current_page(&resolved, offset, u64::from(limit)).await?;
                let answer = Arc::new(self.page_answer(&resolved, offset, limit, page).await?);
                // Only an answer read from the copies the key names is kept.
                if let Some(k) = cached.filter(|k| answer.version == Some(k.version)) {
                    self.answers.put(k, &answer);
                }
                return Ok(answer);
            }
        };
        Ok(Arc::new(self.page_answer(&resolved, offset, limit, page).await?))
    }

    /// The answer of a page read at `offset`: entries annotated, the next page's token.
    async fn page_answer(
        &self,
        resolved: &Resolved,
        offset: u64,
        limit: u32,
        page: Page,
    ) -> Result<TopAnswer, QueryError> {
        let next = offset + page.entries.len() as u64;
        let next_page_token = (!page.entries.is_empty() && next < page.total)
            .then(|| PageToken { key: resolved.key, version: page.version.unwrap_or(0), offset: next, limit }.encode());
        let mut entries: Vec<RankedEntry> = page
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| resolved.entry(offset + i as u64, e.product_id, e.score))
            .collect();
        self.annotate(resolved, page.version, page.total, &mut entries, true).await?;
        Ok(TopAnswer {
            entries,
            total: page.total,
            date: resolved.date(),
            version: page.version,
            next_page_token,
            encoded: OnceLock::new(),
        })
    }

    /// One product's entry, its neighbours and the size of the ranking, from one version.
    pub async fn rank(&self, query: RankQuery) -> Result<RankAnswer, QueryError> {
        if query.product_id < 1 {
            return Err(Invalid::field("product_id", format!("must be >= 1, got {}", query.product_id)).into());
        }
        if query.neighbors > MAX_NEIGHBORS {
            let reason = format!("must be at most {MAX_NEIGHBORS}, got {}", query.neighbors);
            return Err(Invalid::field("neighbors", reason).into());
        }
        let resolved = self.resolve(query.selector, self.policy.now())?;
        let placed = self.placements(&resolved, &[query.product_id]).await?;
        let found = placed
            .found
            .first()
            .copied()
            .flatten()
            .ok_or(QueryError::NotRanked { product_id: query.product_id, date: resolved.date() })?;
        let (total, version) = (placed.total, placed.version);
        // The product alone: its competition rank came with its place.
        let alone = || {
            let mut entry = resolved.entry(found.index, query.product_id, found.score);
            entry.tied_rank = found.above + 1;
            [entry]
        };
        let k = u64::from(query.neighbors);
        let mut window = Vec::new();
        if k > 0 {
            let start = found.index.saturating_sub(k);
            let count = found.index - start + 1 + k;
            let page = match version {
                Some(version) => self.version_page(&resolved, version, start, count).await?,
                None => self.rankings.top(resolved.key, start, count).await?,
            };
            window = page
                .entries
                .iter()
                .enumerate()
                .map(|(i, e)| resolved.entry(start + i as u64, e.product_id, e.score))
                .collect();
            self.annotate(&resolved, version, total, &mut window, true).await?;
        }
        // Without neighbours, or when an hourly ranking moved between the two reads and the
        // product is no longer in the window read, the answer is the product alone.
        let Some(at) = window.iter().position(|e| e.product_id == query.product_id) else {
            let mut entry = alone();
            self.annotate(&resolved, version, total, &mut entry, false).await?;
            return Ok(RankAnswer { entry: entry[0], above: Vec::new(), below: Vec::new(), total, version });
        };
        let below = window.split_off(at + 1);
        // `at` is an index of `window`, so the product is its last entry now.
        let Some(entry) = window.pop() else { return Err(StoreError::Corrupt("empty neighbourhood".into()).into()) };
        Ok(RankAnswer { entry, above: window, below, total, version })
    }

    /// Several products' entries from one version of a ranking, ranked ones in request
    /// order, the others listed as missing.
    pub async fn ranks(&self, query: RanksQuery) -> Result<RanksAnswer, QueryError> {
        if query.product_ids.is_empty() || query.product_ids.len() > MAX_PRODUCT_IDS {
            let reason = format!("must name 1-{MAX_PRODUCT_IDS} products, got {}", query.product_ids.len());
            return Err(Invalid::field("product_ids", reason).into());
        }
        if let Some((i, id)) = query.product_ids.iter().enumerate().find(|(_, id)| **id < 1) {
            return Err(Invalid::element("product_ids", i, format!("must be >= 1, got {id}")).into());
        }
        let mut seen = std::collections::HashSet::with_capacity(query.product_ids.len());
        let ids: Vec<i64> = query.product_ids.iter().copied().filter(|id| seen.insert(*id)).collect();
        let resolved = self.resolve(query.selector, self.policy.now())?;
        let placements = self.placements(&resolved, &ids).await?;
        let (mut entries, mut missing) = (Vec::new(), Vec::new());
        for (id, found) in ids.iter().zip(&placements.found) {
            match found {
                Some(f) => {
                    let mut e = resolved.entry(f.index, *id, f.score);
                    e.tied_rank = f.above + 1;
                    entries.push(e);
                }
                None => missing.push(*id),
            }
        }
        self.annotate(&resolved, placements.version, placements.total, &mut entries, false).await?;
        Ok(RanksAnswer { entries, missing, total: placements.total, version: placements.version })
    }

    /// The products whose rank changed most since the previous period (SPEC §9.3): RISING
    /// lists `rank_change > 0`, largest first; FALLING `rank_change < 0`, most negative
    /// first; products not ranked then are not movers; equal changes by current rank.
    pub async fn movers(&self, query: MoversQuery) -> Result<MoversAnswer, QueryError> {
        let limit = match query.limit {
            0 => DEFAULT_LIMIT,
            n if n > MAX_LIMIT => {
                return Err(Invalid::field("limit", format!("must be at most {MAX_LIMIT}, got {n}")).into());
            }
            n => n,
        } as usize;
        let resolved = self.resolve(query.selector, self.policy.now())?;
        let Some(current) = self.snapshots.whole(resolved.key).await? else {
            return Ok(MoversAnswer { entries: Vec::new(), date: resolved.date(), version: None });
        };
        let version = current.key_version();
        let previous = match previous_period(resolved.key) {
            Some(key) => self.snapshots.whole(key).await?,
            None => None,
        };
        let Some(previous) = previous else {
            return Ok(MoversAnswer { entries: Vec::new(), date: resolved.date(), version });
        };
        let (now, then) = (&current.ranking, &previous.ranking);
        let bound = |within: u64, len: usize| if within == 0 { len as u64 } else { within.min(len as u64) };
        // (current index, previous index) of every candidate.
        let mut moves: Vec<(usize, usize)> = match query.direction {
            Direction::Rising => now
                .page(0, bound(query.within_top, now.len()))
                .iter()
                .enumerate()
                .filter_map(|(i, e)| then.position(e.product_id).map(|(p, _)| (i, p)).filter(|(i, p)| p > i))
                .collect(),
            Direction::Falling => then
                .page(0, bound(query.within_top, then.len()))
                .iter()
                .enumerate()
                .filter_map(|(p, e)| now.position(e.product_id).map(|(i, _)| (i, p)).filter(|(i, p)| i > p))
                .collect(),
        };
        let change = |(i, p): (usize, usize)| p as i64 - i as i64;
        match query.direction {
            Direction::Rising => moves.sort_unstable_by_key(|m| (std::cmp::Reverse(change(*m)), m.0)),
            Direction::Falling => moves.sort_unstable_by_key(|m| (change(*m), m.0)),
        }
        moves.truncate(limit);
        let total = now.len() as u64;
        let entries = moves
            .into_iter()
            .map(|(i, p)| {
                let e = now.page(i as u64, 1)[0];
                let mut entry = resolved.entry(i as u64, e.product_id, e.score);
                entry.tied_rank = now.above(e.score) as u64 + 1;
                entry.top_percent = 100.0 * entry.rank as f64 / total as f64;
                entry.previous_rank = p as u64 + 1;
                entry.rank_change = change((i, p));
                entry
            })
            .collect();
        Ok(MoversAnswer { entries, date: resolved.date(), version })
    }

    /// Several products' places in the current version: the held copy, else the store (a
    /// lost daily ranking rebuilt first).
    async fn placements(&self, resolved: &Resolved, ids: &[i64]) -> Result<Placements, StoreError> {
        if let Some(held) = self.snapshots.get(resolved.key) {
            return Ok(held_placements(&held, ids));
        }
        let placements = self.rankings.placements(resolved.key, None, ids).await?;
        if self.rebuilt_if_lost(resolved, placements.version).await? {
            if let Some(held) = self.snapshots.get(resolved.key) {
                return Ok(held_placements(&held, ids));
            }
            return self.rankings.placements(resolved.key, None, ids).await;
        }
        Ok(placements)
    }

    /// Fills in what an entry says beyond its place: its competition rank (`tied_rank`), its
    /// share of the ranking (`top_percent`) and its rank one period before
    /// (`previous_rank`, `rank_change`). When `consecutive`, `entries` are consecutive
    /// entries of `version` and their tied ranks are found here; otherwise the caller has
    /// set them.
    async fn annotate(
        &self,
        resolved: &Resolved,
        version: Option<u64>,
        total: u64,
        entries: &mut [RankedEntry],
        consecutive: bool,
    ) -> Result<(), StoreError> {
        let Some(first) = entries.first().copied() else { return Ok(()) };
        let held = self.snapshots.get(resolved.key).filter(|h| Some(h.version) == version);
        match held {
            _ if !consecutive => {}
            Some(held) => {
                for e in entries.iter_mut() {
                    e.tied_rank = held.ranking.above(e.score) as u64 + 1;
                }
            }
            None => {
                // Only the first entry needs the store: within consecutive entries, one whose
                // score differs from the entry before it starts its group.
                let placed = self.rankings.placements(resolved.key, version, &[first.product_id]).await?;
                let mut tied = placed.found.first().copied().flatten().map_or(first.rank, |f| f.above + 1);
                let mut group = first.score;
                for e in entries.iter_mut() {
                    if e.score.total_cmp(&group).is_ne() {
                        (tied, group) = (e.rank, e.score);
                    }
                    e.tied_rank = tied;
                }
            }
        }
        let ids: Vec<i64> = entries.iter().map(|e| e.product_id).collect();
        let previous = self.previous_ranks(resolved.key, &ids).await?;
        for e in entries.iter_mut() {
            e.top_percent = 100.0 * e.rank as f64 / total.max(1) as f64;
        }
        for (e, previous_rank) in entries.iter_mut().zip(previous) {
            e.previous_rank = previous_rank;
            e.rank_change = if previous_rank > 0 { previous_rank as i64 - e.rank as i64 } else { 0 };
        }
        Ok(())
    }

    /// The ranks of products in the final ranking one period before `key` (0: not ranked).
    async fn previous_ranks(&self, key: RankingKey, ids: &[i64]) -> Result<Vec<u64>, StoreError> {
        let Some(previous) = previous_period(key) else { return Ok(vec![0; ids.len()]) };
        if let Some(held) = self.snapshots.get(previous) {
            return Ok(ids.iter().map(|id| held.ranking.position(*id).map_or(0, |(i, _)| i as u64 + 1)).collect());
        }
        if self.snapshots.absent(previous) {
            return Ok(vec![0; ids.len()]);
        }
        let placed = self.rankings.placements(previous, None, ids).await?;
        Ok(placed.found.iter().map(|f| f.map_or(0, |f| f.index + 1)).collect())
    }
}

/// The same window one period earlier: the day before (for the weekly window, the 7 days
/// ending the day before), or the hour before.
fn previous_period(key: RankingKey) -> Option<RankingKey> {
    match key {
        RankingKey::Daily(d) => d.pred_opt().map(RankingKey::Daily),
        RankingKey::Weekly(d) => d.pred_opt().map(RankingKey::Weekly),
        RankingKey::DailySegment(d, s) => d.pred_opt().map(|d| RankingKey::DailySegment(d, s)),
        RankingKey::WeeklySegment(d, s) => d.pred_opt().map(|d| RankingKey::WeeklySegment(d, s)),
        RankingKey::Hourly(h) if h.hour > 0 => Some(RankingKey::Hourly(RankingHour { date: h.date, hour: h.hour - 1 })),
        RankingKey::Hourly(h) => h.date.pred_opt().map(|date| RankingKey::Hourly(RankingHour { date, hour: 23 })),
    }
}

fn held_page(ranking: &crate::domain::snapshot::Snapshot, version: u64, offset: u64, limit: u64) -> Page {
    Page { entries: ranking.page(offset, limit).to_vec(), total: ranking.len() as u64, version: Some(version) }
}

fn held_placements(held: &Held, ids: &[i64]) -> Placements {
    Placements::in_snapshot(&held.ranking, held.version, ids)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::adapters::memory::MemoryRankingStore;
    use crate::app::invalid::PathSegment;
    use crate::app::policy::Clock;
    use crate::app::test_support::Wired;
    use crate::ports::Scored;

    fn queries() -> (Queries, Arc<MemoryRankingStore>) {
        let store = Arc::new(MemoryRankingStore::new());
        (Wired::new(&store, Clock::System).queries(&store), store)
    }

    fn field(e: QueryError) -> Vec<PathSegment> {
        match e {
            QueryError::Invalid(i) => i.path.0,
            other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_selector_is_todays_daily_ranking() {
        let (q, _) = queries();
        let now: DateTime<Utc> = "2026-04-09T13:30:00Z".parse().expect("valid");
        let r = q.resolve(Selector::default(), now).expect("valid");
        assert_eq!(r.key, RankingKey::Daily("2026-04-09".parse().expect("valid")));
        let hourly = q.resolve(Selector { window: Some(Window::Hourly), ..Default::default() }, now).expect("valid");
        assert_eq!(hourly.key, RankingKey::Hourly(RankingHour { date: r.date(), hour: 13 }));
        let other_day =
            Selector { window: Some(Window::Hourly), date: "2026-04-08".parse().ok(), ..Default::default() };
        assert_eq!(q.resolve(other_day, now).expect_err("needs an hour").path.0, vec![PathSegment::Field("hour")]);
        let bad_hour = Selector { hour: Some(24), ..Default::default() };
        assert!(q.resolve(bad_hour, now).is_err());
    }

    #[tokio::test]
    async fn reads_check_their_bounds_and_number_entries_from_the_offset() {
        let (q, store) = queries();
        let today = Utc::now().date_naive();
        let entries: Vec<Scored> = (1..=5).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
        let life = crate::ports::VersionLife {
            expire_at: Utc::now() + chrono::Duration::days(1),
            superseded_for: Duration::from_secs(60),
        };
        let v1 = store.publish(RankingKey::Daily(today), &entries, life).await.expect("stored");

        let page = q.top(TopQuery { offset: 1, limit: 2, ..Default::default() }).await.expect("page");
        assert_eq!(page.entries.iter().map(|e| (e.rank, e.product_id)).collect::<Vec<_>>(), vec![(2, 4), (3, 3)]);
        assert_eq!((page.total, page.date), (5, today));
        assert_eq!(page.entries[0].breakdown.map(|b| b.main_floor), Some(4));
        assert_eq!(q.top(TopQuery::default()).await.expect("page").entries.len(), 5, "0 means 10");
        let too_many = q.top(TopQuery { limit: MAX_LIMIT + 1, ..Default::default() }).await.expect_err("too many");
        assert_eq!(field(too_many), vec![PathSegment::Field("limit")]);

        let rank = q.rank(RankQuery { product_id: 2, ..Default::default() }).await.expect("ranked");
        assert_eq!((rank.entry.rank, rank.total), (4, 5));
        let bad = q.rank(RankQuery { product_id: 0, ..Default::default() }).await.expect_err("id 0");
        assert_eq!(field(bad), vec![PathSegment::Field("product_id")]);
        let missing = q.rank(RankQuery { product_id: 9, ..Default::default() }).await.expect_err("absent");
        assert!(matches!(missing, QueryError::NotRanked { product_id: 9, .. }));
        assert_eq!((page.version, rank.version), (Some(v1), Some(v1)));
    }

    #[tokio::test]
    async fn page_tokens_walk_one_version_and_refuse_what_they_cannot_continue() {
        let (q, store) = queries();
        let today = RankingKey::Daily(Utc::now().date_naive());
        let life = |secs| crate::ports::VersionLife {
            expire_at: Utc::now() + chrono::Duration::days(1),
            superseded_for: Duration::from_secs(secs),
        };
        let first: Vec<Scored> = (1..=25).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
        let v1 = store.publish(today, &first, life(60)).await.expect("v1");
        let page = q.top(TopQuery { limit: 10, ..Default::default() }).await.expect("page 1");
        let token = page.next_page_token.clone().expect("more pages");
        // A recompute reverses the ranking between pages; the walk stays on version 1.
        let reversed: Vec<Scored> = (1..=25).map(|p| Scored { product_id: p, score: -p as f64 }).collect();
        store.publish(today, &reversed, life(60)).await.expect("v2");
        let next = |token: &str| TopQuery { page_token: Some(token.to_string()), ..Default::default() };
        let page2 = q.top(next(&token)).await.expect("page 2");
        assert_eq!(page2.version, Some(v1));
        assert_eq!(page2.entries.iter().map(|e| e.product_id).collect::<Vec<_>>(), (6..=15).rev().collect::<Vec<_>>());
        assert_eq!(page2.entries[0].rank, 11);
        let page3 = q.top(next(page2.next_page_token.as_deref().expect("more"))).await.expect("page 3");
        assert_eq!((page3.entries.len(), page3.next_page_token.clone()), (5, None));

        // Version 3 is published keeping no superseded version: a walk of version 2 ends.
        let page = q.top(TopQuery { limit: 10, ..Default::default() }).await.expect("page 1 of v2");
        store.publish(today, &first, life(0)).await.expect("v3");
        let expired = q.top(next(&page.next_page_token.clone().expect("more"))).await.expect_err("gone");
        assert!(matches!(expired, QueryError::Expired { .. }), "{expired:?}");

        assert_eq!(field(q.top(next("garbage")).await.expect_err("garbled")), vec![PathSegment::Field("page_token")]);
        let other =
            TopQuery { selector: Selector { window: Some(Window::Hourly), ..Default::default() }, ..next(&token) };
        assert_eq!(field(q.top(other).await.expect_err("other ranking")), vec![PathSegment::Field("page_token")]);
        let offset = TopQuery { offset: 3, ..next(&token) };
        assert_eq!(field(q.top(offset).await.expect_err("offset")), vec![PathSegment::Field("offset")]);
    }

    #[tokio::test]
    async fn answers_of_held_copies_are_kept_per_version_and_never_outlive_it() {
        let (q, store) = queries();
        let today = Utc::now().date_naive();
        let life = crate::ports::VersionLife {
            expire_at: Utc::now() + chrono::Duration::days(1),
            superseded_for: Duration::from_secs(60),
        };
        let ranked = |ids: &[i64]| -> Vec<Scored> {
            ids.iter().enumerate().map(|(i, id)| Scored { product_id: *id, score: 100.0 - i as f64 }).collect()
        };
        let yesterday = today.pred_opt().expect("a day before");
        let v0 = store.publish(RankingKey::Daily(yesterday), &ranked(&[3, 2, 1]), life).await.expect("yesterday");
        q.snapshots.install(RankingKey::Daily(yesterday), v0, ranked(&[3, 2, 1])).await;
        let v1 = store.publish(RankingKey::Daily(today), &ranked(&[1, 2, 3]), life).await.expect("v1");
        q.snapshots.install(RankingKey::Daily(today), v1, ranked(&[1, 2, 3])).await;

        let first = q.top(TopQuery { limit: 2, ..Default::default() }).await.expect("page");
        let key = q.answers.key(&q.snapshots, RankingKey::Daily(today), 0, 2).expect("both copies held");
        assert_eq!(q.answers.get(&key), Some(first.clone()), "kept");
        assert_eq!(q.top(TopQuery { limit: 2, ..Default::default() }).await.expect("again"), first);
        assert_eq!(
            first.entries.iter().map(|e| (e.product_id, e.previous_rank)).collect::<Vec<_>>(),
            vec![(1, 3), (2, 2)]
        );

        // A new version is read at once; the kept answer of the old one is never served again.
        let v2 = store.publish(RankingKey::Daily(today), &ranked(&[3, 1, 2]), life).await.expect("v2");
        q.snapshots.install(RankingKey::Daily(today), v2, ranked(&[3, 1, 2])).await;
        let second = q.top(TopQuery { limit: 2, ..Default::default() }).await.expect("page of v2");
        assert_eq!((second.version, second.entries[0].product_id), (Some(v2), 3));
    }

    #[tokio::test]
    async fn a_previous_period_without_a_ranking_costs_no_store_read() {
        let (q, store) = queries();
        let today = Utc::now().date_naive();
        let life = crate::ports::VersionLife {
            expire_at: Utc::now() + chrono::Duration::days(1),
            superseded_for: Duration::from_secs(60),
        };
        let entries: Vec<Scored> = (1..=3).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
        store.publish(RankingKey::Daily(today), &entries, life).await.expect("today");
        q.snapshots.refresh().await.expect("poll");
        let yesterday = RankingKey::Daily(today.pred_opt().expect("a day before"));
        assert!(q.snapshots.absent(yesterday));
        let page = q.top(TopQuery { limit: 3, ..Default::default() }).await.expect("page");
        assert!(page.entries.iter().all(|e| e.previous_rank == 0));
        assert!(q.answers.key(&q.snapshots, RankingKey::Daily(today), 0, 3).is_some(), "kept");
        // Once yesterday is published it is no longer taken as absent.
        store.publish(yesterday, &entries, life).await.expect("yesterday");
        q.snapshots.refresh().await.expect("poll");
        assert!(!q.snapshots.absent(yesterday));
        let page = q.top(TopQuery { limit: 3, ..Default::default() }).await.expect("page");
        assert_eq!(page.entries.iter().map(|e| e.previous_rank).collect::<Vec<_>>(), vec![1, 2, 3]);
    }
}
