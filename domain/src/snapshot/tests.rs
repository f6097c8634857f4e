//! Snapshots against their rules: order, positions, served boards, held within another.
use proptest::prelude::*;

use super::build::{from_order_bits, order_bits};
use super::*;

fn scored(product_id: i64, score: f64) -> Scored {
    Scored { product_id, score }
}

#[test]
fn order_is_score_then_descending_id() {
    let s = Snapshot::from_unordered(vec![scored(999, 1.0), scored(1000, 1.0), scored(5, 2.0), scored(42, 1.0)])
        .expect("valid");
    let ids: Vec<_> = s.page(0, 10).iter().map(|e| e.product_id).collect();
    assert_eq!(ids, vec![5, 1000, 999, 42]);
    assert_eq!(s.position(999).map(|(p, _)| p), Some(2));
    assert_eq!(s.position(7), None);
    assert_eq!((s.tied_head(0), s.tied_head(1), s.tied_head(3)), (0, 1, 1));
    assert_eq!(s.page(3, 10).len(), 1);
    assert!(s.page(4, 10).is_empty());
    assert!(s.page(u64::MAX, u64::MAX).is_empty());
}

#[test]
fn a_served_board_is_ordered_but_at_its_pins() {
    // 9 pinned first with a low score, 4 pinned third; the rest in ranking order.
    let entries = vec![scored(9, 0.5), scored(2, 3.0), scored(4, 9.0), scored(1, 3.0), scored(3, 1.0)];
    let s = Snapshot::from_served(entries.clone(), vec![0, 2]).expect("valid");
    assert_eq!(s.pinned(), &[0, 2]);
    assert_eq!((0..5).map(|i| s.tied_head(i)).collect::<Vec<_>>(), vec![0, 1, 2, 1, 4]);
    assert_eq!(s.position(4).map(|(p, _)| p), Some(2));
    assert_eq!(
        Snapshot::from_served(entries.clone(), vec![2]).expect_err("9 out of order"),
        SnapshotError::Unordered(1)
    );
    assert_eq!(Snapshot::from_served(entries.clone(), vec![2, 0]).expect_err("descending"), SnapshotError::Pinned(0));
    assert_eq!(Snapshot::from_served(entries, vec![0, 5]).expect_err("past the end"), SnapshotError::Pinned(5));
    let served = Arc::new(Snapshot::from_served(vec![scored(9, 0.5), scored(1, 3.0)], vec![0]).expect("valid"));
    assert!(Snapshot::within(&served, &[scored(1, 3.0)]).is_none(), "a pinned board is no whole to hold a part of");
}

#[test]
fn an_entry_takes_28_bytes_with_its_index() {
    let entries: Vec<Scored> = (0..1_000).map(|i| scored(i, f64::from(i as u32 % 7))).collect();
    assert_eq!(Snapshot::from_unordered(entries.clone()).expect("valid").heap_bytes(), 28_000);
    let ranked = Snapshot::from_unordered(entries).expect("valid").page(0, u64::MAX).into_owned();
    assert_eq!(Snapshot::from_ranked(ranked).expect("valid").heap_bytes(), 28_000);
}

#[test]
fn duplicates_and_disorder_are_refused() {
    let dup = Snapshot::from_unordered(vec![scored(1, 1.0), scored(1, 2.0)]).expect_err("duplicate");
    assert_eq!(dup, SnapshotError::Duplicate(1));
    let dup = Snapshot::from_ranked(vec![scored(1, 1.0), scored(1, 1.0)]).expect_err("duplicate");
    assert_eq!(dup, SnapshotError::Duplicate(1));
    let unordered = Snapshot::from_ranked(vec![scored(1, 1.0), scored(2, 2.0)]).expect_err("unordered");
    assert_eq!(unordered, SnapshotError::Unordered(1));
}

proptest! {
    #[test]
    fn a_ranking_held_within_another_answers_like_one_of_its_own(
        ids in proptest::collection::hash_set(1i64..1_000, 1..200),
        scores in proptest::collection::vec(0u8..4, 200),
        keep in proptest::collection::vec(any::<bool>(), 200),
        asked in proptest::collection::vec(0i64..1_100, 20),
    ) {
        let entries: Vec<Scored> =
            ids.iter().zip(scores.iter().cycle()).map(|(id, s)| scored(*id, f64::from(*s))).collect();
        let whole = Arc::new(Snapshot::from_unordered(entries).expect("valid"));
        let members: Vec<Scored> =
            whole.page(0, u64::MAX).iter().zip(keep.iter().cycle()).filter(|(_, k)| **k).map(|(e, _)| *e).collect();
        let own = Snapshot::from_ranked(members.clone()).expect("valid");
        let within = Snapshot::within(&whole, &members).expect("a restriction of the whole");
        prop_assert_eq!(within.len(), own.len());
        prop_assert_eq!(within.page(0, u64::MAX), own.page(0, u64::MAX));
        prop_assert_eq!(within.page(3, 5), own.page(3, 5));
        for id in asked.iter().chain(ids.iter()) {
            prop_assert_eq!(within.position(*id), own.position(*id));
        }
        for s in 0..5 {
            prop_assert_eq!(within.above(f64::from(s)), own.above(f64::from(s)));
        }
    }
}

proptest! {
    #[test]
    fn order_bits_sort_like_total_cmp_and_give_the_score_back(a in any::<f64>(), b in any::<f64>()) {
        prop_assert_eq!(order_bits(a).cmp(&order_bits(b)), a.total_cmp(&b));
        prop_assert_eq!(from_order_bits(order_bits(a)).to_bits(), a.to_bits());
    }

    /// Entries in any order, in product order and in ranking order make the same
    /// snapshot: the same entries bit for bit, and a product index giving each product's
    /// position in ascending id order.
    #[test]
    fn every_order_of_the_entries_makes_the_same_snapshot(
        ids in proptest::collection::hash_set(any::<i64>(), 0..300),
        scores in proptest::collection::vec(prop_oneof![Just(-0.0), Just(0.0), Just(1.5), any::<f64>()], 300),
    ) {
        let shuffled: Vec<Scored> = ids.iter().zip(scores.iter().cycle()).map(|(id, s)| scored(*id, *s)).collect();
        let mut by_product = shuffled.clone();
        by_product.sort_by_key(|e| e.product_id);
        let mut ranked = shuffled.clone();
        ranked.sort_by(ranking_order);
        let bits = |s: &Snapshot| -> Vec<(i64, u64)> {
            s.page(0, u64::MAX).iter().map(|e| (e.product_id, e.score.to_bits())).collect()
        };
        let expected: Vec<(i64, u64)> = ranked.iter().map(|e| (e.product_id, e.score.to_bits())).collect();
        let index: Vec<u32> = by_product
            .iter()
            .map(|e| ranked.iter().position(|r| r.product_id == e.product_id).expect("ranked") as u32)
            .collect();
        for snapshot in [
            Snapshot::from_unordered(shuffled).expect("valid"),
            Snapshot::from_unordered(by_product).expect("valid"),
            Snapshot::from_unordered(ranked.clone()).expect("valid"),
            Snapshot::from_ranked(ranked).expect("valid"),
        ] {
            prop_assert_eq!(bits(&snapshot), expected.clone());
            prop_assert_eq!(snapshot.product_index(), Some(&index[..]));
        }
    }
}

#[test]
fn entries_that_are_not_a_restriction_are_not_held_within() {
    let whole =
        Arc::new(Snapshot::from_unordered(vec![scored(1, 3.0), scored(2, 2.0), scored(3, 1.0)]).expect("valid"));
    assert!(Snapshot::within(&whole, &[scored(1, 3.0), scored(3, 1.0)]).is_some());
    assert!(Snapshot::within(&whole, &[scored(1, 3.5)]).is_none(), "another score");
    assert!(Snapshot::within(&whole, &[scored(4, 0.5)]).is_none(), "not in the whole");
    assert!(Snapshot::within(&whole, &[scored(3, 1.0), scored(1, 3.0)]).is_none(), "another order");
    let within = Snapshot::within(&whole, &[scored(2, 2.0)]).expect("held within");
    assert_eq!(within.heap_bytes(), 4);

    let at = Snapshot::at_positions(&whole, vec![0, 2]).expect("ascending, in range");
    assert_eq!(at.page(0, 10), vec![scored(1, 3.0), scored(3, 1.0)]);
    assert_eq!(whole.entries_at(&[2, 0]), vec![scored(3, 1.0), scored(1, 3.0)]);
    assert!(Snapshot::at_positions(&whole, vec![2, 0]).is_err(), "not ascending");
    assert!(Snapshot::at_positions(&whole, vec![1, 1]).is_err(), "repeated");
    assert!(Snapshot::at_positions(&whole, vec![3]).is_err(), "past the end");
}

proptest! {
    #[test]
    fn positions_agree_with_a_sort(ids in proptest::collection::hash_set(1i64..1_000_000, 0..400),
                                   scores in proptest::collection::vec(0u8..5, 400)) {
        let entries: Vec<Scored> =
            ids.iter().zip(scores.iter().cycle()).map(|(id, s)| scored(*id, f64::from(*s))).collect();
        let s = Snapshot::from_unordered(entries.clone()).expect("valid");
        let mut expected = entries;
        expected.sort_by(|a, b| (b.score, b.product_id).partial_cmp(&(a.score, a.product_id)).expect("no NaN"));
        prop_assert_eq!(s.page(0, u64::MAX), &expected[..]);
        for (i, e) in expected.iter().enumerate() {
            prop_assert_eq!(s.position(e.product_id), Some((i, *e)));
        }
    }
}
