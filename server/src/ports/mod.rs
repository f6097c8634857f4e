//! The traits the application needs from the outside world, implemented by `adapters/`.
//!
//! - [`MetricsStore`] (`metrics_store.rs`): the SQL single source of truth, as one port per
//!   concern: [`EventLedger`], [`DayScans`], [`CatalogRows`], [`RunLog`], [`ChangeFeed`];
//!   [`ControlRows`] (`controls.rs`), the merchandising controls; [`HistoryRows`]
//!   (`history.rs`), the kept tops of ended days.
//! - [`RankingStore`] (`rankings.rs`): the derived rankings (Redis, or the embedded in-process
//!   store), named by [`RankingKey`] (`key.rs`) and kept as [`VersionLife`] says (`life.rs`).
//! - [`FeedCursors`] (`feed.rs`): where the ranking feed has got to on each board, and
//!   [`FeedSink`], where its records go.
//! - [`ReplicaRows`] (`layout.rs`): what each running replica announces it reads of the
//!   ranking store, so that mixed releases agree on the [`Layout`] written.
//! - [`LeaseLock`] (`lease.rs`): mutual exclusion of a day's work across replicas, and the
//!   [`Fence`] its writes carry.
//!
//! Handlers, the ingest path and the recompute depend on these traits only, so a new store
//! plugs in without touching them.

pub use crate::domain::catalog::{CatalogEntry, Segment};
pub use crate::domain::explain::{ProductDay, RecencyClock};
pub use crate::domain::snapshot::Scored;
pub use crate::domain::snapshot::ServedParts;

mod controls;
mod error;
mod feed;
mod history;
mod key;
mod layout;
mod lease;
mod life;
mod metrics_store;
mod rankings;
pub use controls::{ControlRows, DeleteOutcome, PutOutcome};
pub use error::{Cause, StoreError};
pub use feed::{FeedBatch, FeedCause, FeedCursor, FeedCursors, FeedSink, pack_top, unpack_top};
pub use history::{HistoryRows, Kept};
pub use key::RankingKey;
pub use layout::{Announced, InForce, Layout, READS, ReplicaRows, WRITES};
pub use lease::{Fence, Lease, LeaseLock, day_lease, day_of_lease};
pub use life::{SUPERSEDED_GRACE, VersionLife};
pub use metrics_store::{
    CatalogRows, ChangeFeed, ChangedRow, DailyRow, DatedEvent, DayScans, EventLedger, HourScans, MetricsStore, Outcome,
    RankingRun, RecordRules, Recorded, RunLog,
};
pub use rankings::{
    Announcement, Announcements, Form, Found, HourlyIncrement, Page, Placements, Publishing, RankingStore, VersionCopy,
    VersionStats,
};
