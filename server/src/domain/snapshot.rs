//! An immutable ranking held in memory: entries best first plus an index from product id
//! to position, so a page costs O(limit) and a product's rank O(1).
//!
//! A ranking that is another one restricted to some of its products (a segment of a daily or
//! weekly ranking, same scores, same order) can be held as the positions of its entries in
//! that other ranking ([`Snapshot::within`]): 4 bytes an entry instead of 16 plus an index; a
//! product's rank is then its position in the whole ranking (O(1)) searched among the
//! positions (O(log n)).
//!
//! The order is the ranking stores' order: score descending, equal scores by descending
//! product id (the `ZREVRANGE` order of zero-padded members). The index is a
//! `hashbrown::HashTable` of `u32` positions hashed by product id with a per-snapshot random
//! seed: 4 bytes per bucket instead of a second copy of every id, and ids chosen by a caller
//! cannot be lined up to collide without knowing the seed.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

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
    held: Held,
}

/// How a snapshot holds its entries.
enum Held {
    /// Entries of its own and an index from product id to position.
    Own { entries: Vec<Scored>, index: HashTable<u32>, seed: u64 },
    /// Ascending positions of its entries in `whole`.
    Within { whole: Arc<Snapshot>, positions: Vec<u32> },
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("len", &self.len()).finish_non_exhaustive()
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
        Ok(Self { held: Held::Own { entries, index, seed } })
    }

    /// `entries` (in ranking order) held as positions in `whole`, when every entry is an
    /// entry of `whole` with the same score bits, in the same order; `None` otherwise (a
    /// ranking of another version, say), and the entries are then held on their own.
    pub fn within(whole: &Arc<Snapshot>, entries: &[Scored]) -> Option<Self> {
        let mut positions = Vec::with_capacity(entries.len());
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
        if let Some(i) = positions.windows(2).position(|w| w[0] >= w[1]) {
            return Err(SnapshotError::Unordered(i + 1));
        }
        if let Some(last) = positions.last()
            && *last as usize >= whole.len()
        {
            return Err(SnapshotError::Unordered(positions.len() - 1));
        }
        Ok(Self { held: Held::Within { whole: whole.clone(), positions } })
    }

    /// The entries at `positions` (each below [`Snapshot::len`]), in the order given.
    pub fn entries_at(&self, positions: &[u32]) -> Vec<Scored> {
        positions.iter().map(|p| self.entry(*p as usize)).collect()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match &self.held {
            Held::Own { entries, .. } => entries.len(),
            Held::Within { positions, .. } => positions.len(),
        }
    }

    /// Whether the ranking has no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries `offset .. offset + limit`, best first (fewer at the end, none past it):
    /// borrowed from a snapshot with entries of its own, gathered from the whole ranking
    /// for one held as positions.
    pub fn page(&self, offset: u64, limit: u64) -> Cow<'_, [Scored]> {
        let len = self.len();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(len);
        let end = start.saturating_add(usize::try_from(limit).unwrap_or(usize::MAX)).min(len);
        match &self.held {
            Held::Own { entries, .. } => Cow::Borrowed(&entries[start..end]),
            Held::Within { whole, positions } => {
                Cow::Owned(positions[start..end].iter().map(|p| whole.entry(*p as usize)).collect())
            }
        }
    }

    /// The entry at a 0-based position (which must be below [`Snapshot::len`]).
    fn entry(&self, at: usize) -> Scored {
        match &self.held {
            Held::Own { entries, .. } => entries[at],
            Held::Within { whole, positions } => whole.entry(positions[at] as usize),
        }
    }

    /// The 0-based position of a product and its entry.
    pub fn position(&self, product_id: i64) -> Option<(usize, Scored)> {
        match &self.held {
            Held::Own { entries, index, seed } => {
                let p = *index.find(hash(*seed, product_id), |p| entries[*p as usize].product_id == product_id)?;
                Some((p as usize, entries[p as usize]))
            }
            Held::Within { whole, positions } => {
                let (p, e) = whole.position(product_id)?;
                let at = positions.binary_search(&(p as u32)).ok()?;
                Some((at, e))
            }
        }
    }

    /// Entries with a strictly greater score than `score` (ties share a competition rank).
    pub fn above(&self, score: f64) -> usize {
        match &self.held {
            Held::Own { entries, .. } => entries.partition_point(|e| e.score.total_cmp(&score).is_gt()),
            Held::Within { whole, positions } => {
                positions.partition_point(|p| whole.entry(*p as usize).score.total_cmp(&score).is_gt())
            }
        }
    }

    /// Bytes held on the heap, for the memory bound and the benchmark (a snapshot held as
    /// positions counts its positions, not the whole ranking it shares).
    pub fn heap_bytes(&self) -> usize {
        match &self.held {
            Held::Own { entries, index, .. } => {
                entries.capacity() * std::mem::size_of::<Scored>() + index.allocation_size()
            }
            Held::Within { positions, .. } => positions.capacity() * std::mem::size_of::<u32>(),
        }
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
        fn a_ranking_held_within_another_answers_like_one_of_its_own(
            ids in proptest::collection::hash_set(1i64..1_000, 1..200),
            scores in proptest::collection::vec(0u8..4, 200),
            keep in proptest::collection::vec(any::<bool>(), 200),
            asked in proptest::collection::vec(0i64..1_100, 20),
        ) {
            let entries: Vec<Scored> =
                ids.iter().zip(scores.iter().cycle()).map(|(id, s)| scored(*id, f64::from(*s))).collect();
            let whole = Arc::new(Snapshot::from_unordered(entries).expect("valid"));
            let members: Vec<Scored> =
                whole.page(0, u64::MAX).iter().zip(keep.iter().cycle()).filter(|(_, k)| **k).map(|(e, _)| *e).collect();
            let own = Snapshot::from_ranked(members.clone()).expect("valid");
            let within = Snapshot::within(&whole, &members).expect("a restriction of the whole");
            prop_assert_eq!(within.len(), own.len());
            prop_assert_eq!(within.page(0, u64::MAX), own.page(0, u64::MAX));
            prop_assert_eq!(within.page(3, 5), own.page(3, 5));
            for id in asked.iter().chain(ids.iter()) {
                prop_assert_eq!(within.position(*id), own.position(*id));
            }
            for s in 0..5 {
                prop_assert_eq!(within.above(f64::from(s)), own.above(f64::from(s)));
            }
        }
    }

    #[test]
    fn entries_that_are_not_a_restriction_are_not_held_within() {
        let whole =
            Arc::new(Snapshot::from_unordered(vec![scored(1, 3.0), scored(2, 2.0), scored(3, 1.0)]).expect("valid"));
        assert!(Snapshot::within(&whole, &[scored(1, 3.0), scored(3, 1.0)]).is_some());
        assert!(Snapshot::within(&whole, &[scored(1, 3.5)]).is_none(), "another score");
        assert!(Snapshot::within(&whole, &[scored(4, 0.5)]).is_none(), "not in the whole");
        assert!(Snapshot::within(&whole, &[scored(3, 1.0), scored(1, 3.0)]).is_none(), "another order");
        let within = Snapshot::within(&whole, &[scored(2, 2.0)]).expect("held within");
        assert_eq!(within.heap_bytes(), 4);

        let at = Snapshot::at_positions(&whole, vec![0, 2]).expect("ascending, in range");
        assert_eq!(at.page(0, 10), vec![scored(1, 3.0), scored(3, 1.0)]);
        assert_eq!(whole.entries_at(&[2, 0]), vec![scored(3, 1.0), scored(1, 3.0)]);
        assert!(Snapshot::at_positions(&whole, vec![2, 0]).is_err(), "not ascending");
        assert!(Snapshot::at_positions(&whole, vec![1, 1]).is_err(), "repeated");
        assert!(Snapshot::at_positions(&whole, vec![3]).is_err(), "past the end");
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
