//! Publishing a version: the entries written into fresh staging keys (the ZSET of a daily
//! ranking, the packed copy, the product index of a packed-only ranking), then one script
//! (`scripts/publish.lua`) that renames them to the next version, moves the pointer, keeps
//! the superseded version for `RANKING_SNAPSHOT_TTL` and announces the new one.

use redis::RedisError;

use super::keys::{announced, member};
use super::packed::{indexed, pack, packed_only, product_order};
use super::{RedisRankingStore, unavailable};
use crate::ports::{RankingKey, Scored, StoreError, VersionLife};

/// Members per ZADD when writing a staging key.
const ZADD_CHUNK: usize = 5_000;
/// ZADD commands per pipeline round trip.
const PIPELINE_CHUNKS: usize = 20;
/// Entries per pipeline round trip when staging a version.
const STAGE_GROUP: usize = ZADD_CHUNK * PIPELINE_CHUNKS;

/// The staging keys of a version being written.
struct Staged {
    zset: String,
    packed: String,
    index: String,
}

impl Staged {
    fn named(zset: String) -> Self {
        Self { packed: format!("{zset}:packed"), index: format!("{zset}:index"), zset }
    }

    fn keys(&self) -> [&String; 3] {
        [&self.zset, &self.packed, &self.index]
    }
}

impl RedisRankingStore {
    /// [`crate::ports::RankingStore::publish`].
    pub(super) async fn publish_version(
        &self,
        key: RankingKey,
        entries: &[Scored],
        life: VersionLife,
    ) -> Result<u64, StoreError> {
        let announced = announced(key).ok_or_else(|| StoreError::Corrupt(format!("{key:?} has no versions")))?;
        let zset = !packed_only(key);
        let staged = self.stage(key, entries, zset).await.map_err(unavailable)?;
        let superseded_ms = u64::try_from(life.superseded_for.as_millis()).unwrap_or(u64::MAX);
        let published = self
            .scripts
            .publish
            .key(&staged.zset)
            .key(self.keys.pointer(key))
            .key(self.keys.superseded(key))
            .key(&staged.packed)
            .key(&staged.index)
            .arg(self.keys.versions(key))
            .arg(life.expire_at.timestamp())
            .arg(superseded_ms)
            .arg(self.keys.channel())
            .arg(announced)
            .arg(if entries.is_empty() { "0" } else { "1" })
            .arg(if zset { "1" } else { "0" })
            .invoke_async::<u64>(&mut self.conn.clone())
            .await;
        if published.is_err() && !entries.is_empty() {
            let _ = redis::cmd("UNLINK").arg(&staged.keys()).query_async::<()>(&mut self.conn.clone()).await;
        }
        published.map_err(unavailable)
    }

    /// Writes `entries` into fresh staging keys of `key`: a ZSET when `zset`, else the
    /// product index; and the packed copy (a string, for replicas to load).
    async fn stage(&self, key: RankingKey, entries: &[Scored], zset: bool) -> Result<Staged, RedisError> {
        let mut conn = self.conn.clone();
        let staged = Staged::named(self.keys.staging(key));
        let ttl = self.staging_ttl.as_secs().max(1);
        let order = if zset { Vec::new() } else { product_order(entries) };
        let mut index = order.chunks(STAGE_GROUP);
        for group in entries.chunks(STAGE_GROUP) {
            let mut pipe = redis::pipe();
            for chunk in group.chunks(ZADD_CHUNK).filter(|_| zset) {
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(&staged.zset);
                for e in chunk {
                    zadd.arg(e.score).arg(member(e.product_id));
                }
                pipe.add_command(zadd).ignore();
            }
            pipe.cmd("APPEND").arg(&staged.packed).arg(pack(group)).ignore();
            if let Some(positions) = index.next() {
                pipe.cmd("APPEND").arg(&staged.index).arg(indexed(positions)).ignore();
            }
            // A crashed writer's staging keys must not live forever.
            for key in staged.keys() {
                pipe.cmd("EXPIRE").arg(key).arg(ttl).ignore();
            }
            if let Err(e) = pipe.query_async::<()>(&mut conn).await {
                let _ = redis::cmd("UNLINK").arg(&staged.keys()).query_async::<()>(&mut conn).await;
                return Err(e);
            }
        }
        Ok(staged)
    }
}
