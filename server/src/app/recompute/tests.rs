//! Batched withdrawals, and a control pass that finds the day's lease taken, over an
//! in-process ranking store.

use std::collections::HashSet;

use super::*;
use tokio_util::sync::CancellationToken;

use crate::adapters::memory::MemoryRankingStore;
use crate::app::policy::Clock;
use crate::domain::controls::Control;
use crate::ports::VersionLife;
use crate::test_support::Wired;

/// Products 1 to 50 (score = id) published as `key`'s ranking and held.
async fn fifty_products(store: &MemoryRankingStore, snapshots: &Snapshots, key: RankingKey) {
    let entries: Vec<Scored> = (1..=50).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
    let life = VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: Duration::ZERO };
    let version = store.publish(key, &entries, life, &Fence::unchecked()).await.expect("published");
    snapshots.install(key, version, entries).await;
}

#[tokio::test]
async fn concurrent_withdrawals_of_a_day_share_rewrites() {
    let store = Arc::new(MemoryRankingStore::new());
    let now = crate::test_support::noon(0);
    let Wired { snapshots, recompute, .. } = Wired::new(&store, Clock::tokio_from(now));
    let today = now.date_naive();
    let key = RankingKey::Daily(today);
    fifty_products(&store, &snapshots, key).await;
    let installs = snapshots.installed();
    let before = *installs.borrow();

    let calls: Vec<_> = (1..=20i64)
        .map(|id| {
            let recompute = recompute.clone();
            tokio::spawn(async move { recompute.withdrawals().withdraw(today, &HashSet::from([id])).await })
        })
        .collect();
    for call in calls {
        call.await.expect("joined").expect("withdrawn");
    }
    let held = snapshots.current_whole(key).await.expect("read").expect("ranking");
    let left: Vec<i64> = held.ranking.page(0, 100).iter().map(|e| e.product_id).collect();
    assert_eq!(left, (21..=50).rev().collect::<Vec<_>>());
    let rewrites = *installs.borrow() - before;
    assert!((1..20).contains(&rewrites), "{rewrites} rewrites for 20 calls");
}

/// Controls as a test stores them.
struct StoredControls(std::sync::Mutex<(u64, Vec<Control>)>);

#[async_trait::async_trait]
impl crate::ports::ControlRows for StoredControls {
    async fn put_control(&self, _: Control, _: u64, _: i64) -> Result<crate::ports::PutOutcome, StoreError> {
        Err(StoreError::database("this fixture's controls are set by the test"))
    }

    async fn delete_control(&self, _: &str, _: u64) -> Result<crate::ports::DeleteOutcome, StoreError> {
        Err(StoreError::database("this fixture's controls are set by the test"))
    }

    async fn controls(&self) -> Result<(u64, Vec<Control>), StoreError> {
        Ok(self.0.lock().expect("controls").clone())
    }

    async fn control_revision(&self) -> Result<u64, StoreError> {
        Ok(self.0.lock().expect("controls").0)
    }
}

#[tokio::test(start_paused = true)]
async fn a_control_pass_that_found_the_lease_taken_looks_again_within_a_tenth_of_a_poll() {
    use crate::domain::board::Windows;
    use crate::domain::controls::Action;
    use crate::ports::{LeaseLock, day_lease};

    let store = Arc::new(MemoryRankingStore::new());
    let now = crate::test_support::noon(0);
    let Wired { snapshots, recompute, policy, .. } = Wired::new(&store, Clock::tokio_from(now));
    let today = now.date_naive();
    let key = RankingKey::Daily(today);
    fifty_products(&store, &snapshots, key).await;
    let pin = Control {
        id: "pin".into(),
        segment: None,
        windows: Windows::ALL,
        profile: None,
        active_from_us: 0,
        active_until_us: None,
        action: Action::Pin { product_id: 7, position: 1 },
        note: String::new(),
        revision: 1,
        updated_at_us: 0,
    };
    let stored = Arc::new(StoredControls(std::sync::Mutex::new((1, vec![pin]))));
    let wired = recompute.control_passes();
    let passes = Arc::new(ControlPasses {
        controls: Arc::new(CurrentControls::new(stored, policy.profile_name.clone())),
        rankings: wired.rankings.clone(),
        snapshots: wired.snapshots.clone(),
        leases: wired.leases.clone(),
        policy: wired.policy.clone(),
        metrics: wired.metrics.clone(),
        publisher: wired.publisher.clone(),
        changed: Default::default(),
    });
    let top =
        async || snapshots.current_whole(key).await.expect("read").expect("ranking").ranking.page(0, 1)[0].product_id;

    // Another replica's live pass holds the day's lease: the pass finds it taken.
    let elsewhere = store.try_acquire(&day_lease(today), Duration::from_secs(30)).await.expect("lease").expect("free");
    let stop = CancellationToken::new();
    let running = tokio::spawn(passes.clone().run(stop.clone()));
    tokio::time::sleep(policy.control_poll / 2).await;
    assert_eq!(top().await, 50, "not served while the lease is taken");

    // Released between two polls: served a tenth of a poll later, not at the next poll.
    store.release(&elsewhere).await.expect("released");
    tokio::time::sleep(policy.control_poll / 10 + Duration::from_millis(1)).await;
    assert_eq!(top().await, 7, "served once the lease is free");
    stop.cancel();
    running.await.expect("stopped");
}
