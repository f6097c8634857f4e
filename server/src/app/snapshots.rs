//! Each replica's in-process copies of the current versions of the exact rankings it
//! serves (SPEC §9.1): today's and yesterday's daily rankings.
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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::policy::Policy;
use crate::domain::snapshot::{Snapshot, SnapshotError};
use crate::metrics::Metrics;
use crate::ports::{Announcement, Announcements, RankingKey, RankingStore, Scored, Segment, StoreError};

/// Entries per read while loading a version (4 MB of packed entries from Redis).
pub const LOAD_CHUNK: u64 = 262_144;
/// Wait before subscribing again after the subscription failed or ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(5);

/// What reading a version whole found.
enum Read {
    /// The version is no longer kept.
    Gone,
    /// It has this many entries, more than allowed.
    TooLarge(u64),
    /// Its entries, in ranking order.
    Entries(Vec<Scored>),
}

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
    absent: ArcSwap<std::collections::HashSet<RankingKey>>,
    /// When each whole ranking's segment versions were last polled, and when its own version
    /// last moved.
    segment_polls: Mutex<HashMap<RankingKey, SegmentPoll>>,
    /// Counts installed copies, so that watchers of tops wake when a copy changes.
    installs: tokio::sync::watch::Sender<u64>,
    /// Copies read for a single caller ([`Snapshots::whole`]) being built at once: however
    /// many callers ask, they hold at most this many rankings' worth of memory.
    passing: tokio::sync::Semaphore,
}

/// How long after a whole ranking's version moved its segments' versions are polled on
/// every poll (a recompute publishes the segments after the whole ranking, for seconds when
/// there are thousands).
const SEGMENT_POLL_AFTER_CHANGE: Duration = Duration::from_secs(60);

/// Otherwise, how often the segments' versions are polled (the fallback for announcements
/// lost outside those windows).
const SEGMENT_POLL_EVERY: Duration = Duration::from_secs(30);

/// When a whole ranking's segment versions were polled.
#[derive(Debug, Clone, Copy)]
struct SegmentPoll {
    /// The whole ranking's version seen.
    seen: Option<u64>,
    /// When that version was first seen.
    changed: Instant,
    /// The last poll of its segments.
    polled: Option<Instant>,
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
            max_entries,
            held: ArcSwap::default(),
            oversize: Mutex::default(),
            installing: tokio::sync::Mutex::new(()),
            passing: tokio::sync::Semaphore::new(PASSING_COPIES),
            segments: ArcSwap::default(),
            installs: tokio::sync::watch::Sender::new(0),
            absent: ArcSwap::default(),
            segment_polls: Mutex::default(),
        }
    }

    /// The held copy of a ranking, if any.
    pub fn get(&self, key: RankingKey) -> Option<Arc<Held>> {
        if !key.is_versioned() {
            return None;
        }
        self.held.load().get(&key).cloned()
    }

    /// Entries held in all copies.
    pub fn entries(&self) -> usize {
        self.held.load().values().map(|h| h.ranking.len()).sum()
    }

    /// The rankings a replica keeps copies of at `now`: today's and yesterday's daily and
    /// weekly rankings, then the segment rankings published with them (whole rankings come
    /// first, so they are the last to be left out by the bound).
    pub fn wanted(&self, now: DateTime<Utc>) -> Vec<RankingKey> {
        let mut keys = self.wholes(now);
        let segments = self.segments.load();
        let restricted: Vec<RankingKey> = keys
            .iter()
            .flat_map(|whole| segments.get(whole).into_iter().flatten().filter_map(|s| whole.restricted(Some(*s))))
            .collect();
        keys.extend(restricted);
        keys
    }

    /// Whether `key` is one of [`Snapshots::wanted`], without listing them (a recompute
    /// installs and hears of thousands of segment rankings; each look costs two searches).
    fn is_wanted(&self, key: RankingKey, now: DateTime<Utc>) -> bool {
        let whole = key.whole();
        self.wholes(now).contains(&whole)
            && key
                .segment()
                .is_none_or(|s| self.segments.load().get(&whole).is_some_and(|k| k.binary_search(&s).is_ok()))
    }

    fn wholes(&self, now: DateTime<Utc>) -> Vec<RankingKey> {
        let today = self.policy.today(now);
        let mut keys = vec![RankingKey::Daily(today), RankingKey::Weekly(today)];
        keys.extend(today.pred_opt().into_iter().flat_map(|d| [RankingKey::Daily(d), RankingKey::Weekly(d)]));
        keys
    }

    /// Notes the segments published with `whole` (by this replica's recompute, or found by
    /// the poll), so that their rankings are wanted.
    pub fn know_segments(&self, whole: RankingKey, segments: &[Segment]) {
        if !self.wholes(self.policy.now()).contains(&whole) {
            return;
        }
        // Sorted, for `is_wanted`'s search.
        let mut segments = segments.to_vec();
        segments.sort_unstable();
        segments.dedup();
        self.segments.rcu(|known| {
            let mut known = HashMap::clone(known);
            known.insert(whole, segments.clone());
            known
        });
        self.forget_unwanted(self.policy.now());
    }

    /// Drops copies of rankings no longer wanted.
    fn forget_unwanted(&self, now: DateTime<Utc>) {
        let wanted = self.wanted(now);
        if self.held.load().keys().any(|k| !wanted.contains(k)) {
            self.held.rcu(|held| {
                let mut held = HashMap::clone(held);
                held.retain(|k, _| wanted.contains(k));
                held
            });
            self.oversize.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| wanted.contains(k));
        }
    }

    /// Entries a copy of `key` may have beside the copies of other rankings.
    fn room(&self, key: RankingKey) -> u64 {
        let others: usize = self.held.load().iter().filter(|(k, _)| **k != key).map(|(_, h)| h.ranking.len()).sum();
        self.max_entries.saturating_sub(others) as u64
    }

    /// Reads one version whole, in chunks, unless it has more than `max` entries.
    async fn read_version(&self, key: RankingKey, version: u64, max: u64) -> Result<Read, StoreError> {
        let Some(first) = self.rankings.version_chunk(key, version, 0, LOAD_CHUNK).await? else {
            return Ok(Read::Gone);
        };
        if first.total > max {
            return Ok(Read::TooLarge(first.total));
        }
        let total = first.total as usize;
        let mut entries = Vec::with_capacity(total);
        entries.extend(first.entries);
        while entries.len() < total {
            let Some(page) = self.rankings.version_chunk(key, version, entries.len() as u64, LOAD_CHUNK).await? else {
                return Ok(Read::Gone);
            };
            if page.entries.is_empty() {
                break;
            }
            entries.extend(page.entries);
        }
        if entries.len() != total {
            return Err(StoreError::Corrupt(format!(
                "version {version} of {key:?} changed while loading ({} of {total} entries)",
                entries.len()
            )));
        }
        Ok(Read::Entries(entries))
    }

    /// Records that `version` of `key` is not held because it is too large: the older copy
    /// goes too, so reads fall through to the store rather than serve a superseded version.
    fn oversize(&self, key: RankingKey, version: u64, len: u64) {
        self.note_oversize(key, version, len);
        self.held.rcu(|held| {
            let mut held = HashMap::clone(held);
            held.remove(&key);
            held
        });
        self.report(self.policy.now());
    }

    /// Records (and reports once) that `version` of `key` is too large to hold.
    fn note_oversize(&self, key: RankingKey, version: u64, len: u64) {
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

    /// Swaps a copy in unless a newer one is held already.
    fn swap_in(&self, key: RankingKey, copy: Held) {
        let copy = Arc::new(copy);
        let version = copy.version;
        self.held.rcu(|held| {
            let mut held = HashMap::clone(held);
            if held.get(&key).is_none_or(|h| h.version < version) {
                held.insert(key, copy.clone());
            }
            held
        });
        self.metrics.snapshot_loads.inc();
        self.installs.send_modify(|n| *n += 1);
        self.report(self.policy.now());
    }

    /// Changes whenever a copy is installed.
    pub fn installed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.installs.subscribe()
    }

    /// Installs a version a recompute of this replica just published, from its entries in
    /// ranking order, when the ranking is one this replica keeps.
    pub async fn install(&self, key: RankingKey, version: u64, entries: Vec<Scored>) {
        self.present(key);
        if !self.is_wanted(key, self.policy.now()) {
            return;
        }
        let _one = self.installing.lock().await;
        if self.get(key).is_some_and(|h| h.version >= version) {
            return;
        }
        if entries.len() as u64 > self.room(key) {
            return self.oversize(key, version, entries.len() as u64);
        }
        match self.held_as(key, entries) {
            Ok(ranking) => self.swap_in(key, Held { version, ranking: Arc::new(ranking) }),
            Err(e) => tracing::error!(?key, version, error = %e, "published ranking cannot be held"),
        }
    }

    /// Installs a copy a recompute of this replica already made of a version it just
    /// published (a whole ranking, or a segment's as positions in that copy).
    pub async fn install_copy(&self, key: RankingKey, version: u64, ranking: Arc<Snapshot>) {
        self.install_copies(vec![(key, version, ranking)]).await;
    }

    /// [`Snapshots::install_copy`] of many rankings at once (a recompute's segment
    /// rankings): one swap of the held copies for all of them, in the order given as far as
    /// the bound allows.
    pub async fn install_copies(&self, copies: Vec<(RankingKey, u64, Arc<Snapshot>)>) {
        let now = self.policy.now();
        for (key, ..) in &copies {
            self.present(*key);
        }
        let _one = self.installing.lock().await;
        let held = self.held.load_full();
        let copies: Vec<_> = copies
            .into_iter()
            .filter(|(key, version, _)| self.is_wanted(*key, now) && held.get(key).is_none_or(|h| h.version < *version))
            .collect();
        let replaced: std::collections::HashSet<RankingKey> = copies.iter().map(|(k, ..)| *k).collect();
        let mut used: usize = held.iter().filter(|(k, _)| !replaced.contains(k)).map(|(_, h)| h.ranking.len()).sum();
        let mut swaps = Vec::with_capacity(copies.len());
        for (key, version, ranking) in copies {
            if used + ranking.len() > self.max_entries {
                // Too large beside the others: the older copy goes too (see `oversize`).
                self.note_oversize(key, version, ranking.len() as u64);
                swaps.push((key, None));
            } else {
                used += ranking.len();
                swaps.push((key, Some(Arc::new(Held { version, ranking }))));
            }
        }
        if swaps.is_empty() {
            return;
        }
        let installed = swaps.iter().filter(|(_, copy)| copy.is_some()).count();
        self.held.rcu(|held| {
            let mut held = HashMap::clone(held);
            for (key, copy) in &swaps {
                match copy {
                    Some(copy) if held.get(key).is_none_or(|h| h.version < copy.version) => {
                        held.insert(*key, copy.clone());
                    }
                    Some(_) => {}
                    None => {
                        held.remove(key);
                    }
                }
            }
            held
        });
        self.metrics.snapshot_loads.inc_by(installed as u64);
        self.installs.send_modify(|n| *n += 1);
        self.report(now);
    }

    /// The copy of `entries` (in ranking order) of `key`: a segment ranking whose entries are
    /// those of the held copy of its whole ranking (same products, scores and order, as a
    /// recompute publishes them) is held as positions in that copy, 4 bytes an entry; any
    /// other ranking, or a segment of another version than the held whole one, on its own.
    fn held_as(&self, key: RankingKey, entries: Vec<Scored>) -> Result<Snapshot, SnapshotError> {
        if key.segment().is_some()
            && let Some(whole) = self.get(key.whole())
            && let Some(within) = Snapshot::within(&whole.ranking, &entries)
        {
            return Ok(within);
        }
        Snapshot::from_ranked(entries)
    }

    /// Loads `version` of `key` from the store unless it or a newer one is held.
    pub async fn load(&self, key: RankingKey, version: u64) -> Result<(), StoreError> {
        let _one = self.installing.lock().await;
        if self.get(key).is_some_and(|h| h.version >= version)
            || self.oversize.lock().unwrap_or_else(|e| e.into_inner()).get(&key) == Some(&version)
        {
            return Ok(());
        }
        let entries = match self.read_version(key, version, self.room(key)).await? {
            // Superseded and dropped already: its successor is loaded next.
            Read::Gone => return Ok(()),
            Read::TooLarge(total) => {
                self.oversize(key, version, total);
                return Ok(());
            }
            Read::Entries(entries) => entries,
        };
        let total = entries.len();
        let ranking = self.held_as(key, entries).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        tracing::debug!(?key, version, entries = total, "loaded ranking snapshot");
        self.swap_in(key, Held { version, ranking: Arc::new(ranking) });
        Ok(())
    }

    /// The whole current version of a ranking: the held copy, else a copy read from the
    /// store for this one caller (at most `RANKING_SNAPSHOT_MAX_ENTRIES` entries, and at most
    /// [`PASSING_COPIES`] such copies being read at once; an hourly ranking, which changes
    /// while it is read, is taken as read). `None` when the store has no such ranking.
    pub async fn whole(&self, key: RankingKey) -> Result<Option<Arc<Held>>, StoreError> {
        match self.get(key) {
            Some(held) => Ok(Some(held)),
            None => self.copy(key, false).await,
        }
    }

    /// Like [`Snapshots::whole`], but always the version the store holds as current now: the
    /// held copy only when it is that version (a replica may not have loaded a newer one yet).
    pub async fn current(&self, key: RankingKey) -> Result<Option<Arc<Held>>, StoreError> {
        self.copy(key, true).await
    }

    async fn copy(&self, key: RankingKey, current: bool) -> Result<Option<Arc<Held>>, StoreError> {
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
            StoreError::Corrupt(format!(
                "{key:?} has {total} entries, more than RANKING_SNAPSHOT_MAX_ENTRIES ({}) allows to scan",
                self.max_entries
            ))
        };
        let mut entries: Vec<Scored> = Vec::new();
        let version = if let Some(version) = stored {
            entries = match self.read_version(key, version, self.max_entries as u64).await? {
                Read::Gone => return Ok(None),
                Read::TooLarge(total) => return Err(too_large(total)),
                Read::Entries(entries) => entries,
            };
            version
        } else {
            loop {
                let page = self.rankings.top(key, entries.len() as u64, LOAD_CHUNK).await?;
                if page.total > self.max_entries as u64 {
                    return Err(too_large(page.total));
                }
                let done = page.entries.len() < LOAD_CHUNK as usize;
                entries.extend(page.entries);
                if done {
                    break;
                }
            }
            // Increments between pages may repeat a product or break the order a little.
            let mut seen = std::collections::HashSet::with_capacity(entries.len());
            entries.retain(|e| seen.insert(e.product_id));
            0
        };
        let ranking = match key.is_versioned() {
            true => Snapshot::from_ranked(entries),
            false => Snapshot::from_unordered(entries),
        }
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Some(Arc::new(Held { version, ranking: Arc::new(ranking) })))
    }

    /// Drops copies of rankings no longer wanted, then loads every wanted ranking whose
    /// current version is newer than its copy.
    ///
    /// Segment rankings change only with their whole ranking (a recompute or a withdrawal
    /// publishes the whole one first), so their versions are polled while the whole one's
    /// version moved within [`SEGMENT_POLL_AFTER_CHANGE`], and otherwise once per
    /// [`SEGMENT_POLL_EVERY`]: thousands of segments do not cost thousands of reads a poll.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let now = self.policy.now();
        let wholes = self.wholes(now);
        let whole_versions = self.rankings.versions(&wholes).await?;
        let due: Vec<RankingKey> = {
            let mut polls = self.segment_polls.lock().unwrap_or_else(|e| e.into_inner());
            polls.retain(|k, _| wholes.contains(k));
            let at = Instant::now();
            wholes
                .iter()
                .zip(&whole_versions)
                .filter(|(whole, version)| {
                    let poll = polls.entry(**whole).or_insert(SegmentPoll { seen: None, changed: at, polled: None });
                    if poll.seen != **version {
                        *poll = SegmentPoll { seen: **version, changed: at, polled: poll.polled };
                    }
                    let due = at.duration_since(poll.changed) <= SEGMENT_POLL_AFTER_CHANGE
                        || poll.polled.is_none_or(|p| at.duration_since(p) >= SEGMENT_POLL_EVERY);
                    if due {
                        poll.polled = Some(at);
                    }
                    due
                })
                .map(|(whole, _)| *whole)
                .collect()
        };
        let mut known = HashMap::clone(&self.segments.load());
        known.retain(|k, _| wholes.contains(k));
        for whole in &due {
            known.insert(*whole, self.rankings.published_segments(*whole).await?);
        }
        self.segments.store(Arc::new(known));
        self.forget_unwanted(now);
        self.report(now);

        let segment_keys: Vec<RankingKey> = {
            let known = self.segments.load();
            due.iter()
                .flat_map(|whole| known.get(whole).into_iter().flatten().filter_map(|s| whole.restricted(Some(*s))))
                .collect()
        };
        let mut keys = wholes;
        let mut versions = whole_versions;
        if !segment_keys.is_empty() {
            versions.extend(self.rankings.versions(&segment_keys).await?);
        }
        keys.extend(segment_keys);
        let wanted = self.wanted(now);
        self.absent.rcu(|absent| {
            let mut absent: std::collections::HashSet<RankingKey> =
                absent.iter().filter(|k| wanted.contains(k) && !keys.contains(k)).copied().collect();
            absent.extend(keys.iter().zip(&versions).filter(|(_, v)| v.is_none()).map(|(k, _)| *k));
            absent
        });
        for (key, version) in keys.into_iter().zip(versions) {
            if let Some(version) = version {
                self.load(key, version).await?;
            }
        }
        Ok(())
    }

    /// Whether the store had no version of this wanted ranking at the last poll (and none
    /// was announced since).
    pub fn absent(&self, key: RankingKey) -> bool {
        self.absent.load().contains(&key)
    }

    fn present(&self, key: RankingKey) {
        if self.absent(key) {
            self.absent.rcu(|absent| {
                let mut absent = std::collections::HashSet::clone(absent);
                absent.remove(&key);
                absent
            });
        }
    }

    /// Exports the version of today's copy.
    fn report(&self, now: DateTime<Utc>) {
        let today = self.policy.today(now);
        self.metrics.snapshot_serving("daily", self.get(RankingKey::Daily(today)).map(|h| h.version));
        self.metrics.snapshot_serving("weekly", self.get(RankingKey::Weekly(today)).map(|h| h.version));
    }

    async fn announced(&self, a: Announcement) -> Result<(), StoreError> {
        self.present(a.key);
        // This replica's own publications come back announced: held already.
        if self.get(a.key).is_some_and(|h| h.version >= a.version) {
            return Ok(());
        }
        let now = self.policy.now();
        // A segment first published now is not known yet: its whole ranking says it is wanted.
        let wanted =
            self.is_wanted(a.key, now) || (a.key.segment().is_some() && self.wholes(now).contains(&a.key.whole()));
        if wanted { self.load(a.key, a.version).await } else { Ok(()) }
    }

    /// Keeps the copies current until `stop`: loads announced versions at once, polls the
    /// current versions every [`Policy::snapshot_poll`], subscribes again after the
    /// subscription is lost.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut subscription: Option<Announcements> = None;
        let mut subscribe_at = Instant::now();
        let mut poll = tokio::time::interval(self.policy.snapshot_poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            if subscription.is_none() && Instant::now() >= subscribe_at {
                tokio::select! {
                    () = stop.cancelled() => return,
                    s = self.rankings.announcements() => match s {
                        Ok(s) => subscription = Some(s),
                        Err(e) => {
                            tracing::debug!(error = %e, "cannot subscribe to ranking versions; polling");
                            subscribe_at = Instant::now() + RESUBSCRIBE_AFTER;
                        }
                    },
                }
            }
            let result = tokio::select! {
                () = stop.cancelled() => return,
                _ = poll.tick() => tokio::select! {
                    () = stop.cancelled() => return,
                    r = self.refresh() => r,
                },
                a = next(&mut subscription) => match a {
                    Some(a) => tokio::select! {
                        () = stop.cancelled() => return,
                        r = self.announced(a) => r,
                    },
                    None => {
                        tracing::debug!("ranking version subscription ended; polling until it is back");
                        subscription = None;
                        subscribe_at = Instant::now() + RESUBSCRIBE_AFTER;
                        Ok(())
                    }
                },
            };
            match result {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("ranking snapshots are current again");
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "cannot refresh ranking snapshots; serving the versions held");
                }
                _ => {}
            }
        }
    }
}

/// The next announcement, or never when there is no subscription.
async fn next(subscription: &mut Option<Announcements>) -> Option<Announcement> {
    match subscription {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::MemoryRankingStore;
    use crate::domain::calendar::RankingCalendar;
    use crate::domain::score::Weights;
    use crate::ports::VersionLife;

    fn snapshots(max_entries: usize) -> (Arc<Snapshots>, Arc<MemoryRankingStore>) {
        let store = Arc::new(MemoryRankingStore::new());
        let policy =
            Arc::new(Policy::new(RankingCalendar::new(chrono_tz::UTC), Weights::default(), 7, 8, 7, Duration::ZERO));
        let metrics = Arc::new(Metrics::new());
        (Arc::new(Snapshots::new(store.clone(), policy, metrics, max_entries)), store)
    }

    /// `n` entries in ranking order.
    fn ranking(n: i64) -> Vec<Scored> {
        let mut entries: Vec<Scored> = (1..=n).map(|p| Scored { product_id: p, score: (p % 7) as f64 }).collect();
        entries.sort_by(crate::domain::snapshot::ranking_order);
        entries
    }

    fn life() -> VersionLife {
        VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: Duration::from_secs(60) }
    }

    #[tokio::test]
    async fn a_poll_loads_newer_versions_in_chunks_and_equals_the_store() {
        let (snapshots, store) = snapshots(1_000_000);
        let today = RankingKey::Daily(Utc::now().date_naive());
        let n = LOAD_CHUNK as i64 * 2 + 17;
        let v = store.publish(today, &ranking(n), life()).await.expect("publish");
        snapshots.refresh().await.expect("refresh");
        let held = snapshots.get(today).expect("held");
        assert_eq!(held.version, v);
        let page = store.top(today, 0, u64::MAX).await.expect("top");
        assert_eq!(held.ranking.page(0, u64::MAX), &page.entries[..]);
        let old = RankingKey::Daily(Utc::now().date_naive() - chrono::Duration::days(3));
        store.publish(old, &ranking(3), life()).await.expect("publish");
        snapshots.refresh().await.expect("refresh");
        assert!(snapshots.get(old).is_none(), "only today and yesterday are held");
    }

    #[tokio::test]
    async fn the_bound_counts_every_copy_and_a_version_too_large_is_read_from_the_store() {
        let (snapshots, store) = snapshots(100);
        let today = RankingKey::Daily(Utc::now().date_naive());
        let yesterday = RankingKey::Daily(Utc::now().date_naive() - chrono::Duration::days(1));
        store.publish(yesterday, &ranking(60), life()).await.expect("publish");
        let v1 = store.publish(today, &ranking(40), life()).await.expect("publish");
        snapshots.refresh().await.expect("refresh");
        assert_eq!(snapshots.get(today).map(|h| h.version), Some(v1));
        assert_eq!(snapshots.entries(), 100);
        let v2 = store.publish(today, &ranking(41), life()).await.expect("publish");
        snapshots.install(today, v2, ranking(41)).await;
        assert!(snapshots.get(today).is_none(), "over the bound: no stale copy either");
        assert!(snapshots.entries() <= 100);
        assert_eq!(snapshots.metrics.snapshot_oversize.get(), 1);
        snapshots.refresh().await.expect("refresh");
        assert_eq!(snapshots.metrics.snapshot_oversize.get(), 1, "not fetched again");
    }

    #[tokio::test]
    async fn a_segment_of_the_held_whole_version_is_held_as_positions_in_it() {
        let (snapshots, _) = snapshots(1_000);
        let date = Utc::now().date_naive();
        let today = RankingKey::Daily(date);
        let segment = crate::domain::catalog::Segment::parse("brand:acme").expect("segment");
        let key = RankingKey::DailySegment(date, segment);
        snapshots.know_segments(today, &[segment]);
        let whole = ranking(30);
        snapshots.install(today, 7, whole.clone()).await;
        let members: Vec<Scored> = whole.iter().step_by(3).copied().collect();
        snapshots.install(key, 8, members.clone()).await;
        let held = snapshots.get(key).expect("held");
        assert_eq!(held.ranking.page(0, u64::MAX), &members[..]);
        assert_eq!(held.ranking.heap_bytes(), 4 * members.len(), "positions in the whole copy");
        // Scores of another version: held on its own.
        let other: Vec<Scored> = members.iter().map(|e| Scored { score: e.score + 0.5, ..*e }).collect();
        snapshots.install(key, 9, other.clone()).await;
        let held = snapshots.get(key).expect("held");
        assert_eq!(held.ranking.page(0, u64::MAX), &other[..]);
        assert!(held.ranking.heap_bytes() >= 16 * other.len());
    }

    #[tokio::test]
    async fn install_keeps_the_newest_version() {
        let (snapshots, _) = snapshots(1_000);
        let today = RankingKey::Daily(Utc::now().date_naive());
        snapshots.install(today, 5, ranking(3)).await;
        snapshots.install(today, 4, ranking(9)).await;
        let held = snapshots.get(today).expect("held");
        assert_eq!((held.version, held.ranking.len()), (5, 3));
    }

    #[tokio::test]
    async fn copies_installed_together_follow_the_rules_of_one_at_a_time() {
        let (snapshots, _) = snapshots(100);
        let date = Utc::now().date_naive();
        let today = RankingKey::Daily(date);
        let segment = |name: &str| crate::domain::catalog::Segment::parse(name).expect("segment");
        let (a, b, c, unknown) = (segment("a"), segment("b"), segment("c"), segment("unknown"));
        snapshots.know_segments(today, &[c, a, b]);
        let whole = Arc::new(Snapshot::from_ranked(ranking(40)).expect("valid"));
        snapshots.install_copy(today, 7, whole.clone()).await;
        let at = |positions: Vec<u32>| Arc::new(Snapshot::at_positions(&whole, positions).expect("ascending"));
        let key = |s| RankingKey::DailySegment(date, s);
        snapshots.install_copy(key(b), 9, at(vec![1, 2])).await;
        snapshots
            .install_copies(vec![
                (key(a), 7, at((0..30).collect())),
                // Older than the held copy: kept as it is.
                (key(b), 8, at(vec![5])),
                // Beside the others, over the bound of 100: not held, nor is an older copy.
                (key(c), 7, at((0..31).collect())),
                // Not a known segment of a held day: not wanted.
                (key(unknown), 7, at(vec![0])),
            ])
            .await;
        assert_eq!(snapshots.get(key(a)).map(|h| (h.version, h.ranking.len())), Some((7, 30)));
        assert_eq!(snapshots.get(key(b)).map(|h| (h.version, h.ranking.len())), Some((9, 2)));
        assert!(snapshots.get(key(c)).is_none());
        assert!(snapshots.get(key(unknown)).is_none());
        assert_eq!(snapshots.metrics.snapshot_oversize.get(), 1);
        assert_eq!(snapshots.entries(), 40 + 30 + 2);
        assert!(
            snapshots.is_wanted(key(c), snapshots.policy.now())
                && !snapshots.is_wanted(key(unknown), snapshots.policy.now())
        );
    }
}
