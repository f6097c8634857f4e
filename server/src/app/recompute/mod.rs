//! Rebuilding one day's rankings from SQL under the day's lease: carry-over ledger,
//! population, score engine, publication of a new version of the daily and weekly rankings
//! and their segments in the ranking store (and in this replica's snapshots); withdrawals of
//! hidden products; retention.
//!
//! Memory stays bounded by one day's population: earlier days are folded into the carry
//! ledger one at a time, and the ranking day is streamed into a compact contender list.
//!
//! - this module: [`Recompute`], the parts wired to their ports; the report and errors.
//! - [`build`]: one recompute of a day ([`build::Rebuild`]): SQL rows → the day's or the
//!   week's population → encoded entries → published.
//! - [`publish`]: the rankings and their segments published and installed, for a recompute
//!   and a live pass alike.
//! - [`live`]: live passes of today ([`LivePasses`]): the changed rows applied to the held
//!   population, published like a recompute.
//! - [`withdraw`]: hidden products out of a day's rankings, batched per lease turn
//!   ([`Withdrawals`]).
//! - [`controls`]: this replica's copy of the merchandising controls ([`CurrentControls`]),
//!   and a board served under them: every publication above serves its boards with them.
//! - [`trending`]: today's trending board, from the hours of the last seven days, in a
//!   recompute and a live pass alike.
//! - [`control_passes`]: today's boards served again when the controls change, start or end
//!   ([`ControlPasses`]).
//! - [`faults`]: where a test holds a day's work just before its first write.
//!
//! Every change of a day's rankings holds the day's lease and carries its fence
//! ([`crate::app::lease`]).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use tokio_util::task::TaskTracker;

use self::build::Rebuild;
pub use self::control_passes::ControlPasses;
pub use self::controls::{ControlSet, CurrentControls};
use self::faults::FaultPoints;
pub use self::live::LivePasses;
use self::publish::Publisher;
pub use self::withdraw::Withdrawals;
use super::feed::Feeder;
use super::invalid::Invalid;
use super::lease::DayLeases;
use super::policy::{PRUNE_CHUNK, Policy};
use super::snapshots::Snapshots;
use crate::domain::explain::RecencyClock;
use crate::domain::ranking::PopulationStats;
use crate::metrics::Metrics;
use crate::ports::{
    EventLedger, Fence, HistoryRows, LeaseLock, MetricsStore, RankingKey, RankingStore, Scored, StoreError,
};

mod apart;
mod build;
mod control_passes;
mod controls;
pub mod faults;
mod keep;
mod live;
mod publish;
mod trending;
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

/// The stores a recompute works on: SQL (every port), the ranking store and its leases.
pub struct Stores {
    pub sql: Arc<dyn MetricsStore>,
    pub rankings: Arc<dyn RankingStore>,
    pub leases: Arc<dyn LeaseLock>,
}

pub struct Recompute {
    rebuild: Arc<Rebuild>,
    leases: Arc<DayLeases>,
    rankings: Arc<dyn RankingStore>,
    ledger: Arc<dyn EventLedger>,
    history: Arc<dyn HistoryRows>,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
    live: Arc<LivePasses>,
    withdrawals: Arc<Withdrawals>,
    control_passes: Arc<ControlPasses>,
}

impl Recompute {
    /// Wires the recompute, its live passes and withdrawals to their stores, each part to
    /// the ports it uses; published versions are installed in `snapshots`; withdrawals run as
    /// tasks of `tasks`.
    pub fn new(
        stores: Stores,
        snapshots: Arc<Snapshots>,
        policy: Arc<Policy>,
        metrics: Arc<Metrics>,
        tasks: TaskTracker,
        feeder: Arc<Feeder>,
    ) -> Self {
        let Stores { sql: store, rankings, leases } = stores;
        let leases = Arc::new(DayLeases::new(leases, policy.clone(), metrics.clone()));
        let controls = Arc::new(CurrentControls::new(store.clone(), policy.profile_name.clone()));
        let publisher = Arc::new(Publisher {
            rankings: rankings.clone(),
            snapshots: snapshots.clone(),
            runs: store.clone(),
            catalog: store.clone(),
            policy: policy.clone(),
            metrics: metrics.clone(),
            controls: controls.clone(),
            history: keep::HistoryKeeper { rows: store.clone(), policy: policy.clone() },
            feeder: feeder.clone(),
            faults: FaultPoints::default(),
        });
        let rebuild = Arc::new(Rebuild {
            scans: store.clone(),
            hours: store.clone(),
            catalog: store.clone(),
            snapshots: snapshots.clone(),
            policy: policy.clone(),
            publisher: publisher.clone(),
            variants: Default::default(),
        });
        let live = Arc::new(LivePasses {
            changes: store.clone(),
            scans: store.clone(),
            hours: store.clone(),
            catalog: store.clone(),
            leases: leases.clone(),
            rebuild: rebuild.clone(),
            publisher: publisher.clone(),
            policy: policy.clone(),
            metrics: metrics.clone(),
            variants: Default::default(),
        });
        let control_passes = Arc::new(ControlPasses {
            controls: controls.clone(),
            rankings: rankings.clone(),
            snapshots: snapshots.clone(),
            leases: leases.clone(),
            policy: policy.clone(),
            metrics: metrics.clone(),
            publisher: publisher.clone(),
            changed: Default::default(),
        });
        let withdrawals = Arc::new(Withdrawals::new(
            rankings.clone(),
            snapshots,
            leases.clone(),
            controls.clone(),
            policy.clone(),
            tasks,
            publisher.clone(),
        ));
        Self {
            rebuild,
            leases,
            rankings,
            ledger: store.clone(),
            history: store,
            policy,
            metrics,
            live,
            withdrawals,
            control_passes,
        }
    }

    /// Makes each recompute of this (the service profile's) also rank and publish the boards
    /// of `variants`, from the same read of the rows and under the same day lease. Once; a
    /// second call changes nothing.
    pub fn adopt(&self, variants: Vec<Arc<Recompute>>) {
        let _ = self.rebuild.variants.set(variants.iter().map(|v| v.rebuild.clone()).collect());
        let _ = self.live.variants.set(variants.iter().map(|v| v.live.clone()).collect());
    }

    /// The policy the recompute follows.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Where a test holds the work before it writes.
    pub fn faults(&self) -> &faults::FaultPoints {
        &self.rebuild.publisher.faults
    }

    /// The live passes of today, run by the service as a task of its own.
    pub fn live_passes(&self) -> Arc<LivePasses> {
        self.live.clone()
    }

    /// The control passes, which the service runs on its tracker (and a change of the
    /// controls nudges).
    pub fn control_passes(&self) -> Arc<ControlPasses> {
        self.control_passes.clone()
    }

    /// Withdrawals of hidden products from the days' rankings.
    pub fn withdrawals(&self) -> Arc<Withdrawals> {
        self.withdrawals.clone()
    }

    /// A recompute a caller asked for: `date` (`None` = today) must be within retention and
    /// not in the future.
    pub async fn requested(&self, date: Option<NaiveDate>) -> Result<RecomputeReport, RecomputeError> {
        let today = self.policy.today(self.policy.now());
        let date = date.unwrap_or(today);
        self.policy.check_recomputable(date, today).map_err(|reason| Invalid::field("date", reason))?;
        self.run(date).await
    }

    /// Recomputes `date` under the day's lease, waiting up to the policy's recompute wait for
    /// another replica's change of the same day to finish.
    pub async fn run(&self, date: NaiveDate) -> Result<RecomputeReport, RecomputeError> {
        let lease = self.leases.wait_for(date).await?.ok_or(RecomputeError::Busy(date))?;
        let result = self.leases.holding(&lease, "recompute", self.rebuild.run(date, &Fence::of(&lease))).await;
        self.leases.release(&lease).await;
        match &result {
            Ok(r) => {
                self.metrics.recompute.succeeded(r.elapsed.as_secs_f64(), r.products);
                tracing::info!(%date, products = r.products, elapsed_ms = r.elapsed.as_millis() as u64, "recomputed");
            }
            Err(e) => {
                self.metrics.recompute.failures.inc();
                tracing::warn!(%date, error = %e, "recompute failed");
            }
        }
        result.map_err(RecomputeError::Store)
    }

    /// Whether the daily or weekly ranking of `date` (or today's trending board) is missing
    /// from the ranking store.
    pub async fn missing(&self, date: NaiveDate) -> Result<bool, StoreError> {
        let mut keys = vec![RankingKey::Daily(date), RankingKey::Weekly(date)];
        if date == self.policy.today(self.policy.now()) {
            keys.push(RankingKey::Trending(date));
        }
        let versions = self.rankings.versions(&keys).await?;
        Ok(versions.len() < keys.len() || versions.iter().any(Option::is_none))
    }

    /// Claims a named piece of periodic work (a day's scheduler tick, retention) for one
    /// replica: `true` for the replica that got it. The claim lasts `ttl`.
    pub async fn claim(&self, work: &str, ttl: Duration) -> Result<bool, StoreError> {
        self.leases.claim(work, ttl).await
    }

    /// Deletes events, daily metrics and their ledger entries that retention no longer
    /// keeps at `now`. Returns the rows deleted.
    pub async fn prune(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let today = self.policy.today(now);
        let oldest_day = self.policy.oldest_retained_day(today);
        let events = self.ledger.prune(self.policy.events_pruned_before(now), oldest_day, PRUNE_CHUNK).await?;
        let days = self.history.prune_history(self.policy.oldest_history_day(today)).await?;
        Ok(events + days)
    }

    /// Recency of day `date`, measured from its start to its end.
    pub fn clock(&self, date: NaiveDate) -> RecencyClock {
        build::clock(&self.policy, date)
    }
}

#[cfg(test)]
mod tests;
