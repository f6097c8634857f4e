//! The read side: which ranking a request means and the page or placement it gets.
//!
//! Every read rule lives here: an unspecified date is today in the ranking time zone, an
//! hourly read of another day names its hour, a page holds 1–[`MAX_LIMIT`] entries (0 means
//! [`DEFAULT_LIMIT`]), a product id is ≥ 1. Reads touch the ranking store only, never SQL.
//!
//! The exact rankings this replica holds copies of ([`Snapshots`]: today's and yesterday's
//! daily and weekly rankings and their segments) are answered from the copy of their
//! current version; other rankings, and these while no copy is held, are read from the
//! ranking store. Every answer of an exact ranking carries the version it was read from,
//! and a GetTopN page carries a [`PageToken`] for the next page of that same version.
//!
//! - [`types`]: requests, answers, bounds and errors.
//! - [`resolve`]: a selector or a page token → the ranking read; the previous period.
//! - [`source`]: the held copy or the store, in one function.
//! - [`rebuild`]: the shared rebuild of a ranking the store lost.
//! - [`annotate`]: tied rank, top %, previous rank and change of every entry.
//! - [`answers`]: kept answers of the hot pages of held copies.
//! - [`movers`]: ListMovers, the products that moved most.
//! - [`preview`]: PreviewTopN, a board as controls would serve it.
//! - [`compare`]: CompareRankings, two boards compared.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::invalid::Invalid;
use super::page_token::PageToken;
use super::policy::Policy;
use super::recompute::Recompute;
use super::snapshots::Snapshots;
use crate::domain::profile::ScoringProfile;
use crate::ports::{Page, RankingKey, RankingStore, ServedParts, StoreError};

mod annotate;
mod answers;
mod compare;
mod movers;
mod preview;
mod rebuild;
mod resolve;
mod source;
mod types;

use annotate::Ties;
use answers::Answers;
pub use compare::{CompareAnswer, DEFAULT_DEPTH, DEFAULT_PERSISTENCE};
pub use preview::{PreviewAnswer, PreviewQuery};
use types::page_limit;
pub use types::{
    DEFAULT_LIMIT, Direction, EntryControls, MAX_LIMIT, MAX_NEIGHBORS, MAX_PRODUCT_IDS, MoversAnswer, MoversQuery,
    QueryError, RankAnswer, RankQuery, RankedEntry, RanksAnswer, RanksQuery, Resolved, Selector, TopAnswer, TopQuery,
    Window,
};

/// The read service.
pub struct Queries {
    rankings: Arc<dyn RankingStore>,
    snapshots: Arc<Snapshots>,
    policy: Arc<Policy>,
    recompute: Arc<Recompute>,
    rebuilds: rebuild::Rebuilds,
    /// Answers of pages of held copies, which never change for a given pair of versions.
    answers: Answers,
    /// What the store keeps beside versions read from it that are served boards, by version
    /// (immutable, like the versions).
    served: moka::sync::Cache<(RankingKey, u64), Option<Arc<ServedParts>>>,
}

/// Versions whose served parts are kept for reads from the store.
const SERVED_PARTS_KEPT: u64 = 256;

impl Queries {
    /// Reads from `snapshots`, else `rankings`, under `policy`; lost daily rankings are
    /// rebuilt by `recompute`.
    pub fn new(
        rankings: Arc<dyn RankingStore>,
        snapshots: Arc<Snapshots>,
        policy: Arc<Policy>,
        recompute: Arc<Recompute>,
    ) -> Self {
        Self {
            rankings,
            snapshots,
            policy,
            recompute,
            rebuilds: Default::default(),
            answers: Answers::default(),
            served: moka::sync::Cache::new(SERVED_PARTS_KEPT),
        }
    }

    /// The current instant by the policy's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.policy.now()
    }

    /// A page of a ranking, best first, and the token of the next page.
    pub async fn top(&self, query: TopQuery) -> Result<Arc<TopAnswer>, QueryError> {
        let limit = page_limit(query.limit)?;
        let Some(token) = query.page_token.as_deref() else {
            let resolved = self.resolve(query.selector, self.policy.now())?;
            let offset = u64::from(query.offset);
            let kept = self.answers.key(&self.snapshots, resolved.key, offset, limit);
            if let Some(answer) = kept.and_then(|k| self.answers.get(&k)) {
                return Ok(answer);
            }
            let page = self.current_page(&resolved, offset, u64::from(limit)).await?;
            let answer = Arc::new(self.page_answer(&resolved, offset, limit, page).await?);
            // Only an answer read from the copies the key names is kept.
            if let Some(k) = kept.filter(|k| answer.version == Some(k.version)) {
                self.answers.put(k, &answer);
            }
            return Ok(answer);
        };
        let (resolved, token) = self.continued(&query, token)?;
        // Without a limit of its own, the next page is as large as the one before.
        let limit = if query.limit == 0 { token.limit.clamp(1, MAX_LIMIT) } else { limit };
        let page = self.page_of(&resolved, Some(token.version), token.offset, u64::from(limit)).await?;
        Ok(Arc::new(self.page_answer(&resolved, token.offset, limit, page).await?))
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
        let mut entries = consecutive(&self.policy.profile, resolved, offset, &page);
        let controls = self.annotate(resolved, page.version, page.total, &mut entries, Ties::Consecutive).await?;
        let date = resolved.date();
        Ok(TopAnswer {
            entries,
            controls,
            total: page.total,
            date,
            version: page.version,
            next_page_token,
            encoding: Default::default(),
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
        let k = u64::from(query.neighbors);
        let mut window = Vec::new();
        let mut controls = Default::default();
        if k > 0 {
            let start = found.index.saturating_sub(k);
            let page = self.page_of(&resolved, version, start, found.index - start + 1 + k).await?;
            window = consecutive(&self.policy.profile, &resolved, start, &page);
            controls = self.annotate(&resolved, version, total, &mut window, Ties::Consecutive).await?;
        }
        // Without neighbours, or when an hourly ranking moved between the two reads and the
        // product is no longer in the window read, the answer is the product alone.
        let Some(at) = window.iter().position(|e| e.product_id == query.product_id) else {
            let profile = &self.policy.profile;
            let mut alone = [resolved.entry(profile, found.index, query.product_id, found.score, found.above)];
            let controls = self.annotate(&resolved, version, total, &mut alone, Ties::Placed).await?;
            return Ok(RankAnswer { entry: alone[0], controls, above: Vec::new(), below: Vec::new(), total, version });
        };
        let below = window.split_off(at + 1);
        // `at` is an index of `window`, so the product is its last entry now.
        let Some(entry) = window.pop() else { return Err(StoreError::Corrupt("empty neighbourhood".into()).into()) };
        Ok(RankAnswer { entry, controls, above: window, below, total, version })
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
                Some(f) => entries.push(resolved.entry(&self.policy.profile, f.index, *id, f.score, f.above)),
                None => missing.push(*id),
            }
        }
        let controls =
            self.annotate(&resolved, placements.version, placements.total, &mut entries, Ties::Placed).await?;
        Ok(RanksAnswer { controls, entries, missing, total: placements.total, version: placements.version })
    }
}

/// The entries of a page read at `offset`, their competition ranks still to be found
/// ([`Ties::Consecutive`]).
fn consecutive(profile: &ScoringProfile, resolved: &Resolved, offset: u64, page: &Page) -> Vec<RankedEntry> {
    let at = |i: usize| offset + i as u64;
    page.entries.iter().enumerate().map(|(i, e)| resolved.entry(profile, at(i), e.product_id, e.score, at(i))).collect()
}

#[cfg(test)]
mod tests;
