//! PreviewTopN's read: a board as it would be served under a set of controls, derived from its
//! current organic version as a publication derives it, writing nothing.

use super::Queries;
use super::types::{EntryControls, QueryError, RankedEntry, Selector, TopAnswer, page_limit};
use crate::app::invalid::Invalid;
use crate::domain::controls::{Board, Control, boosted, serve, tied_ranks};

/// A page of a board served under `controls` at `at_us`.
#[derive(Debug, Clone)]
pub struct PreviewQuery {
    /// Which board (daily or weekly).
    pub selector: Selector,
    /// Entries skipped from the top.
    pub offset: u32,
    /// Page size (0: the default).
    pub limit: u32,
    /// The instant whose active controls count, Unix microseconds.
    pub at_us: i64,
    /// Every control to consider; those active at `at_us` on the board act.
    pub controls: Vec<Control>,
}

/// A previewed page: the answer GetTopN would give (with the controls acting on each entry;
/// no next page token: a preview is not a version).
pub type PreviewAnswer = TopAnswer;

impl Queries {
    /// The page of the board `query` names as the controls active at its instant would serve
    /// it from the board's current organic version.
    pub async fn preview(&self, query: PreviewQuery) -> Result<PreviewAnswer, QueryError> {
        let limit = page_limit(query.limit).map_err(|e| e.within("selector"))?;
        let resolved = self.resolve(query.selector, self.policy.now()).map_err(|e| e.within("selector"))?;
        if !resolved.window.is_versioned() {
            return Err(Invalid::field(
                "window",
                "must be WINDOW_DAILY, WINDOW_WEEKLY or WINDOW_TRENDING: hourly rankings have no controls",
            )
            .within("selector")
            .into());
        }
        let current = self.current_page(&resolved, 0, u64::MAX).await?;
        // The current version may be served under controls already: its organic board.
        let held = self.snapshots.get(resolved.key).filter(|h| Some(h.version) == current.version);
        let organic = match (held, current.version) {
            (Some(held), _) => held.ranking.organic_board(),
            (None, Some(version)) => match self.served_parts(resolved.key, version).await? {
                Some(parts) => parts.annex.organic_board(&current.entries),
                None => current.entries,
            },
            (None, None) => current.entries,
        };
        let board = Board {
            window: resolved.window,
            segment: resolved.key.segment(),
            profile: Some(&self.policy.profile_name),
        };
        let acting = query.controls.iter().filter(|c| c.active_at(query.at_us) && c.acts_on(&board));
        let layout = self.policy.profile.layout();
        let served = serve(&organic, acting, |score, points| boosted(layout, score, points)).entries;
        let tied = tied_ranks(&served);
        let total = served.len() as u64;
        let start = (query.offset as usize).min(served.len());
        let end = (start + limit as usize).min(served.len());
        let mut entries: Vec<RankedEntry> = served[start..end]
            .iter()
            .zip(start..)
            .map(|(e, i)| {
                let mut entry = resolved.entry(&self.policy.profile, i as u64, e.product_id, e.score, tied[i] - 1);
                entry.organic_rank = e.organic_rank;
                entry
            })
            .collect();
        let mut controls = EntryControls::default();
        for e in &served[start..end] {
            controls.note(e.product_id, &e.control_ids, e.organic_score);
        }
        let ids: Vec<i64> = entries.iter().map(|e| e.product_id).collect();
        let previous = self.previous_ranks(resolved.key, &ids).await?;
        for (e, previous_rank) in entries.iter_mut().zip(previous) {
            e.against(total, previous_rank);
        }
        Ok(TopAnswer {
            entries,
            controls,
            total,
            date: resolved.date(),
            version: current.version,
            next_page_token: None,
            encoding: Default::default(),
        })
    }
}
