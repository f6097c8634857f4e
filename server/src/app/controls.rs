//! PutControl, DeleteControl, ListControls and PreviewTopN: the merchandising controls, stored
//! in SQL, checked here (the fields, then the revision and the bounds in the store's
//! transaction); a change serves today's boards again ([`ControlPasses`]).

use std::sync::Arc;

use super::invalid::Invalid;
use super::policy::Policy;
use super::queries::{PreviewAnswer, PreviewQuery, Queries, QueryError, Selector};
use super::recompute::ControlPasses;
use crate::domain::catalog::Segment;
use crate::domain::controls::{Control, validate};
use crate::ports::{ControlRows, DeleteOutcome, PutOutcome, StoreError};

/// Why a change of a control did not take effect; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// A field broke a rule.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// `expected_revision` is not the stored control's (two merchandisers editing one).
    #[error("control {id:?} is at revision {}, not {expected}; read it again", stored.map_or("none (it is not stored)".to_string(), |r| r.to_string()))]
    Conflict {
        /// The control.
        id: String,
        /// The revision the caller expected.
        expected: u64,
        /// The stored one's; `None`: not stored.
        stored: Option<u64>,
    },
    /// Storing it would pass a bound (named).
    #[error("{bound}: control not stored")]
    Exceeded {
        /// The bound, in words.
        bound: String,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A preview's read of the board failed.
    #[error(transparent)]
    Query(QueryError),
}

/// Which stored controls ListControls lists.
#[derive(Debug, Clone, Copy, Default)]
pub struct ControlFilter {
    /// Only one board's (`Some(None)`: the whole ranking's); `None`: every board's.
    pub segment: Option<Option<Segment>>,
    /// Only those active at this instant (Unix microseconds).
    pub active_at_us: Option<i64>,
}

/// PreviewTopN: a page of a board, and what to serve it under.
#[derive(Debug, Clone)]
pub struct Preview {
    /// The board and page.
    pub selector: Selector,
    pub offset: u32,
    pub limit: u32,
    /// The instant whose active controls count (Unix microseconds); `None`: now.
    pub at_us: Option<i64>,
    /// Controls as if put (replacing stored ones of the same id).
    pub drafts: Vec<Control>,
    /// Ids of controls as if deleted.
    pub without: Vec<String>,
    /// No control counts: the organic board.
    pub organic: bool,
}

/// Most drafts and deletions of one preview.
pub const MAX_PREVIEW_CHANGES: usize = 100;

/// The controls service.
pub struct Controls {
    store: Arc<dyn ControlRows>,
    /// Every profile's control passes.
    passes: Vec<Arc<ControlPasses>>,
    policy: Arc<Policy>,
}

impl Controls {
    /// Controls stored in `store`, every profile's boards served again by its `passes` after
    /// a change, timed by `policy`'s clock.
    pub fn new(store: Arc<dyn ControlRows>, passes: Vec<Arc<ControlPasses>>, policy: Arc<Policy>) -> Self {
        Self { store, passes, policy }
    }

    /// Every profile serves its boards again.
    fn nudge(&self) {
        self.passes.iter().for_each(|p| p.nudge());
    }

    /// The current instant, Unix microseconds: an unset `active_from`, an unset `at`.
    pub fn now_us(&self) -> i64 {
        self.policy.now().timestamp_micros()
    }

    /// Validates and stores `control` (its revision and update time set by the store).
    pub async fn put(&self, control: Control, expected_revision: u64) -> Result<Control, ControlError> {
        validate(&control).map_err(|r| Invalid::field(r.field, r.reason).within("control"))?;
        let id = control.id.clone();
        match self.store.put_control(control, expected_revision, self.now_us()).await? {
            PutOutcome::Stored(stored) => {
                self.nudge();
                Ok(stored)
            }
            PutOutcome::Conflict { stored } => Err(ControlError::Conflict { id, expected: expected_revision, stored }),
            PutOutcome::Exceeded(e) => Err(ControlError::Exceeded { bound: e.bound }),
        }
    }

    /// Deletes control `id`; whether there was one.
    pub async fn delete(&self, id: &str, expected_revision: u64) -> Result<bool, ControlError> {
        if let Some(problem) = crate::domain::controls::id_problem(id) {
            return Err(Invalid::field("control_id", problem).into());
        }
        match self.store.delete_control(id, expected_revision).await? {
            DeleteOutcome::Deleted(deleted) => {
                self.nudge();
                Ok(deleted)
            }
            DeleteOutcome::Conflict { stored } => {
                Err(ControlError::Conflict { id: id.to_string(), expected: expected_revision, stored })
            }
        }
    }

    /// The stored controls `filter` selects, by id.
    pub async fn list(&self, filter: ControlFilter) -> Result<Vec<Control>, ControlError> {
        let (_, mut controls) = self.store.controls().await?;
        if let Some(segment) = filter.segment {
            controls.retain(|c| c.segment == segment);
        }
        if let Some(at) = filter.active_at_us {
            controls.retain(|c| c.active_at(at));
        }
        Ok(controls)
    }

    /// The page of a board of the profile `queries` read as it would be served at
    /// `preview.at_us` with the drafts put and the others deleted, from the board's current
    /// organic version. Writes nothing.
    pub async fn preview(&self, queries: &Queries, preview: Preview) -> Result<PreviewAnswer, ControlError> {
        for (field, n) in [("drafts", preview.drafts.len()), ("without", preview.without.len())] {
            if n > MAX_PREVIEW_CHANGES {
                return Err(Invalid::field(field, format!("must hold at most {MAX_PREVIEW_CHANGES}, got {n}")).into());
            }
        }
        for (i, draft) in preview.drafts.iter().enumerate() {
            validate(draft).map_err(|r| Invalid::field(r.field, r.reason).within_element("drafts", i))?;
        }
        for (i, id) in preview.without.iter().enumerate() {
            if let Some(problem) = crate::domain::controls::id_problem(id) {
                return Err(Invalid::element("without", i, problem).into());
            }
        }
        if preview.organic {
            for (field, n) in [("drafts", preview.drafts.len()), ("without", preview.without.len())] {
                if n > 0 {
                    return Err(Invalid::field(field, "must be empty when organic is set").into());
                }
            }
        }
        let (_, mut controls) = if preview.organic { (0, Vec::new()) } else { self.store.controls().await? };
        controls.retain(|c| !preview.without.contains(&c.id) && !preview.drafts.iter().any(|d| d.id == c.id));
        // Of two drafts with one id, the later is the one put last.
        for (i, draft) in preview.drafts.iter().enumerate() {
            if !preview.drafts[i + 1..].iter().any(|d| d.id == draft.id) {
                controls.push(draft.clone());
            }
        }
        let query = PreviewQuery {
            selector: preview.selector,
            offset: preview.offset,
            limit: preview.limit,
            at_us: preview.at_us.unwrap_or_else(|| self.now_us()),
            controls,
        };
        queries.preview(query).await.map_err(ControlError::Query)
    }
}
