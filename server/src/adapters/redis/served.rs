//! A served board's parts as the store keeps them beside its version: the positions its pins
//! placed (`v<N>:pins`, 4 bytes each, big-endian and ascending, which
//! `scripts/packed_placements.lua` searches for tied ranks), and the parts whole
//! (`v<N>:served`, JSON: the controls it was served under, the pins and the annex's touched
//! entries), which a replica loading
//! the version and a read of it from the store take.

use serde::{Deserialize, Serialize};

use crate::domain::snapshot::annex::{Annex, Touched};
use crate::ports::{ServedParts, StoreError};

/// One touched entry as stored.
#[derive(Serialize, Deserialize)]
struct StoredTouched {
    /// Product.
    p: i64,
    /// Organic rank (0: none) and score.
    r: u64,
    s: f64,
    /// Served index, when served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    a: Option<u32>,
    /// Control ids.
    c: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    /// The controls it was served under: id and revision.
    acting: Vec<(String, u64)>,
    pinned: Vec<u32>,
    touched: Vec<StoredTouched>,
}

/// The pins' positions as `v<N>:pins` holds them.
pub(super) fn pins(pinned: &[u32]) -> Vec<u8> {
    pinned.iter().flat_map(|p| p.to_be_bytes()).collect()
}

/// The parts as `v<N>:served` holds them.
pub(super) fn encode(parts: &ServedParts) -> Vec<u8> {
    let touched = parts
        .annex
        .touched()
        .iter()
        .map(|t| StoredTouched {
            p: t.product_id,
            r: t.organic.map_or(0, |(rank, _)| rank),
            s: t.organic.map_or(0.0, |(_, score)| score),
            a: t.served_at,
            c: t.control_ids.clone(),
        })
        .collect();
    // Serialising plain numbers and strings cannot fail.
    serde_json::to_vec(&Stored { acting: parts.acting.clone(), pinned: parts.pinned.clone(), touched })
        .unwrap_or_default()
}

/// The parts `v<N>:served` holds.
pub(super) fn decode(bytes: &[u8]) -> Result<ServedParts, StoreError> {
    let stored: Stored =
        serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("served parts of a version: {e}")))?;
    let touched = stored
        .touched
        .into_iter()
        .map(|t| Touched {
            product_id: t.p,
            organic: (t.r > 0).then_some((t.r, t.s)),
            served_at: t.a,
            control_ids: t.c,
        })
        .collect();
    Ok(ServedParts { acting: stored.acting, pinned: stored.pinned, annex: Annex::from_touched(touched) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_read_back_as_written() {
        let touched = vec![
            Touched {
                product_id: 7,
                organic: Some((3, 12.000_500_5)),
                served_at: Some(0),
                control_ids: vec!["pin".into()],
            },
            Touched { product_id: 9, organic: None, served_at: Some(1), control_ids: vec!["a".into(), "b".into()] },
            Touched { product_id: 2, organic: Some((1, 0.1 + 0.2)), served_at: None, control_ids: vec!["x".into()] },
        ];
        let acting = vec![("a".to_string(), 4), ("pin".to_string(), 9)];
        let parts = ServedParts { acting, pinned: vec![0, 1], annex: Annex::from_touched(touched) };
        assert_eq!(decode(&encode(&parts)).expect("decodes"), parts);
        assert_eq!(pins(&parts.pinned), vec![0, 0, 0, 0, 0, 0, 0, 1]);
        assert!(decode(b"{").is_err());
    }
}
