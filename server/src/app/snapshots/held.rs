//! The held set: a replica's copies by ranking, the bound they stay within, and the one rule
//! every change of them follows — a copy only moves forward. A copy replaces another only
//! with a newer version, and never installs a version older than one a read of this replica
//! already answered from the store ([`HeldSet::served_from_store`]); both decisions take one
//! lock, so a reader and an install cannot pass each other.
//!
//! Copies are swapped in whole (`ArcSwap`), so a read sees one version, without a lock.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use super::Held;
use crate::domain::snapshot::Snapshot;
use crate::ports::RankingKey;

/// A copy to swap in: its ranking, or (`Err`) the size of a version too large to hold.
pub(super) type Copy = Result<Arc<Snapshot>, u64>;

/// What a swap did.
#[derive(Debug, Default)]
pub(super) struct Swapped {
    /// Copies installed.
    pub installed: usize,
    /// Versions found too large to hold for the first time: `(key, version, entries)`.
    pub too_large: Vec<(RankingKey, u64, u64)>,
}

/// The held copies of one replica, at most `max_entries` entries in all.
pub(super) struct HeldSet {
    copies: ArcSwap<HashMap<RankingKey, Arc<Held>>>,
    max_entries: usize,
    /// The version of a ranking found too large to hold, so the poll does not fetch it again.
    oversize: Mutex<HashMap<RankingKey, u64>>,
    /// The newest version of each wanted ranking that a read of this replica answered from
    /// the store (it held no copy yet): a copy older than that is never installed, so a
    /// load that started before a newer version was published (a replica paused in the
    /// middle of it) cannot make its readers see the ranking go back.
    served_from_store: Mutex<HashMap<RankingKey, u64>>,
    /// Counts swaps, so that watchers of tops wake when a copy changes.
    installs: tokio::sync::watch::Sender<u64>,
}

/// Whether `version` of `key` is newer than the copy `held` has of it (or there is none).
fn is_newer(held: &HashMap<RankingKey, Arc<Held>>, key: RankingKey, version: u64) -> bool {
    held.get(&key).is_none_or(|h| h.version < version)
}

impl HeldSet {
    pub fn new(max_entries: usize) -> Self {
        Self {
            copies: ArcSwap::default(),
            max_entries,
            oversize: Mutex::default(),
            served_from_store: Mutex::default(),
            installs: tokio::sync::watch::Sender::new(0),
        }
    }

    /// The bound on the entries of all copies.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The held copy of `key`, if any.
    pub fn get(&self, key: RankingKey) -> Option<Arc<Held>> {
        self.copies.load().get(&key).cloned()
    }

    /// Whether `version` of `key` (or a newer one) is held already.
    pub fn holds(&self, key: RankingKey, version: u64) -> bool {
        !is_newer(&self.copies.load(), key, version)
    }

    /// Entries held in all copies.
    pub fn entries(&self) -> usize {
        self.copies.load().values().map(|h| h.ranking.len()).sum()
    }

    /// Entries a copy of `key` may have beside the copies of other rankings.
    pub fn room(&self, key: RankingKey) -> u64 {
        let copies = self.copies.load();
        let others: usize = copies.iter().filter(|(k, _)| **k != key).map(|(_, h)| h.ranking.len()).sum();
        self.max_entries.saturating_sub(others) as u64
    }

    /// Notes that a read answered `version` of `key` from the store: no older copy of it is
    /// installed from now on, and one installed while the read was under way is dropped, so
    /// the next read goes to the store, which is at least as new, until a newer copy is
    /// loaded. Under the same lock as [`HeldSet::swap`]'s decision.
    pub fn served_from_store(&self, key: RankingKey, version: u64) -> bool {
        let mut served = self.served_from_store.lock().unwrap_or_else(|e| e.into_inner());
        let newest = served.entry(key).or_insert(version);
        *newest = (*newest).max(version);
        let older = |held: &HashMap<RankingKey, Arc<Held>>| held.get(&key).is_some_and(|h| h.version < version);
        if !older(&self.copies.load()) {
            return false;
        }
        self.copies.rcu(|held| {
            let mut held = HashMap::clone(held);
            if older(&held) {
                held.remove(&key);
            }
            held
        });
        true
    }

    /// The one change of the copies: each copy newer than the one held replaces it, in the
    /// order given, while the copies together stay within the bound; a version that does not
    /// fit beside the others, or was found too large to read (`Err`), is not held, and
    /// neither is an older copy of its ranking, so reads fall through to the store rather
    /// than serve a superseded version.
    pub fn swap(&self, copies: Vec<(RankingKey, u64, Copy)>) -> Swapped {
        let held = self.copies.load_full();
        // Held until the copies are in: a read answered from the store meanwhile either sees
        // them (and drops one older than its answer) or is seen here.
        let served = self.served_from_store.lock().unwrap_or_else(|e| e.into_inner());
        let not_older_than_served = |key: &RankingKey, version: u64| served.get(key).is_none_or(|v| *v <= version);
        let copies: Vec<_> = copies
            .into_iter()
            .filter(|(key, version, _)| is_newer(&held, *key, *version) && not_older_than_served(key, *version))
            .collect();
        let mut swapped = Swapped::default();
        if copies.is_empty() {
            return swapped;
        }
        let replaced: HashSet<RankingKey> = copies.iter().map(|(k, ..)| *k).collect();
        let mut used: usize = held.iter().filter(|(k, _)| !replaced.contains(k)).map(|(_, h)| h.ranking.len()).sum();
        let mut swaps = Vec::with_capacity(copies.len());
        for (key, version, copy) in copies {
            let len = match copy {
                Ok(ranking) if used + ranking.len() <= self.max_entries => {
                    used += ranking.len();
                    swaps.push((key, version, Some(Arc::new(Held { version, ranking }))));
                    continue;
                }
                Ok(ranking) => ranking.len() as u64,
                Err(len) => len,
            };
            swaps.push((key, version, None));
            let first = self.oversize.lock().unwrap_or_else(|e| e.into_inner()).insert(key, version) != Some(version);
            if first {
                swapped.too_large.push((key, version, len));
            }
        }
        swapped.installed = swaps.iter().filter(|(.., copy)| copy.is_some()).count();
        self.copies.rcu(|held| {
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
        self.installs.send_modify(|n| *n += 1);
        swapped
    }

    /// Whether `version` of `key` was found too large to hold.
    pub fn known_too_large(&self, key: RankingKey, version: u64) -> bool {
        self.oversize.lock().unwrap_or_else(|e| e.into_inner()).get(&key) == Some(&version)
    }

    /// Keeps the copies (and what is known of them) of the rankings `wanted` says.
    pub fn retain(&self, wanted: impl Fn(&RankingKey) -> bool) {
        if self.copies.load().keys().any(|k| !wanted(k)) {
            self.copies.rcu(|held| {
                let mut held = HashMap::clone(held);
                held.retain(|k, _| wanted(k));
                held
            });
            self.oversize.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| wanted(k));
        }
        self.served_from_store.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| wanted(k));
    }

    /// Changes whenever copies are swapped.
    pub fn installed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.installs.subscribe()
    }
}
