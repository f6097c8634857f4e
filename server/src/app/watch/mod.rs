//! WatchTopN: live tops pushed to watchers.
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
                        self.metrics.watch.skipped.inc_by(frame.seq - self.last_seq - 1);
                    }
                    self.last_seq = frame.seq;
                    self.metrics.watch.messages.inc();
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
        // States published since the last one this watcher took never reached it (a reader
        // that stopped reading): skipped too, or a stalled peer's backlog would never show.
        let newest = self.frames.borrow().as_ref().map_or(0, |f| f.seq);
        if self.last_seq > 0 && newest > self.last_seq {
            self.metrics.watch.skipped.inc_by(newest - self.last_seq);
        }
        self.metrics.watch.streams.dec();
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

    /// The same hub taking its watcher slots from `slots` (holding `max_watchers` permits),
    /// shared with the other profiles' hubs: the replica's bound on streams counts them all.
    pub fn sharing_slots(mut self, slots: Arc<Semaphore>) -> Self {
        self.watchers = slots;
        self
    }

    /// The slots its watchers take, to share with another hub.
    pub fn slots(&self) -> Arc<Semaphore> {
        self.watchers.clone()
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
        self.metrics.watch.streams.inc();
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
mod tests;
