//! Batched withdrawals over an in-process ranking store.

use std::collections::HashSet;

use super::*;
use crate::adapters::memory::MemoryRankingStore;
use crate::app::policy::Clock;
use crate::ports::VersionLife;
use crate::test_support::Wired;

#[tokio::test]
async fn concurrent_withdrawals_of_a_day_share_rewrites() {
    let store = Arc::new(MemoryRankingStore::new());
    let now = crate::test_support::noon(0);
    let Wired { snapshots, recompute, .. } = Wired::new(&store, Clock::tokio_from(now));
    let today = now.date_naive();
    let key = RankingKey::Daily(today);
    let entries: Vec<Scored> = (1..=50).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
    let life = VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: Duration::ZERO };
    let version = store.publish(key, &entries, life, &Fence::unchecked()).await.expect("published");
    snapshots.install(key, version, entries).await;
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
