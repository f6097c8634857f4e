//! [`HistoryRows`]: the kept tops of ended days, one row per board and day, replaced only by
//! a newer version of the same board.

use async_trait::async_trait;
use chrono::NaiveDate;

use super::StoreError;
use crate::domain::board::Board;
use crate::domain::history::KeptDay;

/// What keeping a day did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// The day's first kept top.
    First,
    /// A newer version with the same top: its version noted, nothing restated (or an empty
    /// top of a day never kept: nothing to keep).
    Unchanged,
    /// A newer version with another top: rewritten whole, counted as restated.
    Restated,
    /// A version no newer than the kept one (a replica that stalled past its lease publishing
    /// late): nothing written.
    Stale,
}

/// The kept days of the boards.
#[async_trait]
pub trait HistoryRows: Send + Sync + 'static {
    /// Keeps `top` (packed, [`crate::domain::history::pack`]) as the top of `board` on
    /// `date` from its `version`, unless a version at least as new is kept.
    async fn keep_day(
        &self,
        board: Board<'_>,
        date: NaiveDate,
        version: u64,
        top: &[u8],
        kept_at_us: i64,
    ) -> Result<Kept, StoreError>;

    /// Every kept day of `board`, oldest first: one range read of its rows.
    async fn kept_days(&self, board: Board<'_>) -> Result<Vec<KeptDay>, StoreError>;

    /// Forgets the days before `day`; returns the rows deleted (PostgreSQL drops whole months'
    /// partitions first).
    async fn prune_history(&self, before: NaiveDate) -> Result<u64, StoreError>;
}
