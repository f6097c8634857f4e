//! Each replica's in-process copies of the current versions of the exact rankings it
//! serves: today's and yesterday's daily and weekly rankings, and the segment
//! rankings published with them.
//!
//! A version is immutable, so a copy of it answers exactly what Redis would: a page in
//! O(limit), a rank in O(1), with no round trip and no parsing, and it keeps answering while
//! Redis is down. Copies are installed three ways:
//!
//! - by the recompute that published the version, before its call returns ([`Snapshots::install`]);
//! - on an announcement over the ranking store's pub/sub ([`Snapshots::run`]);
//! - by a poll of the current versions every [`Policy::snapshot_poll`], which also finds
//!   announcements lost while the subscription was down.
//!
//! Loading reads the version in chunks of [`LOAD_CHUNK`] entries (from Redis, its packed
//! copy: 16 bytes per entry, parsed without allocating per entry); a version is immutable, so
//! chunks never mix versions, and a version superseded and dropped mid-load is abandoned
//! (the next poll loads its successor). The copies together hold at most
//! `RANKING_SNAPSHOT_MAX_ENTRIES` entries: a version that does not fit is not copied, and
//! its ranking is read from the store as before. Copies are swapped in whole
//! (`ArcSwap`), so a read sees one version, without taking a lock.
//!
//! - this module: the held set, its bound and the one [`Snapshots::swap`] that changes it.
//! - [`wanted`]: which rankings are held, and when segment versions are polled.
//! - [`load`]: installing, loading, the poll and the announcement loop.
//! - [`whole`]: whole rankings read for single callers (movers, withdrawals).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};

use super::policy::Policy;
use crate::domain::snapshot::Snapshot;
use crate::metrics::Metrics;
use crate::ports::{RankingKey, RankingStore, Segment};

mod load;
mod wanted;
mod whole;

pub use load::LOAD_CHUNK;

/// One held version.
#[derive(Debug)]
pub struct Held {
    /// Its version number.
    pub version: u64,
    /// Its entries (a segment's copy may share its whole ranking's copy: [`Snapshots::held_as`]).
    pub ranking: Arc<Snapshot>,
}

impl Held {
    /// The version, `None` for a copy of an hourly ranking (which has none).
    pub fn key_version(&self) -> Option<u64> {
        (self.version > 0).then_some(self.version)
    }
}

/// A copy to swap in: its ranking, or (`Err`) the size of a version too large to hold.
type Copy = Result<Arc<Snapshot>, u64>;

/// The held copies of one replica.
pub struct Snapshots {
    rankings: Arc<dyn RankingStore>,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
    max_entries: usize,
    held: ArcSwap<HashMap<RankingKey, Arc<Held>>>,
    /// The version of a ranking found too large to hold, so the poll does not fetch it again.
    oversize: Mutex<HashMap<RankingKey, u64>>,
    /// One installation at a time, so the bound holds while a copy is built.
    installing: tokio::sync::Mutex<()>,
    /// The segments published with each whole ranking a replica keeps (their rankings are
    /// kept too, after the whole ones, within the same bound).
    segments: ArcSwap<HashMap<RankingKey, Vec<Segment>>>,
    /// Wanted rankings the store had no version of at the last poll (yesterday's, on a
    /// service's first day): reads that annotate with them need not ask the store.
    absent: ArcSwap<HashSet<RankingKey>>,
    /// When each whole ranking's segment versions were last polled, and when its own version
    /// last moved.
    segment_polls: Mutex<HashMap<RankingKey, wanted::SegmentPoll>>,
    /// Counts installed copies, so that watchers of tops wake when a copy changes.
    installs: tokio::sync::watch::Sender<u64>,
    /// Copies read for a single caller ([`Snapshots::whole`]) being built at once: however
    /// many callers ask, they hold at most this many rankings' worth of memory.
    passing: tokio::sync::Semaphore,
    /// The newest version of each wanted ranking that a read of this replica answered from
    /// the store (it held no copy yet): a copy older than that is never installed, so a
    /// load that started before a newer version was published (a replica paused in the
    /// middle of it) cannot make its readers see the ranking go back.
    served_from_store: Mutex<HashMap<RankingKey, u64>>,
}

/// Rankings read whole for single callers at the same time.
const PASSING_COPIES: usize = 2;

/// Whether `version` of `key` is newer than the copy `held` has of it (or there is none):
/// the rule every change of the held set follows, so a copy never goes back in time.
fn is_newer(held: &HashMap<RankingKey, Arc<Held>>, key: RankingKey, version: u64) -> bool {
    held.get(&key).is_none_or(|h| h.version < version)
}

impl Snapshots {
    /// Copies of versions read from `rankings`, at most `max_entries` entries in all.
    pub fn new(
        rankings: Arc<dyn RankingStore>,
        policy: Arc<Policy>,
        metrics: Arc<Metrics>,
        max_entries: usize,
    ) -> Self {
        Self {
            rankings,
            policy,
            metrics,
            max_entries,
            held: ArcSwap::default(),
            oversize: Mutex::default(),
            installing: tokio::sync::Mutex::new(()),
            passing: tokio::sync::Semaphore::new(PASSING_COPIES),
            segments: ArcSwap::default(),
            installs: tokio::sync::watch::Sender::new(0),
            absent: ArcSwap::default(),
            segment_polls: Mutex::default(),
            served_from_store: Mutex::default(),
        }
    }

    /// Notes that a read answered `version` of `key` from the store: no older copy of it is
    /// installed from now on, and one installed while the read was under way (a load begun
    /// before a pause, finished after it) is dropped, so the next read goes to the store,
    /// which is at least as new, until a newer copy is loaded. Under the same lock as
    /// [`Snapshots::swap`]'s decision, so that a read and an install cannot pass each other.
    pub fn served_from_store(&self, key: RankingKey, version: u64) {
        if !key.is_versioned() || !self.is_wanted(key, self.policy.now()) {
            return;
        }
        let mut served = self.served_from_store.lock().unwrap_or_else(|e| e.into_inner());
        let newest = served.entry(key).or_insert(version);
        *newest = (*newest).max(version);
        let older = |held: &HashMap<RankingKey, Arc<Held>>| held.get(&key).is_some_and(|h| h.version < version);
        if older(&self.held.load()) {
            tracing::debug!(?key, version, "dropping a copy older than a version served from the store");
            self.held.rcu(|held| {
                let mut held = HashMap::clone(held);
                if older(&held) {
                    held.remove(&key);
                }
                held
            });
        }
    }

    /// The held copy of a ranking, if any.
    pub fn get(&self, key: RankingKey) -> Option<Arc<Held>> {
        if !key.is_versioned() {
            return None;
        }
        self.held.load().get(&key).cloned()
    }

    /// Whether `version` of `key` (or a newer one) is held already.
    fn holds(&self, key: RankingKey, version: u64) -> bool {
        !is_newer(&self.held.load(), key, version)
    }

    /// Entries held in all copies.
    pub fn entries(&self) -> usize {
        self.held.load().values().map(|h| h.ranking.len()).sum()
    }

    /// Entries a copy of `key` may have beside the copies of other rankings.
    fn room(&self, key: RankingKey) -> u64 {
        let others: usize = self.held.load().iter().filter(|(k, _)| **k != key).map(|(_, h)| h.ranking.len()).sum();
        self.max_entries.saturating_sub(others) as u64
    }

    /// The one change of the held set (called under `installing`): each copy newer than the
    /// one held replaces it, in the order given, while the copies together stay within
    /// `RANKING_SNAPSHOT_MAX_ENTRIES`; a version that does not fit beside the others, or was
    /// found too large to read (`Err`), is not held, and neither is an older copy of its
    /// ranking, so reads fall through to the store rather than serve a superseded version.
    fn swap(&self, copies: Vec<(RankingKey, u64, Copy)>) {
        let held = self.held.load_full();
        // Held until the copies are in: a read answered from the store meanwhile either sees
        // them (and drops one older than its answer) or is seen here.
        let served = self.served_from_store.lock().unwrap_or_else(|e| e.into_inner());
        let not_older_than_served = |key: &RankingKey, version: u64| served.get(key).is_none_or(|v| *v <= version);
        let copies: Vec<_> = copies
            .into_iter()
            .filter(|(key, version, _)| is_newer(&held, *key, *version) && not_older_than_served(key, *version))
            .collect();
        if copies.is_empty() {
            return;
        }
        let replaced: HashSet<RankingKey> = copies.iter().map(|(k, ..)| *k).collect();
        let mut used: usize = held.iter().filter(|(k, _)| !replaced.contains(k)).map(|(_, h)| h.ranking.len()).sum();
        let mut swaps = Vec::with_capacity(copies.len());
        for (key, version, copy) in copies {
            match copy {
                Ok(ranking) if used + ranking.len() <= self.max_entries => {
                    used += ranking.len();
                    swaps.push((key, version, Some(Arc::new(Held { version, ranking }))));
                }
                Ok(ranking) => self.too_large(key, version, ranking.len() as u64, &mut swaps),
                Err(len) => self.too_large(key, version, len, &mut swaps),
            }
        }
        let installed = swaps.iter().filter(|(.., copy)| copy.is_some()).count();
        self.held.rcu(|held| {
            let mut held = HashMap::clone(held);
            for (key, version, copy) in &swaps {
                if !is_newer(&held, *key, *version) {
                    continue;
                }
                match copy {
                    Some(copy) => held.insert(*key, copy.clone()),
                    None => held.remove(key),
                };
            }
            held
        });
        drop(served);
        self.metrics.snapshot_loads.inc_by(installed as u64);
        self.installs.send_modify(|n| *n += 1);
        self.report(self.policy.now());
    }

    /// Records (and reports once) that `version` of `key` is too large to hold, and drops
    /// the older copy with it.
    fn too_large(
        &self,
        key: RankingKey,
        version: u64,
        len: u64,
        swaps: &mut Vec<(RankingKey, u64, Option<Arc<Held>>)>,
    ) {
        swaps.push((key, version, None));
        let first = self.oversize.lock().unwrap_or_else(|e| e.into_inner()).insert(key, version) != Some(version);
        if first {
            self.metrics.snapshot_oversize.inc();
            tracing::warn!(
                ?key,
                version,
                entries = len,
                max = self.max_entries,
                "ranking too large for RANKING_SNAPSHOT_MAX_ENTRIES; reading it from the ranking store"
            );
        }
    }

    /// Whether `version` of `key` was found too large to hold.
    fn known_too_large(&self, key: RankingKey, version: u64) -> bool {
        self.oversize.lock().unwrap_or_else(|e| e.into_inner()).get(&key) == Some(&version)
    }

    /// Changes whenever a copy is installed.
    pub fn installed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.installs.subscribe()
    }

    /// Whether the store had no version of this wanted ranking at the last poll (and none
    /// was announced since).
    pub fn absent(&self, key: RankingKey) -> bool {
        self.absent.load().contains(&key)
    }

    fn present(&self, key: RankingKey) {
        if self.absent(key) {
            self.absent.rcu(|absent| {
                let mut absent = HashSet::clone(absent);
                absent.remove(&key);
                absent
            });
        }
    }

    /// Exports the version of today's copies.
    fn report(&self, now: DateTime<Utc>) {
        let today = self.policy.today(now);
        self.metrics.snapshot_serving("daily", self.get(RankingKey::Daily(today)).map(|h| h.version));
        self.metrics.snapshot_serving("weekly", self.get(RankingKey::Weekly(today)).map(|h| h.version));
    }
}

#[cfg(test)]
mod tests;
