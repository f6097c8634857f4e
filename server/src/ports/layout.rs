//! Storage layouts of the ranking store, and the announcements by which replicas of mixed
//! releases agree on the one every publisher writes.
//!
//! A layout is a number: what the ranking store's keys hold and how (layout 1: every version
//! a whole packed copy and its product index). A release reads a range of layouts — its own
//! newest and the one before — and announces that range in SQL while it runs. Publishers write
//! the newest layout that every live replica reads, so during a rolling upgrade the new
//! release keeps writing the old layout until the last old replica is gone, and a rollback
//! brings the old layout back at once.

use std::ops::RangeInclusive;

use async_trait::async_trait;

use super::StoreError;

/// A storage layout's number.
pub type Layout = u16;

/// The layouts this release reads: a version written in any other is refused, never served.
pub const READS: RangeInclusive<Layout> = 1..=1;

/// What a replica said of itself, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announced {
    /// The replica's name, unique among running replicas.
    pub replica: String,
    /// The layouts it reads.
    pub reads: RangeInclusive<Layout>,
    /// Its release (the package version).
    pub release: String,
    /// When it last announced itself, Unix milliseconds of its own clock.
    pub seen_at_ms: i64,
}

/// The announcements of running replicas (SQL).
#[async_trait]
pub trait ReplicaRows: Send + Sync + 'static {
    /// Records (or refreshes) a replica's announcement.
    async fn announce(&self, announced: &Announced) -> Result<(), StoreError>;

    /// Removes `replica`'s announcement (it is stopping), if named, and every announcement
    /// last seen before `stale_before_ms` (replicas that died without saying so).
    async fn forget(&self, replica: Option<&str>, stale_before_ms: i64) -> Result<(), StoreError>;

    /// Every announcement seen at or after `since_ms`, by replica name.
    async fn announced_since(&self, since_ms: i64) -> Result<Vec<Announced>, StoreError>;
}
