//! `served-parts`: where the time of a served board goes, in process and without a store: a
//! synthetic organic board of `products` entries (the built-in layout, scores with ties) under
//! the same 1,000 controls as `controls` (100 pins, 600 boosts and buries, 300 exclusions),
//! each step of a publication's derivation timed on its own: the served board, its held copy
//! (the product index), and the organic board a control pass derives back from a version.

use std::hint::black_box;
use std::time::Instant;

use ranking_server::domain::controls::Control;
use ranking_server::domain::controls::served::{boosted, serve};
use ranking_server::domain::profile::ScoringProfile;
use ranking_server::domain::snapshot::{Scored, Snapshot, ranking_order};

/// Runs of each step; the median is reported.
const RUNS: usize = 5;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The organic board: main scores falling with many ties, norms spread, in ranking order.
fn organic(products: i64, profile: &ScoringProfile) -> Vec<Scored> {
    let layout = profile.layout();
    let axes = profile.axes().len();
    let mut board: Vec<Scored> = (1..=products)
        .map(|p| {
            let norms: Vec<u32> = (0..axes).map(|a| ((p * 31 + a as i64 * 17) % 1_000) as u32).collect();
            Scored { product_id: p, score: layout.encode((p % 5_000) as u64, &norms) }
        })
        .collect();
    board.sort_by(ranking_order);
    board
}

/// The `controls` scenario's 1,000 controls, as the domain holds them (read as PutControl
/// reads them, active from the epoch).
fn thousand(products: i64) -> Vec<Control> {
    crate::controls::thousand(products)
        .into_iter()
        .map(|c| ranking_server::grpc::controls::control(c, 0).expect("a valid control"))
        .collect()
}

/// Seconds of `f`'s run, median of [`RUNS`].
pub(crate) fn timed<T>(mut f: impl FnMut() -> T) -> f64 {
    median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                black_box(f());
                started.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

pub fn bench_served_parts(products: i64) {
    let profile = ScoringProfile::built_in();
    let layout = profile.layout();
    let board = organic(products, &profile);
    let controls = thousand(products);
    let acting: Vec<(String, u64)> = controls.iter().map(|c| (c.id.clone(), c.revision)).collect();
    let boost = |score, points| boosted(layout, score, points);

    let plain = timed(|| Snapshot::from_ranked(board.clone()).expect("ranked"));
    let copy = timed(|| board.clone());
    let derive = timed(|| serve(&board, &controls, boost));
    let served = serve(&board, &controls, boost);
    let held = timed(|| served.snapshot(acting.clone()).expect("served"));
    let snapshot = served.snapshot(acting.clone()).expect("served");
    let back = timed(|| snapshot.organic_board());
    assert_eq!(snapshot.organic_board(), board, "the organic board derived back is the organic board");

    println!("\n## Served board, step by step ({products} entries, 1,000 controls, in process)\n");
    println!("| step | ms (median of {RUNS}) |");
    println!("|---|---:|");
    println!("| copy of the organic board (the floor of any step that builds a board) | {:.1} |", copy * 1e3);
    println!("| held copy of the organic board (product index), no controls | {:.1} |", plain * 1e3);
    println!("| served board derived (exclude, boost, merge the boosted back, pin) | {:.1} |", derive * 1e3);
    println!("| its held copy (entries, pins, annex, product index) | {:.1} |", held * 1e3);
    println!("| organic board derived back from the served version (a control pass) | {:.1} |", back * 1e3);
}
