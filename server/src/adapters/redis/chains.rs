//! Versions written as deltas (layout 2) read whole: a version's chain walked back through
//! the previous versions its deltas name to a copy at hand (the caller's held copy, one built
//! before) or to the chain's base (a whole packed copy), then the deltas applied in order.
//!
//! A replica holding the previous version applies one delta (its copies move from version
//! to version at the cost of the change plus a copy at memory speed); a read of the store
//! (a board larger than a replica holds, a page token of a superseded version) builds the
//! version once and keeps it ([`Materialized`], bounded), and the scripts refuse to read a
//! delta version from a packed copy it does not have (`DELTA <N>`), never answering an
//! empty page for it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use redis::RedisError;

use super::delta::{self, CHAIN};
use super::packed::unpack;
use super::{RedisRankingStore, unavailable};
use crate::domain::snapshot::{Changes, Snapshot};
use crate::ports::{Page, RankingKey, RankingStore, ServedParts, StoreError, VersionCopy};

/// Entries of the versions built whole for reads, kept at most: a few boards' worth.
const MATERIALIZED_ENTRIES: usize = 4_000_000;

/// The delta versions last built whole for reads of the store, newest last.
#[derive(Default)]
pub(super) struct Materialized {
    kept: Mutex<VecDeque<(RankingKey, u64, Arc<Snapshot>)>>,
}

impl Materialized {
    fn get(&self, key: RankingKey, version: u64) -> Option<Arc<Snapshot>> {
        let kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.iter().find(|(k, v, _)| *k == key && *v == version).map(|(_, _, copy)| Arc::clone(copy))
    }

    /// Keeps `copy` in place of older versions of `key`, dropping the oldest beyond the
    /// bound (a copy above it alone is not kept).
    fn keep(&self, key: RankingKey, version: u64, copy: &Arc<Snapshot>) {
        if copy.len() > MATERIALIZED_ENTRIES {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.retain(|(k, v, _)| *k != key || *v > version);
        kept.push_back((key, version, Arc::clone(copy)));
        while kept.iter().map(|(_, _, c)| c.len()).sum::<usize>() > MATERIALIZED_ENTRIES {
            kept.pop_front();
        }
    }
}

/// The version a script refused to read from a packed copy because it is a delta version.
pub(super) fn delta_refusal(e: &RedisError) -> Option<u64> {
    (e.code() == Some("DELTA")).then(|| e.detail()?.trim().parse().ok()).flatten()
}

/// `copy` with the served parts of its version; a board with pins (layout 3) put back in
/// its served order first.
fn served_as(copy: Snapshot, parts: Option<ServedParts>) -> Result<Snapshot, StoreError> {
    match parts {
        None => Ok(copy),
        Some(parts) if parts.pinned.is_empty() => Ok(copy.with_annex(parts.annex).served_under(parts.acting)),
        Some(parts) => Snapshot::served_from(copy.page(0, u64::MAX).into_owned(), parts).map_err(StoreError::ranking),
    }
}

impl RedisRankingStore {
    /// Version `version` of `key` whole when it is a delta version (`None` when it is not,
    /// or is no longer kept), from `held` (a copy of an earlier version) when its chain
    /// passes through it.
    pub(super) async fn chained(
        &self,
        key: RankingKey,
        version: u64,
        held: Option<(u64, &Arc<Snapshot>)>,
    ) -> Result<Option<Arc<Snapshot>>, StoreError> {
        if let Some(hit) = self.materialized.get(key, version) {
            return Ok(Some(hit));
        }
        let prefix = self.keys.versions(key);
        let mut deltas: Vec<Changes> = Vec::new();
        let mut at = version;
        let start = loop {
            if !deltas.is_empty() {
                match held {
                    Some((v, copy)) if v == at => break Arc::clone(copy),
                    _ => {}
                }
                if let Some(hit) = self.materialized.get(key, at) {
                    break hit;
                }
            }
            if deltas.len() > CHAIN {
                return Err(StoreError::Corrupt(format!("version {version} of {key:?}: a chain past {CHAIN} deltas")));
            }
            let bytes: Option<Vec<u8>> = redis::cmd("GET")
                .arg(format!("{prefix}{at}:delta"))
                .query_async(&mut self.conn.clone())
                .await
                .map_err(unavailable)?;
            match bytes {
                Some(bytes) => {
                    let (previous, changes) = delta::decode(&bytes)?;
                    deltas.push(changes);
                    at = previous;
                }
                // Not a delta version: the scripts read it.
                None if deltas.is_empty() => return Ok(None),
                None => match self.whole(key, at).await? {
                    Some(base) => break Arc::new(base),
                    // Swept with its chain meanwhile.
                    None => return Ok(None),
                },
            }
        };
        let served = self.version_served(key, version).await?;
        // Deltas of a million-entry board: off the runtime's workers.
        let built = tokio::task::spawn_blocking(move || {
            let mut deltas = deltas.into_iter().rev();
            let first = deltas.next().expect("one delta at least");
            let mut copy = start.with_changes(&first).map_err(StoreError::ranking)?;
            for changes in deltas {
                copy = copy.with_changes(&changes).map_err(StoreError::ranking)?;
            }
            served_as(copy, served)
        })
        .await
        .map_err(|e| StoreError::Corrupt(format!("building version {version} of {key:?}: {e}")))??;
        let built = Arc::new(built);
        self.materialized.keep(key, version, &built);
        Ok(Some(built))
    }

    /// [`crate::ports::RankingStore::version_copy`]: a delta version of at most `max`
    /// entries built from its chain; `None` for a version that is not a delta.
    pub(super) async fn copy_of_delta(
        &self,
        key: RankingKey,
        version: u64,
        held: Option<(u64, &Arc<Snapshot>)>,
        max: u64,
    ) -> Result<Option<VersionCopy>, StoreError> {
        // The header first: a version too large to hold is not built.
        let head: Vec<u8> = redis::cmd("GETRANGE")
            .arg(format!("{}{version}:delta", self.keys.versions(key)))
            .arg(0)
            .arg(delta::HEADER - 1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        if head.is_empty() {
            return Ok(None);
        }
        let (_, len) = delta::header(&head)?;
        if len as u64 > max {
            return Ok(Some(VersionCopy::TooLarge(len as u64)));
        }
        Ok(self.chained(key, version, held).await?.map(VersionCopy::Copy))
    }

    /// A whole version (a chain's base) read at once: its packed copy and served parts.
    async fn whole(&self, key: RankingKey, version: u64) -> Result<Option<Snapshot>, StoreError> {
        let packed: Option<Vec<u8>> = redis::cmd("GET")
            .arg(format!("{}{version}:packed", self.keys.versions(key)))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let Some(packed) = packed else { return Ok(None) };
        let served = self.version_served(key, version).await?;
        let entries = unpack(&packed)?;
        tokio::task::spawn_blocking(move || Snapshot::from_parts(entries, served).map_err(StoreError::ranking))
            .await
            .map_err(|e| StoreError::Corrupt(format!("reading version {version} of {key:?}: {e}")))?
            .map(Some)
    }

    /// A page of a delta version a script refused to read, from the version built whole.
    pub(super) async fn chained_page(
        &self,
        key: RankingKey,
        version: u64,
        offset: u64,
        limit: u64,
    ) -> Result<Option<Page>, StoreError> {
        let Some(copy) = self.chained(key, version, None).await? else { return Ok(None) };
        let entries = copy.page(offset, limit).into_owned();
        Ok(Some(Page { entries, total: copy.len() as u64, version: Some(version) }))
    }
}
