//! How a snapshot is made: from entries in any order (what a recompute ranks is in product
//! order, what a store returns in ranking order: neither is sorted again), from a served board
//! with its pins, and the product index every snapshot keeps.

use std::cmp::Ordering;

use super::{Held, Scored, Snapshot, SnapshotError, ranking_order};

/// Each of `entries` as `(product id, its position)`, ascending by id: a product index.
/// Sorted as pairs side by side rather than as positions keyed by a lookup of the id: no
/// random access into `entries` per comparison (45 against 97 ms at a million entries in
/// random order here).
pub fn by_product(entries: &[Scored]) -> Vec<(i64, u32)> {
    let mut pairs: Vec<(i64, u32)> = entries.iter().zip(0u32..).map(|(e, at)| (e.product_id, at)).collect();
    pairs.sort_unstable();
    pairs
}

/// `score` as an unsigned integer of the same order as `f64::total_cmp` (an order-preserving
/// bit flip): sorting on it needs no float comparison.
pub(super) fn order_bits(score: f64) -> u64 {
    let bits = score.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
}

/// The inverse of [`order_bits`].
pub(super) fn from_order_bits(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 { key & !(1 << 63) } else { !key })
}

impl Snapshot {
    /// A snapshot of entries in any order. Entries in ascending product order (what a
    /// recompute ranks) or already in ranking order (what a store returns) are taken as they
    /// are, without a sort.
    pub fn from_unordered(mut entries: Vec<Scored>) -> Result<Self, SnapshotError> {
        if u32::try_from(entries.len()).is_err() {
            return Err(SnapshotError::TooLarge(entries.len()));
        }
        if entries.is_sorted_by(|a, b| ranking_order(a, b) == Ordering::Less) {
            return Self::from_ranked(entries);
        }
        entries.sort_unstable_by_key(|e| e.product_id);
        if let Some(w) = entries.windows(2).find(|w| w[0].product_id == w[1].product_id) {
            return Err(SnapshotError::Duplicate(w[0].product_id));
        }
        Ok(Self::from_product_order(entries))
    }

    /// Entries of strictly ascending product ids put in ranking order: one sort of 16-byte
    /// integer keys (the score's order bits, then the product's index reversed), after which
    /// both the entries and the product index are written in one pass.
    fn from_product_order(mut entries: Vec<Scored>) -> Self {
        let ids: Vec<i64> = entries.iter().map(|e| e.product_id).collect();
        // Ascending keys: descending score, then descending product id (= index).
        let mut keys: Vec<u128> = entries
            .iter()
            .zip(0u32..)
            .map(|(e, k)| u128::from(!order_bits(e.score)) << 32 | u128::from(u32::MAX - k))
            .collect();
        keys.sort_unstable();
        let mut at = vec![0u32; ids.len()];
        for ((entry, key), position) in entries.iter_mut().zip(&keys).zip(0u32..) {
            let k = (u32::MAX - *key as u32) as usize;
            *entry = Scored { product_id: ids[k], score: from_order_bits(!((*key >> 32) as u64)) };
            at[k] = position;
        }
        entries.shrink_to_fit();
        Self { held: Held::Own { entries, ids, at }, pinned: Vec::new(), annex: None, acting: Vec::new() }
    }

    /// A snapshot of entries already in ranking order (as a store returns them).
    pub fn from_ranked(entries: Vec<Scored>) -> Result<Self, SnapshotError> {
        Self::from_served(entries, Vec::new())
    }

    /// A served board: entries in ranking order but at `pinned` (ascending positions), whose
    /// entries a pin placed where they are whatever their scores.
    pub fn from_served(entries: Vec<Scored>, pinned: Vec<u32>) -> Result<Self, SnapshotError> {
        check_served(&entries, &pinned)?;
        Self::indexed_whole(entries, pinned)
    }

    /// A served board already checked ([`check_served`]), its product index built by a sort.
    pub(super) fn indexed_whole(mut entries: Vec<Scored>, pinned: Vec<u32>) -> Result<Self, SnapshotError> {
        entries.shrink_to_fit();
        let pairs = by_product(&entries);
        if let Some(w) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(SnapshotError::Duplicate(w[0].0));
        }
        let (ids, at) = pairs.into_iter().unzip();
        Ok(Self { held: Held::Own { entries, ids, at }, pinned, annex: None, acting: Vec::new() })
    }
}

/// Checks that `entries` can be a served board with pins at `pinned`: addressable by a `u32`,
/// `pinned` ascending and within the board, the other entries in ranking order.
pub(super) fn check_served(entries: &[Scored], pinned: &[u32]) -> Result<(), SnapshotError> {
    if u32::try_from(entries.len()).is_err() {
        return Err(SnapshotError::TooLarge(entries.len()));
    }
    if let Some(bad) = pinned
        .iter()
        .zip(std::iter::once(None).chain(pinned.iter().map(Some)))
        .find(|(p, before)| **p as usize >= entries.len() || before.is_some_and(|b| b >= p))
    {
        return Err(SnapshotError::Pinned(*bad.0));
    }
    let mut placed = pinned.iter().peekable();
    let mut previous: Option<usize> = None;
    for i in 0..entries.len() {
        if placed.next_if(|p| **p as usize == i).is_some() {
            continue;
        }
        if let Some(b) = previous
            && ranking_order(&entries[b], &entries[i]) != Ordering::Less
        {
            return Err(match entries[b].product_id == entries[i].product_id {
                true => SnapshotError::Duplicate(entries[i].product_id),
                false => SnapshotError::Unordered(i),
            });
        }
        previous = Some(i);
    }
    Ok(())
}
