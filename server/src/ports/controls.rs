//! [`ControlRows`]: the merchandising controls stored in SQL, changed one at a time under a
//! revision that only grows.

use async_trait::async_trait;

use super::StoreError;
use crate::domain::controls::{Control, Exceeded};

/// What a put did.
#[derive(Debug, Clone, PartialEq)]
pub enum PutOutcome {
    /// Stored as this (its revision and update time set).
    Stored(Control),
    /// The stored control's revision (`None`: no control of that id) is not the expected one:
    /// nothing was written.
    Conflict { stored: Option<u64> },
    /// Storing it would pass a bound: nothing was written.
    Exceeded(Exceeded),
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// Whether there was a control to delete.
    Deleted(bool),
    /// As [`PutOutcome::Conflict`].
    Conflict { stored: Option<u64> },
}

/// The stored controls.
#[async_trait]
pub trait ControlRows: Send + Sync + 'static {
    /// Stores `control` (replacing one of the same id) with the next revision and
    /// `updated_at_us`, unless `expected_revision` (0: any) is not the stored one's or a
    /// bound of [`crate::domain::controls::exceeded`] would be passed.
    async fn put_control(
        &self,
        control: Control,
        expected_revision: u64,
        updated_at_us: i64,
    ) -> Result<PutOutcome, StoreError>;

    /// Deletes the control `id`, unless `expected_revision` (0: any) is not its revision;
    /// a delete raises the revision too.
    async fn delete_control(&self, id: &str, expected_revision: u64) -> Result<DeleteOutcome, StoreError>;

    /// Every stored control by id, and the revision of the last change (0: none ever).
    async fn controls(&self) -> Result<(u64, Vec<Control>), StoreError>;

    /// The revision of the last change of any control: what a replica polls to learn that
    /// the controls changed.
    async fn control_revision(&self) -> Result<u64, StoreError>;
}
