//! The ranking feed's arithmetic: what changed in a board's fed top between two versions, and
//! the checksum a consumer verifies the top it holds with.
//!
//! A board's fed top is its first `RANKING_FEED_TOP` served entries. Between the top a
//! consumer holds (the previous fed version's, or nothing) and the current one, one change per
//! product whose rank or score changed, that entered, or that left (rank 0): applying them to
//! the held top gives the current one exactly. The checksum is FNV-1a 64 over the top in rank
//! order, each entry's product id then its rank as 8 bytes big-endian each.

use std::collections::HashMap;

/// One entry of a fed top; its rank is its place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FedEntry {
    pub product_id: i64,
    pub score: f64,
    /// Rank before merchandising controls (0: not ranked organically).
    pub organic_rank: u64,
}

/// One product's change between two fed tops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub product_id: i64,
    /// Its rank now; 0: it left the fed top.
    pub rank: u64,
    /// Its rank in the previous fed top; 0: it entered.
    pub previous_rank: u64,
    /// Its score now (the previous one when it left).
    pub score: f64,
    pub organic_rank: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of the top `products` (in rank order): each product id then its rank (1-based),
/// 8 bytes big-endian each.
pub fn checksum(products: impl IntoIterator<Item = i64>) -> u64 {
    let mut hash = FNV_OFFSET;
    for (product_id, rank) in products.into_iter().zip(1u64..) {
        for byte in product_id.to_be_bytes().into_iter().chain(rank.to_be_bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(FNV_PRIME);
        }
    }
    hash
}

/// The changes from `previous` to `current` (both fed tops, in rank order): the entries of
/// `current` that are new or moved or rescored, in rank order, then those of `previous` that
/// left, in their previous rank order. A top sent whole is the changes from an empty one.
pub fn changes(previous: &[FedEntry], current: &[FedEntry]) -> Vec<Change> {
    let before: HashMap<i64, (u64, f64)> =
        previous.iter().zip(1u64..).map(|(e, rank)| (e.product_id, (rank, e.score))).collect();
    let mut changes: Vec<Change> = current
        .iter()
        .zip(1u64..)
        .filter_map(|(e, rank)| {
            let previous_rank = match before.get(&e.product_id) {
                Some(&(was, score)) if was == rank && score.to_bits() == e.score.to_bits() => return None,
                Some(&(was, _)) => was,
                None => 0,
            };
            Some(Change { product_id: e.product_id, rank, previous_rank, score: e.score, organic_rank: e.organic_rank })
        })
        .collect();
    let now: HashMap<i64, ()> = current.iter().map(|e| (e.product_id, ())).collect();
    changes.extend(previous.iter().zip(1u64..).filter(|(e, _)| !now.contains_key(&e.product_id)).map(|(e, was)| {
        Change { product_id: e.product_id, rank: 0, previous_rank: was, score: e.score, organic_rank: 0 }
    }));
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(ids: &[(i64, f64)]) -> Vec<FedEntry> {
        ids.iter().map(|&(product_id, score)| FedEntry { product_id, score, organic_rank: 0 }).collect()
    }

    /// The consumer's side, written apart: the held top as product → (rank, score).
    fn apply(held: &mut HashMap<i64, (u64, f64)>, changes: &[Change]) {
        for c in changes {
            if c.rank == 0 {
                held.remove(&c.product_id);
            } else {
                held.insert(c.product_id, (c.rank, c.score));
            }
        }
    }

    fn ranked(held: &HashMap<i64, (u64, f64)>) -> Vec<i64> {
        let mut entries: Vec<(u64, i64)> = held.iter().map(|(p, (r, _))| (*r, *p)).collect();
        entries.sort_unstable();
        entries.into_iter().map(|(_, p)| p).collect()
    }

    #[test]
    fn the_checksum_is_fnv1a_64_over_ids_and_ranks_big_endian() {
        // Computed apart: FNV-1a 64 of 00..2a 00..01 (product 42, rank 1).
        let mut bytes = 42i64.to_be_bytes().to_vec();
        bytes.extend_from_slice(&1u64.to_be_bytes());
        let mut expected = 0xcbf29ce484222325u64;
        for b in bytes {
            expected = (expected ^ u64::from(b)).wrapping_mul(0x100000001b3);
        }
        assert_eq!(checksum([42]), expected);
        // The figures of docs/API.md's Python checksum.
        assert_eq!(checksum([42]), 10_327_725_056_075_130_052);
        assert_eq!(checksum([1, 2]), 1_996_706_736_776_675_461);
        assert_eq!(checksum([]), 0xcbf29ce484222325);
        assert_ne!(checksum([1, 2]), checksum([2, 1]));
    }

    #[test]
    fn applying_the_changes_to_the_previous_top_gives_the_current_one() {
        let previous = top(&[(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0)]);
        // 3 rises past 2, 4 leaves, 5 enters, 1 stays as it was.
        let current = top(&[(1, 9.0), (3, 8.5), (2, 8.0), (5, 5.0)]);
        let changes = changes(&previous, &current);
        let ids: Vec<(i64, u64, u64)> = changes.iter().map(|c| (c.product_id, c.rank, c.previous_rank)).collect();
        assert_eq!(ids, vec![(3, 2, 3), (2, 3, 2), (5, 4, 0), (4, 0, 4)]);
        let mut held: HashMap<i64, (u64, f64)> =
            previous.iter().zip(1u64..).map(|(e, r)| (e.product_id, (r, e.score))).collect();
        apply(&mut held, &changes);
        assert_eq!(ranked(&held), vec![1, 3, 2, 5]);
        assert_eq!(checksum(ranked(&held)), checksum(current.iter().map(|e| e.product_id)));
    }

    #[test]
    fn a_rescored_entry_in_place_is_a_change_and_an_unchanged_top_has_none() {
        let previous = top(&[(1, 9.0), (2, 8.0)]);
        assert!(changes(&previous, &previous).is_empty());
        let rescored = top(&[(1, 9.5), (2, 8.0)]);
        let c = changes(&previous, &rescored);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].product_id, c[0].rank, c[0].previous_rank, c[0].score), (1, 1, 1, 9.5));
    }

    #[test]
    fn a_whole_top_is_the_changes_from_nothing() {
        let current = top(&[(7, 3.0), (8, 2.0)]);
        let c = changes(&[], &current);
        assert_eq!(
            c.iter().map(|c| (c.product_id, c.rank, c.previous_rank)).collect::<Vec<_>>(),
            vec![(7, 1, 0), (8, 2, 0)]
        );
    }
}
