//! The embedded in-process ranking store: the Redis key semantics (atomic replace, rank,
//! range, increment, expiry) on ordered sets in memory, so `make run` needs no external
//! service. Rankings live as long as the process, like a Redis that is flushed on restart;
//! the start-up recompute fills them again from SQL.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use crate::ports::{HourlyIncrement, Lease, LeaseLock, Page, Placement, RankingKey, RankingStore, Scored, StoreError};

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
    fn from_entries(entries: &[Scored], expire_at: DateTime<Utc>) -> Self {
        let mut set = Self { expire_at: Some(expire_at), ..Self::default() };
        for e in entries {
            set.insert(e.product_id, e.score);
        }
        set
    }

    fn insert(&mut self, product_id: i64, score: f64) {
        if let Some(old) = self.by_member.insert(product_id, score) {
            self.by_rank.remove(&(OrderedScore(old), product_id));
        }
        self.by_rank.insert((OrderedScore(score), product_id));
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
        Page { entries, total: self.by_member.len() as u64 }
    }

    fn placement(&self, product_id: i64) -> Option<Placement> {
        let score = *self.by_member.get(&product_id)?;
        // Entries ranked above this one: greater (score, id) pairs. The range walk is
        // O(rank); the embedded store serves development-sized rankings.
        let above = self.by_rank.range((OrderedScore(score), product_id)..).count() as u64 - 1;
        Some(Placement { index: above, score })
    }
}

/// Rankings and leases held in this process.
#[derive(Debug, Default)]
pub struct MemoryRankingStore {
    sets: Mutex<HashMap<RankingKey, SortedSet>>,
    leases: Mutex<HashMap<String, (String, tokio::time::Instant)>>,
}

impl MemoryRankingStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` on the live sets after dropping expired ones.
    fn with_sets<T>(&self, f: impl FnOnce(&mut HashMap<RankingKey, SortedSet>) -> T) -> T {
        // A poisoned lock only means another call panicked mid-update of an in-memory
        // ranking that the next recompute rebuilds anyway; keep serving.
        let mut sets = self.sets.lock().unwrap_or_else(|p| p.into_inner());
        let now = Utc::now();
        sets.retain(|_, s| s.expire_at.is_none_or(|t| t > now));
        f(&mut sets)
    }
}

#[async_trait]
impl RankingStore for MemoryRankingStore {
    async fn replace_daily(
        &self,
        date: NaiveDate,
        entries: &[Scored],
        expire_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        // Built outside the lock, swapped in under it: readers see old or new, never a mix.
        // An empty ranking is kept as an empty set: the day was built, it has no products.
        let set = SortedSet::from_entries(entries, expire_at);
        self.with_sets(|sets| sets.insert(RankingKey::Daily(date), set));
        Ok(())
    }

    async fn increment_hourly(&self, increments: &[HourlyIncrement]) -> Result<(), StoreError> {
        self.with_sets(|sets| {
            for inc in increments {
                let set = sets.entry(RankingKey::Hourly(inc.hour)).or_default();
                let score = set.by_member.get(&inc.product_id).copied().unwrap_or(0.0) + inc.delta;
                set.insert(inc.product_id, score);
                set.expire_at = Some(inc.expire_at);
            }
        });
        Ok(())
    }

    async fn top(&self, key: RankingKey, offset: u64, limit: u64) -> Result<Page, StoreError> {
        Ok(self.with_sets(|sets| sets.get(&key).map(|s| s.page(offset, limit)).unwrap_or_default()))
    }

    async fn placement(&self, key: RankingKey, product_id: i64) -> Result<(Option<Placement>, u64), StoreError> {
        Ok(self.with_sets(|sets| match sets.get(&key) {
            Some(s) => (s.placement(product_id), s.by_member.len() as u64),
            None => (None, 0),
        }))
    }

    async fn exists(&self, key: RankingKey) -> Result<bool, StoreError> {
        Ok(self.with_sets(|sets| sets.contains_key(&key)))
    }
}

#[async_trait]
impl LeaseLock for MemoryRankingStore {
    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let now = tokio::time::Instant::now();
        if leases.get(name).is_some_and(|(_, until)| *until > now) {
            return Ok(None);
        }
        let token = format!("{:032x}", rand::random::<u128>());
        leases.insert(name.to_string(), (token.clone(), now + ttl));
        Ok(Some(Lease { name: name.to_string(), token }))
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        if leases.get(&lease.name).is_some_and(|(t, _)| *t == lease.token) {
            leases.remove(&lease.name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 4, 9).expect("valid")
    }

    fn later() -> DateTime<Utc> {
        Utc::now() + chrono::Duration::hours(1)
    }

    #[tokio::test]
    async fn equal_scores_order_by_descending_product_id() {
        let store = MemoryRankingStore::new();
        let entries: Vec<Scored> = [(999, 1.0), (1000, 1.0), (5, 2.0), (42, 1.0)]
            .into_iter()
            .map(|(product_id, score)| Scored { product_id, score })
            .collect();
        store.replace_daily(day(), &entries, later()).await.expect("replace");
        let page = store.top(RankingKey::Daily(day()), 0, 10).await.expect("top");
        let ids: Vec<_> = page.entries.iter().map(|e| e.product_id).collect();
        assert_eq!(ids, vec![5, 1000, 999, 42]);
        let (p, total) = store.placement(RankingKey::Daily(day()), 999).await.expect("rank");
        assert_eq!((p.map(|p| p.index), total), (Some(2), 4));
        let page = store.top(RankingKey::Daily(day()), 3, 10).await.expect("top");
        assert_eq!(page.entries.len(), 1);
    }

    #[tokio::test]
    async fn replace_drops_products_that_left_and_expired_keys_vanish() {
        let store = MemoryRankingStore::new();
        let one = [Scored { product_id: 1, score: 1.0 }];
        store.replace_daily(day(), &[one[0], Scored { product_id: 2, score: 2.0 }], later()).await.expect("replace");
        store.replace_daily(day(), &one, later()).await.expect("replace");
        assert_eq!(store.placement(RankingKey::Daily(day()), 2).await.expect("rank"), (None, 1));
        store.replace_daily(day(), &one, Utc::now() - chrono::Duration::seconds(1)).await.expect("replace");
        assert!(!store.exists(RankingKey::Daily(day())).await.expect("exists"));
    }

    #[tokio::test(start_paused = true)]
    async fn leases_exclude_until_released_or_expired() {
        let store = MemoryRankingStore::new();
        let lease = store.try_acquire("d", Duration::from_secs(60)).await.expect("ok").expect("free");
        assert!(store.try_acquire("d", Duration::from_secs(60)).await.expect("ok").is_none());
        store.release(&lease).await.expect("release");
        assert!(store.try_acquire("d", Duration::from_millis(1)).await.expect("ok").is_some());
        assert!(store.try_acquire("d", Duration::from_secs(1)).await.expect("ok").is_none(), "held for 1 ms");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(store.try_acquire("d", Duration::from_secs(1)).await.expect("ok").is_some(), "expired");
    }
}
