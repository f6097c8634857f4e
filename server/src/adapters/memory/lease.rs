//! [`LeaseLock`] in process: a lease is a token with a deadline in a map, for the one
//! process of `make run` (or a test).

use std::time::Duration;

use async_trait::async_trait;

use super::MemoryRankingStore;
use crate::ports::{Lease, LeaseLock, StoreError};

#[async_trait]
impl LeaseLock for MemoryRankingStore {
    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let now = tokio::time::Instant::now();
        if leases.get(name).is_some_and(|(_, until)| *until > now) {
            return Ok(None);
        }
        let token = format!("{:032x}", rand::random::<u128>());
        leases.insert(name.to_string(), (token.clone(), now + ttl));
        Ok(Some(Lease { name: name.to_string(), token }))
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        if leases.get(&lease.name).is_some_and(|(t, _)| *t == lease.token) {
            leases.remove(&lease.name);
        }
        Ok(())
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError> {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        let now = tokio::time::Instant::now();
        match leases.get_mut(&lease.name) {
            Some((token, until)) if *token == lease.token && *until > now => {
                *until = now + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
