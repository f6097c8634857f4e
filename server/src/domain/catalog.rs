//! What the shop says about a product beyond its events: the segments it belongs to
//! (category, brand, region…) and whether it is hidden (delisted, out of stock).

/// Most segments one product belongs to.
pub const MAX_SEGMENTS: usize = 32;

/// Longest segment name.
pub const MAX_SEGMENT_LEN: usize = 64;

/// One product's catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogEntry {
    /// The product.
    pub product_id: i64,
    /// Its segments, sorted, without repeats.
    pub segments: Vec<String>,
    /// Left out of every ranking while set.
    pub hidden: bool,
}

/// Why a segment name is refused, for the caller's error message; `None` when it is valid:
/// `[a-z0-9][a-z0-9_.:-]{0,63}`.
pub fn segment_problem(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let Some(first) = bytes.first() else { return Some("must not be empty".into()) };
    if bytes.len() > MAX_SEGMENT_LEN {
        return Some(format!("must be at most {MAX_SEGMENT_LEN} characters, got {}", bytes.len()));
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return Some("must start with a-z or 0-9".into());
    }
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'.' | b':' | b'-');
    bytes.iter().position(|b| !allowed(b)).map(|at| format!("may hold only a-z 0-9 _ . : - (byte {at} is not one)"))
}

/// The stored form of a segment set: sorted, repeats removed, joined by single spaces.
pub fn joined(segments: &[String]) -> String {
    let mut sorted: Vec<&str> = segments.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.join(" ")
}

/// The segment set of its stored form.
pub fn split(stored: &str) -> Vec<String> {
    stored.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn segment_syntax() {
        for ok in ["category:shoes", "brand:acme", "region:kr-seoul", "0", "a.b_c-d:e"] {
            assert_eq!(segment_problem(ok), None, "{ok}");
        }
        let long = "a".repeat(65);
        for bad in ["", "Shoes", ":x", "-x", "a b", "café", long.as_str(), "a/b"] {
            assert!(segment_problem(bad).is_some(), "{bad:?}");
        }
        assert_eq!(segment_problem(&"a".repeat(64)), None);
    }

    proptest! {
        #[test]
        fn stored_sets_round_trip(names in prop::collection::vec("[a-z0-9][a-z0-9_.:-]{0,20}", 0..32)) {
            let stored = joined(&names);
            let mut expected = names.clone();
            expected.sort();
            expected.dedup();
            prop_assert_eq!(split(&stored), expected);
        }
    }
}
