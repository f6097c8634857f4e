//! The in-process store against the Redis semantics it stands in for.

use crate::ports::Fence;
use std::time::Duration;

use chrono::NaiveDate;
use futures_util::StreamExt;

use super::*;
use crate::domain::calendar::RankingHour;
use crate::ports::LeaseLock;

fn day() -> RankingKey {
    RankingKey::Daily(NaiveDate::from_ymd_opt(2026, 4, 9).expect("valid"))
}

fn life(superseded_for: Duration) -> VersionLife {
    VersionLife { expire_at: Utc::now() + chrono::Duration::hours(1), superseded_for }
}

/// Entries in ranking order, as a recompute publishes them.
fn scored(pairs: &[(i64, f64)]) -> Vec<Scored> {
    let mut entries: Vec<Scored> = pairs.iter().map(|&(product_id, score)| Scored { product_id, score }).collect();
    entries.sort_by(crate::domain::snapshot::ranking_order);
    entries
}

#[tokio::test]
async fn equal_scores_order_by_descending_product_id() {
    let store = MemoryRankingStore::new();
    let entries = scored(&[(999, 1.0), (1000, 1.0), (5, 2.0), (42, 1.0)]);
    store.publish(day(), &entries, life(Duration::ZERO), &Fence::unchecked()).await.expect("publish");
    let page = store.top(day(), 0, 10).await.expect("top");
    let ids: Vec<_> = page.entries.iter().map(|e| e.product_id).collect();
    assert_eq!(ids, vec![5, 1000, 999, 42]);
    let placed = store.placements(day(), None, &[999]).await.expect("rank");
    assert_eq!((placed.found[0].map(|p| (p.index, p.above)), placed.total), (Some((2, 1)), 4));
    assert_eq!(store.top(day(), 3, 10).await.expect("top").entries.len(), 1);
    let hour = RankingKey::Hourly(RankingHour { date: day().date(), hour: 3 });
    let inc = |product_id, delta| HourlyIncrement {
        hour: RankingHour { date: day().date(), hour: 3 },
        product_id,
        delta,
        expire_at: Utc::now() + chrono::Duration::hours(1),
    };
    store.increment_hourly(&[inc(999, 1.0), inc(1000, 1.0), inc(999, 0.5)]).await.expect("increment");
    let ids: Vec<_> = store.top(hour, 0, 10).await.expect("top").entries.iter().map(|e| e.product_id).collect();
    assert_eq!(ids, vec![999, 1000]);
}

#[tokio::test(start_paused = true)]
async fn versions_grow_and_superseded_ones_stay_readable_for_their_life() {
    let store = MemoryRankingStore::new();
    let mut announced = store.announcements().await.expect("subscribe");
    let v1 = store
        .publish(day(), &scored(&[(1, 1.0), (2, 2.0)]), life(Duration::from_secs(60)), &Fence::unchecked())
        .await
        .expect("v1");
    let v2 = store
        .publish(day(), &scored(&[(1, 1.0)]), life(Duration::from_secs(60)), &Fence::unchecked())
        .await
        .expect("v2");
    assert!(v2 > v1);
    assert_eq!(announced.next().await, Some(Announcement { key: day(), version: v1 }));
    assert_eq!(announced.next().await, Some(Announcement { key: day(), version: v2 }));
    assert_eq!(store.versions(&[day()]).await.expect("versions"), vec![Some(v2)]);
    assert_eq!(store.placements(day(), None, &[2]).await.expect("rank").found, [None], "products that left are gone");
    let old = store.version_page(day(), v1, 0, 10).await.expect("read").expect("kept");
    assert_eq!((old.total, old.version), (2, Some(v1)));
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(store.version_page(day(), v1, 0, 10).await.expect("read"), None, "past its life");
    assert!(store.version_page(day(), v2, 0, 10).await.expect("read").is_some(), "the current one stays");
    let v3 = store.publish(day(), &[], life(Duration::ZERO), &Fence::unchecked()).await.expect("v3");
    assert_eq!(store.version_page(day(), v2, 0, 10).await.expect("read"), None, "zero keeps none");
    let empty = store.top(day(), 0, 10).await.expect("top");
    assert_eq!((empty.total, empty.version), (0, Some(v3)), "an empty day is built, with a version");
}

#[tokio::test]
async fn expired_rankings_vanish() {
    let store = MemoryRankingStore::new();
    let gone = VersionLife { expire_at: Utc::now() - chrono::Duration::seconds(1), superseded_for: Duration::ZERO };
    store.publish(day(), &scored(&[(1, 1.0)]), gone, &Fence::unchecked()).await.expect("publish");
    assert_eq!(store.versions(&[day()]).await.expect("versions"), vec![None]);
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

#[tokio::test]
async fn statistics_travel_with_their_versions() {
    crate::test_support::statistics_travel_with_their_versions(&MemoryRankingStore::new(), day()).await;
}
