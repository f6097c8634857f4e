//! The rank history's writer: every board published for a day that has ended (the first
//! recompute after midnight, a Recompute of a past date, a live pass or withdrawal of an ended
//! day) keeps its served top as that day's history. A newer version replaces the kept one
//! (restated when its top differs); an older one, published late by a replica that stalled,
//! changes nothing. Today's boards are not kept: their day has not ended.

use std::sync::Arc;

use crate::app::policy::{Policy, SEGMENT_HISTORY_TOP};
use crate::domain::board::{Board, Window};
use crate::domain::history::{KeptEntry, pack};
use crate::domain::snapshot::Snapshot;
use crate::ports::{HistoryRows, Kept, RankingKey, StoreError};

/// Kept days written at once by one publication of many segments.
const KEPT_AT_ONCE: usize = 8;

pub(super) struct HistoryKeeper {
    pub rows: Arc<dyn HistoryRows>,
    pub policy: Arc<Policy>,
}

impl HistoryKeeper {
    /// Keeps `served`, published as `version` of `key`, when `key`'s day has ended.
    pub(super) async fn keep(&self, key: RankingKey, version: u64, served: &Snapshot) -> Result<(), StoreError> {
        let window = match key.window() {
            window @ (Window::Daily | Window::Weekly) => window,
            // What rises now has no history of its own.
            Window::Trending | Window::Hourly => return Ok(()),
        };
        let date = key.date();
        if date >= self.policy.today(self.policy.now()) {
            return Ok(());
        }
        let top = match key.segment() {
            Some(_) => self.policy.history_top.min(SEGMENT_HISTORY_TOP),
            None => self.policy.history_top,
        };
        let board = Board { window, segment: key.segment(), profile: Some(self.policy.stored_profile_name()) };
        let kept_at_us = self.policy.now().timestamp_micros();
        let kept = self.rows.keep_day(board, date, version, &pack(&self.top(served, top)), kept_at_us).await?;
        if kept == Kept::Restated {
            tracing::info!(?key, version, "an ended day's top changed: its history is restated");
        }
        Ok(())
    }

    /// Keeps each of `boards` (segments of one publication), a few at a time.
    pub(super) async fn keep_all(&self, boards: &[(RankingKey, u64, Arc<Snapshot>)]) -> Result<(), StoreError> {
        for chunk in boards.chunks(KEPT_AT_ONCE) {
            let keeps = chunk.iter().map(|(key, version, served)| self.keep(*key, *version, served));
            futures_util::future::try_join_all(keeps).await?;
        }
        Ok(())
    }

    /// The first `n` served entries as kept: product, organic rank, served main score.
    fn top(&self, served: &Snapshot, n: usize) -> Vec<KeptEntry> {
        let layout = self.policy.profile.layout();
        served
            .page(0, n as u64)
            .iter()
            .enumerate()
            .map(|(position, e)| KeptEntry {
                product_id: e.product_id,
                organic_rank: u32::try_from(served.organic_rank(position)).unwrap_or(u32::MAX),
                main_floor: layout.decode(e.score).map_or(0, |b| i64::try_from(b.main_floor).unwrap_or(i64::MAX)),
            })
            .collect()
    }
}
