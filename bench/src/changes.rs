//! `changes`: what a live pass's copy of a board costs when only some scores changed, in
//! process and without a store: a board of `products` entries (the built-in layout, scores
//! with ties), the next population with a share of its scores changed (and a few products new
//! and gone), its copy built whole (the sort every pass did) against the changes found and
//! applied to the previous copy. The floor beside them: one copy of the board's entries.

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
