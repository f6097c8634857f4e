//! Unit tests of the held copies over an in-process ranking store.

use crate::ports::Fence;
use std::time::Duration;

use chrono::NaiveDate;

use super::*;
use crate::adapters::memory::MemoryRankingStore;
use crate::app::policy::{Clock, PolicySettings};
use crate::ports::Scored;
use crate::ports::VersionLife;

/// Copies over an in-process store, on a clock set to noon of today (whatever the time of day
/// the test runs at), and that day.
fn snapshots(max_entries: usize) -> (Arc<Snapshots>, Arc<MemoryRankingStore>, NaiveDate) {
    let store = Arc::new(MemoryRankingStore::new());
    let now = crate::test_support::noon(0);
    let policy = Policy::new(PolicySettings { recompute_interval: Duration::ZERO, ..PolicySettings::default() });
    let policy = Arc::new(policy.with_clock(Clock::tokio_from(now)));
    let metrics = Arc::new(Metrics::new());
    (Arc::new(Snapshots::new(store.clone(), policy, metrics, max_entries)), store, now.date_naive())
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
    let (snapshots, store, date) = snapshots(1_000_000);
    let today = RankingKey::Daily(date);
    let n = LOAD_CHUNK as i64 * 2 + 17;
    let v = store.publish(today, &ranking(n), life(), &Fence::unchecked()).await.expect("publish");
    snapshots.refresh().await.expect("refresh");
    let held = snapshots.get(today).expect("held");
    assert_eq!(held.version, v);
    let page = store.top(today, 0, u64::MAX).await.expect("top");
    assert_eq!(held.ranking.page(0, u64::MAX), &page.entries[..]);
    let old = RankingKey::Daily(date - chrono::Duration::days(3));
    store.publish(old, &ranking(3), life(), &Fence::unchecked()).await.expect("publish");
    snapshots.refresh().await.expect("refresh");
    assert!(snapshots.get(old).is_none(), "only today and yesterday are held");
}

#[tokio::test]
async fn the_bound_counts_every_copy_and_a_version_too_large_is_read_from_the_store() {
    let (snapshots, store, date) = snapshots(100);
    let today = RankingKey::Daily(date);
    let yesterday = RankingKey::Daily(date - chrono::Duration::days(1));
    store.publish(yesterday, &ranking(60), life(), &Fence::unchecked()).await.expect("publish");
    let v1 = store.publish(today, &ranking(40), life(), &Fence::unchecked()).await.expect("publish");
    snapshots.refresh().await.expect("refresh");
    assert_eq!(snapshots.get(today).map(|h| h.version), Some(v1));
    assert_eq!(snapshots.entries(), 100);
    let v2 = store.publish(today, &ranking(41), life(), &Fence::unchecked()).await.expect("publish");
    snapshots.install(today, v2, ranking(41)).await;
    assert!(snapshots.get(today).is_none(), "over the bound: no stale copy either");
    assert!(snapshots.entries() <= 100);
    assert_eq!(snapshots.metrics.stores.snapshot_oversize.get(), 1);
    snapshots.refresh().await.expect("refresh");
    assert_eq!(snapshots.metrics.stores.snapshot_oversize.get(), 1, "not fetched again");
}

#[tokio::test]
async fn a_segment_of_the_held_whole_version_is_held_as_positions_in_it() {
    let (snapshots, _, date) = snapshots(1_000);
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
    let (snapshots, _, date) = snapshots(1_000);
    let today = RankingKey::Daily(date);
    snapshots.install(today, 5, ranking(3)).await;
    snapshots.install(today, 4, ranking(9)).await;
    let held = snapshots.get(today).expect("held");
    assert_eq!((held.version, held.ranking.len()), (5, 3));
}

/// A reader answered from the store (no copy held yet) saw version 6: a load of version 5
/// that finishes after it (begun before 6 was published) is not installed, and 6 is.
#[tokio::test]
async fn no_copy_older_than_a_version_served_from_the_store_is_installed() {
    let (snapshots, _, date) = snapshots(1_000);
    let today = RankingKey::Daily(date);
    snapshots.served_from_store(today, 6);
    snapshots.install(today, 5, ranking(3)).await;
    assert!(snapshots.get(today).is_none(), "the older load is dropped");
    snapshots.install(today, 6, ranking(4)).await;
    assert_eq!(snapshots.get(today).map(|h| h.version), Some(6));
}

/// The same race the other way round: a reader found no copy and went to the store, and while
/// its read of version 6 was under way a load of version 5 (begun before a pause) was
/// installed. The reader's answer drops the older copy, so the next read is not older than
/// it (it goes to the store until 6 or newer is loaded), and 5 stays out.
#[tokio::test]
async fn a_copy_installed_during_a_read_from_the_store_and_older_than_its_answer_is_dropped() {
    let (snapshots, _, date) = snapshots(1_000);
    let today = RankingKey::Daily(date);
    snapshots.install(today, 5, ranking(3)).await;
    snapshots.served_from_store(today, 6);
    assert!(snapshots.get(today).is_none(), "no copy older than an answer already given");
    snapshots.install(today, 5, ranking(3)).await;
    assert!(snapshots.get(today).is_none(), "nor installed again");
    // A copy as new as the answer, or newer, stays.
    snapshots.install(today, 6, ranking(4)).await;
    snapshots.served_from_store(today, 6);
    assert_eq!(snapshots.get(today).map(|h| h.version), Some(6));
}

#[tokio::test]
async fn copies_installed_together_follow_the_rules_of_one_at_a_time() {
    let (snapshots, _, date) = snapshots(100);
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
    assert_eq!(snapshots.metrics.stores.snapshot_oversize.get(), 1);
    assert_eq!(snapshots.entries(), 40 + 30 + 2);
    assert!(
        snapshots.is_wanted(key(c), snapshots.policy.now())
            && !snapshots.is_wanted(key(unknown), snapshots.policy.now())
    );
}

#[tokio::test]
async fn a_poll_reading_an_older_list_of_segments_drops_no_copy_a_publication_just_noted() {
    let (snapshots, _, date) = snapshots(1_000);
    let today = RankingKey::Daily(date);
    let segment = |name: &str| crate::domain::catalog::Segment::parse(name).expect("segment");
    let (a, b) = (segment("a"), segment("b"));
    // A publication notes its segments and installs their copies …
    snapshots.know_segments(today, &[a, b]);
    let whole = Arc::new(Snapshot::from_ranked(ranking(40)).expect("valid"));
    snapshots.install_copy(today, 7, whole.clone()).await;
    let copy = Arc::new(Snapshot::at_positions(&whole, vec![0, 1]).expect("ascending"));
    snapshots.install_copy(RankingKey::DailySegment(date, b), 7, copy).await;
    // … while a poll read the store's list from before it: `b` is not in it.
    let yesterday = RankingKey::Daily(date.pred_opt().expect("a day before"));
    snapshots.wanted.found_segments(&snapshots.wholes(snapshots.policy.now()), &[(today, vec![a])]);
    snapshots.forget_unwanted(snapshots.policy.now());
    assert!(snapshots.get(RankingKey::DailySegment(date, b)).is_some(), "the copy just published is kept");
    assert_eq!(snapshots.wanted.segments().get(&today), Some(&vec![a, b]));
    // A whole ranking no longer wanted takes its segments with it.
    snapshots.wanted.found_segments(&[yesterday], &[]);
    assert!(snapshots.wanted.segments().get(&today).is_none());
}

#[tokio::test]
async fn a_ranking_this_replica_is_publishing_is_not_loaded_until_it_is_done() {
    let (snapshots, store, date) = snapshots(1_000);
    let today = RankingKey::Daily(date);
    let own = snapshots.publishing(today);
    let v = store.publish(today, &ranking(10), life(), &Fence::unchecked()).await.expect("publish");
    // The announcement and the poll while the publisher has not installed its copy yet.
    snapshots.load(today, v).await.expect("load");
    snapshots.refresh().await.expect("refresh");
    assert!(snapshots.get(today).is_none(), "left to the publisher");
    // A publication given up after the store took it: the next poll loads it.
    drop(own);
    snapshots.refresh().await.expect("refresh");
    assert_eq!(snapshots.get(today).map(|h| h.version), Some(v));
}
