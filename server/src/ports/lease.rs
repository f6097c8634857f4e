//! Leases shared by every replica ([`LeaseLock`]), the name of a day's lease, and the
//! [`Fence`] a change of a day's rankings carries: the store applies the change only while
//! the writer's lease is still held, checked with the write itself.

use std::time::Duration;

use async_trait::async_trait;
use chrono::NaiveDate;

use super::StoreError;

/// Proof of holding a lease; released with [`LeaseLock::release`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Lock name.
    pub name: String,
    /// Random token that identifies this holder.
    pub token: String,
}

/// Time-bounded locks shared by every replica.
#[async_trait]
pub trait LeaseLock: Send + Sync + 'static {
    /// Takes the lease when nobody holds it; `None` when somebody does. The lease expires
    /// by itself after `ttl`, so a crashed holder cannot block the others forever.
    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<Option<Lease>, StoreError>;

    /// Gives the lease back if it is still ours.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Extends the lease to `ttl` from now if it is still ours; `false` when it is not (it
    /// expired and somebody else may hold it).
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError>;
}

/// The name of `date`'s lease, which every change of that day's rankings holds (a
/// recompute, a live pass, a withdrawal of hidden products).
pub fn day_lease(date: NaiveDate) -> String {
    format!("recompute:{date}")
}

/// The day of a day's lease name ([`day_lease`]); `None` for every other lease.
pub fn day_of_lease(name: &str) -> Option<NaiveDate> {
    name.strip_prefix("recompute:")?.parse().ok()
}

/// What a change of a day's rankings is made under: the writer's day lease. A store applies
/// the change only if that lease is still held at the instant of the write, and refuses it
/// otherwise with [`StoreError::LostLease`], so that a replica that stalled past its lease
/// (a pause, a partition) can never publish over the next holder's rankings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    lease: Option<Lease>,
}

impl Fence {
    /// Writes made under `lease`.
    pub fn of(lease: &Lease) -> Self {
        Self { lease: Some(lease.clone()) }
    }

    /// Writes checked against no lease: fixtures that publish rankings directly.
    #[cfg(any(test, feature = "test-support"))]
    pub fn unchecked() -> Self {
        Self { lease: None }
    }

    /// The lease the writes are made under (`None`: unchecked).
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_days_lease_names_its_day() {
        let day: NaiveDate = "2026-12-04".parse().expect("date");
        assert_eq!(day_of_lease(&day_lease(day)), Some(day));
        assert_eq!(day_of_lease("live:2026-12-04"), None);
        assert_eq!(day_of_lease("recompute:someday"), None);
    }
}
