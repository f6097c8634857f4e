//! The packed copy of a version (16 bytes an entry: product id and score bits, big-endian,
//! in ranking order), which replicas load and every read of a version decodes
//! (`scripts/current_packed.lua`, `scripts/version_chunk.lua`, `scripts/packed_placements.lua`),
//! and its product index (4 bytes an entry: positions in the packed copy, in ascending product
//! id). A ZSET would cost 118 bytes an entry and a ZADD of every entry per publication (a
//! million for a big day) against 20 for these two, written as a few large appends; only the
//! daily ranking keeps one besides, a sorted set of product ids scored with the packed score, refreshed by full publications.

use crate::domain::snapshot::by_product;
use crate::ports::{Scored, StoreError};

/// Bytes per packed entry: product id and score bits, big-endian.
pub(super) const PACKED: usize = 16;

/// Bytes per product index entry: a position in ranking order, big-endian. The product id
/// is the packed copy's at that position: the index costs 4 bytes an entry, not 12, for one
/// more `GETRANGE` per step of a search.
pub(super) const INDEXED: usize = 4;

pub(super) fn pack(entries: &[Scored]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(entries.len() * PACKED);
    for e in entries {
        bytes.extend_from_slice(&e.product_id.to_be_bytes());
        bytes.extend_from_slice(&e.score.to_bits().to_be_bytes());
    }
    bytes
}

pub(super) fn unpack(bytes: &[u8]) -> Result<Vec<Scored>, StoreError> {
    if !bytes.len().is_multiple_of(PACKED) {
        return Err(StoreError::Corrupt(format!("packed ranking of {} bytes", bytes.len())));
    }
    Ok(bytes
        .chunks_exact(PACKED)
        .map(|e| {
            let (id, score) = e.split_at(8);
            Scored {
                product_id: i64::from_be_bytes(id.try_into().unwrap_or_default()),
                score: f64::from_bits(u64::from_be_bytes(score.try_into().unwrap_or_default())),
            }
        })
        .collect())
}

/// `GETRANGE` bounds of `count` packed entries from `start` (an empty range when `count` is 0:
/// `GETRANGE k 0 -1` would mean the whole value).
pub(super) fn byte_range(start: u64, count: u64) -> (u64, u64) {
    if count == 0 {
        return (1, 0);
    }
    let first = start.saturating_mul(PACKED as u64).min(i64::MAX as u64);
    let last = start.saturating_add(count).saturating_mul(PACKED as u64).saturating_sub(1).min(i64::MAX as u64);
    (first, last)
}

/// The positions of `entries` (in ranking order) in ascending product order: the product
/// index.
pub(super) fn product_order(entries: &[Scored]) -> Vec<u32> {
    by_product(entries).into_iter().map(|(_, at)| at).collect()
}

/// The product index entries of `positions` (a run of [`product_order`]).
pub(super) fn indexed(positions: &[u32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(positions.len() * INDEXED);
    for &at in positions {
        bytes.extend_from_slice(&at.to_be_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_entries_round_trip_bit_for_bit() {
        let entries = [
            Scored { product_id: i64::MAX, score: 4_194_303.999_999_999 },
            Scored { product_id: 1, score: -0.0 },
            Scored { product_id: 42, score: 5.700_500_8 },
        ];
        let back = unpack(&pack(&entries)).expect("unpacks");
        assert_eq!(back.len(), 3);
        for (a, b) in entries.iter().zip(&back) {
            assert_eq!((a.product_id, a.score.to_bits()), (b.product_id, b.score.to_bits()));
        }
        assert!(unpack(&[0; 17]).is_err());
        let order = product_order(&entries);
        assert_eq!(order, vec![1, 2, 0]);
        assert_eq!(indexed(&order), vec![0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0]);
    }
}
