//! The annex against the served board it was made from: every entry's organic rank, and the
//! organic board derived again, on examples and on random boards and controls.

use proptest::prelude::*;

use super::*;
use crate::controls::{Action, Control, Windows, serve_copy};
use crate::layout::Layout;
use crate::snapshot::annex::Annex;
use crate::snapshot::ranking_order;

fn boost(score: f64, points: f64) -> f64 {
    boosted(&Layout::built_in(), score, points)
}

fn control(id: &str, action: Action) -> Control {
    Control {
        id: id.into(),
        segment: None,
        windows: Windows::ALL,
        profile: None,
        active_from_us: 0,
        active_until_us: None,
        action,
        note: String::new(),
        revision: 0,
        updated_at_us: 0,
    }
}

fn board(entries: &[(i64, u64, u32)]) -> Vec<Scored> {
    let mut board: Vec<Scored> = entries
        .iter()
        .map(|(p, floor, norm)| Scored {
            product_id: *p,
            score: Layout::built_in().encode(*floor, &[*norm, *norm, *norm]),
        })
        .collect();
    board.sort_by(ranking_order);
    board
}

fn scored(served: &Served) -> Vec<Scored> {
    served.entries.iter().map(|e| Scored { product_id: e.product_id, score: e.score }).collect()
}

/// Every served entry's organic rank, from the annex, against the derivation's.
fn check(organic: &[Scored], served: &Served) -> Result<(), TestCaseError> {
    let annex = served.annex();
    for e in &served.entries {
        // From the organic board itself: its place there, or 0 when it has none.
        let rank = organic.iter().position(|o| o.product_id == e.product_id).map_or(0, |p| p as u64 + 1);
        prop_assert_eq!(e.organic_rank, rank, "product {}", e.product_id);
    }
    for (i, e) in served.entries.iter().enumerate() {
        let found = annex.organic_rank(i as u64, Scored { product_id: e.product_id, score: e.score });
        prop_assert_eq!(found, e.organic_rank, "product {} at {}", e.product_id, i);
    }
    prop_assert_eq!(annex.organic_board(&scored(served)), organic.to_vec());
    prop_assert_eq!(
        annex.is_empty(),
        served.entries.iter().all(|e| e.control_ids.is_empty()) && served.excluded.is_empty()
    );
    Ok(())
}

#[test]
fn an_untouched_entry_below_a_pin_and_above_a_bury_knows_its_organic_rank() {
    let organic = board(&[(1, 50, 1), (2, 40, 1), (3, 30, 1), (4, 20, 1), (5, 10, 1)]);
    let controls = [
        control("pin", Action::Pin { product_id: 4, position: 1 }),
        control("bury", Action::Boost { product_ids: vec![1], points: -100.0 }),
        control("recall", Action::Exclude { product_ids: vec![2] }),
    ];
    let served = serve(&organic, &controls, boost);
    let ids: Vec<i64> = served.entries.iter().map(|e| e.product_id).collect();
    assert_eq!(ids, vec![4, 3, 5, 1]);
    let annex = served.annex();
    // Product 3: served second, organically third (1 and 2 above it).
    assert_eq!(annex.organic_rank(1, Scored { product_id: 3, score: served.entries[1].score }), 3);
    assert_eq!(annex.get(2).map(|t| (t.served_at, t.organic.map(|o| o.0))), Some((None, Some(2))));
    assert_eq!(annex.touched().len(), 3);
    assert_eq!(annex.organic_board(&scored(&served)), organic);
    check(&organic, &served).expect("consistent");
}

#[test]
fn a_board_without_controls_has_an_empty_annex() {
    let organic = board(&[(1, 5, 1), (2, 5, 1), (3, 1, 9)]);
    let served = serve(&organic, &[], boost);
    let annex = served.annex();
    assert!(annex.is_empty());
    assert_eq!(annex.organic_rank(1, organic[1]), 2);
    check(&organic, &served).expect("consistent");
}

fn arbitrary_case() -> impl Strategy<Value = (Vec<Scored>, Vec<Control>)> {
    let entries = prop::collection::btree_map(1i64..60, (0u64..12, 0u32..3), 0..40)
        .prop_map(|m| board(&m.into_iter().map(|(p, (floor, norm))| (p, floor, norm)).collect::<Vec<_>>()));
    let action = prop_oneof![
        (1i64..70, 1u32..50).prop_map(|(product_id, position)| Action::Pin { product_id, position }),
        (prop::collection::vec(1i64..70, 1..4), prop_oneof![Just(-5.5), Just(-1.0), Just(0.75), Just(3.0), Just(40.0)])
            .prop_map(|(product_ids, points)| Action::Boost { product_ids, points }),
        prop::collection::vec(1i64..70, 1..3).prop_map(|product_ids| Action::Exclude { product_ids }),
    ];
    let controls = prop::collection::vec(action, 0..12)
        .prop_map(|cs| cs.into_iter().enumerate().map(|(i, a)| control(&format!("c{i:02}"), a)).collect());
    (entries, controls)
}

proptest! {
    #[test]
    fn the_annex_gives_every_organic_rank_and_the_organic_board(case in arbitrary_case()) {
        let (organic, controls) = case;
        let served = serve(&organic, &controls, boost);
        check(&organic, &served)?;
        // As stored and read back, in any order.
        let mut touched = served.annex().touched().to_vec();
        touched.reverse();
        prop_assert_eq!(Annex::from_touched(touched), served.annex());
        // Held as a copy: the same organic ranks and board.
        let copy = served.snapshot(Vec::new()).expect("a served board");
        let ranks: Vec<u64> = (0..copy.len()).map(|i| copy.organic_rank(i)).collect();
        prop_assert_eq!(ranks, served.entries.iter().map(|e| e.organic_rank).collect::<Vec<_>>());
        prop_assert_eq!(copy.organic_board(), organic.clone());
        // The held copy a control pass makes, indexed from the organic board and from this
        // board itself as the board before: the same copy.
        let whole = crate::snapshot::Snapshot::from_ranked(organic.clone()).expect("an organic board");
        for before in [&whole, &copy] {
            let lean = serve_copy(&organic, &controls, boost).snapshot_after(before, Vec::new()).expect("served");
            prop_assert_eq!(lean.page(0, u64::MAX), copy.page(0, u64::MAX));
            prop_assert_eq!(lean.pinned(), copy.pinned());
            prop_assert_eq!(lean.product_index(), copy.product_index());
            prop_assert_eq!(lean.served_parts(), copy.served_parts());
        }
    }

    #[test]
    fn a_served_board_is_put_back_in_its_order_from_its_entries_and_parts(case in arbitrary_case()) {
        let (organic, controls) = case;
        let served = serve(&organic, &controls, boost);
        let acting = controls.iter().map(|c| (c.id.clone(), 1)).collect();
        let copy = served.snapshot(acting).expect("a served board");
        let Some(parts) = copy.served_parts() else { return Ok(()) };
        // The entries in another order (by product, descending), as a reader of changes has them.
        let mut entries = copy.page(0, u64::MAX).into_owned();
        entries.sort_by_key(|e| std::cmp::Reverse(e.product_id));
        let rebuilt = crate::snapshot::Snapshot::served_from(entries, parts.clone()).expect("rebuilt");
        prop_assert_eq!(rebuilt.page(0, u64::MAX).into_owned(), copy.page(0, u64::MAX).into_owned());
        prop_assert_eq!(rebuilt.served_parts(), Some(parts));
    }
}
