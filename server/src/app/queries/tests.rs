//! Unit tests of the read rules over an in-process ranking store.

use std::time::Duration;

use super::*;
use crate::adapters::memory::MemoryRankingStore;
use crate::app::invalid::PathSegment;
use crate::app::policy::Clock;
use crate::domain::calendar::RankingHour;
use crate::ports::{Fence, RankingKey, Scored};
use crate::test_support::Wired;

/// The instant the read service's clock starts at: a fixed noon, so that "today" cannot
/// change between a test's reads (it could at midnight with the system clock).
fn noon() -> DateTime<Utc> {
    "2026-04-09T12:00:00Z".parse().expect("valid")
}

fn queries() -> (Queries, Arc<MemoryRankingStore>) {
    let store = Arc::new(MemoryRankingStore::new());
    (Wired::new(&store, Clock::tokio_from(noon())).queries(&store), store)
}

fn field(e: QueryError) -> Vec<PathSegment> {
    match e {
        QueryError::Invalid(i) => i.path.0,
        other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
    }
}

#[test]
fn an_empty_selector_is_todays_daily_ranking() {
    let (q, _) = queries();
    let now: DateTime<Utc> = "2026-04-09T13:30:00Z".parse().expect("valid");
    let r = q.resolve(Selector::default(), now).expect("valid");
    assert_eq!(r.key, RankingKey::Daily("2026-04-09".parse().expect("valid")));
    let hourly = q.resolve(Selector { window: Some(Window::Hourly), ..Default::default() }, now).expect("valid");
    assert_eq!(hourly.key, RankingKey::Hourly(RankingHour { date: r.date(), hour: 13 }));
    let other_day = Selector { window: Some(Window::Hourly), date: "2026-04-08".parse().ok(), ..Default::default() };
    assert_eq!(q.resolve(other_day, now).expect_err("needs an hour").path.0, vec![PathSegment::Field("hour")]);
    let bad_hour = Selector { hour: Some(24), ..Default::default() };
    assert!(q.resolve(bad_hour, now).is_err());
}

#[tokio::test]
async fn reads_check_their_bounds_and_number_entries_from_the_offset() {
    let (q, store) = queries();
    let today = noon().date_naive();
    let entries: Vec<Scored> = (1..=5).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
    let life = crate::ports::VersionLife {
        expire_at: Utc::now() + chrono::Duration::days(1),
        superseded_for: Duration::from_secs(60),
    };
    let v1 = store.publish(RankingKey::Daily(today), &entries, life, &Fence::unchecked()).await.expect("stored");

    let page = q.top(TopQuery { offset: 1, limit: 2, ..Default::default() }).await.expect("page");
    assert_eq!(page.entries.iter().map(|e| (e.rank, e.product_id)).collect::<Vec<_>>(), vec![(2, 4), (3, 3)]);
    assert_eq!((page.total, page.date), (5, today));
    assert_eq!(page.entries[0].breakdown.map(|b| b.main_floor), Some(4));
    assert_eq!(q.top(TopQuery::default()).await.expect("page").entries.len(), 5, "0 means 10");
    let too_many = q.top(TopQuery { limit: MAX_LIMIT + 1, ..Default::default() }).await.expect_err("too many");
    assert_eq!(field(too_many), vec![PathSegment::Field("limit")]);

    let rank = q.rank(RankQuery { product_id: 2, ..Default::default() }).await.expect("ranked");
    assert_eq!((rank.entry.rank, rank.total), (4, 5));
    let bad = q.rank(RankQuery { product_id: 0, ..Default::default() }).await.expect_err("id 0");
    assert_eq!(field(bad), vec![PathSegment::Field("product_id")]);
    let missing = q.rank(RankQuery { product_id: 9, ..Default::default() }).await.expect_err("absent");
    assert!(matches!(missing, QueryError::NotRanked { product_id: 9, .. }));
    assert_eq!((page.version, rank.version), (Some(v1), Some(v1)));
}

#[tokio::test]
async fn page_tokens_walk_one_version_and_refuse_what_they_cannot_continue() {
    let (q, store) = queries();
    let today = RankingKey::Daily(noon().date_naive());
    let life = |secs| crate::ports::VersionLife {
        expire_at: Utc::now() + chrono::Duration::days(1),
        superseded_for: Duration::from_secs(secs),
    };
    let first: Vec<Scored> = (1..=25).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
    let v1 = store.publish(today, &first, life(60), &Fence::unchecked()).await.expect("v1");
    let page = q.top(TopQuery { limit: 10, ..Default::default() }).await.expect("page 1");
    let token = page.next_page_token.clone().expect("more pages");
    // A recompute reverses the ranking between pages; the walk stays on version 1.
    let reversed: Vec<Scored> = (1..=25).map(|p| Scored { product_id: p, score: -p as f64 }).collect();
    store.publish(today, &reversed, life(60), &Fence::unchecked()).await.expect("v2");
    let next = |token: &str| TopQuery { page_token: Some(token.to_string()), ..Default::default() };
    let page2 = q.top(next(&token)).await.expect("page 2");
    assert_eq!(page2.version, Some(v1));
    assert_eq!(page2.entries.iter().map(|e| e.product_id).collect::<Vec<_>>(), (6..=15).rev().collect::<Vec<_>>());
    assert_eq!(page2.entries[0].rank, 11);
    let page3 = q.top(next(page2.next_page_token.as_deref().expect("more"))).await.expect("page 3");
    assert_eq!((page3.entries.len(), page3.next_page_token.clone()), (5, None));

    // Version 3 is published keeping no superseded version: a walk of version 2 ends.
    let page = q.top(TopQuery { limit: 10, ..Default::default() }).await.expect("page 1 of v2");
    store.publish(today, &first, life(0), &Fence::unchecked()).await.expect("v3");
    let expired = q.top(next(&page.next_page_token.clone().expect("more"))).await.expect_err("gone");
    assert!(matches!(expired, QueryError::Expired { .. }), "{expired:?}");

    assert_eq!(field(q.top(next("garbage")).await.expect_err("garbled")), vec![PathSegment::Field("page_token")]);
    let other = TopQuery { selector: Selector { window: Some(Window::Hourly), ..Default::default() }, ..next(&token) };
    assert_eq!(field(q.top(other).await.expect_err("other ranking")), vec![PathSegment::Field("page_token")]);
    let offset = TopQuery { offset: 3, ..next(&token) };
    assert_eq!(field(q.top(offset).await.expect_err("offset")), vec![PathSegment::Field("offset")]);
}

#[tokio::test]
async fn answers_of_held_copies_are_kept_per_version_and_never_outlive_it() {
    let (q, store) = queries();
    let today = noon().date_naive();
    let life = crate::ports::VersionLife {
        expire_at: Utc::now() + chrono::Duration::days(1),
        superseded_for: Duration::from_secs(60),
    };
    let ranked = |ids: &[i64]| -> Vec<Scored> {
        ids.iter().enumerate().map(|(i, id)| Scored { product_id: *id, score: 100.0 - i as f64 }).collect()
    };
    let yesterday = today.pred_opt().expect("a day before");
    let v0 = store
        .publish(RankingKey::Daily(yesterday), &ranked(&[3, 2, 1]), life, &Fence::unchecked())
        .await
        .expect("yesterday");
    q.snapshots.install(RankingKey::Daily(yesterday), v0, ranked(&[3, 2, 1])).await;
    let v1 = store.publish(RankingKey::Daily(today), &ranked(&[1, 2, 3]), life, &Fence::unchecked()).await.expect("v1");
    q.snapshots.install(RankingKey::Daily(today), v1, ranked(&[1, 2, 3])).await;

    let first = q.top(TopQuery { limit: 2, ..Default::default() }).await.expect("page");
    let key = q.answers.key(&q.snapshots, RankingKey::Daily(today), 0, 2).expect("both copies held");
    assert_eq!(q.answers.get(&key), Some(first.clone()), "kept");
    assert_eq!(q.top(TopQuery { limit: 2, ..Default::default() }).await.expect("again"), first);
    assert_eq!(first.entries.iter().map(|e| (e.product_id, e.previous_rank)).collect::<Vec<_>>(), vec![(1, 3), (2, 2)]);

    // A new version is read at once; the kept answer of the old one is never served again.
    let v2 = store.publish(RankingKey::Daily(today), &ranked(&[3, 1, 2]), life, &Fence::unchecked()).await.expect("v2");
    q.snapshots.install(RankingKey::Daily(today), v2, ranked(&[3, 1, 2])).await;
    let second = q.top(TopQuery { limit: 2, ..Default::default() }).await.expect("page of v2");
    assert_eq!((second.version, second.entries[0].product_id), (Some(v2), 3));
}

#[tokio::test]
async fn a_previous_period_without_a_ranking_costs_no_store_read() {
    let (q, store) = queries();
    let today = noon().date_naive();
    let life = crate::ports::VersionLife {
        expire_at: Utc::now() + chrono::Duration::days(1),
        superseded_for: Duration::from_secs(60),
    };
    let entries: Vec<Scored> = (1..=3).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
    store.publish(RankingKey::Daily(today), &entries, life, &Fence::unchecked()).await.expect("today");
    q.snapshots.refresh().await.expect("poll");
    let yesterday = RankingKey::Daily(today.pred_opt().expect("a day before"));
    assert!(q.snapshots.absent(yesterday));
    let page = q.top(TopQuery { limit: 3, ..Default::default() }).await.expect("page");
    assert!(page.entries.iter().all(|e| e.previous_rank == 0));
    assert!(q.answers.key(&q.snapshots, RankingKey::Daily(today), 0, 3).is_some(), "kept");
    // Once yesterday is published it is no longer taken as absent.
    store.publish(yesterday, &entries, life, &Fence::unchecked()).await.expect("yesterday");
    q.snapshots.refresh().await.expect("poll");
    assert!(!q.snapshots.absent(yesterday));
    let page = q.top(TopQuery { limit: 3, ..Default::default() }).await.expect("page");
    assert_eq!(page.entries.iter().map(|e| e.previous_rank).collect::<Vec<_>>(), vec![1, 2, 3]);
}
