//! `changes`: what a live pass's copy of a board costs when only some scores changed, in
//! process and without a store: a board of `products` entries (the built-in layout, scores
//! with ties), the next population with a share of its scores changed (and a few products new
//! and gone), its copy built whole (the sort every pass did) against the changes found and
//! applied to the previous copy; and a control pass's served board indexed whole against
//! mapped from the board it replaces. The floor beside them: one copy of the board's entries.

use ranking_server::domain::profile::ScoringProfile;
use ranking_server::domain::snapshot::{Changes, Scored, Snapshot};

use crate::served_parts::timed;

/// A population in product order: main scores falling with many ties, norms spread; every
/// `every`th product rescored by `salt`, and (when `salt` is not 0) every `every * 10`th
/// product left out and as many new ones past the end.
fn population(products: i64, every: i64, salt: i64) -> Vec<Scored> {
    let layout = ScoringProfile::built_in().layout().clone();
    let score = |p: i64, s: i64| {
        let norms = [((p * 31 + s * 7) % 1_000) as u32, ((p * 17 + s) % 1_000) as u32, ((p * 13) % 1_000) as u32];
        layout.encode(((p + s) % 5_000) as u64, &norms)
    };
    let mut entries: Vec<Scored> = (1..=products)
        .filter(|p| salt == 0 || p % (every * 10) != 3)
        .map(|p| Scored { product_id: p, score: score(p, if p % every == 0 { salt } else { 0 }) })
        .collect();
    if salt != 0 {
        entries.extend((1..=products / (every * 10)).map(|k| Scored { product_id: products + k, score: score(k, 0) }));
    }
    entries
}

pub fn bench_changes(products: i64) {
    println!("\n## A pass's copy of a board: whole against changed ({products} entries, in process)\n");
    println!(
        "| scores changed | copy of the entries (floor) ms | built whole ms | changes found ms | applied ms | changed |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let before = population(products, 1, 0);
    let previous = Snapshot::from_unordered(before.clone()).expect("valid");
    for every in [2, 5, 10, 100, 1_000] {
        let next = population(products, every, 1);
        let floor = timed(|| next.clone());
        let whole = timed(|| Snapshot::from_unordered(next.clone()).expect("valid"));
        let found = timed(|| Changes::between(&previous, &next).expect("ordered"));
        let changes = Changes::between(&previous, &next).expect("ordered");
        let applied = timed(|| previous.with_changes(&changes).expect("valid"));
        let built = previous.with_changes(&changes).expect("valid");
        let reference = Snapshot::from_unordered(next).expect("valid");
        assert_eq!(built.page(0, u64::MAX), reference.page(0, u64::MAX), "the changed copy is the whole one");
        assert_eq!(built.product_index(), reference.product_index());
        println!(
            "| 1 in {every} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            floor * 1e3,
            whole * 1e3,
            found * 1e3,
            applied * 1e3,
            changes.len()
        );
    }
}

/// A control pass's served board: its product index built whole (a sort of the board)
/// against mapped from the board it replaces, when 100 products from the middle of the board
/// are pinned at the top and 1,000 more are taken off (what a control touches).
pub fn bench_served_index(products: i64) {
    println!("\n## A served board's product index: built whole against mapped ({products} entries, in process)\n");
    println!("| copy of the entries (floor) ms | built whole ms | mapped from the board before ms |");
    println!("|---:|---:|---:|");
    let mut ranked = population(products, 1, 0);
    ranked.sort_by(ranking_server::domain::snapshot::ranking_order);
    let before = Snapshot::from_ranked(ranked.clone()).expect("valid");
    let middle = ranked.len() / 2;
    let pinned: Vec<Scored> = (0..100).map(|k| ranked[middle + k * 37]).collect();
    let mut touched: Vec<i64> = pinned.iter().map(|e| e.product_id).collect();
    touched.extend((0..1_000).map(|k| ranked[ranked.len() / 3 + k * 11].product_id));
    touched.sort_unstable();
    touched.dedup();
    let mut served = pinned;
    served.extend(ranked.iter().filter(|e| touched.binary_search(&e.product_id).is_err()));
    let positions: Vec<u32> = (0..100).collect();
    let floor = timed(|| served.clone());
    let whole = timed(|| Snapshot::from_served(served.clone(), positions.clone()).expect("valid"));
    let mapped =
        timed(|| Snapshot::from_served_after(&before, served.clone(), positions.clone(), &touched).expect("valid"));
    let reference = Snapshot::from_served(served.clone(), positions.clone()).expect("valid");
    let built = Snapshot::from_served_after(&before, served, positions, &touched).expect("valid");
    assert_eq!(built.product_index(), reference.product_index(), "the mapped index is the whole one");
    println!("| {:.1} | {:.1} | {:.1} |", floor * 1e3, whole * 1e3, mapped * 1e3);
}
