//! A served board's product index taken from the board it replaces rather than sorted.
//!
//! A control pass serves a board again when a control changes: the new board differs from
//! the one it replaces only at the products a control touched, before or now (boosted,
//! pinned, excluded). Every other product keeps its order among the others, so its new
//! position follows from its old one: walking both boards in order and skipping the touched
//! products pairs each untouched entry with itself. The new index is then the old one with
//! positions mapped and the touched products merged back in, one pass in product order
//! instead of a sort of the board (at ten million entries, most of a control pass).
//!
//! The pairing is checked entry by entry: when a product the caller did not name moved, the
//! board is indexed whole ([`Snapshot::from_served`]), so a wrong list costs time, never a
//! wrong index.

use super::build::check_served;
use super::{Held, Scored, Snapshot, SnapshotError};

/// Bits of the filter that answers "not touched" for most products with one read of a
/// table that stays in the first-level cache (8 KiB).
const FILTER_BITS: u32 = 16;

/// A product index: ids ascending, each one's position beside it.
type Index = (Vec<i64>, Vec<u32>);

/// For each old position its new one, and the touched products' new positions.
type Pairing = (Vec<u32>, Vec<(i64, u32)>);

/// The products a control touched, with a filter in front of their sorted list: a board's
/// entries are mostly untouched, and each is asked about once.
struct Touched<'a> {
    ids: &'a [i64],
    filter: Vec<u64>,
}

impl<'a> Touched<'a> {
    fn new(ids: &'a [i64]) -> Self {
        let mut filter = vec![0u64; 1 << (FILTER_BITS - 6)];
        for id in ids {
            let bit = Self::bit(*id);
            filter[bit >> 6] |= 1 << (bit & 63);
        }
        Self { ids, filter }
    }

    /// A multiplicative hash of the id to a bit of the filter.
    fn bit(id: i64) -> usize {
        ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS)) as usize
    }

    fn contains(&self, id: i64) -> bool {
        let bit = Self::bit(id);
        self.filter[bit >> 6] & (1 << (bit & 63)) != 0 && self.ids.binary_search(&id).is_ok()
    }
}

impl Snapshot {
    /// [`Snapshot::from_served`] of `entries` with pins at `pinned`, its product index mapped
    /// from `before`'s: `touched` (ascending) names the products whose place may have changed
    /// other than by the entries around them moving. Any other product must keep its order
    /// among the untouched; where one did not, or `before` holds no index of its own, the
    /// board is indexed whole.
    pub fn from_served_after(
        before: &Snapshot,
        entries: Vec<Scored>,
        pinned: Vec<u32>,
        touched: &[i64],
    ) -> Result<Self, SnapshotError> {
        check_served(&entries, &pinned)?;
        match mapped_index(before, &entries, touched)? {
            Some((ids, at)) => {
                Ok(Self { held: Held::Own { entries, ids, at }, pinned, annex: None, acting: Vec::new() })
            }
            None => Self::indexed_whole(entries, pinned),
        }
    }
}

/// The product index of `entries` mapped from `before`'s (`ids` ascending, `at` beside
/// them); `None` when `before` holds no index of its own or a product `touched` does not
/// name moved.
fn mapped_index(before: &Snapshot, entries: &[Scored], touched: &[i64]) -> Result<Option<Index>, SnapshotError> {
    let Held::Own { entries: old, ids: old_ids, at: old_at } = &before.held else { return Ok(None) };
    let Some((new_at, mut moved)) = paired(old, entries, &Touched::new(touched)) else { return Ok(None) };
    moved.sort_unstable();
    if let Some(w) = moved.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(SnapshotError::Duplicate(w[0].0));
    }
    let mut ids = Vec::with_capacity(entries.len());
    let mut at = Vec::with_capacity(entries.len());
    let mut moved = moved.into_iter().peekable();
    for (id, position) in old_ids.iter().zip(old_at) {
        let position = new_at[*position as usize];
        if position == UNPAIRED {
            continue;
        }
        while let Some((m, p)) = moved.next_if(|(m, _)| m < id) {
            ids.push(m);
            at.push(p);
        }
        ids.push(*id);
        at.push(position);
    }
    for (m, p) in moved {
        ids.push(m);
        at.push(p);
    }
    Ok(Some((ids, at)))
}

/// An old position whose product is touched (or gone): no new position is mapped from it.
const UNPAIRED: u32 = u32::MAX;

/// Pairs the untouched entries of `old` and `new` in order: for each old position its new
/// one ([`UNPAIRED`] for a touched product), and the touched products of `new` with their
/// positions. `None` when an untouched product is not where the pairing expects it.
fn paired(old: &[Scored], new: &[Scored], touched: &Touched<'_>) -> Option<Pairing> {
    // Positions fit a u32 below its largest value (a board is at most u32::MAX entries).
    let mut new_at = vec![UNPAIRED; old.len()];
    let mut moved = Vec::new();
    let mut olds = old.iter().zip(0usize..).filter(|(e, _)| !touched.contains(e.product_id));
    for (e, position) in new.iter().zip(0u32..) {
        if touched.contains(e.product_id) {
            moved.push((e.product_id, position));
            continue;
        }
        match olds.next() {
            Some((o, i)) if o.product_id == e.product_id => new_at[i] = position,
            _ => return None,
        }
    }
    olds.next().is_none().then_some((new_at, moved))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;
    use crate::snapshot::ranking_order;

    /// `board` (ranking order) with each of `pins` (product, position from 1) taken from
    /// where it is (score 0 when absent) and placed in ascending position, the way a served
    /// board places them: its entries and its pinned positions.
    fn served(board: &[Scored], pins: &[(i64, u32)]) -> (Vec<Scored>, Vec<u32>) {
        let pinned_ids: BTreeSet<i64> = pins.iter().map(|(id, _)| *id).collect();
        let mut entries: Vec<Scored> = board.iter().filter(|e| !pinned_ids.contains(&e.product_id)).copied().collect();
        let mut pins: Vec<(i64, u32)> = pins.to_vec();
        pins.sort_by_key(|(id, position)| (*position, *id));
        let mut positions = Vec::new();
        for (id, position) in pins {
            let entry =
                board.iter().find(|e| e.product_id == id).copied().unwrap_or(Scored { product_id: id, score: 0.0 });
            let at =
                (position as usize - 1).max(positions.last().map_or(0, |p: &u32| *p as usize + 1)).min(entries.len());
            entries.insert(at, entry);
            positions.push(at as u32);
        }
        (entries, positions)
    }

    fn index(s: &Snapshot) -> Vec<(i64, usize)> {
        s.page(0, u64::MAX).iter().map(|e| (e.product_id, s.position(e.product_id).expect("indexed").0)).collect()
    }

    proptest! {
        /// A board served again after some products were rescored, removed, added or pinned:
        /// its index mapped from the board before is the index built whole, whether the
        /// touched list names every product that moved or misses some.
        #[test]
        fn an_index_mapped_from_the_board_before_is_the_index_built_whole(
            scores in proptest::collection::vec(0u8..6, 1..150),
            pins_before in proptest::collection::vec((0i64..160, 1u32..40), 0..4),
            changes in proptest::collection::vec((0i64..160, 0u8..8), 0..12),
            pins_after in proptest::collection::vec((0i64..160, 1u32..40), 0..4),
            name_all in any::<bool>(),
            asked in proptest::collection::vec(-5i64..170, 10),
        ) {
            let organic: Vec<Scored> = scores.iter().zip(0i64..).map(|(s, id)| Scored { product_id: id, score: f64::from(*s) }).collect();
            let mut ranked = organic.clone();
            ranked.sort_by(ranking_order);
            let dedup = |pins: &[(i64, u32)]| {
                let mut seen = BTreeSet::new();
                pins.iter().filter(|(id, _)| seen.insert(*id)).copied().collect::<Vec<_>>()
            };
            let (pins_before, pins_after) = (dedup(&pins_before), dedup(&pins_after));
            let (entries, pinned) = served(&ranked, &pins_before);
            let before = Snapshot::from_served(entries, pinned).expect("a valid board before");

            // Rescored (score 0..5), removed (6) or added (7, an id past the board) products.
            let mut next: std::collections::BTreeMap<i64, f64> = organic.iter().map(|e| (e.product_id, e.score)).collect();
            let mut touched: BTreeSet<i64> = pins_before.iter().chain(&pins_after).map(|(id, _)| *id).collect();
            for (id, change) in &changes {
                match change {
                    6 => drop(next.remove(id)),
                    7 => drop(next.insert(id + 1_000, 2.5)),
                    s => drop(next.insert(*id, f64::from(*s))),
                }
                touched.insert(if *change == 7 { id + 1_000 } else { *id });
            }
            let mut after: Vec<Scored> = next.into_iter().map(|(product_id, score)| Scored { product_id, score }).collect();
            after.sort_by(ranking_order);
            let (entries, pinned) = served(&after, &pins_after);
            let whole = Snapshot::from_served(entries.clone(), pinned.clone()).expect("a valid board after");

            // Named in part, the pairing fails where an unnamed product moved: built whole then.
            let named: Vec<i64> = touched.iter().copied().filter(|id| name_all || id % 3 != 0).collect();
            if name_all {
                let index = mapped_index(&before, &entries, &named).expect("valid");
                prop_assert!(index.is_some(), "every moved product named: the index is mapped, not built whole");
            }
            let mapped = Snapshot::from_served_after(&before, entries, pinned, &named).expect("mapped");
            prop_assert_eq!(mapped.page(0, u64::MAX), whole.page(0, u64::MAX));
            prop_assert_eq!(mapped.pinned(), whole.pinned());
            prop_assert_eq!(mapped.product_index(), whole.product_index());
            prop_assert_eq!(index(&mapped), index(&whole));
            for id in asked {
                prop_assert_eq!(mapped.position(id), whole.position(id));
            }
        }
    }

    #[test]
    fn a_board_that_is_not_a_served_board_is_refused_as_whole_indexing_refuses_it() {
        let board = |ids: &[i64]| ids.iter().map(|id| Scored { product_id: *id, score: 1.0 }).collect::<Vec<_>>();
        let before = Snapshot::from_ranked(board(&[5, 4, 3])).expect("valid");
        let twice = Snapshot::from_served_after(&before, board(&[5, 4, 4, 3]), Vec::new(), &[4]);
        assert_eq!(twice.expect_err("a product twice"), SnapshotError::Duplicate(4));
        let unordered = Snapshot::from_served_after(&before, board(&[3, 5, 4]), Vec::new(), &[]);
        assert_eq!(unordered.expect_err("out of order"), SnapshotError::Unordered(1));
        let past = Snapshot::from_served_after(&before, board(&[5, 4]), vec![2], &[]);
        assert_eq!(past.expect_err("a pin past the end"), SnapshotError::Pinned(2));
    }
}
