//! Rebuilding one day's rankings from SQL under the day's lease: carry-over ledger,
//! population, score engine, publication of a new version of the daily and weekly rankings
//! and their segments in the ranking store (and in this replica's snapshots); withdrawals of
//! hidden products; retention.
//!
//! Memory stays bounded by one day's population: earlier days are folded into the carry
//! ledger one at a time, and the ranking day is streamed into a compact contender list.
//!
//! - this module: the lease (taken, renewed while held, released), the report and errors.
//! - [`build`]: SQL rows → the day's or the week's population → encoded entries.
//! - [`faults`]: where a test holds a day's work just before its first write.
//! - [`live`]: live passes of today: the changed rows applied to the held
//!   population, published like a recompute.
//! - [`publish`]: one recompute of a day: the rankings published, segment fan-out.
//! - [`withdraw`]: hidden products out of a day's rankings, batched per lease turn.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::invalid::Invalid;
use super::policy::{PRUNE_CHUNK, Policy};
use super::snapshots::Snapshots;
use crate::domain::explain::RecencyClock;
use crate::domain::ranking::PopulationStats;
use crate::metrics::Metrics;
use crate::metrics::leases::KindLabels;
use crate::ports::{Fence, Lease, LeaseLock, MetricsStore, RankingKey, RankingStore, Scored, StoreError, day_lease};

mod build;
pub mod faults;
mod live;
mod publish;
mod withdraw;

/// What a recompute did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecomputeReport {
    /// The ranking day.
    pub date: NaiveDate,
    /// Products in the new ranking.
    pub products: u64,
    /// The version published.
    pub version: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// A day's ranking computed from SQL, before publication.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    /// The encoded entries, in ascending product order.
    pub entries: Vec<Scored>,
    /// How many main scores were clamped.
    pub clamped: usize,
    /// The statistics the norms come from.
    pub stats: PopulationStats,
    /// Where recency was measured from and to.
    pub clock: RecencyClock,
}

/// Why a recompute did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RecomputeError {
    /// The requested day cannot be recomputed.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Another recompute of the same day held the lock for longer than we could wait.
    #[error("a recompute of {0} is already running; try again shortly")]
    Busy(NaiveDate),
    /// A store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The work was dropped before it finished (the server is shutting down).
    #[error("the work was abandoned before it finished (shutting down); retry on another replica")]
    Abandoned,
}

/// Rebuilds daily rankings.
pub struct Recompute {
    store: Arc<dyn MetricsStore>,
    rankings: Arc<dyn RankingStore>,
    leases: Arc<dyn LeaseLock>,
    snapshots: Arc<Snapshots>,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
    /// Withdrawals waiting for their day's lease, by day.
    withdrawals: std::sync::Mutex<std::collections::HashMap<NaiveDate, withdraw::Withdrawal>>,
    /// Where withdrawal tasks run: the service's tracker, joined at shutdown.
    tasks: TaskTracker,
    /// Where a test holds the work before it writes.
    faults: faults::FaultPoints,
}

impl Recompute {
    /// Wires the recompute to its stores; published versions are installed in `snapshots`;
    /// withdrawals run as tasks of `tasks`.
    pub fn new(
        store: Arc<dyn MetricsStore>,
        rankings: Arc<dyn RankingStore>,
        leases: Arc<dyn LeaseLock>,
        snapshots: Arc<Snapshots>,
        policy: Arc<Policy>,
        metrics: Arc<Metrics>,
        tasks: TaskTracker,
    ) -> Self {
        let withdrawals = Default::default();
        Self { store, rankings, leases, snapshots, policy, metrics, withdrawals, tasks, faults: Default::default() }
    }

    /// The policy the recompute follows.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Where a test holds the work before it writes.
    pub fn faults(&self) -> &faults::FaultPoints {
        &self.faults
    }

    /// A recompute a caller asked for: `date` (`None` = today) must be within retention and
    /// not in the future.
    pub async fn requested(&self, date: Option<NaiveDate>) -> Result<RecomputeReport, RecomputeError> {
        let today = self.policy.today(self.policy.now());
        let date = date.unwrap_or(today);
        self.policy.check_recomputable(date, today).map_err(|reason| Invalid::field("date", reason))?;
        self.run(date).await
    }

    /// Recomputes `date` under the day's lock, waiting up to the policy's recompute wait for
    /// another replica's recompute of the same day to finish.
    pub async fn run(&self, date: NaiveDate) -> Result<RecomputeReport, RecomputeError> {
        let lease = self.lease(date).await?;
        let result = self.holding(&lease, "recompute", self.rebuild(date, &Fence::of(&lease))).await;
        self.release(&lease, date).await;
        match &result {
            Ok(r) => {
                self.metrics.recompute_succeeded(r.elapsed.as_secs_f64(), r.products);
                tracing::info!(%date, products = r.products, elapsed_ms = r.elapsed.as_millis() as u64, "recomputed");
            }
            Err(e) => {
                self.metrics.recompute_failures.inc();
                tracing::warn!(%date, error = %e, "recompute failed");
            }
        }
        result.map_err(RecomputeError::Store)
    }

    /// The day's lease: every change of the day's rankings holds it, so a recompute and a
    /// withdrawal never interleave, on one replica or several.
    async fn lease(&self, date: NaiveDate) -> Result<Lease, RecomputeError> {
        let name = day_lease(date);
        let deadline = Instant::now() + self.policy.recompute_wait;
        loop {
            if let Some(lease) = self.leases.try_acquire(&name, self.policy.recompute_lease).await? {
                return Ok(lease);
            }
            if Instant::now() >= deadline {
                return Err(RecomputeError::Busy(date));
            }
            tokio::time::sleep(self.policy.lease_poll).await;
        }
    }

    /// Runs `work` (a `kind` of change of the day's rankings, whose writes carry the lease's
    /// fence) while renewing `lease` every third of its life. Should the lease be lost (this
    /// replica stalled longer than the lease, and another may now hold the day), the work is
    /// abandoned rather than published over the other holder's: the renewal notices
    /// (refused, or not renewed for a whole life, which counts as lost), or the store
    /// refuses the write itself, which is counted and logged.
    async fn holding<T>(
        &self,
        lease: &Lease,
        kind: &'static str,
        work: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let ttl = self.policy.recompute_lease;
        let taken = Instant::now();
        let renewed = std::sync::Mutex::new(taken);
        let renewals = async {
            let mut every = tokio::time::interval_at(tokio::time::Instant::now() + ttl / 3, ttl / 3);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                match self.leases.renew(lease, ttl).await {
                    Ok(true) => *renewed.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now(),
                    Ok(false) => {
                        let detail = "the renewal found another holder, or none".to_string();
                        return StoreError::LostLease { lease: lease.name.clone(), detail };
                    }
                    Err(e) => {
                        let since = renewed.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
                        if since >= ttl {
                            // Whatever the store says later, the lease may have run out: the
                            // work stops here rather than write on a lease nobody can vouch for.
                            let detail = format!("not renewed for {} ms, a whole lease life: {e}", since.as_millis());
                            return StoreError::LostLease { lease: lease.name.clone(), detail };
                        }
                        tracing::warn!(error = %e, lease = %lease.name, "could not renew lease");
                    }
                }
            }
        };
        // `fenced`: the store refused a write, the fence rather than the renewal caught it.
        let (result, fenced) = tokio::select! {
            result = work => {
                let fenced = matches!(result, Err(StoreError::LostLease { .. }));
                (result, fenced)
            }
            lost = renewals => (Err(lost), false),
        };
        if let Err(StoreError::LostLease { detail, .. }) = &result {
            if fenced {
                self.metrics.leases.fenced_writes.get_or_create(&KindLabels { kind }).inc();
            }
            let renewed = renewed.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
            tracing::warn!(
                lease = %lease.name,
                kind,
                held_ms = taken.elapsed().as_millis() as u64,
                since_renewal_ms = renewed.as_millis() as u64,
                now = %detail,
                "lost the day's lease: nothing more of this work is published"
            );
        }
        result
    }

    async fn release(&self, lease: &Lease, date: NaiveDate) {
        if let Err(e) = self.leases.release(lease).await {
            // The lease expires by itself; the next recompute only waits a little longer.
            tracing::warn!(error = %e, %date, "could not release recompute lease");
        }
    }

    /// Whether the daily or weekly ranking of `date` is missing from the ranking store.
    pub async fn missing(&self, date: NaiveDate) -> Result<bool, StoreError> {
        let versions = self.rankings.versions(&[RankingKey::Daily(date), RankingKey::Weekly(date)]).await?;
        Ok(versions.len() < 2 || versions.iter().any(Option::is_none))
    }

    /// Claims a named piece of periodic work (a day's scheduler tick, retention) for one
    /// replica: `true` for the replica that got it. The claim lasts `ttl`.
    pub async fn claim(&self, work: &str, ttl: Duration) -> Result<bool, StoreError> {
        Ok(self.leases.try_acquire(work, ttl).await?.is_some())
    }

    /// Deletes events, daily metrics and their ledger entries that retention no longer
    /// keeps at `now`. Returns the rows deleted.
    pub async fn prune(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let oldest_day = self.policy.oldest_retained_day(self.policy.today(now));
        self.store.prune(self.policy.events_pruned_before(now), oldest_day, PRUNE_CHUNK).await
    }
}

#[cfg(test)]
mod tests;
