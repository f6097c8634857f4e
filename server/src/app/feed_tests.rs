//! The feeder against an in-process cursor store and recording sinks: whole first, then
//! changes against the cursor; a failing sink keeps the board and sends what comes meanwhile
//! whole;
//! an older version than the cursor's sends nothing.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use chrono::NaiveDate;

use super::*;
use crate::adapters::memory::MemoryRankingStore;
use crate::app::policy::PolicySettings;
use crate::domain::snapshot::Scored;

#[derive(Default)]
struct Recorded {
    batches: Mutex<Vec<FeedBatch>>,
    down: AtomicBool,
}

#[async_trait]
impl FeedSink for Recorded {
    fn name(&self) -> &'static str {
        "kafka"
    }

    async fn send(&self, batch: &FeedBatch) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::ranking("broker down"));
        }
        self.batches.lock().expect("lock").push(batch.clone());
        Ok(())
    }
}

fn board(ids: &[i64]) -> Snapshot {
    let entries =
        ids.iter().zip((1..=ids.len()).rev()).map(|(&p, s)| Scored { product_id: p, score: s as f64 }).collect();
    Snapshot::from_ranked(entries).expect("ranked")
}

fn feeder(sink: Arc<Recorded>, cursors: Arc<MemoryRankingStore>, whole_every: Duration) -> Feeder {
    feeder_counting(sink, cursors, whole_every, Arc::new(Metrics::default()))
}

/// A feeder counting into `metrics` (shared by the feeders of several profiles).
fn feeder_counting(
    sink: Arc<Recorded>,
    cursors: Arc<MemoryRankingStore>,
    whole_every: Duration,
    metrics: Arc<Metrics>,
) -> Feeder {
    let settings = FeedSettings { top: 3, interval: Duration::from_millis(10), whole_every };
    let policy = Arc::new(Policy::new(PolicySettings::default()));
    Feeder::new(cursors, vec![sink], policy, metrics, settings)
}

/// `ranking_feed_behind_versions` as scraped.
fn behind(metrics: &Metrics) -> i64 {
    metrics.feed.behind_versions.get()
}

/// The gauge of boards waiting to be fed: up when a version is noted, back to 0 once fed, up
/// again while a sink refuses, and the sum of every profile's feeder (each its own share).
#[tokio::test]
async fn the_behind_gauge_returns_to_zero_once_fed_and_sums_the_profiles_feeders() {
    let metrics = Arc::new(Metrics::default());
    let (sink, other_sink) = (Arc::new(Recorded::default()), Arc::new(Recorded::default()));
    let week = RankingKey::Weekly(NaiveDate::from_ymd_opt(2026, 12, 5).expect("date"));
    let feed = feeder_counting(sink.clone(), Arc::new(MemoryRankingStore::new()), Duration::MAX, metrics.clone());
    let variant =
        feeder_counting(other_sink.clone(), Arc::new(MemoryRankingStore::new()), Duration::MAX, metrics.clone());
    feed.note(key(), 10, &board(&[1, 2, 3]), FeedCause::Recompute);
    feed.note(week, 10, &board(&[1, 2, 3]), FeedCause::Recompute);
    variant.note(key(), 10, &board(&[3, 2, 1]), FeedCause::Recompute);
    assert_eq!(behind(&metrics), 3, "two boards of one profile, one of the other");
    feed.round().await;
    assert_eq!(behind(&metrics), 1, "the variant's board still waits");
    variant.round().await;
    assert_eq!(behind(&metrics), 0, "every board fed");

    // A refused round keeps its board noted, and counted, until a round feeds it.
    sink.down.store(true, Ordering::SeqCst);
    feed.note(key(), 11, &board(&[2, 1, 3]), FeedCause::LivePass);
    variant.note(key(), 11, &board(&[2, 3, 1]), FeedCause::LivePass);
    feed.round().await;
    variant.round().await;
    assert_eq!(behind(&metrics), 1, "the refused board");
    feed.note(key(), 12, &board(&[3, 1, 2]), FeedCause::LivePass);
    assert_eq!(behind(&metrics), 1, "a newer version of the same board is one board behind");
    sink.down.store(false, Ordering::SeqCst);
    feed.round().await;
    assert_eq!(behind(&metrics), 0, "fed at last");
}

fn key() -> RankingKey {
    RankingKey::Daily(NaiveDate::from_ymd_opt(2026, 12, 5).expect("date"))
}

#[tokio::test]
async fn a_board_goes_whole_first_then_as_changes_against_its_cursor() {
    let sink = Arc::new(Recorded::default());
    let cursors = Arc::new(MemoryRankingStore::new());
    let feed = feeder(sink.clone(), cursors.clone(), Duration::from_secs(3_600));
    feed.note(key(), 10, &board(&[1, 2, 3, 4]), FeedCause::Recompute);
    feed.round().await;
    feed.note(key(), 11, &board(&[2, 1, 3, 4]), FeedCause::LivePass);
    feed.round().await;
    let batches = sink.batches.lock().expect("lock").clone();
    assert_eq!(batches.len(), 2);
    assert_eq!((batches[0].version, batches[0].previous_version, batches[0].changes.len()), (10, 0, 3));
    assert_eq!((batches[1].version, batches[1].previous_version, batches[1].cause), (11, 10, FeedCause::LivePass));
    let moved: Vec<(i64, u64, u64)> =
        batches[1].changes.iter().map(|c| (c.product_id, c.rank, c.previous_rank)).collect();
    assert_eq!(moved, vec![(2, 1, 2), (1, 2, 1)], "only the top 3 is fed; 3 kept its place");
    assert_eq!((batches[1].entries, batches[1].checksum), (3, checksum([2, 1, 3])));
    assert_eq!(cursors.feed_cursor(key()).await.expect("cursor").map(|c| c.version), Some(11));
    // Nothing noted, nothing sent.
    feed.round().await;
    assert_eq!(sink.batches.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn a_failing_sink_keeps_the_board_and_the_next_round_sends_what_came_meanwhile_whole() {
    let sink = Arc::new(Recorded::default());
    let cursors = Arc::new(MemoryRankingStore::new());
    let feed = feeder(sink.clone(), cursors.clone(), Duration::from_secs(3_600));
    feed.note(key(), 10, &board(&[1, 2, 3]), FeedCause::Recompute);
    feed.round().await;
    sink.down.store(true, Ordering::SeqCst);
    feed.note(key(), 11, &board(&[2, 1, 3]), FeedCause::LivePass);
    feed.round().await;
    assert_eq!(cursors.feed_cursor(key()).await.expect("cursor").map(|c| c.version), Some(10));
    feed.note(key(), 12, &board(&[3, 2, 1]), FeedCause::Controls);
    sink.down.store(false, Ordering::SeqCst);
    feed.round().await;
    let batches = sink.batches.lock().expect("lock").clone();
    // Whole: the refused send might have been stored (an acknowledgement lost).
    assert_eq!(batches.iter().map(|b| (b.version, b.previous_version)).collect::<Vec<_>>(), vec![(10, 0), (12, 0)]);
    assert_eq!(batches[1].checksum, checksum([3, 2, 1]));
}

#[tokio::test]
async fn an_older_version_than_the_cursor_sends_nothing_and_a_snapshot_goes_whole() {
    let sink = Arc::new(Recorded::default());
    let cursors = Arc::new(MemoryRankingStore::new());
    let feed = feeder(sink.clone(), cursors.clone(), Duration::ZERO);
    let ahead = FeedCursor { version: 20, whole_at_ms: 0, top: Vec::new() };
    cursors.advance_feed_cursor(key(), &ahead, chrono::Utc::now() + chrono::Duration::days(1)).await.expect("cursor");
    feed.note(key(), 19, &board(&[1]), FeedCause::Recompute);
    feed.round().await;
    assert!(sink.batches.lock().expect("lock").is_empty(), "another replica fed a later version");
    // With a snapshot due every round, each version goes whole.
    feed.note(key(), 21, &board(&[1, 2]), FeedCause::Recompute);
    feed.round().await;
    feed.note(key(), 22, &board(&[1, 2]), FeedCause::Recompute);
    feed.round().await;
    let batches = sink.batches.lock().expect("lock").clone();
    assert_eq!(
        batches.iter().map(|b| (b.version, b.previous_version, b.changes.len())).collect::<Vec<_>>(),
        vec![(21, 0, 2), (22, 0, 2)]
    );
}

#[tokio::test]
async fn a_round_that_reached_one_sink_of_two_sends_the_board_whole_next() {
    let (first, second) = (Arc::new(Recorded::default()), Arc::new(Recorded::default()));
    let cursors = Arc::new(MemoryRankingStore::new());
    let settings =
        FeedSettings { top: 3, interval: Duration::from_millis(10), whole_every: Duration::from_secs(3_600) };
    let policy = Arc::new(Policy::new(PolicySettings::default()));
    let sinks: Vec<Arc<dyn FeedSink>> = vec![first.clone(), second.clone()];
    let feed = Feeder::new(cursors.clone(), sinks, policy, Arc::new(Metrics::default()), settings);
    feed.note(key(), 10, &board(&[1, 2, 3]), FeedCause::Recompute);
    feed.round().await;
    second.down.store(true, Ordering::SeqCst);
    feed.note(key(), 11, &board(&[2, 1, 3]), FeedCause::LivePass);
    feed.round().await;
    // The first sink holds 11; the cursor still says 10.
    second.down.store(false, Ordering::SeqCst);
    feed.note(key(), 12, &board(&[3, 2, 1]), FeedCause::LivePass);
    feed.round().await;
    let sent = |sink: &Recorded| {
        sink.batches.lock().expect("lock").iter().map(|b| (b.version, b.previous_version)).collect::<Vec<_>>()
    };
    assert_eq!(sent(&first), vec![(10, 0), (11, 10), (12, 0)], "whole after the partial round");
    assert_eq!(sent(&second), vec![(10, 0), (12, 0)]);
    assert_eq!(cursors.feed_cursor(key()).await.expect("cursor").map(|c| c.version), Some(12));
}
