//! Leases in Redis: `SET NX PX` with a random holder token; renewal and release only by the
//! holder (`scripts/renew.lua`, `scripts/release.lua`), so an expired holder can never free or
//! extend the next holder's lease.

use std::time::Duration;

use async_trait::async_trait;

use super::{RedisRankingStore, unavailable};
use crate::ports::{Lease, LeaseLock, StoreError};

/// A lease's life in whole milliseconds, at least 1 (`PX 0` is an error).
fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[async_trait]
impl LeaseLock for RedisRankingStore {
    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let token = format!("{:032x}", rand::random::<u128>());
        let set: Option<String> = redis::cmd("SET")
            .arg(self.keys.lock(name))
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(set.map(|_| Lease { name: name.to_string(), token }))
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.scripts
            .release
            .key(self.keys.lock(&lease.name))
            .arg(&lease.token)
            .invoke_async::<i64>(&mut self.conn.clone())
            .await
            .map(|_| ())
            .map_err(unavailable)
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError> {
        self.scripts
            .renew
            .key(self.keys.lock(&lease.name))
            .arg(&lease.token)
            .arg(millis(ttl))
            .invoke_async::<i64>(&mut self.conn.clone())
            .await
            .map(|renewed| renewed == 1)
            .map_err(unavailable)
    }
}
