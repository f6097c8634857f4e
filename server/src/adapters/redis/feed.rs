//! The feed cursors in Redis: one hash per board (`…:feed`: `version`, `whole_at`, `top`)
//! in the board's day slot, moved forward only by `scripts/feed_cursor.lua`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{RedisRankingStore, unavailable};
use crate::ports::{FeedCursor, FeedCursors, RankingKey, StoreError, pack_top, unpack_top};

#[async_trait]
impl FeedCursors for RedisRankingStore {
    async fn feed_cursor(&self, key: RankingKey) -> Result<Option<FeedCursor>, StoreError> {
        let mut conn = self.conn.clone();
        let (version, whole_at, top): (Option<u64>, Option<i64>, Option<Vec<u8>>) = redis::cmd("HMGET")
            .arg(self.keys.feed_cursor(key))
            .arg(&["version", "whole_at", "top"])
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        match (version, whole_at, top) {
            (Some(version), Some(whole_at_ms), Some(top)) => {
                Ok(Some(FeedCursor { version, whole_at_ms, top: unpack_top(&top)? }))
            }
            _ => Ok(None),
        }
    }

    async fn advance_feed_cursor(
        &self,
        key: RankingKey,
        cursor: &FeedCursor,
        expire_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let moved: i64 = self
            .scripts
            .feed_cursor
            .key(self.keys.feed_cursor(key))
            .arg(cursor.version)
            .arg(cursor.whole_at_ms)
            .arg(pack_top(&cursor.top))
            .arg(expire_at.timestamp_millis())
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(moved == 1)
    }
}
