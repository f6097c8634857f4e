//! Changes against an independent model: a population as a map from product to score, ranked
//! by one plain sort, and its diff found by looking every product up.
use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;

fn scored(product_id: i64, score: f64) -> Scored {
    Scored { product_id, score }
}

/// The model's ranking: every entry sorted by the ranking order.
fn ranked(population: &BTreeMap<i64, f64>) -> Vec<Scored> {
    let mut entries: Vec<Scored> = population.iter().map(|(id, s)| scored(*id, *s)).collect();
    entries.sort_by(ranking_order);
    entries
}

/// The model's diff: every product of either population looked up in the other.
fn diff(before: &BTreeMap<i64, f64>, after: &BTreeMap<i64, f64>) -> Changes {
    Changes {
        set: after
            .iter()
            .filter(|(id, s)| before.get(id).is_none_or(|b| b.to_bits() != s.to_bits()))
            .map(|(id, s)| scored(*id, *s))
            .collect(),
        gone: before.keys().filter(|id| !after.contains_key(id)).copied().collect(),
    }
}

/// Every read a snapshot answers: its page, each product's position, its product index.
type Reads = (Vec<Scored>, Vec<Option<(usize, Scored)>>, Option<Vec<u32>>);

/// [`Reads`] of `s`, for comparing two snapshots whole.
fn reads(s: &Snapshot, ids: impl Iterator<Item = i64>) -> Reads {
    let page = s.page(0, u64::MAX).into_owned();
    let found = ids.map(|id| s.position(id)).collect();
    (page, found, s.product_index().map(<[u32]>::to_vec))
}

#[test]
fn a_changed_copy_is_the_copy_of_the_changed_population() {
    let before =
        Snapshot::from_unordered(vec![scored(1, 3.0), scored(2, 2.0), scored(3, 1.0), scored(4, 2.0)]).expect("valid");
    // 3 rises to the top, 2 leaves, 5 arrives tied with 4, 1 stays.
    let next = vec![scored(1, 3.0), scored(3, 9.0), scored(4, 2.0), scored(5, 2.0)];
    let changes = Changes::between(&before, &next).expect("ordered");
    assert_eq!(changes, Changes { set: vec![scored(3, 9.0), scored(5, 2.0)], gone: vec![2] });
    let after = before.with_changes(&changes).expect("valid");
    let ids: Vec<i64> = after.page(0, 10).iter().map(|e| e.product_id).collect();
    assert_eq!(ids, [3, 1, 5, 4]);
    let whole = Snapshot::from_unordered(next).expect("valid");
    assert_eq!(reads(&after, 0..7), reads(&whole, 0..7));
}

#[test]
fn a_rescore_of_the_same_bits_is_no_change_and_zero_signs_differ() {
    let before = Snapshot::from_unordered(vec![scored(1, 0.0), scored(2, 1.5)]).expect("valid");
    let same = Changes::between(&before, &[scored(1, 0.0), scored(2, 1.5)]).expect("ordered");
    assert!(same.is_empty());
    let signed = Changes::between(&before, &[scored(1, -0.0), scored(2, 1.5)]).expect("ordered");
    assert_eq!(signed.set.len(), 1, "exactness is bit for bit");
}

#[test]
fn changes_that_break_their_promises_are_refused() {
    let before = Snapshot::from_unordered(vec![scored(1, 1.0)]).expect("valid");
    let both = Changes { set: vec![scored(1, 2.0)], gone: vec![1] };
    assert_eq!(before.with_changes(&both).expect_err("set and gone"), SnapshotError::Duplicate(1));
    let unordered = Changes { set: vec![scored(3, 1.0), scored(2, 1.0)], gone: vec![] };
    assert_eq!(before.with_changes(&unordered).expect_err("descending"), SnapshotError::Unordered(1));
    assert_eq!(
        Changes::between(&before, &[scored(2, 1.0), scored(2, 3.0)]).expect_err("twice"),
        SnapshotError::Duplicate(2)
    );
    // A product gone that was not held changes nothing.
    let absent = Changes { set: vec![], gone: vec![7] };
    assert_eq!(before.with_changes(&absent).expect("valid").len(), 1);
}

#[test]
fn a_served_board_or_a_segment_is_changed_whole_into_an_organic_copy() {
    let served = Snapshot::from_served(vec![scored(9, 0.5), scored(2, 3.0), scored(1, 1.0)], vec![0]).expect("valid");
    let changes = Changes { set: vec![scored(1, 5.0)], gone: vec![9] };
    let after = served.with_changes(&changes).expect("valid");
    let ids: Vec<i64> = after.page(0, 10).iter().map(|e| e.product_id).collect();
    assert_eq!((ids, after.pinned().len()), (vec![1, 2], 0));

    let whole = Arc::new(Snapshot::from_unordered(vec![scored(1, 1.0), scored(2, 2.0), scored(3, 3.0)]).expect("ok"));
    let part = Snapshot::within(&whole, &[scored(3, 3.0), scored(1, 1.0)]).expect("within");
    let changes = Changes::between(&part, &[scored(1, 4.0), scored(2, 2.0)]).expect("ordered");
    assert_eq!(changes, Changes { set: vec![scored(1, 4.0), scored(2, 2.0)], gone: vec![3] });
    let ids: Vec<i64> = part.with_changes(&changes).expect("ok").page(0, 9).iter().map(|e| e.product_id).collect();
    assert_eq!(ids, [1, 2]);
}

/// A population of up to `n` products over a small id range, with scores from a few values
/// (ties are the hard part) or any finite double.
fn population(n: usize) -> impl Strategy<Value = BTreeMap<i64, f64>> {
    let score = prop_oneof![3 => (0u8..6).prop_map(|v| f64::from(v) * 0.5), 1 => -1e9f64..1e9];
    proptest::collection::btree_map(0i64..(n as i64 * 2), score, 0..n)
}

/// A population and the next one: most products kept as they are, some rescored, some gone,
/// some new.
fn successive(n: usize) -> impl Strategy<Value = (BTreeMap<i64, f64>, BTreeMap<i64, f64>)> {
    (population(n), population(n), proptest::collection::vec(0u8..4, n * 2)).prop_map(|(before, other, fate)| {
        let mut after = BTreeMap::new();
        for id in before.keys().chain(other.keys()) {
            let kept = before.get(id);
            let new = other.get(id);
            let pick = match fate[*id as usize % fate.len()] {
                0 | 1 => kept.or(new),
                2 => new,
                _ => kept,
            };
            if let Some(score) = pick {
                after.insert(*id, *score);
            }
        }
        (before, after)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The diff is the model's, and the old copy with it is the new population's copy: the
    /// same pages, positions and product index as one built whole.
    #[test]
    fn applying_the_diff_gives_the_whole_copy((before, after) in successive(60)) {
        let old = Snapshot::from_unordered(ranked(&before)).expect("valid");
        let next: Vec<Scored> = after.iter().map(|(id, s)| scored(*id, *s)).collect();
        let next_entries = next.clone();
        let changes = Changes::between(&old, &next).expect("ordered");
        prop_assert_eq!(&changes, &diff(&before, &after));
        let changed = old.with_changes(&changes).expect("valid");
        let whole = Snapshot::from_unordered(next).expect("valid");
        prop_assert_eq!(&Changes::of(&old, &whole).expect("copies"), &changes, "the same from two copies");
        let limited = Changes::between_at_most(&old, &next_entries, changes.len()).expect("ordered");
        prop_assert_eq!(limited.as_ref(), Some(&changes), "within its limit");
        if !changes.is_empty() {
            let short = Changes::of_at_most(&old, &whole, changes.len() - 1).expect("copies");
            prop_assert!(short.is_none(), "one change past the limit");
        }
        // Both ways of applying them (placed one by one, or sorted whole), whatever the share
        // that changed.
        for changed in [changed, old.merged_with(&changes).expect("valid"), old.rebuilt_with(&changes).expect("valid")] {
            prop_assert_eq!(changed.page(0, u64::MAX).into_owned(), ranked(&after));
            prop_assert_eq!(reads(&changed, -1..125), reads(&whole, -1..125));
            for p in 0..changed.len() {
                prop_assert_eq!(changed.tied_head(p), whole.tied_head(p));
            }
        }
    }

    /// Changes applied one version after another stay equal to the population built whole.
    #[test]
    fn a_chain_of_changes_stays_whole(chain in proptest::collection::vec(population(40), 1..6)) {
        let mut held = Snapshot::from_unordered(Vec::new()).expect("empty");
        let mut model = BTreeMap::new();
        for next in chain {
            let changes = diff(&model, &next);
            let merged = held.merged_with(&changes).expect("valid");
            held = held.with_changes(&changes).expect("valid");
            model = next;
            prop_assert_eq!(merged.page(0, u64::MAX).into_owned(), ranked(&model));
            prop_assert_eq!(held.page(0, u64::MAX).into_owned(), ranked(&model));
        }
    }
}
