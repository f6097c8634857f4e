//! Where a read is answered from: this replica's held copy of the version when it has one,
//! else the ranking store (a lost daily or weekly ranking rebuilt first). Every read of a
//! current version goes through [`Queries::current`], every read of a named version through
//! [`Queries::version_page`].

use super::Queries;
use super::types::{QueryError, Resolved};
use crate::app::snapshots::Held;
use crate::ports::{Page, Placements, StoreError};

/// What a read of a current version found, whichever source it came from.
pub(super) trait Versioned {
    /// The version read; `None` when the store has none (or the ranking has none: hourly).
    fn version(&self) -> Option<u64>;
}

impl Versioned for Page {
    fn version(&self) -> Option<u64> {
        self.version
    }
}

impl Versioned for Placements {
    fn version(&self) -> Option<u64> {
        self.version
    }
}

impl Queries {
    /// A read of the current version of `resolved`: `held` of the held copy when there is
    /// one, else `stored` from the store; when the store has no version of a ranking that
    /// should exist, it is rebuilt and read again (from the copy the rebuild installed).
    async fn current<T: Versioned, F: Future<Output = Result<T, StoreError>>>(
        &self,
        resolved: &Resolved,
        held: impl Fn(&Held) -> T,
        stored: impl Fn() -> F,
    ) -> Result<T, QueryError> {
        if let Some(copy) = self.snapshots.get(resolved.key) {
            return Ok(held(&copy));
        }
        let read = stored().await?;
        if let Some(version) = read.version() {
            // No copy older than what this reader saw may be installed after it.
            self.snapshots.served_from_store(resolved.key, version);
        }
        if !self.rebuilt_if_lost(resolved, read.version()).await? {
            return Ok(read);
        }
        match self.snapshots.get(resolved.key) {
            Some(copy) => Ok(held(&copy)),
            None => Ok(stored().await?),
        }
    }

    /// A page of the current version of a ranking.
    pub(super) async fn current_page(&self, resolved: &Resolved, offset: u64, limit: u64) -> Result<Page, QueryError> {
        self.current(resolved, |held| held_page(held, offset, limit), || self.rankings.top(resolved.key, offset, limit))
            .await
    }

    /// Several products' places in the current version of a ranking.
    pub(super) async fn placements(&self, resolved: &Resolved, ids: &[i64]) -> Result<Placements, QueryError> {
        self.current(
            resolved,
            |held| Placements::in_snapshot(&held.ranking, held.version, ids),
            || self.rankings.placements(resolved.key, None, ids),
        )
        .await
    }

    /// A page of one version: from the held copy when it is that version, else from the
    /// store, which may have dropped it.
    pub(super) async fn version_page(
        &self,
        resolved: &Resolved,
        version: u64,
        offset: u64,
        limit: u64,
    ) -> Result<Page, QueryError> {
        if let Some(held) = self.snapshots.get(resolved.key).filter(|h| h.version == version) {
            return Ok(held_page(&held, offset, limit));
        }
        self.rankings
            .version_page(resolved.key, version, offset, limit)
            .await?
            .ok_or(QueryError::Expired { date: resolved.date(), version })
    }

    /// A page of the version a read found (`None`: a ranking without versions, hourly).
    pub(super) async fn page_of(
        &self,
        resolved: &Resolved,
        version: Option<u64>,
        offset: u64,
        limit: u64,
    ) -> Result<Page, QueryError> {
        match version {
            Some(version) if resolved.key.is_versioned() => self.version_page(resolved, version, offset, limit).await,
            _ => Ok(self.rankings.top(resolved.key, offset, limit).await?),
        }
    }
}

fn held_page(held: &Held, offset: u64, limit: u64) -> Page {
    Page {
        entries: held.ranking.page(offset, limit).to_vec(),
        total: held.ranking.len() as u64,
        version: Some(held.version),
    }
}
