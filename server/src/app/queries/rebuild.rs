//! The rebuild of a daily (or weekly) ranking the store lost: a retained day whose version
//! pointer is gone (Redis restarted empty or was flushed) is recomputed at once, under the
//! day's lease, and the read answers from the rebuilt ranking, so an empty store is never
//! served as an empty home page until the next scheduler tick. Concurrent reads of one day
//! share one rebuild.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};

use super::Queries;
use super::types::{QueryError, Resolved};
use crate::app::recompute::{Recompute, RecomputeError};
use crate::ports::RankingKey;

/// A rebuild under way, shared by the reads waiting for it.
type Rebuild = Shared<BoxFuture<'static, Result<(), RecomputeError>>>;

/// Rebuilds under way, by day; an entry lives while its rebuild runs.
#[derive(Default, Clone)]
pub(super) struct Rebuilds(Arc<Mutex<HashMap<NaiveDate, Rebuild>>>);

impl Rebuilds {
    /// The rebuild of `date` under way, or a new one by `recompute`.
    fn of(&self, date: NaiveDate, recompute: &Arc<Recompute>) -> Rebuild {
        let mut rebuilds = self.0.lock().unwrap_or_else(|e| e.into_inner());
        rebuilds
            .entry(date)
            .or_insert_with(|| {
                let (recompute, rebuilds) = (recompute.clone(), self.clone());
                async move {
                    tracing::warn!(%date, "daily ranking missing from the ranking store; rebuilding it now");
                    let result = recompute.run(date).await.map(drop);
                    rebuilds.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&date);
                    result
                }
                .boxed()
                .shared()
            })
            .clone()
    }
}

impl Queries {
    /// When the store has no version of a daily or weekly ranking, makes sure it is not a
    /// lost one: if its day is retained, rebuilds it (sharing a rebuild under way) and
    /// returns `true` so the caller reads again.
    pub(super) async fn rebuilt_if_lost(&self, resolved: &Resolved, version: Option<u64>) -> Result<bool, QueryError> {
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
        self.rebuilds.of(date, &self.recompute).await?;
        Ok(true)
    }
}
