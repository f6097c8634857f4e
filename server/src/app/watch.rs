//! WatchTopN (SPEC §9.3): live tops pushed to watchers.
//!
//! One feed per distinct (window, date, hour, segment, limit) on a replica, shared by all its
//! watchers: a task that computes the top when this replica's copies change (or, for the
//! hourly window, every interval) and publishes it in a `tokio::sync::watch` channel, at most
//! once per `RANKING_WATCH_INTERVAL`, and only when the entries (ids, ranks, scores) changed.
//! A watcher holds a receiver: it always reads the latest state, so a slow reader skips
//! states instead of queueing them, whatever it does. A feed ends with its last watcher;
//! every feed and stream ends at shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::invalid::Invalid;
use super::queries::{DEFAULT_LIMIT, Queries, QueryError, Selector, TopAnswer, TopQuery, Window};
use super::snapshots::Snapshots;
use crate::metrics::Metrics;
use crate::ports::RankingKey;

/// Most entries of a watched top.
pub const MAX_WATCH_LIMIT: u32 = 100;

/// What a watcher asks for: a selector whose empty date follows today and whose empty hour
/// follows the current hour, and the size of the top.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WatchQuery {
    /// The ranking.
    pub selector: Selector,
    /// Entries, 1-100 (0 means 10).
    pub limit: u32,
}

/// One state of a watched top.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Grows by one with every state published by the feed.
    pub seq: u64,
    /// The top.
    pub answer: Arc<TopAnswer>,
    /// The hour read (hourly window).
    pub hour: Option<u32>,
}

impl Frame {
    /// Whether `answer` shows other entries (ids, ranks or scores) than this frame.
    fn differs(&self, answer: &TopAnswer) -> bool {
        let entries =
            |a: &TopAnswer| a.entries.iter().map(|e| (e.product_id, e.rank, e.score.to_bits())).collect::<Vec<_>>();
        self.answer.date != answer.date || entries(&self.answer) != entries(answer)
    }
}

/// Why a watch cannot start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The request broke a rule.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// `RANKING_MAX_WATCHERS` streams are open.
    #[error("{0} watchers are open on this replica; retry later or on another replica")]
    Full(usize),
    /// The replica is shutting down.
    #[error("the server is shutting down; reconnect to another replica")]
    Closing,
    /// The first state could not be computed.
    #[error(transparent)]
    Query(#[from] QueryError),
}

/// A watcher's end: the latest frame of its feed, and its place among the watchers.
pub struct Watcher {
    /// The feed's frames (the current one is unseen when the watch starts).
    pub frames: watch::Receiver<Option<Arc<Frame>>>,
    /// Cancelled when the replica shuts down: the stream then ends with UNAVAILABLE.
    pub closing: CancellationToken,
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
    last_seq: u64,
    done: bool,
}

impl Watcher {
    /// The next state to send; once the replica shuts down (or the feed ends), one
    /// [`WatchError::Closing`], then `None`.
    pub async fn next(&mut self) -> Option<Result<Arc<Frame>, WatchError>> {
        if self.done {
            return None;
        }
        loop {
            tokio::select! {
                biased;
                () = self.closing.cancelled() => break,
                changed = self.frames.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let Some(frame) = self.frames.borrow_and_update().clone() else { continue };
                    if self.last_seq > 0 && frame.seq > self.last_seq + 1 {
                        self.metrics.watch_skipped.inc_by(frame.seq - self.last_seq - 1);
                    }
                    self.last_seq = frame.seq;
                    self.metrics.watch_messages.inc();
                    return Some(Ok(frame));
                }
            }
        }
        self.done = true;
        Some(Err(WatchError::Closing))
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.metrics.watch_streams.dec();
    }
}

/// The sending end of a feed: the latest frame (none before the first is computed).
type Feed = watch::Sender<Option<Arc<Frame>>>;

/// The feeds of one replica.
pub struct WatchHub {
    queries: Arc<Queries>,
    snapshots: Arc<Snapshots>,
    metrics: Arc<Metrics>,
    interval: Duration,
    max_watchers: usize,
    watchers: Arc<Semaphore>,
    feeds: Arc<Mutex<HashMap<WatchQuery, Feed>>>,
    closing: CancellationToken,
    tasks: TaskTracker,
}

impl WatchHub {
    /// Feeds computed by `queries`, woken by `snapshots`, at most one frame per `interval`,
    /// at most `max_watchers` streams.
    pub fn new(
        queries: Arc<Queries>,
        snapshots: Arc<Snapshots>,
        metrics: Arc<Metrics>,
        interval: Duration,
        max_watchers: usize,
    ) -> Self {
        Self {
            queries,
            snapshots,
            metrics,
            interval: interval.max(Duration::from_millis(10)),
            max_watchers,
            watchers: Arc::new(Semaphore::new(max_watchers)),
            feeds: Arc::default(),
            closing: CancellationToken::new(),
            tasks: TaskTracker::new(),
        }
    }

    /// Starts a watch: checks the request, takes a watcher slot, joins (or starts) the feed.
    pub fn watch(&self, mut query: WatchQuery) -> Result<Watcher, WatchError> {
        if self.closing.is_cancelled() {
            return Err(WatchError::Closing);
        }
        if query.limit > MAX_WATCH_LIMIT {
            let reason = format!("must be at most {MAX_WATCH_LIMIT}, got {}", query.limit);
            return Err(Invalid::field("limit", reason).into());
        }
        if query.limit == 0 {
            query.limit = DEFAULT_LIMIT;
        }
        // The selector's rules (hour range, hourly segments…), checked now rather than by the
        // feed.
        self.queries.resolve(query.selector, self.queries.now())?;
        let permit = self.watchers.clone().try_acquire_owned().map_err(|_| WatchError::Full(self.max_watchers))?;
        let mut frames = {
            let mut feeds = self.feeds.lock().unwrap_or_else(|e| e.into_inner());
            match feeds.get(&query) {
                Some(feed) => feed.subscribe(),
                None => {
                    let (feed, frames) = watch::channel(None);
                    feeds.insert(query, feed.clone());
                    self.tasks.spawn(self.feed(query, feed));
                    frames
                }
            }
        };
        // The current frame, if the feed has one, is the watcher's first message.
        frames.mark_changed();
        self.metrics.watch_streams.inc();
        Ok(Watcher {
            frames,
            closing: self.closing.clone(),
            _permit: permit,
            metrics: self.metrics.clone(),
            last_seq: 0,
            done: false,
        })
    }

    /// Ends every stream (with UNAVAILABLE) and feed.
    pub fn close(&self) {
        self.closing.cancel();
        self.tasks.close();
    }

    /// Waits until every feed has ended (after [`WatchHub::close`]).
    pub async fn closed(&self) {
        self.tasks.wait().await;
    }

    fn feed(&self, query: WatchQuery, feed: Feed) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (queries, feeds, closing) = (self.queries.clone(), self.feeds.clone(), self.closing.clone());
        let mut installed = self.snapshots.installed();
        let interval = self.interval;
        async move {
            let mut seq = 0;
            let mut last_sent: Option<tokio::time::Instant> = None;
            loop {
                let computed_at = tokio::time::Instant::now();
                match queries.top(TopQuery { selector: query.selector, limit: query.limit, ..Default::default() }).await
                {
                    Ok(answer) => {
                        let hour = hour_of(&queries, &query);
                        let sent = feed.send_if_modified(|current| {
                            if current.as_ref().is_some_and(|f| !f.differs(&answer)) {
                                return false;
                            }
                            seq += 1;
                            *current = Some(Arc::new(Frame { seq, answer, hour }));
                            true
                        });
                        if sent {
                            last_sent = Some(computed_at);
                        }
                    }
                    // Watchers keep the last state; the next wake-up tries again.
                    Err(e) => tracing::debug!(error = %e, ?query, "watched top not computed"),
                }
                // At most one frame per interval (counted from the last frame sent, so a
                // change after a quiet spell goes out at once), and at most ten computations
                // per interval however often copies are installed; the hourly window is
                // computed once per interval.
                let versioned = !matches!(query.selector.window, Some(Window::Hourly));
                let mut earliest = computed_at + interval / 10;
                if let Some(sent) = last_sent {
                    earliest = earliest.max(sent + interval);
                }
                if !versioned {
                    earliest = earliest.max(computed_at + interval);
                }
                tokio::select! {
                    () = closing.cancelled() => break,
                    () = tokio::time::sleep_until(earliest) => {}
                }
                let follows_today = query.selector.date.is_none();
                if versioned {
                    // A new version held by this replica wakes the feed at once; the timer
                    // covers midnight (a feed following today) and rankings this replica
                    // does not hold (days before yesterday, read from Redis).
                    let fallback = if follows_today { interval * 4 } else { interval * 30 };
                    tokio::select! {
                        () = closing.cancelled() => break,
                        _ = installed.changed() => {}
                        () = feed.closed() => {}
                        () = tokio::time::sleep(fallback) => {}
                    }
                }
                let mut feeds = feeds.lock().unwrap_or_else(|e| e.into_inner());
                if feed.receiver_count() == 0 {
                    feeds.remove(&query);
                    break;
                }
            }
        }
    }
}

/// The hour an hourly watch reads now.
fn hour_of(queries: &Queries, query: &WatchQuery) -> Option<u32> {
    match queries.resolve(query.selector, queries.now()).map(|r| r.key) {
        Ok(RankingKey::Hourly(h)) => Some(h.hour),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
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
        store.publish(RankingKey::Daily(day), &scored(&[2, 1]), life).await.expect("day");
        store.publish(RankingKey::Daily(next_day), &scored(&[3]), life).await.expect("next day");
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

#[cfg(test)]
mod slow_reader {
    use chrono::Utc;

    use super::tests_support::*;
    use super::*;
    use crate::ports::{RankingStore, Scored, VersionLife};

    /// A watcher that reads nothing while the top changes many times holds one frame, the
    /// latest, never the ones in between: old frames are freed as soon as they are replaced.
    #[tokio::test(start_paused = true)]
    async fn a_watcher_that_does_not_read_holds_only_the_latest_frame() {
        let store = Arc::new(crate::adapters::memory::MemoryRankingStore::new());
        let (hub, snapshots) = hub_and_snapshots(&store, Utc::now());
        let key = RankingKey::Daily(Utc::now().date_naive());
        let life = VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: Duration::ZERO };
        let publish = |lead: i64| {
            let (store, snapshots) = (store.clone(), snapshots.clone());
            async move {
                let entries = vec![Scored { product_id: lead, score: 2.0 }, Scored { product_id: 1_000, score: 1.0 }];
                let version = store.publish(key, &entries, life).await.expect("published");
                snapshots.install(key, version, entries).await;
            }
        };
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
}

#[cfg(test)]
mod tests_support {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::adapters::memory::MemoryRankingStore;
    use crate::app::policy::Clock;
    use crate::app::test_support::Wired;

    /// A hub over an in-process store, its clock following tokio's from `at`, 100 ms pace.
    pub fn hub_and_snapshots(store: &Arc<MemoryRankingStore>, at: DateTime<Utc>) -> (WatchHub, Arc<Snapshots>) {
        let wired = Wired::new(store, Clock::tokio_from(at));
        let queries = Arc::new(wired.queries(store));
        let hub = WatchHub::new(queries, wired.snapshots.clone(), wired.metrics, Duration::from_millis(100), 10);
        (hub, wired.snapshots)
    }
}
