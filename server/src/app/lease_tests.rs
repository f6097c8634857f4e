//! The day's lease over an in-process ranking store: renewed while its work runs, the work
//! stopped when it is lost or cannot be renewed, a write under a lease another holder took
//! refused and counted.

use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use super::*;
use crate::adapters::memory::MemoryRankingStore;
use crate::app::policy::Clock;
use crate::ports::{Fence, RankingKey, RankingStore, Scored, VersionLife};
use crate::test_support::Wired;

#[tokio::test(start_paused = true)]
async fn a_lease_is_renewed_while_its_work_runs_and_work_stops_when_it_is_lost() {
    let store = Arc::new(MemoryRankingStore::new());
    let Wired { policy, metrics, .. } = Wired::new(&store, Clock::tokio_from(crate::test_support::noon(0)));
    let leases = DayLeases::new(store.clone(), policy.clone(), metrics);
    let ttl = policy.lease_life();
    let lease = store.try_acquire("recompute:x", ttl).await.expect("store").expect("free");
    // Work lasting four lease lives: nobody else gets the lease meanwhile.
    let held = leases
        .holding(&lease, "recompute", async {
            tokio::time::sleep(ttl * 4).await;
            Ok(store.try_acquire("recompute:x", ttl).await?.is_none())
        })
        .await;
    assert!(held.expect("work finished"), "renewed while the work ran");

    // The lease goes (released here; expired after a stall in life) and another holder
    // takes it: the work is abandoned at the next renewal instead of finishing.
    let finished = std::sync::atomic::AtomicBool::new(false);
    let lost = leases
        .holding(&lease, "recompute", async {
            store.release(&lease).await?;
            assert!(store.try_acquire("recompute:x", ttl).await?.is_some(), "another holder");
            tokio::time::sleep(ttl * 4).await;
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
        .await;
    assert!(lost.expect_err("abandoned").to_string().contains("lost the lease"));
    assert!(!finished.load(std::sync::atomic::Ordering::SeqCst));
}

/// A write made after the lease went to another holder is refused by the store itself,
/// counted, and publishes nothing, even when the renewal has not noticed yet.
#[tokio::test(start_paused = true)]
async fn a_write_under_a_lease_another_holder_took_is_refused_and_counted() {
    let store = Arc::new(MemoryRankingStore::new());
    let now = crate::test_support::noon(0);
    let Wired { policy, metrics, .. } = Wired::new(&store, Clock::tokio_from(now));
    let leases = DayLeases::new(store.clone(), policy.clone(), metrics.clone());
    let ttl = policy.lease_life();
    let today = now.date_naive();
    let key = RankingKey::Daily(today);
    let lease = store.try_acquire(&day_lease(today), ttl).await.expect("store").expect("free");
    let life = VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: Duration::ZERO };
    let entries = vec![Scored { product_id: 1, score: 1.0 }];
    let fence = Fence::of(&lease);
    let published = leases
        .holding(&lease, "recompute", async {
            // The lease runs out (a stall) and another replica takes the day before the write.
            store.release(&lease).await?;
            assert!(store.try_acquire(&day_lease(today), ttl).await?.is_some(), "another holder");
            store.publish(key, &entries, life, &fence).await
        })
        .await;
    let refused = published.expect_err("fenced");
    assert!(
        matches!(&refused, StoreError::LostLease { detail, .. } if detail.starts_with("another holder")),
        "{refused}"
    );
    assert_eq!(store.versions(&[key]).await.expect("versions"), vec![None], "nothing published");
    let scraped = metrics.render();
    assert!(scraped.contains("ranking_fenced_writes_total{kind=\"recompute\"} 1"), "{scraped}");
    assert!(scraped.contains("ranking_fenced_writes_total{kind=\"live_pass\"} 0"), "{scraped}");
}

/// Leases whose renewals cannot reach the store.
struct Unreachable(Arc<MemoryRankingStore>);

#[async_trait::async_trait]
impl LeaseLock for Unreachable {
    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        self.0.try_acquire(name, ttl).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.0.release(lease).await
    }

    async fn renew(&self, _: &Lease, _: Duration) -> Result<bool, StoreError> {
        Err(StoreError::ranking("unreachable"))
    }
}

/// A holder that cannot renew for a whole lease life treats the lease as lost and stops.
#[tokio::test(start_paused = true)]
async fn a_lease_not_renewed_for_a_whole_life_is_lost() {
    let store = Arc::new(MemoryRankingStore::new());
    let Wired { policy, metrics, .. } = Wired::new(&store, Clock::tokio_from(crate::test_support::noon(0)));
    let leases = DayLeases::new(Arc::new(Unreachable(store.clone())), policy.clone(), metrics);
    let ttl = policy.lease_life();
    let lease = store.try_acquire("recompute:x", ttl).await.expect("store").expect("free");
    let finished = std::sync::atomic::AtomicBool::new(false);
    let started = Instant::now();
    let lost = leases
        .holding(&lease, "recompute", async {
            tokio::time::sleep(ttl * 4).await;
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
        .await;
    let lost = lost.expect_err("lost");
    assert!(matches!(&lost, StoreError::LostLease { detail, .. } if detail.starts_with("not renewed")), "{lost}");
    assert!(!finished.load(std::sync::atomic::Ordering::SeqCst));
    // Given up at the first failed renewal a whole life after the lease was taken, no later.
    assert!(started.elapsed() >= ttl && started.elapsed() < ttl * 2, "{:?}", started.elapsed());
}

/// A live pass holds the day's lease and the live lease: both are renewed while it runs, and
/// losing the live lease abandons the pass, naming that lease.
#[tokio::test(start_paused = true)]
async fn a_pass_renews_both_its_leases_and_stops_when_the_live_lease_is_lost() {
    let store = Arc::new(MemoryRankingStore::new());
    let Wired { policy, metrics, .. } = Wired::new(&store, Clock::tokio_from(crate::test_support::noon(0)));
    let leases = DayLeases::new(store.clone(), policy.clone(), metrics);
    let ttl = policy.lease_life();
    let day = store.try_acquire("recompute:x", ttl).await.expect("store").expect("free");
    let live = store.try_acquire("live:x", ttl).await.expect("store").expect("free");
    let held = leases
        .holding_with(&day, Some(&live), "live_pass", async {
            tokio::time::sleep(ttl * 4).await;
            let taken = (store.try_acquire("recompute:x", ttl).await?, store.try_acquire("live:x", ttl).await?);
            Ok(taken.0.is_none() && taken.1.is_none())
        })
        .await;
    assert!(held.expect("work finished"), "both renewed while the work ran");

    let lost = leases
        .holding_with(&day, Some(&live), "live_pass", async {
            store.release(&live).await?;
            assert!(store.try_acquire("live:x", ttl).await?.is_some(), "another holder of the live lease");
            tokio::time::sleep(ttl * 4).await;
            Ok(())
        })
        .await;
    let error = lost.expect_err("abandoned").to_string();
    assert!(error.contains("live:x"), "{error}");
}
