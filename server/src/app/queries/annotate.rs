//! What an entry says beyond its place, in one place: its competition rank (`tied_rank`),
//! its share of the ranking (`top_percent`) and its rank one period before
//! (`previous_rank`, `rank_change`).

use super::Queries;
use super::resolve::previous_period;
use super::types::{EntryControls, RankedEntry, Resolved};
use std::sync::Arc;

use crate::ports::{RankingKey, ServedParts, StoreError};

/// How the entries handed to [`Queries::annotate`] know their competition rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ties {
    /// Each entry was placed with its count of greater scores (a placement read).
    Placed,
    /// The entries are consecutive entries of one version, best first: their competition
    /// ranks are found here.
    Consecutive,
}

impl RankedEntry {
    /// Fills in what follows from the size of the ranking and the rank one period before
    /// (0: not ranked then).
    pub(super) fn against(&mut self, total: u64, previous_rank: u64) {
        self.top_percent = 100.0 * self.rank as f64 / total.max(1) as f64;
        self.previous_rank = previous_rank;
        self.rank_change = match (previous_rank, self.organic_rank) {
            (0, _) | (_, 0) => 0,
            (previous, organic) => previous as i64 - organic as i64,
        };
    }
}

impl Queries {
    /// Annotates `entries` of `version` of a ranking of `total` entries, and returns the
    /// merchandising controls acting on them.
    pub(super) async fn annotate(
        &self,
        resolved: &Resolved,
        version: Option<u64>,
        total: u64,
        entries: &mut [RankedEntry],
        ties: Ties,
    ) -> Result<EntryControls, StoreError> {
        let mut controls = EntryControls::default();
        let Some(first) = entries.first().copied() else { return Ok(controls) };
        let held = self.snapshots.get(resolved.key).filter(|h| Some(h.version) == version);
        // A served board knows each entry's organic rank and controls: its copy, or what the
        // store keeps beside the version read.
        let parts = match (&held, version) {
            (None, Some(version)) => self.served_parts(resolved.key, version).await?,
            _ => None,
        };
        let annex = held.as_ref().and_then(|h| h.ranking.annex()).or(parts.as_ref().map(|p| &p.annex));
        if let Some(annex) = annex {
            for e in entries.iter_mut() {
                let entry = crate::ports::Scored { product_id: e.product_id, score: e.score };
                e.organic_rank = annex.organic_rank(e.rank - 1, entry);
                if let Some(touched) = annex.get(e.product_id) {
                    controls.note(e.product_id, &touched.control_ids, touched.organic.map_or(0.0, |(_, s)| s));
                }
            }
        }
        if ties == Ties::Consecutive {
            match held {
                Some(held) => {
                    for e in entries.iter_mut() {
                        e.tied_rank = held.ranking.tied_head((e.rank - 1) as usize) as u64 + 1;
                    }
                }
                None => {
                    // Only the first entry needs the store: within consecutive entries, one
                    // whose score differs from the entry before it starts its group.
                    let placed = self.rankings.placements(resolved.key, version, &[first.product_id]).await?;
                    let mut tied = placed.found.first().copied().flatten().map_or(first.rank, |f| f.above + 1);
                    let mut group = first.score;
                    for e in entries.iter_mut() {
                        if e.score.total_cmp(&group).is_ne() {
                            (tied, group) = (e.rank, e.score);
                        }
                        e.tied_rank = tied;
                    }
                }
            }
        }
        let ids: Vec<i64> = entries.iter().map(|e| e.product_id).collect();
        let previous = self.previous_ranks(resolved.key, &ids).await?;
        for (e, previous_rank) in entries.iter_mut().zip(previous) {
            e.against(total, previous_rank);
        }
        Ok(controls)
    }

    /// The organic ranks of products in the final ranking one period before `key` (0: not
    /// ranked): a control is not a movement.
    pub(super) async fn previous_ranks(&self, key: RankingKey, ids: &[i64]) -> Result<Vec<u64>, StoreError> {
        let Some(previous) = previous_period(key) else { return Ok(vec![0; ids.len()]) };
        if let Some(held) = self.snapshots.get(previous) {
            return Ok(ids
                .iter()
                .map(|id| held.ranking.position(*id).map_or(0, |(i, _)| held.ranking.organic_rank(i)))
                .collect());
        }
        if self.snapshots.absent(previous) {
            return Ok(vec![0; ids.len()]);
        }
        let placed = self.rankings.placements(previous, None, ids).await?;
        let parts = match placed.version {
            Some(version) => self.served_parts(previous, version).await?,
            None => None,
        };
        Ok(ids
            .iter()
            .zip(&placed.found)
            .map(|(id, f)| match (f, &parts) {
                (None, _) => 0,
                (Some(f), None) => f.index + 1,
                (Some(f), Some(p)) => {
                    p.annex.organic_rank(f.index, crate::ports::Scored { product_id: *id, score: f.score })
                }
            })
            .collect())
    }

    /// What the store keeps beside `version` of `key` when it is a served board, read once per
    /// version while it is read from the store.
    pub(super) async fn served_parts(
        &self,
        key: RankingKey,
        version: u64,
    ) -> Result<Option<Arc<ServedParts>>, StoreError> {
        if !key.is_versioned() {
            return Ok(None);
        }
        if let Some(kept) = self.served.get(&(key, version)) {
            return Ok(kept);
        }
        let parts = self.rankings.version_served(key, version).await?.map(Arc::new);
        self.served.insert((key, version), parts.clone());
        Ok(parts)
    }
}
