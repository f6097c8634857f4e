//! ListMovers: RISING lists `rank_change > 0`, largest first; FALLING
//! `rank_change < 0`, most negative first; products not ranked then are not movers; equal
//! changes by current rank. Both periods are read whole (held copies, or copies read for
//! this caller within the snapshots' bound), as organic boards: merchandising controls move
//! no product.

use std::sync::Arc;

use super::Queries;
use super::resolve::previous_period;
use super::types::{Direction, MoversAnswer, MoversQuery, QueryError, page_limit};
use crate::domain::snapshot::Snapshot;
use crate::ports::StoreError;

impl Queries {
    /// The products whose rank changed most since the previous period.
    pub async fn movers(&self, query: MoversQuery) -> Result<MoversAnswer, QueryError> {
        let limit = page_limit(query.limit)? as usize;
        let resolved = self.resolve(query.selector, self.policy.now())?;
        let Some(current) = self.snapshots.whole(resolved.key).await? else {
            return Ok(MoversAnswer { entries: Vec::new(), date: resolved.date(), version: None });
        };
        let version = current.key_version();
        let previous = match previous_period(resolved.key) {
            Some(key) => self.snapshots.whole(key).await?,
            None => None,
        };
        let Some(previous) = previous else {
            return Ok(MoversAnswer { entries: Vec::new(), date: resolved.date(), version });
        };
        // Organic boards: a control is not a movement (served boards give their organic one).
        let organic = |ranking: &Arc<Snapshot>| -> Result<Arc<Snapshot>, QueryError> {
            match ranking.annex() {
                None => Ok(ranking.clone()),
                Some(_) => Ok(Arc::new(Snapshot::from_ranked(ranking.organic_board()).map_err(StoreError::ranking)?)),
            }
        };
        let (now, then) = (&organic(&current.ranking)?, &organic(&previous.ranking)?);
        let bound = |within: u64, len: usize| if within == 0 { len as u64 } else { within.min(len as u64) };
        // (current index, previous index) of every candidate.
        let mut moves: Vec<(usize, usize)> = match query.direction {
            Direction::Rising => now
                .page(0, bound(query.within_top, now.len()))
                .iter()
                .enumerate()
                .filter_map(|(i, e)| then.position(e.product_id).map(|(p, _)| (i, p)).filter(|(i, p)| p > i))
                .collect(),
            Direction::Falling => then
                .page(0, bound(query.within_top, then.len()))
                .iter()
                .enumerate()
                .filter_map(|(p, e)| now.position(e.product_id).map(|(i, _)| (i, p)).filter(|(i, p)| i > p))
                .collect(),
        };
        let change = |(i, p): (usize, usize)| p as i64 - i as i64;
        match query.direction {
            Direction::Rising => moves.sort_unstable_by_key(|m| (std::cmp::Reverse(change(*m)), m.0)),
            Direction::Falling => moves.sort_unstable_by_key(|m| (change(*m), m.0)),
        }
        moves.truncate(limit);
        let total = now.len() as u64;
        let entries = moves
            .into_iter()
            .map(|(i, p)| {
                let e = now.page(i as u64, 1)[0];
                let mut entry =
                    resolved.entry(&self.policy.profile, i as u64, e.product_id, e.score, now.tied_head(i) as u64);
                entry.against(total, p as u64 + 1);
                entry
            })
            .collect();
        Ok(MoversAnswer { entries, date: resolved.date(), version })
    }
}
