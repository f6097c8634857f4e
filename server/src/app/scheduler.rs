//! The periodic recompute: today every interval, yesterday too on the first run after
//! midnight, and data retention.
//!
//! Replicas coordinate through claims: the periodic work of one interval (a day's
//! recompute, retention) is claimed under a name that includes the interval's slot number
//! (`now / interval`), so one replica does it per interval, and the recompute itself runs
//! under the day's lock. [`Scheduler::tick`] is one deterministic step at a given instant,
//! so tests drive it directly.

use std::sync::Arc;

use chrono::{DateTime, Days, NaiveDate, Utc};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::recompute::{Recompute, RecomputeReport};

/// Drives recomputes and retention.
pub struct Scheduler {
    recompute: Arc<Recompute>,
    /// The day of the previous tick, to notice midnight.
    last_day: Mutex<Option<NaiveDate>>,
    /// Whether the start-up run has finished, for callers that must not race it.
    started: tokio::sync::watch::Sender<bool>,
}

impl Scheduler {
    /// A scheduler over `recompute`, ticking every `recompute.policy().recompute_interval`
    /// (zero: only the start-up run).
    pub fn new(recompute: Arc<Recompute>) -> Self {
        let (started, _) = tokio::sync::watch::channel(false);
        Self { recompute, last_day: Mutex::new(None), started }
    }

    /// The recompute it drives.
    pub fn recompute(&self) -> &Arc<Recompute> {
        &self.recompute
    }

    /// The name of `work` in the slot of `now`.
    fn slot_name(&self, work: &str, now: DateTime<Utc>) -> String {
        let slot = u128::try_from(now.timestamp_millis()).unwrap_or(0)
            / self.recompute.policy().scheduler_slot().as_millis().max(1);
        format!("{work}:{slot}")
    }

    /// The start-up run: today, and yesterday when its ranking is missing, so an empty or
    /// flushed store is filled without waiting for the first interval.
    pub async fn startup(&self, now: DateTime<Utc>) -> Vec<RecomputeReport> {
        let today = self.recompute.policy().today(now);
        // A tick that already ran knows the day better than the start-up does.
        self.last_day.lock().await.get_or_insert(today);
        let mut days = vec![today];
        if let Some(yesterday) = today.checked_sub_days(Days::new(1)) {
            match self.recompute.missing(yesterday).await {
                Ok(true) => days.push(yesterday),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "cannot check yesterday's ranking"),
            }
        }
        let reports = self.recompute_days(&days, None).await;
        self.started.send_replace(true);
        reports
    }

    /// Resolves once the start-up run has finished.
    pub async fn wait_started(&self) {
        let mut started = self.started.subscribe();
        let _ = started.wait_for(|done| *done).await;
    }

    /// One scheduler step at `now`: recompute today (and yesterday after midnight) unless
    /// another replica did in this slot, then prune expired data.
    pub async fn tick(&self, now: DateTime<Utc>) -> Vec<RecomputeReport> {
        let today = self.recompute.policy().today(now);
        let mut days = vec![today];
        {
            let mut last = self.last_day.lock().await;
            if last.is_some_and(|d| d < today) {
                days.extend(today.checked_sub_days(Days::new(1)));
            }
            *last = Some(today);
        }
        let reports = self.recompute_days(&days, Some(now)).await;
        self.prune(now).await;
        reports
    }

    /// Recomputes `days`; with `slot_of`, only the days this replica claims in that slot.
    async fn recompute_days(&self, days: &[NaiveDate], slot_of: Option<DateTime<Utc>>) -> Vec<RecomputeReport> {
        let mut reports = Vec::new();
        for day in days {
            if let Some(now) = slot_of {
                match self
                    .recompute
                    .claim(&self.slot_name(&format!("tick:{day}"), now), self.recompute.policy().scheduler_claim_ttl())
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, %day, "scheduler cannot reach the lock store");
                        continue;
                    }
                }
            }
            match self.recompute.run(*day).await {
                Ok(r) => reports.push(r),
                Err(e) => tracing::warn!(error = %e, %day, "scheduled recompute did not run"),
            }
        }
        reports
    }

    async fn prune(&self, now: DateTime<Utc>) {
        match self.recompute.claim(&self.slot_name("prune", now), self.recompute.policy().scheduler_claim_ttl()).await {
            Ok(true) => {}
            _ => return,
        }
        match self.recompute.prune(now).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(rows = n, "pruned expired events and daily metrics"),
            Err(e) => tracing::warn!(error = %e, "retention prune failed"),
        }
    }

    /// Runs the start-up recompute, then ticks every interval until `stop` is cancelled.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        tokio::select! {
            _ = self.startup(self.recompute.policy().now()) => {}
            () = stop.cancelled() => return,
        }
        let interval = self.recompute.policy().recompute_interval;
        if interval.is_zero() {
            return;
        }
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await; // the first tick fires at once; start-up already covered it
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {
                    tokio::select! {
                        _ = self.tick(self.recompute.policy().now()) => {}
                        // A recompute cut short leaves its staging key to expire and its
                        // lease to lapse; the next run (on any replica) starts over.
                        () = stop.cancelled() => return,
                    }
                }
            }
        }
    }
}
