//! An immutable ranking held in memory: entries best first plus an index from product id
//! to position, so a page costs O(limit) and a product's rank O(1).
//!
//! The order is the ranking stores' order: score descending, equal scores by descending
//! product id (the `ZREVRANGE` order of zero-padded members). The index is a
//! `hashbrown::HashTable` of `u32` positions hashed by product id with a per-snapshot random
//! seed: 4 bytes per bucket instead of a second copy of every id, and ids chosen by a caller
//! cannot be lined up to collide without knowing the seed.

use std::cmp::Ordering;

use hashbrown::HashTable;

/// A product and its score in a ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The product.
    pub product_id: i64,
    /// Its score.
    pub score: f64,
}

/// The ranking order: better first (higher score, then higher product id).
pub fn ranking_order(a: &Scored, b: &Scored) -> Ordering {
    b.score.total_cmp(&a.score).then(b.product_id.cmp(&a.product_id))
}

/// Why entries cannot form a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// More entries than a `u32` position can address.
    #[error("{0} entries do not fit a snapshot")]
    TooLarge(usize),
    /// A product appears twice.
    #[error("product {0} appears twice")]
    Duplicate(i64),
    /// The entries were said to be in ranking order and are not.
    #[error("entries are not in ranking order at position {0}")]
    Unordered(usize),
}

/// An immutable ranking.
pub struct Snapshot {
    entries: Vec<Scored>,
    index: HashTable<u32>,
    seed: u64,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("len", &self.entries.len()).finish_non_exhaustive()
    }
}

/// Folded 64×64→128 multiply of the seeded id: every input bit reaches the high bits that
/// `hashbrown` uses for its control bytes and the low bits it uses for the bucket.
fn hash(seed: u64, product_id: i64) -> u64 {
    let x = u128::from((product_id as u64) ^ seed) * u128::from(0x9E37_79B9_7F4A_7C15_u64);
    (x >> 64) as u64 ^ x as u64
}

impl Snapshot {
    /// A snapshot of entries in any order (as a recompute produces them).
    pub fn from_unordered(mut entries: Vec<Scored>) -> Result<Self, SnapshotError> {
        entries.sort_unstable_by(ranking_order);
        Self::from_ranked(entries)
    }

    /// A snapshot of entries already in ranking order (as a store returns them).
    pub fn from_ranked(mut entries: Vec<Scored>) -> Result<Self, SnapshotError> {
        if u32::try_from(entries.len()).is_err() {
            return Err(SnapshotError::TooLarge(entries.len()));
        }
        if let Some(i) = entries.windows(2).position(|w| ranking_order(&w[0], &w[1]) != Ordering::Less) {
            return Err(match entries[i].product_id == entries[i + 1].product_id {
                true => SnapshotError::Duplicate(entries[i].product_id),
                false => SnapshotError::Unordered(i + 1),
            });
        }
        entries.shrink_to_fit();
        let seed = rand::random::<u64>();
        let mut index = HashTable::with_capacity(entries.len());
        for (position, e) in entries.iter().enumerate() {
            let id = e.product_id;
            match index.entry(
                hash(seed, id),
                |p: &u32| entries[*p as usize].product_id == id,
                |p: &u32| hash(seed, entries[*p as usize].product_id),
            ) {
                hashbrown::hash_table::Entry::Occupied(_) => return Err(SnapshotError::Duplicate(id)),
                hashbrown::hash_table::Entry::Vacant(slot) => {
                    slot.insert(position as u32);
                }
            }
        }
        Ok(Self { entries, index, seed })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the ranking has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries `offset .. offset + limit`, best first (fewer at the end, none past it).
    pub fn page(&self, offset: u64, limit: u64) -> &[Scored] {
        let len = self.entries.len();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(len);
        let end = start.saturating_add(usize::try_from(limit).unwrap_or(usize::MAX)).min(len);
        &self.entries[start..end]
    }

    /// The 0-based position of a product and its entry.
    pub fn position(&self, product_id: i64) -> Option<(usize, Scored)> {
        let p =
            *self.index.find(hash(self.seed, product_id), |p| self.entries[*p as usize].product_id == product_id)?;
        Some((p as usize, self.entries[p as usize]))
    }

    /// Entries with a strictly greater score than `score` (ties share a competition rank).
    pub fn above(&self, score: f64) -> usize {
        self.entries.partition_point(|e| e.score.total_cmp(&score).is_gt())
    }

    /// Bytes held on the heap, for the memory bound and the benchmark.
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Scored>() + self.index.allocation_size()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn scored(product_id: i64, score: f64) -> Scored {
        Scored { product_id, score }
    }

    #[test]
    fn order_is_score_then_descending_id() {
        let s = Snapshot::from_unordered(vec![scored(999, 1.0), scored(1000, 1.0), scored(5, 2.0), scored(42, 1.0)])
            .expect("valid");
        let ids: Vec<_> = s.page(0, 10).iter().map(|e| e.product_id).collect();
        assert_eq!(ids, vec![5, 1000, 999, 42]);
        assert_eq!(s.position(999).map(|(p, _)| p), Some(2));
        assert_eq!(s.position(7), None);
        assert_eq!((s.above(2.0), s.above(1.0), s.above(0.5)), (0, 1, 4));
        assert_eq!(s.page(3, 10).len(), 1);
        assert!(s.page(4, 10).is_empty());
        assert!(s.page(u64::MAX, u64::MAX).is_empty());
    }

    #[test]
    fn duplicates_and_disorder_are_refused() {
        let dup = Snapshot::from_unordered(vec![scored(1, 1.0), scored(1, 2.0)]).expect_err("duplicate");
        assert_eq!(dup, SnapshotError::Duplicate(1));
        let dup = Snapshot::from_ranked(vec![scored(1, 1.0), scored(1, 1.0)]).expect_err("duplicate");
        assert_eq!(dup, SnapshotError::Duplicate(1));
        let unordered = Snapshot::from_ranked(vec![scored(1, 1.0), scored(2, 2.0)]).expect_err("unordered");
        assert_eq!(unordered, SnapshotError::Unordered(1));
    }

    proptest! {
        #[test]
        fn positions_agree_with_a_sort(ids in proptest::collection::hash_set(1i64..1_000_000, 0..400),
                                       scores in proptest::collection::vec(0u8..5, 400)) {
            let entries: Vec<Scored> =
                ids.iter().zip(scores.iter().cycle()).map(|(id, s)| scored(*id, f64::from(*s))).collect();
            let s = Snapshot::from_unordered(entries.clone()).expect("valid");
            let mut expected = entries;
            expected.sort_by(|a, b| (b.score, b.product_id).partial_cmp(&(a.score, a.product_id)).expect("no NaN"));
            prop_assert_eq!(s.page(0, u64::MAX), &expected[..]);
            for (i, e) in expected.iter().enumerate() {
                prop_assert_eq!(s.position(e.product_id), Some((i, *e)));
            }
        }
    }
}
