//! A version as its predecessor plus what changed: [`Changes`] between a held copy and a
//! newly ranked population, and [`Snapshot::with_changes`], the new copy built from the old
//! one and the changes alone.
//!
//! A live pass re-derives every score (the population's norms move together), but between
//! two passes about one score in a hundred changes. Finding them is one walk over both
//! populations in product order; building the new copy sorts the changed entries only and
//! copies the unchanged ones as runs, so a pass costs a sort of what changed and a copy at
//! memory speed, not a sort of the whole board. The result equals, entry for entry and
//! index for index, the copy [`Snapshot::from_unordered`] builds from the whole population.

use std::cmp::Ordering;

use super::{Held, Scored, Snapshot, SnapshotError, ranking_order};

/// What changed between two versions of a ranking.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Changes {
    /// Entries that are new or whose score changed (bit for bit), ascending by product id.
    pub set: Vec<Scored>,
    /// Products that left the ranking, ascending.
    pub gone: Vec<i64>,
}

impl Changes {
    /// Products changed (set or gone).
    pub fn len(&self) -> usize {
        self.set.len() + self.gone.len()
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.gone.is_empty()
    }

    /// The changes from `previous` to `next`, a population's entries in strictly ascending
    /// product order (what a pass ranks): one walk of both in product order.
    pub fn between(previous: &Snapshot, next: &[Scored]) -> Result<Self, SnapshotError> {
        Ok(Self::between_at_most(previous, next, usize::MAX)?.expect("no limit"))
    }

    /// [`Changes::between`], unless more than `at_most` products changed (`None`): the walk
    /// stops there, so a pass whose changes are too many to be worth applying (the
    /// population's statistics moved every norm) costs little before it builds the copy whole.
    pub fn between_at_most(
        previous: &Snapshot,
        next: &[Scored],
        at_most: usize,
    ) -> Result<Option<Self>, SnapshotError> {
        if let Some(w) = next.windows(2).position(|w| w[0].product_id >= w[1].product_id) {
            return Err(match next[w].product_id == next[w + 1].product_id {
                true => SnapshotError::Duplicate(next[w].product_id),
                false => SnapshotError::Unordered(w + 1),
            });
        }
        let mut changes = Self::default();
        let same = |held: &Scored, e: &Scored| held.score.to_bits() == e.score.to_bits();
        match &previous.held {
            Held::Own { entries, ids, at } => {
                let mut held = ids.iter().zip(at).peekable();
                for e in next {
                    while let Some((id, _)) = held.next_if(|(id, _)| **id < e.product_id) {
                        changes.gone.push(*id);
                    }
                    match held.next_if(|(id, _)| **id == e.product_id) {
                        Some((_, at)) if same(&entries[*at as usize], e) => {}
                        _ => changes.set.push(*e),
                    }
                    if changes.len() > at_most {
                        return Ok(None);
                    }
                }
                changes.gone.extend(held.map(|(id, _)| *id));
            }
            Held::Within { .. } => {
                // A segment's copy: few entries, looked up one by one.
                for e in next {
                    match previous.position(e.product_id) {
                        Some((_, held)) if same(&held, e) => {}
                        _ => changes.set.push(*e),
                    }
                }
                let mut left: Vec<i64> = previous.page(0, u64::MAX).iter().map(|e| e.product_id).collect();
                left.sort_unstable();
                left.retain(|id| next.binary_search_by_key(id, |e| e.product_id).is_err());
                changes.gone = left;
            }
        }
        Ok((changes.len() <= at_most).then_some(changes))
    }

    /// The changes from `previous` to `next`, two copies of a ranking (their entries, not
    /// their pins or annexes): one walk of both product indexes.
    pub fn of(previous: &Snapshot, next: &Snapshot) -> Result<Self, SnapshotError> {
        Ok(Self::of_at_most(previous, next, usize::MAX)?.expect("no limit"))
    }

    /// [`Changes::of`], unless more than `at_most` products changed (`None`).
    pub fn of_at_most(previous: &Snapshot, next: &Snapshot, at_most: usize) -> Result<Option<Self>, SnapshotError> {
        let Held::Own { entries, ids, at } = &next.held else {
            let mut by_product = next.page(0, u64::MAX).into_owned();
            by_product.sort_unstable_by_key(|e| e.product_id);
            return Self::between_at_most(previous, &by_product, at_most);
        };
        let next: Vec<Scored> = ids.iter().zip(at).map(|(_, at)| entries[*at as usize]).collect();
        Self::between_at_most(previous, &next, at_most)
    }

    /// Checks the promises of the fields: both ascending without repeats, and no product both
    /// set and gone.
    fn check(&self) -> Result<(), SnapshotError> {
        let repeated = |ids: &mut dyn Iterator<Item = i64>| {
            let mut last: Option<i64> = None;
            for (i, id) in ids.enumerate() {
                match last {
                    Some(l) if l == id => return Err(SnapshotError::Duplicate(id)),
                    Some(l) if l > id => return Err(SnapshotError::Unordered(i)),
                    _ => last = Some(id),
                }
            }
            Ok(())
        };
        repeated(&mut self.set.iter().map(|e| e.product_id))?;
        repeated(&mut self.gone.iter().copied())?;
        match self.set.iter().find(|e| self.gone.binary_search(&e.product_id).is_ok()) {
            Some(e) => Err(SnapshotError::Duplicate(e.product_id)),
            None => Ok(()),
        }
    }
}

/// Past this share of a copy's entries changed (1 in 8), sorting the copy whole is cheaper
/// than placing each changed entry by a search of the held ones: `ranking-bench changes`
/// measured the two even at about 1 in 10 (a million entries: 38 ms built whole, 40 ms
/// applied), and a search per entry only grows past it.
pub const MERGE_SHARE: usize = 8;

impl Snapshot {
    /// This ranking with `changes` applied: the entries of `changes.set` in place of (or
    /// besides) the held ones, without the products of `changes.gone` (one not held is no
    /// change). An organic copy (entries of its own, no pins) changed in at most an
    /// [`MERGE_SHARE`]th of its entries is built from its runs of unchanged entries and the
    /// changed ones sorted; any other is built whole.
    pub fn with_changes(&self, changes: &Changes) -> Result<Snapshot, SnapshotError> {
        changes.check()?;
        let own = matches!(self.held, Held::Own { .. }) && self.pinned.is_empty();
        if own && changes.set.len() <= self.len() / MERGE_SHARE {
            self.merged_with(changes)
        } else {
            self.rebuilt_with(changes)
        }
    }

    /// [`Snapshot::with_changes`] of an organic copy with entries of its own: each changed
    /// entry placed by a search of the held ones, the runs between copied.
    fn merged_with(&self, changes: &Changes) -> Result<Snapshot, SnapshotError> {
        let Held::Own { entries, ids, at } = &self.held else { return self.rebuilt_with(changes) };
        let len = entries.len() - changes.gone.iter().filter(|id| ids.binary_search(id).is_ok()).count()
            + changes.set.iter().filter(|e| ids.binary_search(&e.product_id).is_err()).count();
        if u32::try_from(len).is_err() {
            return Err(SnapshotError::TooLarge(len));
        }
        // Positions of the held entries that leave or move, ascending.
        let mut leaving: Vec<u32> = changes
            .gone
            .iter()
            .chain(changes.set.iter().map(|e| &e.product_id))
            .filter_map(|id| ids.binary_search(id).ok().map(|k| at[k]))
            .collect();
        leaving.sort_unstable();
        // The entries that arrive, in ranking order, each with the number of held entries
        // ranked before it (a product's own old entry, leaving, may be counted either way).
        let mut arriving: Vec<(usize, usize)> = (0..changes.set.len())
            .map(|i| {
                let e = &changes.set[i];
                (entries.partition_point(|h| ranking_order(h, e) == Ordering::Less), i)
            })
            .collect();
        arriving.sort_unstable_by(|a, b| ranking_order(&changes.set[a.1], &changes.set[b.1]));

        // The new entries, and where each held entry went (`u32::MAX`: it left).
        let mut merged: Vec<Scored> = Vec::with_capacity(len);
        let mut moved_to = vec![u32::MAX; entries.len()];
        let mut placed = vec![0u32; changes.set.len()];
        let (mut from, mut leave, mut arrive) = (0usize, 0usize, 0usize);
        loop {
            let next_leave = leaving.get(leave).map(|p| *p as usize);
            let next_arrive = arriving.get(arrive).map(|a| a.0);
            let end = [next_leave, next_arrive].into_iter().flatten().min().unwrap_or(entries.len());
            let base = merged.len();
            for (p, to) in moved_to[from..end].iter_mut().enumerate() {
                *to = (base + p) as u32;
            }
            merged.extend_from_slice(&entries[from..end]);
            from = end;
            match (next_arrive, next_leave) {
                (Some(a), _) if a == end => {
                    let i = arriving[arrive].1;
                    placed[i] = merged.len() as u32;
                    merged.push(changes.set[i]);
                    arrive += 1;
                }
                (_, Some(l)) if l == end => {
                    leave += 1;
                    from += 1;
                }
                _ => break,
            }
        }
        debug_assert_eq!(merged.len(), len);

        // The product index: held ids without the gone, merged with the new ones.
        let mut new_ids = Vec::with_capacity(len);
        let mut new_at = Vec::with_capacity(len);
        let mut set = changes.set.iter().zip(&placed).peekable();
        let mut gone = changes.gone.iter().peekable();
        for (id, old) in ids.iter().zip(at) {
            while let Some((e, to)) = set.next_if(|(e, _)| e.product_id < *id) {
                new_ids.push(e.product_id);
                new_at.push(*to);
            }
            while gone.next_if(|g| **g < *id).is_some() {}
            if let Some((_, to)) = set.next_if(|(e, _)| e.product_id == *id) {
                new_ids.push(*id);
                new_at.push(*to);
            } else if gone.next_if(|g| **g == *id).is_none() {
                new_ids.push(*id);
                new_at.push(moved_to[*old as usize]);
            }
        }
        for (e, to) in set {
            new_ids.push(e.product_id);
            new_at.push(*to);
        }
        Ok(Snapshot {
            held: Held::Own { entries: merged, ids: new_ids, at: new_at },
            pinned: Vec::new(),
            annex: None,
            acting: Vec::new(),
        })
    }

    /// [`Snapshot::with_changes`] ranked whole: a copy held as positions or serving pins, or
    /// one changed past [`MERGE_SHARE`]. Its entries in product order (through the product
    /// index when it has one) merged in one walk with the changes, also in product order, then
    /// ranked.
    fn rebuilt_with(&self, changes: &Changes) -> Result<Snapshot, SnapshotError> {
        let held: Vec<Scored> = match &self.held {
            Held::Own { entries, at, .. } => at.iter().map(|p| entries[*p as usize]).collect(),
            Held::Within { .. } => {
                let mut entries = self.page(0, u64::MAX).into_owned();
                entries.sort_unstable_by_key(|e| e.product_id);
                entries
            }
        };
        let mut merged = Vec::with_capacity(held.len() + changes.set.len());
        let mut set = changes.set.iter().peekable();
        let mut gone = changes.gone.iter().peekable();
        for e in held {
            while let Some(s) = set.next_if(|s| s.product_id < e.product_id) {
                merged.push(*s);
            }
            while gone.next_if(|g| **g < e.product_id).is_some() {}
            if let Some(s) = set.next_if(|s| s.product_id == e.product_id) {
                merged.push(*s);
            } else if gone.next_if(|g| **g == e.product_id).is_none() {
                merged.push(e);
            }
        }
        merged.extend(set.copied());
        Snapshot::from_unordered(merged)
    }
}

#[cfg(test)]
mod tests;
