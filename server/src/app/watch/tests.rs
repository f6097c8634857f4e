//! Unit tests of the watch feeds on a paused clock over an in-process ranking store.

use super::*;
use crate::ports::Fence;

mod clock {
    use chrono::{NaiveDate, NaiveTime, TimeZone, Utc};

    use super::*;
    use crate::adapters::memory::MemoryRankingStore;
    use crate::domain::calendar::RankingHour;
    use crate::ports::{HourlyIncrement, RankingStore, Scored, VersionLife};

    fn hub(store: &Arc<MemoryRankingStore>, at: chrono::DateTime<Utc>) -> WatchHub {
        super::tests_support::hub_and_snapshots(store, at).0
    }

    /// The next frame within an hour of the (paused, self-advancing) clock.
    async fn next_frame(watcher: &mut Watcher) -> Arc<Frame> {
        let next =
            tokio::time::timeout(Duration::from_secs(3_600), watcher.next()).await.expect("a frame within the hour");
        next.expect("open").unwrap_or_else(|e| panic!("{e}"))
    }

    /// With the clock paused one second before midnight, a watch of "today" moves to the
    /// next day's ranking by itself, and a watch of "the current hour" to the next hour's.
    #[tokio::test(start_paused = true)]
    async fn empty_dates_and_hours_follow_the_clock_across_midnight() {
        let store = Arc::new(MemoryRankingStore::new());
        let day = NaiveDate::from_ymd_opt(2026, 6, 1).expect("date");
        let next_day = day.succ_opt().expect("date");
        let life = VersionLife { expire_at: Utc::now() + chrono::Duration::days(30), superseded_for: Duration::ZERO };
        let scored = |ids: &[i64]| -> Vec<Scored> {
            ids.iter().enumerate().map(|(i, id)| Scored { product_id: *id, score: 10.0 - i as f64 }).collect()
        };
        store.publish(RankingKey::Daily(day), &scored(&[2, 1]), life, &Fence::unchecked()).await.expect("day");
        store.publish(RankingKey::Daily(next_day), &scored(&[3]), life, &Fence::unchecked()).await.expect("next day");
        let increment = |date, hour, product_id| HourlyIncrement {
            hour: RankingHour { date, hour },
            product_id,
            delta: 1.0,
            expire_at: Utc::now() + chrono::Duration::days(30),
        };
        store.increment_hourly(&[increment(day, 23, 7), increment(next_day, 0, 8)]).await.expect("hourly");

        let before_midnight = Utc.from_utc_datetime(&day.and_time(NaiveTime::from_hms_opt(23, 59, 59).expect("time")));
        let hub = hub(&store, before_midnight);
        let mut daily = hub.watch(WatchQuery { selector: Selector::default(), limit: 10 }).expect("watch");
        let hourly =
            WatchQuery { selector: Selector { window: Some(Window::Hourly), ..Default::default() }, limit: 10 };
        let mut hourly = hub.watch(hourly).expect("watch");

        // Watchers of the same top share its feed.
        let mut again = hub.watch(WatchQuery { selector: Selector::default(), limit: 10 }).expect("watch");
        assert_eq!(hub.feeds.lock().expect("feeds").len(), 2);
        let first = next_frame(&mut daily).await;
        assert_eq!(next_frame(&mut again).await, first);
        drop(again);
        assert_eq!(first.answer.date, day);
        assert_eq!(first.answer.entries.iter().map(|e| e.product_id).collect::<Vec<_>>(), vec![2, 1]);
        let first_hour = next_frame(&mut hourly).await;
        assert_eq!((first_hour.hour, first_hour.answer.entries[0].product_id), (Some(23), 7));

        // The paused clock moves on by itself while the feeds sleep.
        let after = next_frame(&mut daily).await;
        assert_eq!((after.answer.date, after.answer.entries[0].product_id), (next_day, 3));
        let next_hour = next_frame(&mut hourly).await;
        assert_eq!(
            (next_hour.answer.date, next_hour.hour, next_hour.answer.entries[0].product_id),
            (next_day, Some(0), 8)
        );
        hub.close();
        assert!(matches!(daily.next().await, Some(Err(WatchError::Closing))));
        hub.closed().await;
    }
}

mod slow_reader {
    use chrono::{NaiveDate, Utc};

    use super::tests_support::*;
    use super::*;
    use crate::adapters::memory::MemoryRankingStore;
    use crate::ports::{RankingStore, Scored, VersionLife};

    /// An in-process store and a hub over it, on a clock set to noon of today (the paused
    /// clock follows), and that day.
    fn today_hub() -> (Arc<MemoryRankingStore>, WatchHub, Arc<Snapshots>, NaiveDate) {
        let store = Arc::new(MemoryRankingStore::new());
        let now = crate::test_support::noon(0);
        let (hub, snapshots) = hub_and_snapshots(&store, now);
        (store, hub, snapshots, now.date_naive())
    }

    /// Publishes and installs the daily top of `date`, two led by `lead`; its version.
    async fn publish_top(store: &MemoryRankingStore, snapshots: &Snapshots, date: NaiveDate, lead: i64) -> u64 {
        let key = RankingKey::Daily(date);
        let life = VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: Duration::ZERO };
        let entries = vec![Scored { product_id: lead, score: 2.0 }, Scored { product_id: 1_000, score: 1.0 }];
        let version = store.publish(key, &entries, life, &Fence::unchecked()).await.expect("published");
        snapshots.install(key, version, entries).await;
        version
    }

    /// A watcher that reads nothing while the top changes many times holds one frame, the
    /// latest, never the ones in between: old frames are freed as soon as they are replaced.
    #[tokio::test(start_paused = true)]
    async fn a_watcher_that_does_not_read_holds_only_the_latest_frame() {
        let (store, hub, snapshots, today) = today_hub();
        let publish = |lead: i64| publish_top(&store, &snapshots, today, lead);
        publish(1).await;
        let mut watcher = hub.watch(WatchQuery { selector: Selector::default(), limit: 2 }).expect("watch");
        let first = watcher.next().await.expect("open").expect("frame");
        for lead in 2..=20 {
            publish(lead).await;
            // Let the feed see the version (its pace is 100 ms) before the next one.
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        assert_eq!(Arc::strong_count(&first), 1, "the channel no longer holds the first frame");
        let latest = watcher.next().await.expect("open").expect("frame");
        assert_eq!(latest.answer.entries[0].product_id, 20);
        assert!(latest.seq > first.seq + 1, "frames in between were skipped, not queued");
        hub.close();
    }

    /// A version whose top is the same as the one watched makes no frame: the next frame is
    /// the next change, numbered right after the first.
    #[tokio::test(start_paused = true)]
    async fn an_unchanged_version_makes_no_frame() {
        let (store, hub, snapshots, today) = today_hub();
        let publish = |lead: i64| publish_top(&store, &snapshots, today, lead);
        publish(1).await;
        let mut watcher = hub.watch(WatchQuery { selector: Selector::default(), limit: 2 }).expect("watch");
        let first = watcher.next().await.expect("open").expect("frame");
        let unchanged = publish(1).await;
        // The paused clock lets the feed see the unchanged version (its pace is 100 ms)
        // before the change is published.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(unchanged > first.answer.version.expect("versioned"));
        let changed = publish(2).await;
        let next = watcher.next().await.expect("open").expect("frame");
        assert_eq!(
            (next.seq, next.answer.version, next.answer.entries[0].product_id),
            (first.seq + 1, Some(changed), 2)
        );
        hub.close();
    }
}

/// The hub every test watches through.
mod tests_support {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::adapters::memory::MemoryRankingStore;
    use crate::app::policy::Clock;
    use crate::test_support::Wired;

    /// A hub over an in-process store, its clock following tokio's from `at`, 100 ms pace.
    pub fn hub_and_snapshots(store: &Arc<MemoryRankingStore>, at: DateTime<Utc>) -> (WatchHub, Arc<Snapshots>) {
        let wired = Wired::new(store, Clock::tokio_from(at));
        let queries = Arc::new(wired.queries(store));
        let hub = WatchHub::new(queries, wired.snapshots.clone(), wired.metrics, Duration::from_millis(100), 10);
        (hub, wired.snapshots)
    }
}
