//! Read coalescing in front of a ranking store: concurrent requests for the same page of the
//! same ranking share one store round trip.
//!
//! "Today's top 20" is the hot read of the service: hundreds of callers ask for the very same
//! page at once, and each answer costs a Redis round trip plus parsing 40 RESP values. Here
//! callers that ask for a page while a fetch of it is under way wait for the *next* fetch and
//! share it, so the store sees at most one fetch in progress and one queued per page.
//!
//! Joining the next fetch rather than the one in progress keeps reads exact: every caller's
//! answer comes from a fetch sent after the caller arrived, so an event recorded (and its
//! hourly increment applied) before a read started is always visible to that read, as with
//! no coalescing. Only `top` is coalesced; `placements` reads are spread over many products
//! and gain little, and writes pass through unchanged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::domain::calendar::RankingHour;
use crate::domain::catalog::Segment;
use crate::domain::snapshot::Snapshot;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared, WeakShared};
use prometheus_client::metrics::counter::Counter;

use crate::ports::{
    Announcements, Fence, Form, HourlyIncrement, Page, Placements, Publishing, RankingKey, RankingStore, Scored,
    ServedParts, StoreError, VersionCopy, VersionLife, VersionStats,
};

/// Which page: ranking, offset, limit.
type PageKey = (RankingKey, u64, u64);

/// A fetch of a page from the inner store.
type FetchFuture = BoxFuture<'static, Result<Page, StoreError>>;
/// One shared fetch of a page; every caller that joined it gets a clone of the answer.
type Fetch = Shared<FetchFuture>;

/// The fetches of one page: the one under way and the one queued behind it. The slots
/// hold them weakly: a fetch lives only as long as a caller waits for it, so callers that
/// give up (deadline, disconnect) take their fetch with them while the store is slow.
#[derive(Default)]
struct Slot {
    running: Option<(u64, WeakShared<FetchFuture>)>,
    queued: Option<(u64, WeakShared<FetchFuture>)>,
}

type Slots = Arc<Mutex<HashMap<PageKey, Slot>>>;

/// A [`RankingStore`] that coalesces concurrent `top` reads of the same page.
pub struct CoalescingStore<S> {
    inner: Arc<S>,
    slots: Slots,
    next_id: AtomicU64,
    fetches: Counter,
}

impl<S: RankingStore> CoalescingStore<S> {
    /// Wraps `inner`, counting the fetches that reach it in `fetches`.
    pub fn new(inner: Arc<S>, fetches: Counter) -> Self {
        Self { inner, slots: Arc::default(), next_id: AtomicU64::new(0), fetches }
    }

    /// Pages with a fetch under way or queued (for tests of the cleanup).
    pub fn pages_in_progress(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The fetch this caller gets its answer from: the queued one when there is one (it has
    /// not been sent yet), else a new one, queued behind the fetch under way if any.
    fn join(&self, page: PageKey) -> Fetch {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slots.entry(page).or_default();
        if let Some(queued) = slot.queued.as_ref().and_then(|(_, f)| f.upgrade()) {
            return queued;
        }
        let ahead = slot.running.as_ref().and_then(|(_, f)| f.upgrade());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.fetches.inc();
        let guard = SlotGuard { slots: self.slots.clone(), page, id };
        let queued = ahead.is_some();
        let fetch = fetch(self.inner.clone(), self.slots.clone(), page, id, ahead, guard).boxed().shared();
        let weak = fetch.downgrade().map(|w| (id, w));
        if queued {
            slot.queued = weak;
        } else {
            slot.running = weak;
        }
        fetch
    }
}

/// Removes a fetch from its page's slot when the fetch ends or is dropped unfinished (its
/// last caller went away), and the slot when it is empty.
struct SlotGuard {
    slots: Slots,
    page: PageKey,
    id: u64,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = slots.get_mut(&self.page) {
            if slot.running.as_ref().is_some_and(|(id, _)| *id == self.id) {
                slot.running = None;
            }
            if slot.queued.as_ref().is_some_and(|(id, _)| *id == self.id) {
                slot.queued = None;
            }
            if slot.running.is_none() && slot.queued.is_none() {
                slots.remove(&self.page);
            }
        }
    }
}

/// Waits for the fetch ahead (if any), marks this one as under way, and fetches. The guard
/// is an argument so that it is dropped with the future even if it was never polled.
async fn fetch<S: RankingStore>(
    store: Arc<S>,
    slots: Slots,
    page: PageKey,
    id: u64,
    ahead: Option<Fetch>,
    guard: SlotGuard,
) -> Result<Page, StoreError> {
    if let Some(ahead) = ahead {
        // Its answer predates some of our callers; only its completion matters.
        let _ = ahead.await;
        let mut slots = slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slots.entry(page).or_default();
        if slot.queued.as_ref().is_some_and(|(queued, _)| *queued == id) {
            slot.running = slot.queued.take();
        }
    }
    let answer = store.top(page.0, page.1, page.2).await;
    drop(guard);
    answer
}

#[async_trait]
impl<S: RankingStore> RankingStore for CoalescingStore<S> {
    async fn publish(
        &self,
        key: RankingKey,
        entries: &[Scored],
        life: VersionLife,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        self.inner.publish(key, entries, life, fence).await
    }

    async fn publish_copy(
        &self,
        key: RankingKey,
        publishing: Publishing<'_>,
        life: VersionLife,
        form: Form,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        self.inner.publish_copy(key, publishing, life, form, fence).await
    }

    async fn version_copy(
        &self,
        key: RankingKey,
        version: u64,
        held: Option<(u64, &Arc<Snapshot>)>,
        max: u64,
    ) -> Result<Option<VersionCopy>, StoreError> {
        self.inner.version_copy(key, version, held, max).await
    }

    async fn version_stats(&self, key: RankingKey, version: u64) -> Result<Option<VersionStats>, StoreError> {
        self.inner.version_stats(key, version).await
    }

    async fn versions(&self, keys: &[RankingKey]) -> Result<Vec<Option<u64>>, StoreError> {
        self.inner.versions(keys).await
    }

    async fn version_page(
        &self,
        key: RankingKey,
        version: u64,
        offset: u64,
        limit: u64,
    ) -> Result<Option<Page>, StoreError> {
        self.inner.version_page(key, version, offset, limit).await
    }

    async fn version_chunk(
        &self,
        key: RankingKey,
        version: u64,
        start: u64,
        count: u64,
    ) -> Result<Option<Page>, StoreError> {
        self.inner.version_chunk(key, version, start, count).await
    }

    async fn version_served(&self, key: RankingKey, version: u64) -> Result<Option<ServedParts>, StoreError> {
        self.inner.version_served(key, version).await
    }

    async fn increment_hourly(&self, increments: &[HourlyIncrement]) -> Result<(), StoreError> {
        self.inner.increment_hourly(increments).await
    }

    async fn withdraw_hourly(&self, hours: &[RankingHour], ids: &[i64]) -> Result<(), StoreError> {
        self.inner.withdraw_hourly(hours, ids).await
    }

    async fn published_segments(&self, whole: RankingKey) -> Result<Vec<Segment>, StoreError> {
        self.inner.published_segments(whole).await
    }

    async fn record_segments(
        &self,
        whole: RankingKey,
        segments: &[Segment],
        expire_at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), StoreError> {
        self.inner.record_segments(whole, segments, expire_at).await
    }

    async fn top(&self, key: RankingKey, offset: u64, limit: u64) -> Result<Page, StoreError> {
        self.join((key, offset, limit)).await
    }

    async fn placements(
        &self,
        key: RankingKey,
        version: Option<u64>,
        product_ids: &[i64],
    ) -> Result<Placements, StoreError> {
        self.inner.placements(key, version, product_ids).await
    }

    async fn announcements(&self) -> Result<Announcements, StoreError> {
        self.inner.announcements().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;

    /// A store whose `top` waits for a permit per call and answers with the number of fetches
    /// started so far (as `total`), so a test can tell which fetch an answer came from.
    struct GatedStore {
        started: AtomicUsize,
        gate: Semaphore,
        fail: std::sync::atomic::AtomicBool,
    }

    impl Default for GatedStore {
        fn default() -> Self {
            Self { started: AtomicUsize::new(0), gate: Semaphore::new(0), fail: Default::default() }
        }
    }

    #[async_trait]
    impl RankingStore for GatedStore {
        async fn publish(&self, _: RankingKey, _: &[Scored], _: VersionLife, _: &Fence) -> Result<u64, StoreError> {
            Ok(1)
        }
        async fn versions(&self, keys: &[RankingKey]) -> Result<Vec<Option<u64>>, StoreError> {
            Ok(vec![None; keys.len()])
        }
        async fn version_page(&self, _: RankingKey, _: u64, _: u64, _: u64) -> Result<Option<Page>, StoreError> {
            Ok(None)
        }
        async fn version_served(&self, _: RankingKey, _: u64) -> Result<Option<ServedParts>, StoreError> {
            Ok(None)
        }
        async fn publish_copy(
            &self,
            _: RankingKey,
            _: Publishing<'_>,
            _: VersionLife,
            _: Form,
            _: &Fence,
        ) -> Result<u64, StoreError> {
            Ok(1)
        }
        async fn version_stats(&self, _: RankingKey, _: u64) -> Result<Option<VersionStats>, StoreError> {
            Ok(None)
        }
        async fn increment_hourly(&self, _: &[HourlyIncrement]) -> Result<(), StoreError> {
            Ok(())
        }
        async fn withdraw_hourly(&self, _: &[RankingHour], _: &[i64]) -> Result<(), StoreError> {
            Ok(())
        }
        async fn published_segments(&self, _: RankingKey) -> Result<Vec<Segment>, StoreError> {
            Ok(Vec::new())
        }
        async fn record_segments(
            &self,
            _: RankingKey,
            _: &[Segment],
            _: chrono::DateTime<chrono::Utc>,
        ) -> Result<(), StoreError> {
            Ok(())
        }
        async fn top(&self, _: RankingKey, _: u64, _: u64) -> Result<Page, StoreError> {
            let n = self.started.fetch_add(1, Ordering::SeqCst) + 1;
            self.gate.acquire().await.expect("gate open").forget();
            if self.fail.load(Ordering::SeqCst) {
                return Err(StoreError::ranking("down"));
            }
            Ok(Page { entries: Vec::new(), total: n as u64, version: None })
        }
        async fn placements(&self, _: RankingKey, _: Option<u64>, _: &[i64]) -> Result<Placements, StoreError> {
            Ok(Placements::default())
        }
        async fn announcements(&self) -> Result<Announcements, StoreError> {
            Ok(Box::pin(futures_util::stream::empty()))
        }
    }

    fn today() -> RankingKey {
        RankingKey::Daily(chrono::NaiveDate::from_ymd_opt(2026, 11, 30).expect("date"))
    }

    type Answer = tokio::task::JoinHandle<Result<Page, StoreError>>;

    /// A caller reading the page at `offset` (limit 20) of today's ranking.
    fn spawn_top(store: &Arc<CoalescingStore<GatedStore>>, offset: u64) -> Answer {
        let store = store.clone();
        tokio::spawn(async move { store.top(today(), offset, 20).await })
    }

    /// Lets every spawned task run until it waits on the gate (the runtime is single-threaded).
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn callers_arriving_during_a_fetch_share_the_next_one() {
        let inner = Arc::new(GatedStore::default());
        let store = Arc::new(CoalescingStore::new(inner.clone(), Counter::default()));
        let first = spawn_top(&store, 0);
        settle().await;
        assert_eq!(inner.started.load(Ordering::SeqCst), 1);
        // Ten callers arrive while the first fetch is under way: none may get its answer.
        let later: Vec<_> = (0..10).map(|_| spawn_top(&store, 0)).collect();
        settle().await;
        assert_eq!(inner.started.load(Ordering::SeqCst), 1, "the queued fetch waits for the one under way");

        inner.gate.add_permits(1);
        assert_eq!(first.await.expect("task").expect("read").total, 1);
        settle().await;
        assert_eq!(inner.started.load(Ordering::SeqCst), 2, "one fetch serves the ten callers");
        inner.gate.add_permits(1);
        for r in later {
            assert_eq!(r.await.expect("task").expect("read").total, 2);
        }
        assert_eq!(store.fetches.get(), 2, "eleven calls, two fetches");
        assert!(store.slots.lock().expect("lock").is_empty(), "finished pages leave no entry");
    }

    #[tokio::test]
    async fn different_pages_are_fetched_separately() {
        let inner = Arc::new(GatedStore::default());
        let store = Arc::new(CoalescingStore::new(inner.clone(), Counter::default()));
        let a = spawn_top(&store, 0);
        let b = spawn_top(&store, 20);
        settle().await;
        assert_eq!(inner.started.load(Ordering::SeqCst), 2);
        inner.gate.add_permits(2);
        a.await.expect("task").expect("read");
        b.await.expect("task").expect("read");
    }

    #[tokio::test]
    async fn a_failure_reaches_every_caller_of_the_fetch_and_the_next_fetch_retries() {
        let inner = Arc::new(GatedStore::default());
        let store = Arc::new(CoalescingStore::new(inner.clone(), Counter::default()));
        inner.fail.store(true, Ordering::SeqCst);
        let first = spawn_top(&store, 0);
        settle().await;
        let joined: Vec<_> = (0..3).map(|_| spawn_top(&store, 0)).collect();
        settle().await;
        inner.gate.add_permits(2);
        assert!(first.await.expect("task").is_err());
        for r in joined {
            assert!(matches!(r.await.expect("task"), Err(StoreError::Unavailable { .. })));
        }
        inner.fail.store(false, Ordering::SeqCst);
        inner.gate.add_permits(1);
        assert_eq!(store.top(today(), 0, 20).await.expect("recovered").total, 3);
    }

    #[tokio::test]
    async fn callers_that_give_up_do_not_stall_the_page() {
        let inner = Arc::new(GatedStore::default());
        let store = Arc::new(CoalescingStore::new(inner.clone(), Counter::default()));
        // Both the fetch under way and the queued one lose all their callers.
        let first = spawn_top(&store, 0);
        settle().await;
        let queued = spawn_top(&store, 0);
        settle().await;
        first.abort();
        queued.abort();
        settle().await;
        inner.gate.add_permits(10);
        let answer = tokio::time::timeout(Duration::from_secs(5), store.top(today(), 0, 20)).await;
        assert!(answer.expect("a later caller is answered").is_ok());
    }

    #[tokio::test]
    async fn callers_that_give_up_while_the_store_hangs_leave_nothing_behind() {
        // The store never answers (Redis stopped): every caller gives up, each on a page of
        // its own, and nothing of them may stay in memory.
        let inner = Arc::new(GatedStore::default());
        let store = Arc::new(CoalescingStore::new(inner.clone(), Counter::default()));
        let callers: Vec<_> = (0..1_000).map(|i| spawn_top(&store, i * 20)).collect();
        settle().await;
        assert_eq!(store.pages_in_progress(), 1_000);
        for c in &callers {
            c.abort();
        }
        settle().await;
        assert_eq!(store.pages_in_progress(), 0, "abandoned fetches are dropped with their slots");
        assert_eq!(Arc::strong_count(&inner), 2, "no fetch holds the store any more");
    }
}
