//! The embedded in-process ranking store: the Redis key semantics (versions published
//! whole, superseded versions kept for a while, rank, range, increment, expiry,
//! announcements) in memory, so `make run` needs no external service. Rankings live as long
//! as the process, like a Redis that is flushed on restart; the start-up recompute fills
//! them again from SQL. Versions are immutable [`Snapshot`]s, so a read shares them.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::domain::calendar::RankingHour;
use crate::domain::catalog::Segment;
use crate::domain::snapshot::Snapshot;
use crate::ports::{
    Announcement, Announcements, FeedCursor, Fence, Form, Found, HourlyIncrement, Page, Placements, Publishing,
    RankingKey, RankingStore, Scored, StoreError, VersionLife, VersionStats,
};

/// An ordered set with Redis ZSET ordering: by score, then by product id (`ZREVRANGE`
/// order is the reverse of both).
#[derive(Debug, Default, Clone)]
struct SortedSet {
    by_rank: BTreeSet<(OrderedScore, i64)>,
    by_member: HashMap<i64, f64>,
    expire_at: Option<DateTime<Utc>>,
}

/// `f64` with the total order Redis uses for scores (no NaN is ever stored).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrderedScore(f64);

impl Eq for OrderedScore {}
impl PartialOrd for OrderedScore {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedScore {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl SortedSet {
    fn insert(&mut self, product_id: i64, score: f64) {
        if let Some(old) = self.by_member.insert(product_id, score) {
            self.by_rank.remove(&(OrderedScore(old), product_id));
        }
        self.by_rank.insert((OrderedScore(score), product_id));
    }

    fn remove(&mut self, product_id: i64) {
        if let Some(old) = self.by_member.remove(&product_id) {
            self.by_rank.remove(&(OrderedScore(old), product_id));
        }
    }

    fn page(&self, offset: u64, limit: u64) -> Page {
        let entries = self
            .by_rank
            .iter()
            .rev()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(s, id)| Scored { product_id: *id, score: s.0 })
            .collect();
        Page { entries, total: self.by_member.len() as u64, version: None }
    }

    fn placement(&self, product_id: i64) -> Option<Found> {
        let score = *self.by_member.get(&product_id)?;
        // Entries ranked above this one: greater (score, id) pairs; with a strictly greater
        // score: pairs above (score, MAX). The range walks are O(rank); the embedded store
        // serves development-sized rankings.
        let index = self.by_rank.range((OrderedScore(score), product_id)..).count() as u64 - 1;
        let above =
            self.by_rank.range((Bound::Excluded((OrderedScore(score), i64::MAX)), Bound::Unbounded)).count() as u64;
        Some(Found { index, score, above })
    }
}

/// The versions of one versioned ranking.
#[derive(Debug)]
struct Versions {
    current: u64,
    ranking: Arc<Snapshot>,
    expire_at: DateTime<Utc>,
    /// Superseded versions still readable, and until when.
    superseded: Vec<(u64, Arc<Snapshot>, Instant)>,
    /// The statistics published with the current and superseded versions, by version.
    stats: HashMap<u64, VersionStats>,
}

/// Rankings and leases held in this process.
#[derive(Debug)]
pub struct MemoryRankingStore {
    hourly: Mutex<HashMap<RankingKey, SortedSet>>,
    versioned: Mutex<HashMap<RankingKey, Versions>>,
    last_version: Mutex<u64>,
    announce: broadcast::Sender<Announcement>,
    /// Shared with the stores of the other scoring profiles' boards ([`Self::sharing_leases`]).
    leases: Arc<Mutex<HashMap<String, (String, tokio::time::Instant)>>>,
    /// The segments published with each daily and weekly ranking.
    segments: Mutex<HashMap<RankingKey, Vec<Segment>>>,
    /// The feed's cursor of each board, and until when it is kept.
    feed: Mutex<HashMap<RankingKey, (FeedCursor, DateTime<Utc>)>>,
}

impl Default for MemoryRankingStore {
    fn default() -> Self {
        Self {
            hourly: Mutex::default(),
            versioned: Mutex::default(),
            last_version: Mutex::default(),
            announce: broadcast::channel(64).0,
            leases: Arc::default(),
            segments: Mutex::default(),
            feed: Mutex::default(),
        }
    }
}

/// A poisoned lock only means another call panicked mid-update of an in-memory ranking that
/// the next recompute rebuilds anyway; keep serving.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl MemoryRankingStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose leases are this one's: a scoring profile's boards, changed
    /// under the service profile's day leases.
    pub fn sharing_leases(&self) -> Self {
        Self { leases: Arc::clone(&self.leases), ..Self::default() }
    }

    /// Runs `f` on the live hourly sets after dropping expired ones.
    fn with_hourly<T>(&self, f: impl FnOnce(&mut HashMap<RankingKey, SortedSet>) -> T) -> T {
        let mut sets = lock(&self.hourly);
        let now = Utc::now();
        sets.retain(|_, s| s.expire_at.is_none_or(|t| t > now));
        f(&mut sets)
    }

    /// Runs `f` on the live versioned rankings after dropping expired ones and superseded
    /// versions past their time.
    fn with_versioned<T>(&self, f: impl FnOnce(&mut HashMap<RankingKey, Versions>) -> T) -> T {
        let mut rankings = lock(&self.versioned);
        let (now, instant) = (Utc::now(), Instant::now());
        rankings.retain(|_, v| v.expire_at > now);
        for v in rankings.values_mut() {
            v.superseded.retain(|(_, _, until)| *until > instant);
            let (current, superseded) = (v.current, &v.superseded);
            v.stats.retain(|n, _| *n == current || superseded.iter().any(|(s, _, _)| s == n));
        }
        f(&mut rankings)
    }

    /// [`Self::install`] if `fence`'s lease is held, the lease map locked throughout: a
    /// lease taken by another holder meanwhile waits for the install, or refuses it.
    fn install_fenced(
        &self,
        key: RankingKey,
        ranking: Arc<Snapshot>,
        stats: Option<&VersionStats>,
        life: VersionLife,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        let Some(lease) = fence.lease() else { return self.install(key, ranking, stats, life) };
        let leases = lock(&self.leases);
        let now = tokio::time::Instant::now();
        match leases.get(&lease.name) {
            Some((token, until)) if *token == lease.token && *until > now => self.install(key, ranking, stats, life),
            held => {
                let detail = match held {
                    Some((_, until)) if *until > now => {
                        format!("another holder has it for another {} ms", (*until - now).as_millis())
                    }
                    _ => "it expired and nobody holds it".to_string(),
                };
                Err(StoreError::LostLease { lease: lease.name.clone(), detail })
            }
        }
    }

    /// Makes `ranking` the current version of `key` (a versioned ranking), keeping the
    /// superseded one as [`VersionLife`] says, and announces it.
    fn install(
        &self,
        key: RankingKey,
        ranking: Arc<Snapshot>,
        stats: Option<&VersionStats>,
        life: VersionLife,
    ) -> Result<u64, StoreError> {
        if !key.is_versioned() {
            return Err(StoreError::Corrupt(format!("{key:?} has no versions")));
        }
        let version = self.next_version();
        self.with_versioned(|rankings| {
            let mut kept_stats = HashMap::new();
            let superseded = match rankings.remove(&key) {
                Some(mut old) => {
                    kept_stats = std::mem::take(&mut old.stats);
                    let now = Instant::now();
                    let longest = old.superseded.iter().map(|(_, _, until)| until.saturating_duration_since(now)).max();
                    let keep = life.superseded_life(longest);
                    if !keep.is_zero() {
                        old.superseded.push((old.current, old.ranking, now + keep));
                    }
                    old.superseded
                }
                None => Vec::new(),
            };
            kept_stats.retain(|n, _| superseded.iter().any(|(s, _, _)| s == n));
            kept_stats.extend(stats.map(|s| (version, s.clone())));
            let expire_at = life.expire_at;
            rankings.insert(key, Versions { current: version, ranking, expire_at, superseded, stats: kept_stats });
        });
        // Nobody listening is fine: replicas poll.
        let _ = self.announce.send(Announcement { key, version });
        Ok(version)
    }

    /// The next version number: milliseconds since the epoch, or one more than the last.
    fn next_version(&self) -> u64 {
        let mut last = lock(&self.last_version);
        let now = u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0);
        *last = now.max(*last + 1);
        *last
    }
}

fn page_of(ranking: &Snapshot, version: u64, offset: u64, limit: u64) -> Page {
    Page { entries: ranking.page(offset, limit).to_vec(), total: ranking.len() as u64, version: Some(version) }
}

#[async_trait]
impl RankingStore for MemoryRankingStore {
    async fn publish(
        &self,
        key: RankingKey,
        entries: &[Scored],
        life: VersionLife,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        // Built outside the lock, swapped in under it: readers see old or new, never a mix.
        let ranking =
            Arc::new(Snapshot::from_unordered(entries.to_vec()).map_err(|e| StoreError::Corrupt(e.to_string()))?);
        self.install_fenced(key, ranking, None, life, fence)
    }

    async fn publish_copy(
        &self,
        key: RankingKey,
        publishing: Publishing<'_>,
        life: VersionLife,
        _: Form,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        // Immutable: the replica's copy is the store's version, shared (whatever changed,
        // a publication costs a pointer).
        self.install_fenced(key, Arc::clone(publishing.copy), publishing.stats, life, fence)
    }

    async fn version_stats(&self, key: RankingKey, version: u64) -> Result<Option<VersionStats>, StoreError> {
        Ok(self.with_versioned(|rankings| rankings.get(&key)?.stats.get(&version).cloned()))
    }

    async fn versions(&self, keys: &[RankingKey]) -> Result<Vec<Option<u64>>, StoreError> {
        Ok(self.with_versioned(|rankings| keys.iter().map(|k| rankings.get(k).map(|v| v.current)).collect()))
    }

    async fn version_page(
        &self,
        key: RankingKey,
        version: u64,
        offset: u64,
        limit: u64,
    ) -> Result<Option<Page>, StoreError> {
        Ok(self.with_versioned(|rankings| {
            let v = rankings.get(&key)?;
            if v.current == version {
                return Some(page_of(&v.ranking, version, offset, limit));
            }
            let (_, ranking, _) = v.superseded.iter().find(|(n, _, _)| *n == version)?;
            Some(page_of(ranking, version, offset, limit))
        }))
    }

    async fn version_served(
        &self,
        key: RankingKey,
        version: u64,
    ) -> Result<Option<crate::ports::ServedParts>, StoreError> {
        Ok(self.with_versioned(|rankings| {
            let v = rankings.get(&key)?;
            if v.current == version {
                return v.ranking.served_parts();
            }
            let (_, ranking, _) = v.superseded.iter().find(|(n, _, _)| *n == version)?;
            ranking.served_parts()
        }))
    }

    async fn increment_hourly(&self, increments: &[HourlyIncrement]) -> Result<(), StoreError> {
        self.with_hourly(|sets| {
            for inc in increments {
                let set = sets.entry(RankingKey::Hourly(inc.hour)).or_default();
                let score = set.by_member.get(&inc.product_id).copied().unwrap_or(0.0) + inc.delta;
                set.insert(inc.product_id, score);
                set.expire_at = Some(inc.expire_at);
            }
        });
        Ok(())
    }

    async fn published_segments(&self, whole: RankingKey) -> Result<Vec<Segment>, StoreError> {
        Ok(lock(&self.segments).get(&whole).cloned().unwrap_or_default())
    }

    async fn record_segments(
        &self,
        whole: RankingKey,
        segments: &[Segment],
        _: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut sorted = segments.to_vec();
        sorted.sort_unstable();
        lock(&self.segments).insert(whole, sorted);
        Ok(())
    }

    async fn withdraw_hourly(&self, hours: &[RankingHour], ids: &[i64]) -> Result<(), StoreError> {
        self.with_hourly(|sets| {
            for hour in hours {
                if let Some(set) = sets.get_mut(&RankingKey::Hourly(*hour)) {
                    ids.iter().for_each(|id| set.remove(*id));
                }
            }
        });
        Ok(())
    }

    async fn top(&self, key: RankingKey, offset: u64, limit: u64) -> Result<Page, StoreError> {
        if key.is_versioned() {
            return Ok(self.with_versioned(|rankings| {
                rankings.get(&key).map(|v| page_of(&v.ranking, v.current, offset, limit)).unwrap_or_default()
            }));
        }
        Ok(self.with_hourly(|sets| sets.get(&key).map(|s| s.page(offset, limit)).unwrap_or_default()))
    }

    async fn placements(
        &self,
        key: RankingKey,
        version: Option<u64>,
        product_ids: &[i64],
    ) -> Result<Placements, StoreError> {
        if key.is_versioned() {
            return Ok(self.with_versioned(|rankings| {
                let absent = Placements { found: vec![None; product_ids.len()], total: 0, version: None };
                let Some(v) = rankings.get(&key) else { return absent };
                let (version, ranking) = match version {
                    None => (v.current, &v.ranking),
                    Some(n) if n == v.current => (n, &v.ranking),
                    Some(n) => match v.superseded.iter().find(|(s, _, _)| *s == n) {
                        Some((_, ranking, _)) => (n, ranking),
                        None => return absent,
                    },
                };
                Placements::in_snapshot(ranking, version, product_ids)
            }));
        }
        Ok(self.with_hourly(|sets| match sets.get(&key) {
            Some(s) => Placements {
                found: product_ids.iter().map(|id| s.placement(*id)).collect(),
                total: s.by_member.len() as u64,
                version: None,
            },
            None => Placements { found: vec![None; product_ids.len()], total: 0, version: None },
        }))
    }

    async fn announcements(&self) -> Result<Announcements, StoreError> {
        let receiver = self.announce.subscribe();
        Ok(Box::pin(futures_util::stream::unfold(receiver, |mut receiver| async move {
            loop {
                match receiver.recv().await {
                    Ok(a) => return Some((a, receiver)),
                    // Missed announcements are found by the poll.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })))
    }
}

mod feed;
mod lease;
#[cfg(test)]
mod tests;
