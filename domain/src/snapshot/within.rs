//! A ranking held within another: a segment of a whole ranking, same scores and order, kept
//! as its entries' positions in the whole one (4 bytes an entry).

use std::cmp::Ordering;
use std::sync::Arc;

use super::{Held, Scored, Snapshot, SnapshotError, ranking_order};

impl Snapshot {
    /// `entries` (in ranking order) held as positions in `whole`, when every entry is an
    /// entry of `whole` with the same score bits, in the same order; `None` otherwise (a
    /// ranking of another version, say), and the entries are then held on their own.
    pub fn within(whole: &Arc<Snapshot>, entries: &[Scored]) -> Option<Self> {
        if !whole.pinned.is_empty() {
            return None;
        }
        let mut positions = Vec::with_capacity(entries.len());
        if let Held::Own { entries: ranked, .. } = &whole.held {
            // Members come in ranking order, so each one is found after the one before it: a
            // galloping search from there, O(log gap) of sequential entries, not a lookup of
            // the product index per member.
            let mut from = 0;
            for e in entries {
                let after = &ranked[from..];
                let better = |x: &Scored| ranking_order(x, e) == Ordering::Less;
                let mut bound = 1;
                while bound < after.len() && better(&after[bound - 1]) {
                    bound *= 2;
                }
                let window = &after[bound / 2..bound.min(after.len())];
                let at = from + bound / 2 + window.partition_point(better);
                let found = ranked.get(at)?;
                if found.product_id != e.product_id || found.score.to_bits() != e.score.to_bits() {
                    return None;
                }
                positions.push(at as u32);
                from = at + 1;
            }
            return Self::at_positions(whole, positions).ok();
        }
        for e in entries {
            let (p, found) = whole.position(e.product_id)?;
            if found.score.to_bits() != e.score.to_bits() {
                return None;
            }
            positions.push(p as u32);
        }
        Self::at_positions(whole, positions).ok()
    }

    /// The entries of `whole` at `positions` (strictly ascending, each below its length),
    /// held as those positions: a ranking restricted to some of its products, in its order.
    pub fn at_positions(whole: &Arc<Snapshot>, positions: Vec<u32>) -> Result<Self, SnapshotError> {
        if let Some(p) = whole.pinned.first() {
            return Err(SnapshotError::Pinned(*p));
        }
        if let Some(i) = positions.windows(2).position(|w| w[0] >= w[1]) {
            return Err(SnapshotError::Unordered(i + 1));
        }
        if let Some(last) = positions.last()
            && *last as usize >= whole.len()
        {
            return Err(SnapshotError::Unordered(positions.len() - 1));
        }
        Ok(Self {
            held: Held::Within { whole: whole.clone(), positions },
            pinned: Vec::new(),
            annex: None,
            acting: Vec::new(),
        })
    }

    /// The entries at `positions` (each below [`Snapshot::len`]), in the order given.
    pub fn entries_at(&self, positions: &[u32]) -> Vec<Scored> {
        positions.iter().map(|p| self.entry(*p as usize)).collect()
    }
}
