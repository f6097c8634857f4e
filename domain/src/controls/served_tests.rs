//! The served board against examples of each rule and, on random boards and controls,
//! against a reference written from the rules alone (a slot per position, filled pin by pin)
//! and against the properties every served board has.

use proptest::prelude::*;

use super::*;
use std::collections::HashSet;

use crate::controls::{Action, Windows};
use crate::snapshot::ranking_order;

/// The served entries alone.
fn serve_entries<'c>(
    organic: &[Scored],
    controls: impl IntoIterator<Item = &'c Control>,
    boost: impl Fn(f64, f64) -> f64,
) -> Vec<ServedEntry> {
    serve(organic, controls, boost).entries
}

/// The boost of the served boards: the built-in layout's.
fn boost(score: f64, points: f64) -> f64 {
    boosted(&Layout::built_in(), score, points)
}

/// The boost written from the encoding's definition alone: the numerator's integer part
/// raised by the points, floored, never below 0, over the same norms.
fn boost_by_definition(score: f64, points: f64) -> f64 {
    let n = (score * 1e9).round() as u64;
    let floor = ((n / 1_000_000_000) as f64 + points).floor().max(0.0) as u64;
    (floor * 1_000_000_000 + n % 1_000_000_000) as f64 / 1e9
}

/// An entry whose main score's integer part is `floor`, every norm `norm`.
fn entry(product_id: i64, floor: u64, norm: u32) -> Scored {
    Scored { product_id, score: Layout::built_in().encode(floor, &[norm, norm, norm]) }
}

/// An organic board in ranking order.
fn board(entries: &[Scored]) -> Vec<Scored> {
    let mut board = entries.to_vec();
    board.sort_by(ranking_order);
    board
}

fn control(id: &str, active_from_us: i64, action: Action) -> Control {
    Control {
        id: id.into(),
        segment: None,
        windows: Windows::ALL,
        profile: None,
        active_from_us,
        active_until_us: None,
        action,
        note: String::new(),
        revision: 0,
        updated_at_us: 0,
    }
}

fn pin(id: &str, product_id: i64, position: u32) -> Control {
    control(id, 0, Action::Pin { product_id, position })
}

fn ids(served: &[ServedEntry]) -> Vec<i64> {
    served.iter().map(|e| e.product_id).collect()
}

/// Ten products, 10 best … 1 worst.
fn ten() -> Vec<Scored> {
    board(&(1..=10).map(|p| entry(p, p as u64 * 2, 500)).collect::<Vec<_>>())
}

#[test]
fn without_controls_the_served_board_is_the_organic_one() {
    let served = serve_entries(&ten(), &[], boost);
    assert_eq!(ids(&served), (1..=10).rev().collect::<Vec<_>>());
    assert!(served.iter().enumerate().all(|(i, e)| e.organic_rank == i as u64 + 1 && e.control_ids.is_empty()));
}

#[test]
fn an_exclusion_takes_the_product_off_and_changes_no_other_score() {
    let organic = ten();
    let recall = control("recall", 0, Action::Exclude { product_ids: vec![9, 42] });
    let taken_off = serve(&organic, std::slice::from_ref(&recall), boost).excluded;
    assert_eq!(
        taken_off.iter().map(|e| (e.product_id, e.organic_rank, e.control_ids.clone())).collect::<Vec<_>>(),
        vec![(9, 2, vec!["recall".to_string()])],
        "the excluded entry with its organic rank; 42 had none"
    );
    let served = serve_entries(&organic, &[recall], boost);
    assert_eq!(ids(&served), vec![10, 8, 7, 6, 5, 4, 3, 2, 1]);
    for e in &served {
        assert_eq!(e.score, organic.iter().find(|o| o.product_id == e.product_id).expect("organic").score);
    }
}

#[test]
fn a_boost_adds_to_the_main_score_the_board_carries_and_a_bury_sinks() {
    // Product 3's main floor is 6: +2.6 makes 8.6, floor 8, level with product 4 (8, same
    // norms): the product id breaks the tie, 4 above 3. +2.0 more lifts it above 5 (10).
    let boost_3 = control("b", 0, Action::Boost { product_ids: vec![3], points: 2.6 });
    let bury = control("a", 0, Action::Boost { product_ids: vec![10], points: -100.0 });
    let served = serve_entries(&ten(), &[boost_3.clone(), bury], boost);
    assert_eq!(ids(&served), vec![9, 8, 7, 6, 5, 4, 3, 2, 1, 10]);
    let three = served.iter().find(|e| e.product_id == 3).expect("served");
    assert_eq!((three.score, three.organic_rank, three.control_ids.clone()), (8.5005005, 8, vec!["b".to_string()]));
    assert_eq!(served[9].score, 0.5005005, "buried to a main score of 0, its norms kept");
    let more = control("c", 0, Action::Boost { product_ids: vec![3], points: 4.6 });
    assert_eq!(ids(&serve_entries(&ten(), &[boost_3, more], boost))[..6], [10, 9, 8, 7, 3, 6], "6 + 7.2: 13, above 12");
}

#[test]
fn boosted_keeps_the_norms_and_clamps_the_main_score_to_the_layout() {
    let layout = Layout::built_in();
    let score = layout.encode(5, &[700, 500, 800]);
    assert_eq!(boosted(&layout, score, 0.4), score, "5.4 floors to 5");
    assert_eq!(boosted(&layout, score, 0.99), score);
    assert_eq!(boosted(&layout, score, 1.0), layout.encode(6, &[700, 500, 800]));
    assert_eq!(boosted(&layout, score, -0.5), layout.encode(4, &[700, 500, 800]));
    assert_eq!(boosted(&layout, score, -1e6), layout.encode(0, &[700, 500, 800]));
    assert_eq!(boosted(&layout, score, 1e6), layout.encode(1_000_005, &[700, 500, 800]));
    assert_eq!(boosted(&layout, score, 1e300), layout.encode(layout.bound() - 1, &[700, 500, 800]));
}

#[test]
fn boosts_that_sum_to_nothing_change_no_score() {
    let up = control("up", 0, Action::Boost { product_ids: vec![5], points: 3.25 });
    let down = control("down", 0, Action::Boost { product_ids: vec![5], points: -3.25 });
    let served = serve_entries(&ten(), &[up, down], boost);
    assert_eq!(ids(&served), ids(&serve_entries(&ten(), &[], boost)));
    assert_eq!(served[5].control_ids, vec!["down".to_string(), "up".to_string()]);
}

#[test]
fn pins_take_their_positions_the_earlier_first_and_a_product_pinned_twice_its_smallest() {
    let served = serve_entries(
        &ten(),
        &[
            control("late", 20, Action::Pin { product_id: 1, position: 2 }),
            control("early", 10, Action::Pin { product_id: 2, position: 2 }),
            pin("twice-a", 3, 9),
            pin("twice-b", 3, 1),
        ],
        boost,
    );
    // 3 at 1; 2 (earlier) at 2; 1 at the next free position, 3.
    assert_eq!(ids(&served), vec![3, 2, 1, 10, 9, 8, 7, 6, 5, 4]);
    assert_eq!(served[0].control_ids, vec!["twice-b".to_string()]);
    assert_eq!(served[2].organic_rank, 10);
}

#[test]
fn a_pin_beyond_the_end_places_last_and_a_product_without_an_entry_is_placed_with_score_zero() {
    let served = serve_entries(&ten(), &[pin("far", 5, 1_000), pin("new", 77, 1), pin("far2", 6, 999)], boost);
    // Both beyond the end: the smaller position (999, product 6) is placed first, so last;
    // the other takes the last free place before it.
    assert_eq!(ids(&served), vec![77, 10, 9, 8, 7, 4, 3, 2, 1, 5, 6]);
    assert_eq!((served[0].score, served[0].organic_rank), (0.0, 0));
    assert_eq!(served.len(), 11, "total counts the served board");
}

#[test]
fn an_excluded_product_is_not_placed_by_its_pin() {
    let served =
        serve_entries(&ten(), &[pin("p", 4, 1), control("x", 0, Action::Exclude { product_ids: vec![4] })], boost);
    assert!(!ids(&served).contains(&4));
    assert_eq!(served.len(), 9);
}

#[test]
fn equal_scores_share_a_tied_rank_and_a_pinned_entry_keeps_its_own() {
    // 10 and 9 level at 20 after a boost; a pin placed between 8 and 7 at 16 each.
    let organic = board(&[entry(10, 20, 1), entry(9, 18, 1), entry(8, 16, 1), entry(7, 16, 1), entry(6, 16, 1)]);
    let served = serve_entries(
        &organic,
        &[control("b", 0, Action::Boost { product_ids: vec![9], points: 2.0 }), pin("p", 6, 4)],
        boost,
    );
    assert_eq!(ids(&served), vec![10, 9, 8, 6, 7]);
    assert_eq!(tied_ranks(&served), vec![1, 1, 3, 4, 3], "7 shares 8's rank across the pin");
}

/// The rules, written out with a slot per served position.
fn reference(organic: &[Scored], controls: &[Control]) -> Vec<(i64, f64, u64)> {
    let mut by_id: Vec<&Control> = controls.iter().collect();
    by_id.sort_by(|a, b| a.id.cmp(&b.id));
    let excluded =
        |p: i64| by_id.iter().any(|c| matches!(&c.action, Action::Exclude { product_ids } if product_ids.contains(&p)));
    // The pin of each product: the smallest (position, active_from, id).
    let mut pins: Vec<(u32, i64, String, i64)> = Vec::new();
    for c in &by_id {
        if let Action::Pin { product_id, position } = c.action {
            if excluded(product_id) || position == 0 {
                continue;
            }
            let this = (position, c.active_from_us, c.id.clone(), product_id);
            match pins.iter_mut().find(|p| p.3 == product_id) {
                Some(kept) if this < *kept => *kept = this,
                Some(_) => {}
                None => pins.push(this),
            }
        }
    }
    pins.sort();
    let mut all: Vec<(i64, f64, u64)> = Vec::new();
    for (rank, e) in organic.iter().enumerate() {
        if excluded(e.product_id) {
            continue;
        }
        let mut sum = 0.0;
        let mut boosted = false;
        for c in &by_id {
            if let Action::Boost { product_ids, points } = &c.action
                && product_ids.contains(&e.product_id)
            {
                sum += points;
                boosted = true;
            }
        }
        let score = if boosted && sum != 0.0 { boost_by_definition(e.score, sum) } else { e.score };
        all.push((e.product_id, score, rank as u64 + 1));
    }
    let served_score = |p: i64| all.iter().find(|e| e.0 == p).copied().unwrap_or((p, 0.0, 0));
    let mut rest: Vec<(i64, f64, u64)> = all.iter().filter(|e| !pins.iter().any(|p| p.3 == e.0)).copied().collect();
    rest.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    let n = rest.len() + pins.len();
    let mut slots: Vec<Option<(i64, f64, u64)>> = vec![None; n];
    for (position, _, _, product_id) in &pins {
        let wanted = (*position as usize).min(n) - 1;
        let mut i = wanted;
        while i < n && slots[i].is_some() {
            i += 1;
        }
        if i == n {
            i = wanted;
            while slots[i].is_some() {
                i -= 1;
            }
        }
        slots[i] = Some(served_score(*product_id));
    }
    let mut rest = rest.into_iter();
    slots.into_iter().map(|s| s.or_else(|| rest.next()).expect("a product for every slot")).collect()
}

fn arbitrary_case() -> impl Strategy<Value = (Vec<Scored>, Vec<Control>)> {
    let entries = prop::collection::btree_map(1i64..60, (0u64..40, 0u32..1000), 0..40)
        .prop_map(|m| board(&m.into_iter().map(|(p, (floor, norm))| entry(p, floor, norm)).collect::<Vec<_>>()));
    let action = prop_oneof![
        (1i64..70, 1u32..50).prop_map(|(product_id, position)| Action::Pin { product_id, position }),
        (prop::collection::vec(1i64..70, 1..4), prop_oneof![Just(-5.5), Just(-1.0), Just(0.75), Just(3.0), Just(40.0)])
            .prop_map(|(product_ids, points)| Action::Boost { product_ids, points }),
        prop::collection::vec(1i64..70, 1..3).prop_map(|product_ids| Action::Exclude { product_ids }),
    ];
    let controls = prop::collection::vec((0i64..3, action), 0..12).prop_map(|cs| {
        cs.into_iter().enumerate().map(|(i, (from, action))| control(&format!("c{i:02}"), from, action)).collect()
    });
    (entries, controls)
}

proptest! {
    #[test]
    fn a_held_copy_of_the_served_board_gives_the_same_tied_ranks(case in arbitrary_case()) {
        let (organic, controls) = case;
        let served = serve_entries(&organic, &controls, boost);
        let entries: Vec<Scored> = served.iter().map(|e| Scored { product_id: e.product_id, score: e.score }).collect();
        let copy = crate::snapshot::Snapshot::from_served(entries, pinned_positions(&served)).expect("a served board");
        let held: Vec<u64> = (0..served.len()).map(|i| copy.tied_head(i) as u64 + 1).collect();
        prop_assert_eq!(held, tied_ranks(&served));
    }

    #[test]
    fn the_served_board_is_the_references(case in arbitrary_case()) {
        let (organic, controls) = case;
        let served = serve_entries(&organic, &controls, boost);
        let expected = reference(&organic, &controls);
        let got: Vec<(i64, f64, u64)> = served.iter().map(|e| (e.product_id, e.score, e.organic_rank)).collect();
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn no_product_twice_total_right_and_untouched_products_in_organic_order(case in arbitrary_case()) {
        let (organic, controls) = case;
        let served = serve_entries(&organic, &controls, boost);
        let unique: HashSet<i64> = served.iter().map(|e| e.product_id).collect();
        prop_assert_eq!(unique.len(), served.len());
        let touched: HashSet<i64> = controls.iter().flat_map(|c| match &c.action {
            Action::Pin { product_id, .. } => vec![*product_id],
            Action::Boost { product_ids, .. } | Action::Exclude { product_ids } => product_ids.clone(),
        }).collect();
        let excluded: HashSet<i64> = controls.iter().flat_map(|c| match &c.action {
            Action::Exclude { product_ids } => product_ids.clone(),
            _ => Vec::new(),
        }).collect();
        let pinned: HashSet<i64> = controls.iter().filter_map(|c| match c.action {
            Action::Pin { product_id, position } if position > 0 && !excluded.contains(&product_id) => Some(product_id),
            _ => None,
        }).collect();
        let kept = organic.iter().filter(|e| !excluded.contains(&e.product_id) && !pinned.contains(&e.product_id)).count();
        prop_assert_eq!(served.len(), kept + pinned.len());
        let untouched_served: Vec<i64> = served.iter().map(|e| e.product_id).filter(|p| !touched.contains(p)).collect();
        let untouched_organic: Vec<i64> = organic.iter().map(|e| e.product_id).filter(|p| !touched.contains(p)).collect();
        prop_assert_eq!(untouched_served, untouched_organic);
        for e in &served {
            if !touched.contains(&e.product_id) {
                prop_assert!(e.control_ids.is_empty());
            }
        }
    }

    #[test]
    fn a_boost_of_zero_points_is_the_identity(case in arbitrary_case(), products in prop::collection::vec(1i64..70, 1..5)) {
        let (organic, controls) = case;
        let mut with_zero = controls.clone();
        with_zero.push(control("zz-zero", 0, Action::Boost { product_ids: products, points: 0.0 }));
        let strip = |served: Vec<ServedEntry>| served.into_iter().map(|e| (e.product_id, e.score, e.organic_rank)).collect::<Vec<_>>();
        prop_assert_eq!(strip(serve_entries(&organic, &with_zero, boost)), strip(serve_entries(&organic, &controls, boost)));
    }
}
