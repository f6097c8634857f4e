//! The rebuild of a daily (or weekly) ranking the store lost: a retained day whose version
//! pointer is gone (Redis restarted empty or was flushed) is recomputed at once, under the
//! day's lease, and the read answers from the rebuilt ranking, so an empty store is never
//! served as an empty home page until the next scheduler tick. Concurrent reads of one day
//! share one rebuild, and its failure (moka's single-flight initialisation).

use std::sync::Arc;

use chrono::NaiveDate;
use moka::future::Cache;

use super::Queries;
use super::types::{QueryError, Resolved};
use crate::app::recompute::{Recompute, RecomputeError};
use crate::ports::RankingKey;

/// Most days rebuilt at once: the retained days, with room to spare.
const MAX_REBUILDS: u64 = 64;

/// Rebuilds under way, by day; an entry is dropped by the reads it served once it ends, so
/// that a ranking lost again is rebuilt again.
#[derive(Clone)]
pub(super) struct Rebuilds(Cache<NaiveDate, ()>);

impl Default for Rebuilds {
    fn default() -> Self {
        Self(Cache::new(MAX_REBUILDS))
    }
}

impl Rebuilds {
    /// Waits for the rebuild of `date` under way, or runs one by `recompute`.
    async fn of(&self, date: NaiveDate, recompute: &Arc<Recompute>) -> Result<(), Arc<RecomputeError>> {
        let rebuilt = self
            .0
            .try_get_with(date, async {
                tracing::warn!(%date, "daily ranking missing from the ranking store; rebuilding it now");
                recompute.run(date).await.map(drop)
            })
            .await;
        self.0.invalidate(&date).await;
        rebuilt
    }
}

impl Queries {
    /// When the store has no version of a daily or weekly ranking (or of today's trending
    /// board), makes sure it is not a lost one: if its day is retained, rebuilds it (sharing
    /// a rebuild under way) and returns `true` so the caller reads again.
    pub(super) async fn rebuilt_if_lost(&self, resolved: &Resolved, version: Option<u64>) -> Result<bool, QueryError> {
        let today = self.policy.today(self.policy.now());
        let date = match resolved.key.whole() {
            RankingKey::Daily(date) | RankingKey::Weekly(date) => date,
            // Only today's recompute publishes a trending board.
            RankingKey::Trending(date) if date == today => date,
            _ => return Ok(false),
        };
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
        self.rebuilds.of(date, &self.recompute).await.map_err(|e| QueryError::from((*e).clone()))?;
        Ok(true)
    }
}
