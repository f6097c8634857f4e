//! A version stored as its predecessor plus what changed (`v<N>:delta`, layout 2): 20 bytes
//! of header (the previous version, 8 bytes; the version's entries, the entries set and the
//! products gone, 4 bytes each; big-endian), the entries set as packed entries in ascending product id, then the
//! products gone, 8 bytes each. A version's chain: the whole version it starts from (its
//! base: a packed copy and product index, as in layout 1) and the deltas after it, listed in
//! order in `v<base>:chain`; the pointer of a delta version reads `N:2:<base>`.

use super::packed::{PACKED, pack, unpack};
use crate::domain::snapshot::Changes;
use crate::ports::StoreError;

/// Bytes of a delta's header.
pub(super) const HEADER: usize = 20;

/// The deltas a chain may hold before the next version is written whole: a replica that
/// lacks a chain's versions reads its base and at most this many deltas.
pub(super) const CHAIN: usize = 32;

/// A delta is written only when it is at most this share of the version's entries
/// (1 / `DELTA_SHARE`); a larger change is written whole. Half: a delta of half the entries
/// (16 bytes each) is still less than the whole copy and its index (20 bytes an entry), and
/// a board whose recency norms age every pass (a trending population whose latest events
/// span minutes) changes a third of its entries a second.
pub(super) const DELTA_SHARE: usize = 2;

/// The deltas of `changes`' size a chain may hold: [`CHAIN`], and at most about one
/// version's entries in all, so that a replica lacking the chain reads its base and at most
/// about as much again.
pub(super) fn chain_max(len: usize, changes: &Changes) -> usize {
    CHAIN.min(len / changes.len().max(1)).max(1)
}

/// `changes` after version `previous`, making a version of `len` entries, as `v<N>:delta`
/// holds them.
pub(super) fn encode(previous: u64, len: usize, changes: &Changes) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER + changes.set.len() * PACKED + changes.gone.len() * 8);
    bytes.extend_from_slice(&previous.to_be_bytes());
    bytes.extend_from_slice(&(len as u32).to_be_bytes());
    bytes.extend_from_slice(&(changes.set.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&(changes.gone.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&pack(&changes.set));
    for id in &changes.gone {
        bytes.extend_from_slice(&id.to_be_bytes());
    }
    bytes
}

/// Bytes of `changes` as a delta holds them.
pub(super) fn size(changes: &Changes) -> usize {
    HEADER + changes.set.len() * PACKED + changes.gone.len() * 8
}

/// What a delta's header says: the previous version and the version's entries.
pub(super) fn header(bytes: &[u8]) -> Result<(u64, usize), StoreError> {
    let head: [u8; 8] = bytes.get(..8).and_then(|h| h.try_into().ok()).ok_or_else(|| corrupt(bytes.len()))?;
    Ok((u64::from_be_bytes(head), count(bytes, 8)?))
}

fn count(bytes: &[u8], at: usize) -> Result<usize, StoreError> {
    let b: [u8; 4] = bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).ok_or_else(|| corrupt(bytes.len()))?;
    Ok(u32::from_be_bytes(b) as usize)
}

/// The previous version and the changes a `v<N>:delta` holds.
pub(super) fn decode(bytes: &[u8]) -> Result<(u64, Changes), StoreError> {
    let (previous, _) = header(bytes)?;
    let (set, gone) = (count(bytes, 12)?, count(bytes, 16)?);
    if bytes.len() != HEADER + set * PACKED + gone * 8 {
        return Err(corrupt(bytes.len()));
    }
    let set_end = HEADER + set * PACKED;
    let set = unpack(&bytes[HEADER..set_end])?;
    let gone =
        bytes[set_end..].chunks_exact(8).map(|id| i64::from_be_bytes(id.try_into().unwrap_or_default())).collect();
    Ok((previous, Changes { set, gone }))
}

fn corrupt(len: usize) -> StoreError {
    StoreError::Corrupt(format!("a version's delta of {len} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::Scored;

    #[test]
    fn a_delta_reads_back_bit_for_bit() {
        let changes = Changes {
            set: vec![Scored { product_id: -3, score: -0.0 }, Scored { product_id: i64::MAX, score: 1e300 }],
            gone: vec![i64::MIN, 7],
        };
        let bytes = encode(1_765_000_000_123, 4_000_000, &changes);
        assert_eq!(bytes.len(), HEADER + 2 * PACKED + 2 * 8);
        assert_eq!(header(&bytes).expect("header"), (1_765_000_000_123, 4_000_000));
        let (previous, back) = decode(&bytes).expect("decoded");
        assert_eq!(previous, 1_765_000_000_123);
        assert_eq!(back.gone, changes.gone);
        let bits = |c: &Changes| c.set.iter().map(|e| (e.product_id, e.score.to_bits())).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&changes));
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[0; 7]).is_err());
    }

    /// A chain of deltas holds at most about one version's entries: many small deltas up to
    /// [`CHAIN`], a delta of half the version once, and never none.
    #[test]
    fn a_chain_holds_about_one_version_of_deltas() {
        let of = |n: i64| Changes { set: (0..n).map(|p| Scored { product_id: p, score: 1.0 }).collect(), gone: vec![] };
        assert_eq!(chain_max(1_000_000, &of(5)), CHAIN);
        assert_eq!(chain_max(1_000_000, &of(100_000)), 10);
        assert_eq!(chain_max(1_000_000, &of(400_000)), 2);
        assert_eq!(chain_max(1_000_000, &of(500_000)), 2);
        assert_eq!(chain_max(1_000, &of(1_000)), 1);
        assert_eq!(chain_max(0, &of(0)), 1);
    }
}
