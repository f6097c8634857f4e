//! The served board derived from the organic one under the controls active on it.
//!
//! A board's served ranking is a pure function of its organic ranking and the controls
//! active at the version's publication, applied in this order:
//!
//! 1. **Exclude**: excluded products leave the board. Nothing else changes: the population
//!    and every norm stay the organic ones (unlike a hidden product, an exclusion changes no
//!    other product's score).
//! 2. **Boost** (negative points bury): a boosted product's main score gets the sum of its
//!    active boosts' points (added in ascending control id, so the sum is one double whatever
//!    the order the controls came in) and is encoded again with its own tie-break norms; the
//!    board is sorted again by the ranking's order (score descending, then product id
//!    descending). A sum of exactly 0 leaves the score as it was. The main score a boost adds
//!    to is the one the organic score carries, its integer part ([`boosted`]): a version keeps
//!    nothing finer, so a board republished from it when a control changes, and a caller
//!    checking the served board against the organic one it read, get the same double.
//! 3. **Pin**: each pinned product is taken from wherever it is, with its score as boosted
//!    (also when it had no entry: organic rank 0, score 0), and placed at its position, the others moving down. A product
//!    pinned twice takes its smallest position. Pins are placed in the order (position,
//!    `active_from`, control id): each takes the first free position at or after its own, or,
//!    when none is left (pins beyond the board's end), the last free one before it, so a
//!    position beyond the end places it last.
//!
//! A product never appears twice; the served board's length is its `total`. Products no
//! control touches keep their organic order among themselves.

use super::Control;
use super::copy::serve_copy;
use crate::layout::Layout;
use crate::snapshot::annex::{Annex, Touched};
use crate::snapshot::{Scored, Snapshot, SnapshotError};

/// An entry of the served board.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedEntry {
    pub product_id: i64,
    /// The served score: the organic one, or re-encoded by a boost; 0 for a pinned product
    /// without an organic entry.
    pub score: f64,
    /// Its rank in the organic board (1-based); 0 when it had none.
    pub organic_rank: u64,
    /// Its score in the organic board; 0 when it had none.
    pub organic_score: f64,
    /// The controls that moved or placed it (boosts acting on it, the pin that placed it),
    /// in ascending id.
    pub control_ids: Vec<String>,
    /// Placed by a pin: its rank is its position, whatever its score.
    pub pinned: bool,
}

/// `score` with `points` added to the main score it packs in `layout`, its norms kept: the
/// new main's integer part is `floor(main_floor + points)`, clamped to the layout's range
/// (a bury never goes below 0). A score the layout cannot decode is left as it is.
pub fn boosted(layout: &Layout, score: f64, points: f64) -> f64 {
    let Some(breakdown) = layout.decode(score) else { return score };
    let floor = (breakdown.main_floor as f64 + points).floor();
    // Beyond i64 either way, the clamp takes the sign: the float-to-int cast saturates.
    let (floor, _) = layout.clamp(floor as i64);
    layout.encode(floor, breakdown.norms())
}

/// A served board, and the organic entries its exclusions took off.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Served {
    /// The served entries, best first.
    pub entries: Vec<ServedEntry>,
    /// The excluded entries of the organic board (`score` and `organic_rank` as organic;
    /// `control_ids` the exclusions), in organic order.
    pub excluded: Vec<ServedEntry>,
}

impl Served {
    /// Its annex: every served entry with a control, and every excluded one.
    pub fn annex(&self) -> Annex {
        let touched = self
            .entries
            .iter()
            .zip(0u32..)
            .filter(|(e, _)| !e.control_ids.is_empty())
            .map(|(e, at)| Touched {
                product_id: e.product_id,
                organic: (e.organic_rank > 0).then_some((e.organic_rank, e.organic_score)),
                served_at: Some(at),
                control_ids: e.control_ids.clone(),
            })
            .chain(self.excluded.iter().map(|e| Touched {
                product_id: e.product_id,
                organic: Some((e.organic_rank, e.score)),
                served_at: None,
                control_ids: e.control_ids.clone(),
            }))
            .collect();
        Annex::from_touched(touched)
    }

    /// The served board as a held copy: its entries, its pins' positions and its annex, noted
    /// as served under `acting` (the controls acting on it, with their revisions).
    pub fn snapshot(&self, acting: Vec<(String, u64)>) -> Result<Snapshot, SnapshotError> {
        let snapshot = Snapshot::from_served(self.scored(), pinned_positions(&self.entries))?;
        Ok(snapshot.with_annex(self.annex()).served_under(acting))
    }

    fn scored(&self) -> Vec<Scored> {
        self.entries.iter().map(|e| Scored { product_id: e.product_id, score: e.score }).collect()
    }
}

/// The served board of `organic` (in ranking order) under the active `controls`, every entry
/// with its organic rank and controls: what a preview lists. A held copy is made by
/// [`serve_copy`], which does the same work without an entry of this size per product.
/// `boost(score, points)` is a score with its main score raised by `points` ([`boosted`] in
/// the board's layout).
pub fn serve<'c>(
    organic: &[Scored],
    controls: impl IntoIterator<Item = &'c Control>,
    boost: impl Fn(f64, f64) -> f64,
) -> Served {
    let copy = serve_copy(organic, controls, boost);
    let entries = copy
        .entries
        .iter()
        .zip(0u32..)
        .map(|(e, at)| match copy.annex.get(e.product_id).filter(|t| t.served_at == Some(at)) {
            Some(t) => ServedEntry {
                product_id: e.product_id,
                score: e.score,
                organic_rank: t.organic.map_or(0, |(rank, _)| rank),
                organic_score: t.organic.map_or(0.0, |(_, score)| score),
                control_ids: t.control_ids.clone(),
                pinned: copy.pinned.binary_search(&at).is_ok(),
            },
            None => ServedEntry {
                product_id: e.product_id,
                score: e.score,
                organic_rank: copy.annex.organic_rank(u64::from(at), *e),
                organic_score: e.score,
                control_ids: Vec::new(),
                pinned: false,
            },
        })
        .collect();
    let mut excluded: Vec<ServedEntry> = copy
        .annex
        .touched()
        .iter()
        .filter(|t| t.served_at.is_none())
        .filter_map(|t| {
            let (organic_rank, score) = t.organic?;
            Some(ServedEntry {
                product_id: t.product_id,
                score,
                organic_rank,
                organic_score: score,
                control_ids: t.control_ids.clone(),
                pinned: false,
            })
        })
        .collect();
    excluded.sort_by_key(|e| e.organic_rank);
    Served { entries, excluded }
}

/// The competition rank of each served entry: a pinned entry's is its own rank (its place is
/// not its score's); the others share theirs with the first entry of their score no pin
/// placed, so equal scores share a rank as on an organic board, a pin between them or not.
/// ([`crate::snapshot::Snapshot::tied_head`] finds the same in a held copy.)
pub fn tied_ranks(served: &[ServedEntry]) -> Vec<u64> {
    let mut ranks = Vec::with_capacity(served.len());
    let mut last_unpinned: Option<(f64, u64)> = None;
    for (i, e) in served.iter().enumerate() {
        let rank = match last_unpinned {
            _ if e.pinned => i as u64 + 1,
            Some((score, rank)) if score.total_cmp(&e.score).is_eq() => rank,
            _ => i as u64 + 1,
        };
        if !e.pinned {
            last_unpinned = Some((e.score, rank));
        }
        ranks.push(rank);
    }
    ranks
}

/// The positions (0-based, ascending) of the pinned entries: what a held copy of the board
/// needs beside its entries.
pub fn pinned_positions(served: &[ServedEntry]) -> Vec<u32> {
    served.iter().zip(0u32..).filter(|(e, _)| e.pinned).map(|(_, at)| at).collect()
}

#[cfg(test)]
#[path = "served_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "annex_tests.rs"]
mod annex_tests;
