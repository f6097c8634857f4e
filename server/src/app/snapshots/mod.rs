//! Each replica's in-process copies of the current versions of the exact rankings it
//! serves: today's and yesterday's daily and weekly rankings, and the segment
//! rankings published with them.
//!
//! A version is immutable, so a copy of it answers exactly what Redis would: a page in
//! O(limit), a rank in O(1), with no round trip and no parsing, and it keeps answering while
//! Redis is down. Copies are installed three ways:
//!
//! - by the publication that made the version, before its call returns, from its own copy
//!   ([`Snapshots::install_copy`]);
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
//! - this module: [`Snapshots`], what the other parts share.
//! - [`held`]: the held set, its bound and the one swap that changes it, forward only.
//! - [`wanted`]: which rankings are held, which the store has none of, and when segment
//!   versions are polled.
//! - [`load`]: installing, loading, the poll and the announcement loop.
//! - [`whole`]: whole rankings read for single callers (movers, withdrawals).
//! - [`own`]: this replica's own publications in flight, which no announcement loads.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use self::held::{Copy, HeldSet};
use super::policy::Policy;
use crate::domain::snapshot::Snapshot;
use crate::metrics::Metrics;
use crate::ports::{RankingKey, RankingStore};

mod held;
mod load;
mod own;
mod wanted;
mod whole;

pub use load::LOAD_CHUNK;
pub use own::OwnPublication;

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

/// The held copies of one replica, and what keeps them current.
pub struct Snapshots {
    rankings: Arc<dyn RankingStore>,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
    /// The copies and the rule they change by.
    held: HeldSet,
    /// One installation at a time, so the bound holds while a copy is built.
    installing: tokio::sync::Mutex<()>,
    /// Which rankings are wanted beyond the whole ones, and when they are polled.
    wanted: wanted::Wanted,
    /// Copies read for a single caller ([`Snapshots::whole`]) being built at once: however
    /// many callers ask, they hold at most this many rankings' worth of memory.
    passing: tokio::sync::Semaphore,
    /// This replica's own publications in flight.
    own: own::Own,
}

/// Rankings read whole for single callers at the same time.
const PASSING_COPIES: usize = 2;

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
            held: HeldSet::new(max_entries),
            installing: tokio::sync::Mutex::new(()),
            wanted: wanted::Wanted::default(),
            passing: tokio::sync::Semaphore::new(PASSING_COPIES),
            own: own::Own::default(),
        }
    }

    /// Notes that a read answered `version` of `key` from the store: no older copy of it is
    /// installed from now on, and one installed while the read was under way (a load begun
    /// before a pause, finished after it) is dropped ([`HeldSet::served_from_store`]).
    pub fn served_from_store(&self, key: RankingKey, version: u64) {
        if !key.is_versioned() || !self.is_wanted(key, self.policy.now()) {
            return;
        }
        if self.held.served_from_store(key, version) {
            tracing::debug!(?key, version, "dropped a copy older than a version served from the store");
        }
    }

    /// The held copy of a ranking, if any.
    pub fn get(&self, key: RankingKey) -> Option<Arc<Held>> {
        if !key.is_versioned() {
            return None;
        }
        self.held.get(key)
    }

    /// Whether `version` of `key` (or a newer one) is held already.
    fn holds(&self, key: RankingKey, version: u64) -> bool {
        self.held.holds(key, version)
    }

    /// Entries held in all copies.
    pub fn entries(&self) -> usize {
        self.held.entries()
    }

    /// Entries a copy of `key` may have beside the copies of other rankings.
    fn room(&self, key: RankingKey) -> u64 {
        self.held.room(key)
    }

    /// The one change of the held set (called under `installing`), counted and reported.
    fn swap(&self, copies: Vec<(RankingKey, u64, Copy)>) {
        if copies.is_empty() {
            return;
        }
        let swapped = self.held.swap(copies);
        for (key, version, entries) in swapped.too_large {
            self.metrics.stores.snapshot_oversize.inc();
            tracing::warn!(
                ?key,
                version,
                entries,
                max = self.held.max_entries(),
                "ranking too large for RANKING_SNAPSHOT_MAX_ENTRIES; reading it from the ranking store"
            );
        }
        self.metrics.stores.snapshot_loads.inc_by(swapped.installed as u64);
        self.report(self.policy.now());
    }

    /// Whether `version` of `key` was found too large to hold.
    fn known_too_large(&self, key: RankingKey, version: u64) -> bool {
        self.held.known_too_large(key, version)
    }

    /// Changes whenever a copy is installed.
    pub fn installed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.held.installed()
    }

    /// Whether the store had no version of this wanted ranking at the last poll (and none
    /// was announced since).
    pub fn absent(&self, key: RankingKey) -> bool {
        self.wanted.absent(key)
    }

    /// Exports the version of today's copies.
    fn report(&self, now: DateTime<Utc>) {
        let today = self.policy.today(now);
        for key in [RankingKey::Daily(today), RankingKey::Weekly(today), RankingKey::Trending(today)] {
            self.metrics.stores.snapshot_serving(key.window().name(), self.get(key).map(|h| h.version));
        }
    }
}

#[cfg(test)]
mod tests;
