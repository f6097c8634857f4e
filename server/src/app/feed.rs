//! The ranking feed's writer: after a publication, the board's changes within its fed top go
//! out to the sinks (Kafka, JetStream), then the board's cursor moves to that version.
//!
//! Publication never waits for it: a publisher notes the version it published ([`Feeder::note`],
//! a map of the latest version per board, bounded by the boards there are), and this replica's
//! feed task sends what is noted at most once per `RANKING_FEED_INTERVAL` per board (versions
//! published meanwhile are folded into the next one). Each version's changes are taken against
//! the board's cursor, the last version the feed completed, kept in the ranking store with the
//! board: a crash between a publication and its feed, a broker outage or another replica's
//! publication only mean that the next version fed carries the changes from the cursor on. A
//! sink that fails keeps the board noted and is tried again at the next interval; the cursor
//! moves only after every sink acknowledged every record, and only forward (a replica that
//! stalled and feeds an older version late changes no cursor; its records are older versions
//! a consumer skips). A board is sent whole (against version 0) at first, when its cursor is
//! lost, every `RANKING_FEED_SNAPSHOT`, and after a round that failed once it had started
//! sending (a sink refused or timed out, or the cursor's store did): a sink may hold that
//! version — it took it, or stored it and lost the acknowledgement — while the cursor does not,
//! so no change against the cursor would chain onto what its consumers hold.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::policy::Policy;
use crate::domain::feed::{FedEntry, changes, checksum};
use crate::domain::snapshot::Snapshot;
use crate::metrics::Metrics;
use crate::metrics::feed::{FeedRecordLabels, FeedSinkLabels};
use crate::ports::{FeedBatch, FeedCause, FeedCursor, FeedCursors, FeedSink, RankingKey, StoreError};

/// What the feed follows and how often.
#[derive(Debug, Clone, Copy)]
pub struct FeedSettings {
    /// Entries of each board followed (`RANKING_FEED_TOP`).
    pub top: usize,
    /// At most one fed version per board per this (`RANKING_FEED_INTERVAL`).
    pub interval: Duration,
    /// A board is sent whole at least this often (`RANKING_FEED_SNAPSHOT`).
    pub whole_every: Duration,
}

/// A published version waiting to be fed.
#[derive(Debug, Clone)]
struct Noted {
    version: u64,
    top: Vec<FedEntry>,
    cause: FeedCause,
    published_at_ms: i64,
    /// Sent whole: an earlier round reached some sinks but not the cursor.
    whole: bool,
}

/// The feed of this replica's publications.
pub struct Feeder {
    cursors: Arc<dyn FeedCursors>,
    sinks: Vec<Arc<dyn FeedSink>>,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
    settings: FeedSettings,
    noted: Mutex<HashMap<RankingKey, Noted>>,
    wake: tokio::sync::Notify,
    /// This feeder's share of `ranking_feed_behind_versions`.
    behind: std::sync::atomic::AtomicI64,
}

impl Feeder {
    /// A feeder to `sinks` (none: the feed is off and nothing is noted).
    pub fn new(
        cursors: Arc<dyn FeedCursors>,
        sinks: Vec<Arc<dyn FeedSink>>,
        policy: Arc<Policy>,
        metrics: Arc<Metrics>,
        settings: FeedSettings,
    ) -> Self {
        Self {
            cursors,
            sinks,
            policy,
            metrics,
            settings,
            noted: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            behind: Default::default(),
        }
    }

    /// Whether a sink is configured.
    pub fn is_on(&self) -> bool {
        !self.sinks.is_empty()
    }

    /// Notes that `version` of `key` was published as `served` (DAILY and WEEKLY boards, whole
    /// or a segment's; hourly rankings are not fed).
    pub fn note(&self, key: RankingKey, version: u64, served: &Snapshot, cause: FeedCause) {
        if !self.is_on() || matches!(key, RankingKey::Hourly(_)) {
            return;
        }
        let top = served
            .page(0, self.settings.top as u64)
            .iter()
            .enumerate()
            .map(|(at, e)| FedEntry { product_id: e.product_id, score: e.score, organic_rank: served.organic_rank(at) })
            .collect();
        let published_at_ms = self.policy.now().timestamp_millis();
        let mut noted = self.noted.lock().unwrap_or_else(|p| p.into_inner());
        if noted.get(&key).is_some_and(|n| n.version >= version) {
            return;
        }
        let whole = noted.get(&key).is_some_and(|n| n.whole);
        noted.insert(key, Noted { version, top, cause, published_at_ms, whole });
        self.count_behind(noted.len());
        drop(noted);
        self.wake.notify_one();
    }

    /// Feeds what is noted until `stop`, one round per interval at most.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        if !self.is_on() {
            return;
        }
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(self.settings.interval) => {}
            }
            // A round waiting on a sink that does not answer is dropped at the shutdown: what
            // it did not feed, the next publisher feeds.
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.round() => {}
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.settings.interval) => {}
            }
        }
    }

    /// Feeds every noted board once; a board that fails stays noted (unless a newer version
    /// was noted meanwhile).
    pub async fn round(&self) {
        let due: Vec<(RankingKey, Noted)> =
            std::mem::take(&mut *self.noted.lock().unwrap_or_else(|p| p.into_inner())).into_iter().collect();
        for (key, noted) in due {
            if let Err(Unfed { sink, error, partly }) = self.feed(key, &noted).await {
                tracing::warn!(?key, version = noted.version, sink, %error, "ranking feed not sent; tried again");
                self.metrics.feed.failures.get_or_create(&FeedSinkLabels { sink }).inc();
                let mut pending = self.noted.lock().unwrap_or_else(|p| p.into_inner());
                let pending = pending.entry(key).or_insert(noted);
                pending.whole |= partly;
            }
        }
        let noted = self.noted.lock().unwrap_or_else(|p| p.into_inner());
        self.count_behind(noted.len());
    }

    /// Sets this feeder's share of `ranking_feed_behind_versions` to `behind`, the boards it
    /// holds noted (called under the lock of what is noted, so two calls apply in order). The
    /// gauge sums every profile's feeder: each moves it by the change of its own share, never
    /// sets it.
    fn count_behind(&self, behind: usize) {
        let behind = i64::try_from(behind).unwrap_or(i64::MAX);
        let before = self.behind.swap(behind, std::sync::atomic::Ordering::Relaxed);
        self.metrics.feed.behind_versions.inc_by(behind - before);
    }

    /// Sends `noted`'s changes against the board's cursor, then moves the cursor.
    async fn feed(&self, key: RankingKey, noted: &Noted) -> Result<(), Unfed> {
        let unfed = |sink, error, partly| Unfed { sink, error, partly };
        let cursor = self.cursors.feed_cursor(key).await.map_err(|e| unfed("cursor", e, false))?;
        if cursor.as_ref().is_some_and(|c| c.version >= noted.version) {
            return Ok(());
        }
        let now_ms = self.policy.now().timestamp_millis();
        let whole_every = i64::try_from(self.settings.whole_every.as_millis()).unwrap_or(i64::MAX);
        let (previous_version, previous_top, whole_at_ms) = match &cursor {
            Some(c) if !noted.whole && now_ms.saturating_sub(c.whole_at_ms) < whole_every => {
                (c.version, c.top.as_slice(), c.whole_at_ms)
            }
            _ => (0, &[][..], now_ms),
        };
        let batch = FeedBatch {
            board: key,
            profile: self.policy.profile_name.to_string(),
            version: noted.version,
            previous_version,
            changes: changes(previous_top, &noted.top),
            entries: noted.top.len() as u32,
            checksum: checksum(noted.top.iter().map(|e| e.product_id)),
            cause: noted.cause,
        };
        for sink in &self.sinks {
            // Even the first: a send that timed out may have been stored.
            sink.send(&batch).await.map_err(|e| unfed(sink.name(), e, true))?;
            let records = &self.metrics.feed.records;
            records
                .get_or_create(&FeedRecordLabels { sink: sink.name(), kind: "change" })
                .inc_by(batch.changes.len() as u64);
            records.get_or_create(&FeedRecordLabels { sink: sink.name(), kind: "version" }).inc();
        }
        let lag_ms = self.policy.now().timestamp_millis().saturating_sub(noted.published_at_ms);
        self.metrics.feed.lag_seconds.observe(lag_ms.max(0) as f64 / 1_000.0);
        let moved = FeedCursor { version: noted.version, whole_at_ms, top: noted.top.clone() };
        let expire_at = self.policy.daily_expiry(key.date());
        self.cursors.advance_feed_cursor(key, &moved, expire_at).await.map_err(|e| unfed("cursor", e, true))?;
        Ok(())
    }
}

/// Why a board was not fed: the sink (or `cursor`) that failed, and whether a sink may hold the
/// version (the next round then sends the board whole).
struct Unfed {
    sink: &'static str,
    error: StoreError,
    partly: bool,
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
