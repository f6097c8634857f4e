//! The periodic recompute: today every interval, yesterday too on the first run after
//! midnight, and data retention.
//!
//! Replicas coordinate through leases: a tick marker per day makes one replica recompute
//! a day per tick, and the recompute itself runs under the day's lock. [`Scheduler::tick`]
//! is one deterministic step, so tests drive it directly.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Days, NaiveDate, Utc};
use tokio::sync::Mutex;

use crate::ports::{LeaseLock, MetricsStore, RankingKey, RankingStore};
use crate::recompute::{Recompute, RecomputeReport};

/// Rows deleted per statement by retention.
const PRUNE_CHUNK: u32 = 5_000;

/// Drives recomputes and retention.
pub struct Scheduler {
    recompute: Arc<Recompute>,
    store: Arc<dyn MetricsStore>,
    rankings: Arc<dyn RankingStore>,
    leases: Arc<dyn LeaseLock>,
    interval: Duration,
    retention_days: u32,
    /// The day of the previous tick, to notice midnight.
    last_day: Mutex<Option<NaiveDate>>,
    /// Whether the start-up run has finished, for callers that must not race it.
    started: tokio::sync::watch::Sender<bool>,
}

impl Scheduler {
    /// A scheduler ticking every `interval` (zero: only the start-up run).
    pub fn new(
        recompute: Arc<Recompute>,
        store: Arc<dyn MetricsStore>,
        rankings: Arc<dyn RankingStore>,
        leases: Arc<dyn LeaseLock>,
        interval: Duration,
        retention_days: u32,
    ) -> Self {
        let (started, _) = tokio::sync::watch::channel(false);
        Self { recompute, store, rankings, leases, interval, retention_days, last_day: Mutex::new(None), started }
    }

    /// The start-up run: today, and yesterday when its ranking is missing, so an empty or
    /// flushed store is filled without waiting for the first interval.
    pub async fn startup(&self, now: DateTime<Utc>) -> Vec<RecomputeReport> {
        let today = self.recompute.calendar().day_of(now);
        // A tick that already ran knows the day better than the start-up does.
        self.last_day.lock().await.get_or_insert(today);
        let mut days = vec![today];
        if let Some(yesterday) = today.checked_sub_days(Days::new(1)) {
            match self.rankings.exists(RankingKey::Daily(yesterday)).await {
                Ok(false) => days.push(yesterday),
                Ok(true) => {}
                Err(e) => tracing::warn!(error = %e, "cannot check yesterday's ranking"),
            }
        }
        let reports = self.recompute_days(&days, true).await;
        self.started.send_replace(true);
        reports
    }

    /// Resolves once the start-up run has finished.
    pub async fn wait_started(&self) {
        let mut started = self.started.subscribe();
        let _ = started.wait_for(|done| *done).await;
    }

    /// One scheduler step at `now`: recompute today (and yesterday after midnight) unless
    /// another replica did in this tick, then prune expired data.
    pub async fn tick(&self, now: DateTime<Utc>) -> Vec<RecomputeReport> {
        let today = self.recompute.calendar().day_of(now);
        let mut days = vec![today];
        {
            let mut last = self.last_day.lock().await;
            if last.is_some_and(|d| d < today) {
                days.extend(today.checked_sub_days(Days::new(1)));
            }
            *last = Some(today);
        }
        let reports = self.recompute_days(&days, false).await;
        self.prune(now).await;
        reports
    }

    async fn recompute_days(&self, days: &[NaiveDate], force: bool) -> Vec<RecomputeReport> {
        let mut reports = Vec::new();
        for day in days {
            // The marker outlives this tick but not the next one: whoever sets it owns the
            // day for this tick, and the others skip it.
            let marker_ttl = self.interval.mul_f64(0.9).max(Duration::from_millis(100));
            if !force {
                match self.leases.try_acquire(&format!("tick:{day}"), marker_ttl).await {
                    Ok(Some(_)) => {}
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, %day, "scheduler cannot reach the lock store");
                        continue;
                    }
                }
            }
            match self.recompute.run(*day, Duration::from_secs(30)).await {
                Ok(r) => reports.push(r),
                Err(e) => tracing::warn!(error = %e, %day, "scheduled recompute did not run"),
            }
        }
        reports
    }

    async fn prune(&self, now: DateTime<Utc>) {
        let ttl = self.interval.mul_f64(0.9).max(Duration::from_millis(100));
        match self.leases.try_acquire("prune", ttl).await {
            Ok(Some(_)) => {}
            _ => return,
        }
        let retention = chrono::Duration::days(i64::from(self.retention_days));
        let today = self.recompute.calendar().day_of(now);
        let oldest_day = today.checked_sub_days(Days::new(u64::from(self.retention_days))).unwrap_or(today);
        match self.store.prune(now - retention, oldest_day, PRUNE_CHUNK).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(rows = n, "pruned expired events and daily metrics"),
            Err(e) => tracing::warn!(error = %e, "retention prune failed"),
        }
    }

    /// Runs the start-up recompute, then ticks every interval until `shutdown` resolves.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        self.startup(Utc::now()).await;
        if self.interval.is_zero() {
            shutdown.await;
            return;
        }
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await; // the first tick fires at once; start-up already covered it
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = ticker.tick() => { self.tick(Utc::now()).await; }
            }
        }
    }
}
