//! An immutable ranking held in memory: entries best first plus an index from product id
//! to position, so a page costs O(limit) and a product's rank O(log n).
//!
//! A ranking that is another one restricted to some of its products (a segment of a daily or
//! weekly ranking, same scores, same order) can be held as the positions of its entries in
//! that other ranking ([`Snapshot::within`]): 4 bytes an entry instead of 28; a product's
//! rank is then its position in the whole ranking searched among the positions.
//!
//! The order is the ranking stores' order: score descending, equal scores by descending
//! product id (the `ZREVRANGE` order of zero-padded members). The index is the product ids in
//! ascending order beside each one's position (12 bytes an entry, about what a hash table of
//! positions takes at its load factor). Unlike a hash table it is built in one sequential
//! pass from entries in product order (what a recompute ranks), it is the very product index
//! the Redis store publishes ([`Snapshot::product_index`]), and no choice of ids by a caller
//! makes a lookup slower.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

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
    /// A pinned position is out of order or past the end.
    #[error("pinned position {0} is repeated, out of order or past the end")]
    Pinned(u32),
}

/// An immutable ranking.
pub struct Snapshot {
    held: Held,
    /// Positions (ascending) of entries a merchandising pin placed: their place is not their
    /// score's, so the ranking order holds among the other entries only.
    pinned: Vec<u32>,
}

/// How a snapshot holds its entries.
enum Held {
    /// Entries of its own and the product index: `ids` ascending, `at[k]` the position of
    /// `ids[k]` in `entries`.
    Own { entries: Vec<Scored>, ids: Vec<i64>, at: Vec<u32> },
    /// Ascending positions of its entries in `whole`.
    Within { whole: Arc<Snapshot>, positions: Vec<u32> },
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("len", &self.len()).finish_non_exhaustive()
    }
}

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
fn order_bits(score: f64) -> u64 {
    let bits = score.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
}

/// The inverse of [`order_bits`].
fn from_order_bits(key: u64) -> f64 {
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
        Self { held: Held::Own { entries, ids, at }, pinned: Vec::new() }
    }

    /// A snapshot of entries already in ranking order (as a store returns them).
    pub fn from_ranked(entries: Vec<Scored>) -> Result<Self, SnapshotError> {
        Self::from_served(entries, Vec::new())
    }

    /// A served board: entries in ranking order but at `pinned` (ascending positions), whose
    /// entries a pin placed where they are whatever their scores.
    pub fn from_served(mut entries: Vec<Scored>, pinned: Vec<u32>) -> Result<Self, SnapshotError> {
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
        entries.shrink_to_fit();
        let pairs = by_product(&entries);
        if let Some(w) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(SnapshotError::Duplicate(w[0].0));
        }
        let (ids, at) = pairs.into_iter().unzip();
        Ok(Self { held: Held::Own { entries, ids, at }, pinned })
    }

    /// Positions (ascending) of the entries a pin placed.
    pub fn pinned(&self) -> &[u32] {
        &self.pinned
    }

    /// The product index of a snapshot with entries of its own: for each product in
    /// ascending id order, its position (`None` for one held within another).
    pub fn product_index(&self) -> Option<&[u32]> {
        match &self.held {
            Held::Own { at, .. } => Some(at),
            Held::Within { .. } => None,
        }
    }

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
        Ok(Self { held: Held::Within { whole: whole.clone(), positions }, pinned: Vec::new() })
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
            Held::Own { entries, ids, at } => {
                let p = at[ids.binary_search(&product_id).ok()?] as usize;
                Some((p, entries[p]))
            }
            Held::Within { whole, positions } => {
                let (p, e) = whole.position(product_id)?;
                let at = positions.binary_search(&(p as u32)).ok()?;
                Some((at, e))
            }
        }
    }

    /// Entries with a strictly greater score than `score` (ties share a competition rank), in
    /// a snapshot without pins.
    fn above(&self, score: f64) -> usize {
        match &self.held {
            Held::Own { entries, .. } => entries.partition_point(|e| e.score.total_cmp(&score).is_gt()),
            Held::Within { whole, positions } => {
                positions.partition_point(|p| whole.entry(*p as usize).score.total_cmp(&score).is_gt())
            }
        }
    }

    /// The 0-based position whose rank the entry at `position` shares (its competition rank
    /// less one): the first entry of its score. A pinned entry's is its own position (its place
    /// is not its score's), and the other entries share theirs with the first entry of their
    /// score that no pin placed.
    pub fn tied_head(&self, position: usize) -> usize {
        let score = self.entry(position).score;
        if self.pinned.is_empty() {
            return self.above(score);
        }
        if self.pinned.binary_search(&(position as u32)).is_ok() {
            return position;
        }
        // Among the unpinned entries, which are in ranking order, the first of this score.
        let (mut lo, mut hi) = (0, position - self.pinned.partition_point(|p| (*p as usize) < position));
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(self.unpinned(mid)).score.total_cmp(&score).is_gt() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.unpinned(lo)
    }

    /// The position of the `n`th (0-based) entry no pin placed.
    fn unpinned(&self, n: usize) -> usize {
        let mut at = n;
        for p in &self.pinned {
            if *p as usize <= at {
                at += 1;
            } else {
                break;
            }
        }
        at
    }

    /// Bytes held on the heap, for the memory bound and the benchmark (a snapshot held as
    /// positions counts its positions, not the whole ranking it shares).
    pub fn heap_bytes(&self) -> usize {
        match &self.held {
            Held::Own { entries, ids, at } => {
                entries.capacity() * std::mem::size_of::<Scored>()
                    + ids.capacity() * std::mem::size_of::<i64>()
                    + at.capacity() * std::mem::size_of::<u32>()
                    + self.pinned.capacity() * std::mem::size_of::<u32>()
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
        assert_eq!((s.tied_head(0), s.tied_head(1), s.tied_head(3)), (0, 1, 1));
        assert_eq!(s.page(3, 10).len(), 1);
        assert!(s.page(4, 10).is_empty());
        assert!(s.page(u64::MAX, u64::MAX).is_empty());
    }

    #[test]
    fn a_served_board_is_ordered_but_at_its_pins() {
        // 9 pinned first with a low score, 4 pinned third; the rest in ranking order.
        let entries = vec![scored(9, 0.5), scored(2, 3.0), scored(4, 9.0), scored(1, 3.0), scored(3, 1.0)];
        let s = Snapshot::from_served(entries.clone(), vec![0, 2]).expect("valid");
        assert_eq!(s.pinned(), &[0, 2]);
        assert_eq!((0..5).map(|i| s.tied_head(i)).collect::<Vec<_>>(), vec![0, 1, 2, 1, 4]);
        assert_eq!(s.position(4).map(|(p, _)| p), Some(2));
        assert_eq!(
            Snapshot::from_served(entries.clone(), vec![2]).expect_err("9 out of order"),
            SnapshotError::Unordered(1)
        );
        assert_eq!(
            Snapshot::from_served(entries.clone(), vec![2, 0]).expect_err("descending"),
            SnapshotError::Pinned(0)
        );
        assert_eq!(Snapshot::from_served(entries, vec![0, 5]).expect_err("past the end"), SnapshotError::Pinned(5));
        let served = Arc::new(Snapshot::from_served(vec![scored(9, 0.5), scored(1, 3.0)], vec![0]).expect("valid"));
        assert!(Snapshot::within(&served, &[scored(1, 3.0)]).is_none(), "a pinned board is no whole to hold a part of");
    }

    #[test]
    fn an_entry_takes_28_bytes_with_its_index() {
        let entries: Vec<Scored> = (0..1_000).map(|i| scored(i, f64::from(i as u32 % 7))).collect();
        assert_eq!(Snapshot::from_unordered(entries.clone()).expect("valid").heap_bytes(), 28_000);
        let ranked = Snapshot::from_unordered(entries).expect("valid").page(0, u64::MAX).into_owned();
        assert_eq!(Snapshot::from_ranked(ranked).expect("valid").heap_bytes(), 28_000);
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

    proptest! {
        #[test]
        fn order_bits_sort_like_total_cmp_and_give_the_score_back(a in any::<f64>(), b in any::<f64>()) {
            prop_assert_eq!(order_bits(a).cmp(&order_bits(b)), a.total_cmp(&b));
            prop_assert_eq!(from_order_bits(order_bits(a)).to_bits(), a.to_bits());
        }

        /// Entries in any order, in product order and in ranking order make the same
        /// snapshot: the same entries bit for bit, and a product index giving each product's
        /// position in ascending id order.
        #[test]
        fn every_order_of_the_entries_makes_the_same_snapshot(
            ids in proptest::collection::hash_set(any::<i64>(), 0..300),
            scores in proptest::collection::vec(prop_oneof![Just(-0.0), Just(0.0), Just(1.5), any::<f64>()], 300),
        ) {
            let shuffled: Vec<Scored> = ids.iter().zip(scores.iter().cycle()).map(|(id, s)| scored(*id, *s)).collect();
            let mut by_product = shuffled.clone();
            by_product.sort_by_key(|e| e.product_id);
            let mut ranked = shuffled.clone();
            ranked.sort_by(ranking_order);
            let bits = |s: &Snapshot| -> Vec<(i64, u64)> {
                s.page(0, u64::MAX).iter().map(|e| (e.product_id, e.score.to_bits())).collect()
            };
            let expected: Vec<(i64, u64)> = ranked.iter().map(|e| (e.product_id, e.score.to_bits())).collect();
            let index: Vec<u32> = by_product
                .iter()
                .map(|e| ranked.iter().position(|r| r.product_id == e.product_id).expect("ranked") as u32)
                .collect();
            for snapshot in [
                Snapshot::from_unordered(shuffled).expect("valid"),
                Snapshot::from_unordered(by_product).expect("valid"),
                Snapshot::from_unordered(ranked.clone()).expect("valid"),
                Snapshot::from_ranked(ranked).expect("valid"),
            ] {
                prop_assert_eq!(bits(&snapshot), expected.clone());
                prop_assert_eq!(snapshot.product_index(), Some(&index[..]));
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
