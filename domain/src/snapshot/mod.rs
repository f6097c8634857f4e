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

pub mod annex;
mod build;
mod changes;
mod reindex;
mod served;
mod within;

pub use build::by_product;
pub use changes::{Changes, MERGE_SHARE};

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use annex::Annex;

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

/// What a served board holds beyond its entries: the controls it was served under, the
/// positions its pins placed, and its annex (what it keeps of its organic board). A store
/// keeps them beside the entries.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServedParts {
    /// Each control acting on the board when it was served, by id, with its revision: what
    /// tells whether the board must be served again after a change of the controls.
    pub acting: Vec<(String, u64)>,
    pub pinned: Vec<u32>,
    pub annex: Annex,
}

/// An immutable ranking.
pub struct Snapshot {
    held: Held,
    /// Positions (ascending) of entries a merchandising pin placed: their place is not their
    /// score's, so the ranking order holds among the other entries only.
    pinned: Vec<u32>,
    /// What a served board keeps of its organic board; `None`: no control touched it (it is
    /// its organic board).
    annex: Option<Box<Annex>>,
    /// The controls a served board was served under, by id, with their revisions (empty: an
    /// organic board).
    acting: Vec<(String, u64)>,
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

impl Snapshot {
    /// The product index of a snapshot with entries of its own: for each product in
    /// ascending id order, its position (`None` for one held within another).
    pub fn product_index(&self) -> Option<&[u32]> {
        match &self.held {
            Held::Own { at, .. } => Some(at),
            Held::Within { .. } => None,
        }
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
mod tests;
