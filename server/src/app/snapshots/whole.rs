//! Whole rankings read for single callers (ListMovers, control passes, withdrawals): the held
//! copy, or a copy read from the store for this caller alone, bounded like the held ones (a
//! control pass's and a withdrawal's are not: they serve the board again whatever its size).

use std::collections::HashSet;
use std::sync::Arc;

use super::load::{LOAD_CHUNK, Read};
use super::{Held, Snapshots};
use crate::domain::snapshot::Snapshot;
use crate::ports::{RankingKey, Scored, StoreError};

impl Snapshots {
    /// The whole current version of a ranking: the held copy, else a copy read from the
    /// store for this one caller (at most `RANKING_SNAPSHOT_MAX_ENTRIES` entries, and at most
    /// [`super::PASSING_COPIES`] such copies being read at once; an hourly ranking, which
    /// changes while it is read, is taken as read). `None` when the store has no such ranking.
    pub async fn whole(&self, key: RankingKey) -> Result<Option<Arc<Held>>, StoreError> {
        match self.get(key) {
            Some(held) => Ok(Some(held)),
            None => self.copy(key, false, self.held.max_entries() as u64).await,
        }
    }

    /// Like [`Snapshots::whole`], but always the version the store holds as current now (the
    /// held copy only when it is that version: a replica may not have loaded a newer one yet),
    /// whatever its size: what a control pass or a withdrawal serves again whole, on a board
    /// larger than `RANKING_SNAPSHOT_MAX_ENTRIES` lets a replica hold (read for that work alone,
    /// at most [`super::PASSING_COPIES`] at once, and dropped with it).
    pub async fn current_whole(&self, key: RankingKey) -> Result<Option<Arc<Held>>, StoreError> {
        self.copy(key, true, u64::MAX).await
    }

    /// The current version of a versioned ranking and the controls (ids and revisions) it was
    /// served under, read from the held copy when it is that version, else from what the store
    /// keeps beside the version: no entry is read. `None` when the store has no such ranking.
    pub async fn current_acting(&self, key: RankingKey) -> Result<Option<(u64, Vec<(String, u64)>)>, StoreError> {
        let Some(version) = self.rankings.versions(&[key]).await?.first().copied().flatten() else { return Ok(None) };
        if let Some(held) = self.get(key)
            && held.version == version
        {
            return Ok(Some((version, held.ranking.acting().to_vec())));
        }
        let served = self.rankings.version_served(key, version).await?;
        Ok(Some((version, served.map(|parts| parts.acting).unwrap_or_default())))
    }

    async fn copy(&self, key: RankingKey, current: bool, max: u64) -> Result<Option<Arc<Held>>, StoreError> {
        let stored = match key.is_versioned() {
            true => match self.rankings.versions(&[key]).await?.first().copied().flatten() {
                Some(version) => Some(version),
                None => return Ok(None),
            },
            false => None,
        };
        if let (true, Some(held), Some(version)) = (current, self.get(key), stored)
            && held.version == version
        {
            return Ok(Some(held));
        }
        // Waiting is bounded by the caller's request deadline.
        let _permit = self.passing.acquire().await.map_err(|_| StoreError::ranking("shutting down"))?;
        let too_large = |total: u64| {
            StoreError::Exceeds(format!(
                "{key:?} has {total} entries, more than RANKING_SNAPSHOT_MAX_ENTRIES ({}) allows to scan",
                max
            ))
        };
        let mut entries: Vec<Scored> = Vec::new();
        let mut served = None;
        let version = if let Some(version) = stored {
            (entries, served) = match self.read_version(key, version, max).await? {
                Read::Gone => return Ok(None),
                Read::TooLarge(total) => return Err(too_large(total)),
                Read::Entries(entries, served) => (entries, served),
            };
            version
        } else {
            loop {
                let page = self.rankings.top(key, entries.len() as u64, LOAD_CHUNK).await?;
                if page.total > max {
                    return Err(too_large(page.total));
                }
                let done = page.entries.len() < LOAD_CHUNK as usize;
                entries.extend(page.entries);
                if done {
                    break;
                }
            }
            // Increments between pages may repeat a product or break the order a little.
            let mut seen = HashSet::with_capacity(entries.len());
            entries.retain(|e| seen.insert(e.product_id));
            0
        };
        let ranking = match key.is_versioned() {
            true => Snapshot::from_parts(entries, served),
            false => Snapshot::from_unordered(entries),
        }
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Some(Arc::new(Held { version, ranking: Arc::new(ranking) })))
    }
}
