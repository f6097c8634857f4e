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
        Self { held: Held::Own { entries, ids, at }, pinned: Vec::new(), annex: None, acting: Vec::new() }
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
        Ok(Self { held: Held::Own { entries, ids, at }, pinned, annex: None, acting: Vec::new() })
    }

    /// Positions (ascending) of the entries a pin placed.
    pub fn pinned(&self) -> &[u32] {
        &self.pinned
    }

    /// A board of `entries` with its served parts (`None`: an organic board, in ranking order).
    pub fn from_parts(entries: Vec<Scored>, parts: Option<ServedParts>) -> Result<Self, SnapshotError> {
        match parts {
            None => Self::from_ranked(entries),
            Some(ServedParts { acting, pinned, annex }) => {
                Ok(Self::from_served(entries, pinned)?.with_annex(annex).served_under(acting))
            }
        }
    }

    /// Its served parts; `None` for a board no control acted on.
    pub fn served_parts(&self) -> Option<ServedParts> {
        if self.acting.is_empty() && self.pinned.is_empty() && self.annex.is_none() {
            return None;
        }
        Some(ServedParts {
            acting: self.acting.clone(),
            pinned: self.pinned.clone(),
            annex: self.annex.as_deref().cloned().unwrap_or_default(),
        })
    }

    /// The same board, noted as served under `acting` (control ids and revisions).
    pub fn served_under(mut self, mut acting: Vec<(String, u64)>) -> Self {
        acting.sort();
        self.acting = acting;
        self
    }

    /// The controls the board was served under, by id, with their revisions (empty: none).
    pub fn acting(&self) -> &[(String, u64)] {
        &self.acting
    }

    /// The same board with `annex`, what it keeps of its organic board (an empty one is
    /// none).
    pub fn with_annex(mut self, annex: Annex) -> Self {
        self.annex = (!annex.is_empty()).then(|| Box::new(annex));
        self
    }

    /// What the board keeps of its organic board, when a control touched it.
    pub fn annex(&self) -> Option<&Annex> {
        self.annex.as_deref()
    }

    /// The organic rank of the entry at `position` (0: the organic board lacks it).
    pub fn organic_rank(&self, position: usize) -> u64 {
        match &self.annex {
            Some(annex) => annex.organic_rank(position as u64, self.entry(position)),
            None => position as u64 + 1,
        }
    }

    /// The controls acting on `product_id` in this board, by id.
    pub fn control_ids(&self, product_id: i64) -> &[String] {
        self.annex.as_ref().and_then(|a| a.get(product_id)).map_or(&[], |t| &t.control_ids)
    }

    /// The organic board this one was served from, whole (itself when no control touched it).
    pub fn organic_board(&self) -> Vec<Scored> {
        let served = self.page(0, self.len() as u64);
        match &self.annex {
            Some(annex) => annex.organic_board(&served),
            None => served.into_owned(),
        }
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
