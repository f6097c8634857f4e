//! The day's lease, and the fence every change of a day's rankings carries.
//!
//! A recompute, a live pass and a withdrawal of hidden products each change a day's
//! rankings, on any replica; they take turns through the day's lease (`recompute:D`,
//! [`crate::ports::day_lease`]), so they never interleave. A holder renews its lease every
//! third of its life while it works ([`DayLeases::holding`]). That life is short
//! ([`Policy::lease_life`], at most `RANKING_SQL_TX_TIMEOUT`): a holder that froze keeps the
//! day from the others no longer than its SQL session could.
//!
//! A lease alone does not stop a holder that froze (a VM pause, SIGSTOP) past its lease and
//! then woke up: it would publish over the next holder's rankings what it computed from an
//! older SQL state. So every publication carries the lease it is made under
//! ([`crate::ports::Fence`]) and the ranking store applies it only while that lease is still
//! held, checked with the write itself: Redis reads the lease key in the same script that
//! writes the version (in Redis Cluster the lease key shares the `{daily:D}` hash tag of every
//! ranking of the day, so it is in the slot the script writes); the in-process store checks
//! its lease map under the lock of the install. A holder that cannot renew for a whole lease
//! life stops as if it had lost the lease.
//!
//! Guaranteed: once another replica holds the day, nothing the old holder computed lands,
//! so a version computed from an older SQL state never replaces a newer one, and a product
//! hidden meanwhile does not come back. Not guaranteed: a write of an old holder whose lease
//! simply expired with nobody else holding the day is refused too (the work is lost, the
//! next recompute redoes it); the segment set (`…:segments`) and the hourly rankings are not
//! fenced (the first only names what was published, the second is an approximation).
//!
//! The scheduler's claims (a day's tick, retention) are leases too, never released: one
//! replica does the claimed work per slot ([`DayLeases::claim`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::NaiveDate;
use tokio::time::Instant;

use super::policy::Policy;
use crate::metrics::Metrics;
use crate::metrics::leases::KindLabels;
use crate::ports::{Lease, LeaseLock, StoreError, day_lease};

/// Takes, renews and gives back the leases of the days' rankings.
pub struct DayLeases {
    leases: Arc<dyn LeaseLock>,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
}

impl DayLeases {
    pub fn new(leases: Arc<dyn LeaseLock>, policy: Arc<Policy>, metrics: Arc<Metrics>) -> Self {
        Self { leases, policy, metrics }
    }

    /// The day's lease, waiting up to the policy's recompute wait for another holder to give
    /// it back; `None` when it did not.
    pub async fn wait_for(&self, date: NaiveDate) -> Result<Option<Lease>, StoreError> {
        let name = day_lease(date);
        let deadline = Instant::now() + self.policy.recompute_wait;
        loop {
            if let Some(lease) = self.leases.try_acquire(&name, self.policy.lease_life()).await? {
                return Ok(Some(lease));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(self.policy.lease_poll).await;
        }
    }

    /// The lease `name` when nobody holds it, for a lease life.
    pub async fn try_take(&self, name: &str) -> Result<Option<Lease>, StoreError> {
        self.leases.try_acquire(name, self.policy.lease_life()).await
    }

    /// Extends `lease` by a lease life; `false` when it is no longer ours.
    pub async fn renew(&self, lease: &Lease) -> Result<bool, StoreError> {
        self.leases.renew(lease, self.policy.lease_life()).await
    }

    /// Gives `lease` back. A failure is logged: the lease expires by itself, and the next
    /// holder only waits a little longer.
    pub async fn release(&self, lease: &Lease) {
        if let Err(e) = self.leases.release(lease).await {
            tracing::warn!(error = %e, lease = %lease.name, "could not release a lease");
        }
    }

    /// Claims a named piece of periodic work for one replica for `ttl`: `true` for the
    /// replica that got it.
    pub async fn claim(&self, work: &str, ttl: Duration) -> Result<bool, StoreError> {
        Ok(self.leases.try_acquire(work, ttl).await?.is_some())
    }

    /// Runs `work` (a `kind` of change of the day's rankings, whose writes carry the lease's
    /// fence) while renewing `lease` every third of its life. Should the lease be lost, the
    /// work is abandoned rather than published over the other holder's: the renewal notices
    /// (refused, or not renewed for a whole life, which counts as lost), or the store refuses
    /// the write itself, which is counted and logged.
    pub async fn holding<T>(
        &self,
        lease: &Lease,
        kind: &'static str,
        work: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.holding_with(lease, None, kind, work).await
    }

    /// [`DayLeases::holding`], renewing `also` (the live lease of a live pass) beside `lease`:
    /// a pass longer than a lease life keeps both, and losing either abandons the work.
    pub async fn holding_with<T>(
        &self,
        lease: &Lease,
        also: Option<&Lease>,
        kind: &'static str,
        work: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let ttl = self.policy.lease_life();
        let taken = Instant::now();
        let renewed = Mutex::new(taken);
        let renewals = async {
            let mut every = tokio::time::interval_at(Instant::now() + ttl / 3, ttl / 3);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                // Each lease renewed in turn; the first that is not renewed is the one named.
                let mut outcome = (lease, Ok(true));
                for held in std::iter::once(lease).chain(also) {
                    outcome = (held, self.leases.renew(held, ttl).await);
                    if !matches!(outcome.1, Ok(true)) {
                        break;
                    }
                }
                let (named, renewal) = outcome;
                match renewal {
                    Ok(true) => *renewed.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now(),
                    Ok(false) => {
                        let detail = "the renewal found another holder, or none".to_string();
                        return StoreError::LostLease { lease: named.name.clone(), detail };
                    }
                    Err(e) => {
                        let since = renewed.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
                        if since >= ttl {
                            // Whatever the store says later, the lease may have run out: the
                            // work stops here rather than write on a lease nobody can vouch for.
                            let detail = format!("not renewed for {} ms, a whole lease life: {e}", since.as_millis());
                            return StoreError::LostLease { lease: named.name.clone(), detail };
                        }
                        tracing::warn!(error = %e, lease = %named.name, "could not renew lease");
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
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
