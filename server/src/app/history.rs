//! GetRankHistory: a product's served rank on each ended day of a range of a board, from the
//! board's kept days (one range read), and what those days add up to.

use std::sync::Arc;

use chrono::{Days, NaiveDate};

use super::invalid::Invalid;
use super::policy::Policy;
use super::queries::Window;
use crate::domain::board::Board;
use crate::domain::catalog::Segment;
use crate::domain::history::{Summary, summarize};
use crate::ports::{HistoryRows, StoreError};

/// Days of one range at most.
pub const MAX_DAYS: u64 = 400;

/// Days of the range when `from` is not given.
pub const DEFAULT_DAYS: u64 = 90;

/// What GetRankHistory asks.
#[derive(Debug, Clone)]
pub struct HistoryQuery {
    pub product_id: i64,
    pub segment: Option<Segment>,
    /// The board: the daily (`None` or [`Window::Daily`]) or the weekly; the others have no
    /// kept history.
    pub window: Option<Window>,
    /// First day; `None`: [`DEFAULT_DAYS`] days ending `to`.
    pub from: Option<NaiveDate>,
    /// Last day; `None`: the last ended day.
    pub to: Option<NaiveDate>,
    /// The scoring profile's name; empty or `default`: the service's.
    pub profile: String,
}

/// Why a history was not answered.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// No such scoring profile.
    #[error("no scoring profile {0:?}")]
    UnknownProfile(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The rank history service.
pub struct History {
    rows: Arc<dyn HistoryRows>,
    policy: Arc<Policy>,
}

impl History {
    pub fn new(rows: Arc<dyn HistoryRows>, policy: Arc<Policy>) -> Self {
        Self { rows, policy }
    }

    /// The history `query` asks for.
    pub async fn rank_history(&self, query: HistoryQuery) -> Result<(NaiveDate, NaiveDate, Summary), HistoryError> {
        if query.product_id < 1 {
            return Err(Invalid::field("product_id", format!("must be >= 1, got {}", query.product_id)).into());
        }
        let window = match query.window.unwrap_or_default() {
            window @ (Window::Daily | Window::Weekly) => window,
            Window::Hourly | Window::Trending => {
                return Err(Invalid::field("window", "has no history; use WINDOW_DAILY or WINDOW_WEEKLY").into());
            }
        };
        // Each profile's history answers for its own boards (the service's own are kept under
        // the empty name); the caller picked it by the name.
        if !query.profile.is_empty() && query.profile != *self.policy.profile_name {
            return Err(HistoryError::UnknownProfile(query.profile));
        }
        let today = self.policy.today(self.policy.now());
        let to = match query.to {
            Some(to) => to,
            None => today.checked_sub_days(Days::new(1)).unwrap_or(today),
        };
        let from = match query.from {
            Some(from) => from,
            None => to.checked_sub_days(Days::new(DEFAULT_DAYS - 1)).unwrap_or(to),
        };
        if from > to {
            return Err(Invalid::field("from", format!("{from} is after to ({to})")).into());
        }
        let days = (to - from).num_days() as u64 + 1;
        if days > MAX_DAYS {
            return Err(Invalid::field("from", format!("the range holds {days} days; at most {MAX_DAYS}")).into());
        }
        let board = Board { window, segment: query.segment, profile: Some(self.policy.stored_profile_name()) };
        let kept = self.rows.kept_days(board).await?;
        Ok((from, to, summarize(query.product_id, &kept, from, to)))
    }
}
