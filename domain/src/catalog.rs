//! What the shop says about a product beyond its events: the segments it belongs to
//! (category, brand, region…) and whether it is hidden (delisted, out of stock).

use super::snapshot::Snapshot;

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
    /// The product's name as people know it; empty when not given.
    pub title: String,
}

/// Longest product title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// A valid segment name, stored inline so that ranking keys holding one stay `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Segment {
    len: u8,
    bytes: [u8; MAX_SEGMENT_LEN],
}

impl Segment {
    /// The segment a name means, or why the name is refused.
    pub fn parse(name: &str) -> Result<Self, String> {
        if let Some(problem) = segment_problem(name) {
            return Err(problem);
        }
        let mut bytes = [0u8; MAX_SEGMENT_LEN];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Ok(Self { len: name.len() as u8, bytes })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Only validated ASCII is ever stored.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

/// Hashes the name alone, not the unused tail of the buffer (always zeros, so equal
/// segments still hash equal): ranking keys are hashed on every copy of the held rankings.
impl std::hash::Hash for Segment {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Segment({})", self.as_str())
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The catalog as a recompute fans rankings out by: every product's segments (names
/// interned, one flat list). Hidden products are read on their own (they are needed before
/// the ranking, the segments only after it).
///
/// Products are kept in ascending order in parallel lists, 13 bytes a product (a hash map
/// from product to its span took 36 at a million products, at the recompute's peak): the
/// catalog is read in product order, and fanning a ranking out walks the lists in order
/// and finds each product in the ranking's own index.
#[derive(Debug, Default)]
pub struct Membership {
    /// Most distinct segments kept (0: no limit).
    limit: usize,
    /// Memberships left out because their segment came after the limit was reached.
    dropped: u64,
    names: Vec<Segment>,
    index: std::collections::HashMap<Segment, u32>,
    /// Members of each segment (an upper bound: a product given twice counts twice).
    members: Vec<u32>,
    /// Products with at least one segment, ascending; `starts` and `lens` are their spans in
    /// `flat`.
    ids: Vec<i64>,
    starts: Vec<u32>,
    lens: Vec<u8>,
    flat: Vec<u32>,
}

impl Membership {
    /// An empty membership keeping at most `limit` distinct segments (the first seen, in the
    /// order rows are added); memberships of later ones are counted and left out, so that a
    /// catalog cannot make a recompute publish an unbounded number of rankings.
    pub fn with_limit(limit: usize) -> Self {
        Self { limit, ..Self::default() }
    }

    /// Memberships left out by the limit.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Adds one catalog row (names that are not valid segments are skipped). Rows in
    /// ascending product order are appended; any other is put in its place (a product given
    /// again replaces its segments).
    pub fn add(&mut self, entry: &CatalogEntry) {
        let start = self.flat.len() as u32;
        for name in entry.segments.iter().take(MAX_SEGMENTS) {
            let Ok(segment) = Segment::parse(name) else { continue };
            let i = match self.index.get(&segment) {
                Some(i) => *i,
                None if self.limit > 0 && self.names.len() >= self.limit => {
                    self.dropped += 1;
                    continue;
                }
                None => {
                    let next = self.names.len() as u32;
                    self.index.insert(segment, next);
                    self.names.push(segment);
                    self.members.push(0);
                    next
                }
            };
            self.members[i as usize] += 1;
            self.flat.push(i);
        }
        let len = (self.flat.len() as u32 - start) as u8;
        if len == 0 {
            return;
        }
        let id = entry.product_id;
        if self.ids.last().is_none_or(|last| *last < id) {
            self.ids.push(id);
            self.starts.push(start);
            self.lens.push(len);
            return;
        }
        let at = self.ids.partition_point(|p| *p < id);
        if self.ids[at] == id {
            (self.starts[at], self.lens[at]) = (start, len);
        } else {
            self.ids.insert(at, id);
            self.starts.insert(at, start);
            self.lens.insert(at, len);
        }
    }

    /// Every segment some product belongs to, in the order first seen.
    pub fn segments(&self) -> &[Segment] {
        &self.names
    }

    /// Every segment's ranking as positions in `whole` (indexed like
    /// [`Membership::segments`]), each list ascending, i.e. in ranking order: the same
    /// entries as `whole` restricted to the segment's members that it ranks.
    ///
    /// One lookup per product of the catalog, in its order; no list of entries is copied
    /// (4 bytes a membership instead of 16).
    pub fn positions_in(&self, whole: &Snapshot) -> Vec<Vec<u32>> {
        // Each list sized for every member of its segment: none grows while all are built.
        let mut lists: Vec<Vec<u32>> = self.members.iter().map(|n| Vec::with_capacity(*n as usize)).collect();
        for (at, id) in self.ids.iter().enumerate() {
            let Some((position, _)) = whole.position(*id) else { continue };
            let start = self.starts[at] as usize;
            for &i in &self.flat[start..start + usize::from(self.lens[at])] {
                lists[i as usize].push(position as u32);
            }
        }
        for list in &mut lists {
            list.sort_unstable();
        }
        lists
    }
}

/// Why a segment name is refused, for the caller's error message; `None` when it is valid:
/// `[a-z0-9][a-z0-9_.:-]{0,63}`.
pub fn segment_problem(name: &str) -> Option<String> {
    name_problem(name, MAX_SEGMENT_LEN, b"_.:-")
}

/// Why a name (a segment, a control id) is refused; `None` when it is valid: 1 to `longest`
/// bytes, a-z or 0-9 first, then a-z, 0-9 or one of `punctuation`.
pub fn name_problem(name: &str, longest: usize, punctuation: &[u8]) -> Option<String> {
    let bytes = name.as_bytes();
    let Some(first) = bytes.first() else { return Some("must not be empty".into()) };
    if bytes.len() > longest {
        return Some(format!("must be at most {longest} characters, got {}", bytes.len()));
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return Some("must start with a-z or 0-9".into());
    }
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || punctuation.contains(b);
    let listed: Vec<String> = punctuation.iter().map(|b| char::from(*b).to_string()).collect();
    bytes
        .iter()
        .position(|b| !allowed(b))
        .map(|at| format!("may hold only a-z 0-9 {} (byte {at} is not one)", listed.join(" ")))
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
    use crate::snapshot::Scored;
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
        let s = Segment::parse("brand:acme").expect("valid");
        assert_eq!((s.as_str(), s.to_string()), ("brand:acme", "brand:acme".to_owned()));
        assert!(Segment::parse("Brand").is_err());
    }

    #[test]
    fn membership_fans_a_ranking_out_per_segment_in_its_order() {
        let mut m = Membership::default();
        let entry = |id: i64, segments: &[&str], hidden| CatalogEntry {
            title: String::new(),
            product_id: id,
            segments: segments.iter().map(|s| s.to_string()).collect(),
            hidden,
        };
        m.add(&entry(1, &["a", "b"], false));
        m.add(&entry(2, &["b"], true));
        m.add(&entry(3, &[], false));
        m.add(&entry(4, &["a", "Not valid"], false));
        let names: Vec<&str> = m.segments().iter().map(Segment::as_str).collect();
        assert_eq!(names, vec!["a", "b"]);
        // Ranked 4, 3, 2, 1 (positions 0-3); product 5 is in the catalog, not in the ranking.
        m.add(&entry(5, &["a"], false));
        assert_eq!(m.positions_in(&ranking(&[4, 3, 2, 1])), vec![vec![0, 3], vec![2, 3]]);

        let mut bounded = Membership::with_limit(1);
        bounded.add(&entry(1, &["a", "b"], false));
        bounded.add(&entry(2, &["b", "a"], false));
        assert_eq!(bounded.segments().len(), 1);
        assert_eq!(bounded.dropped(), 2);
        assert_eq!(bounded.positions_in(&ranking(&[2, 1])), vec![vec![0, 1]]);
    }

    /// A ranking of `ids`, best first.
    fn ranking(ids: &[i64]) -> Snapshot {
        let n = ids.len() as f64;
        let entries = ids.iter().enumerate().map(|(i, id)| Scored { product_id: *id, score: n - i as f64 }).collect();
        Snapshot::from_ranked(entries).expect("valid")
    }

    proptest! {
        /// Rows in any order, a product given again: each product's segments are those of
        /// its last row, as a map from product to segments would say.
        #[test]
        fn membership_in_any_row_order_is_the_last_row_of_each_product(
            rows in prop::collection::vec((0i64..40, prop::collection::vec(0u8..6, 0..4)), 0..60),
        ) {
            let mut m = Membership::default();
            let mut model: std::collections::HashMap<i64, Vec<String>> = Default::default();
            for (id, segments) in &rows {
                // Stored sets never repeat a name.
                let mut segments = segments.clone();
                segments.sort_unstable();
                segments.dedup();
                let names: Vec<String> = segments.iter().map(|s| format!("s{s}")).collect();
                m.add(&CatalogEntry { product_id: *id, segments: names.clone(), hidden: false, title: String::new() });
                if !names.is_empty() {
                    model.insert(*id, names);
                }
            }
            // Ranked: the even products, best first; the odd ones are in no ranking.
            let ids: Vec<i64> = (0..40).rev().filter(|id| id % 2 == 0).collect();
            let lists = m.positions_in(&ranking(&ids));
            for (i, segment) in m.segments().iter().enumerate() {
                let expected: Vec<u32> = (0..ids.len() as u32)
                    .filter(|p| model.get(&ids[*p as usize]).is_some_and(|names| names.iter().any(|n| n == segment.as_str())))
                    .collect();
                prop_assert_eq!(&lists[i], &expected, "segment {}", segment);
            }
        }
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
