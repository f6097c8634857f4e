//! The feed cursors of the in-process store: a map beside the rankings, each cursor dropped
//! once its day's rankings would have expired.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryRankingStore, lock};
use crate::ports::{FeedCursor, FeedCursors, RankingKey, StoreError};

#[async_trait]
impl FeedCursors for MemoryRankingStore {
    async fn feed_cursor(&self, key: RankingKey) -> Result<Option<FeedCursor>, StoreError> {
        Ok(lock(&self.feed).get(&key).map(|(cursor, _)| cursor.clone()))
    }

    async fn advance_feed_cursor(
        &self,
        key: RankingKey,
        cursor: &FeedCursor,
        expire_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut cursors = lock(&self.feed);
        let now = Utc::now();
        cursors.retain(|_, (_, until)| *until > now);
        if cursors.get(&key).is_some_and(|(kept, _)| kept.version >= cursor.version) {
            return Ok(false);
        }
        cursors.insert(key, (cursor.clone(), expire_at));
        Ok(true)
    }
}
