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
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use async_trait::async_trait;

use super::StoreError;

/// A storage layout's number.
pub type Layout = u16;

/// The layouts this release reads: a version written in any other is refused, never served.
/// Layout 2: a version may be stored as the changes after the one before it (a delta).
/// Layout 3: a delta may be of a board with pins (a control pass's), put back in its served
/// order from the version's served parts; a replica reading only 2 refuses such a delta.
pub const READS: RangeInclusive<Layout> = 1..=3;

/// The newest layout this release writes by default (`RANKING_STORE_LAYOUT`), once every
/// live replica reads it. A new layout is read by one release before it is written by
/// default, so that a rollback to the release before reads everything written: layout 3 is
/// read since the release of PREVIOUS_RELEASE, which wrote 2 by default.
pub const WRITES: Layout = 3;

/// The layout in force: set by this replica's side of the agreement, read by its ranking
/// stores as they publish. A clone shares the value.
#[derive(Debug, Clone)]
pub struct InForce(Arc<AtomicU16>);

impl InForce {
    /// `layout` in force.
    pub fn new(layout: Layout) -> Self {
        Self(Arc::new(AtomicU16::new(layout)))
    }

    /// The layout to write now.
    pub fn get(&self) -> Layout {
        self.0.load(Ordering::Acquire)
    }

    /// Puts `layout` in force; returns the one before.
    pub fn set(&self, layout: Layout) -> Layout {
        self.0.swap(layout, Ordering::AcqRel)
    }
}

impl Default for InForce {
    /// Layout 1, which every release reads.
    fn default() -> Self {
        Self::new(1)
    }
}

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
