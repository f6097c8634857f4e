//! `controls`: merchandising controls on a day of `products` rows (throwaway PostgreSQL,
//! Redis): a recompute with 1,000 active controls against one without, the republication a
//! put sets off (from the put to the new version served) against a recompute's publication of
//! the daily ranking, and GetTopN(20) of the controlled board against the health check of the
//! same server, measured with h2load in the same run.

use std::time::{Duration, Instant};

use prost::Message;
use ranking_client::v1;

use crate::helpers::{metric_or_zero, metric_value};
use crate::reads::{Shape, h2load};
use crate::recompute::seeded_server_with;

/// Runs of each measured case; the median is reported.
const RUNS: usize = 3;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn control(id: String, action: v1::control::Action) -> v1::Control {
    v1::Control { control_id: id, action: Some(action), ..Default::default() }
}

/// 1,000 controls on the whole ranking: 100 pins, 600 boosts and buries of 10 products each,
/// 300 exclusions of 10 products each, spread over the products.
pub(crate) fn thousand(products: i64) -> Vec<v1::Control> {
    let spread = |i: i64, k: i64| 1 + (i * 7_919 + k * 104_729) % products;
    let mut controls = Vec::new();
    for i in 0..100 {
        controls.push(control(
            format!("pin-{i}"),
            v1::control::Action::Pin(v1::Pin { product_id: spread(i, 0), position: 1 + i as u32 * 3 }),
        ));
    }
    for i in 0..600 {
        let ids = (0..10).map(|k| spread(i + 1_000, k)).collect();
        let points = if i % 3 == 0 { -50.0 } else { 2.5 + i as f64 };
        controls
            .push(control(format!("boost-{i}"), v1::control::Action::Boost(v1::Boost { product_ids: ids, points })));
    }
    for i in 0..300 {
        let ids = (0..10).map(|k| spread(i + 5_000, k)).collect();
        controls.push(control(format!("exclude-{i}"), v1::control::Action::Exclude(v1::Exclude { product_ids: ids })));
    }
    controls
}

/// Bytes written to Redis by publications so far (every form and board).
fn published_bytes(metrics: &str) -> f64 {
    ["whole", "delta"]
        .iter()
        .flat_map(|form| ["daily", "weekly", "trending", "segment"].map(|board| (*form, board)))
        .map(|(form, board)| {
            metric_or_zero(metrics, &format!("ranking_published_bytes_total{{form=\"{form}\",board=\"{board}\"}}"))
        })
        .sum()
}

/// The phases of a control pass's boards (`ranking_control_pass_seconds_total`).
const PHASES: [&str; 5] = ["read", "organic", "serve", "publish", "install"];

/// Seconds control passes spent so far in each of [`PHASES`].
fn phase_seconds(metrics: &str) -> [f64; 5] {
    PHASES.map(|phase| metric_or_zero(metrics, &format!("ranking_control_pass_seconds_total{{phase=\"{phase}\"}}")))
}

/// A put, and the time until this replica serves a version of the daily board other than
/// `before`'s: (seconds, bytes written to Redis meanwhile, seconds of each control-pass phase).
async fn put_until_served(app: &mut crate::Running, control: v1::Control) -> (f64, f64, [f64; 5]) {
    let before = app.clients[0].get_top_n(v1::GetTopNRequest::default()).await.expect("top").into_inner().version;
    let metrics = app.app.scrape_metrics().await;
    let (bytes, phases) = (published_bytes(&metrics), phase_seconds(&metrics));
    let started = Instant::now();
    let put = v1::PutControlRequest { control: Some(control), expected_revision: 0 };
    app.clients[0].put_control(put).await.expect("put");
    loop {
        let top = app.clients[0].get_top_n(v1::GetTopNRequest::default()).await.expect("top").into_inner();
        if top.version != before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let served = started.elapsed().as_secs_f64();
    // The weekly board is served again by the same pass: its bytes counted once it is written.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics = app.app.scrape_metrics().await;
    let spent = phase_seconds(&metrics);
    (served, published_bytes(&metrics) - bytes, std::array::from_fn(|i| spent[i] - phases[i]))
}

pub async fn bench_controls(products: i64, redis: &str, layout: u16) {
    let flags = [format!("--store-layout={layout}")];
    let (_pg, mut app) = seeded_server_with(products, redis, &flags).await;
    // Server-side elapsed ms of a recompute, and its daily phase (ranking and publication of
    // the daily ranking), in seconds.
    let recompute = async |app: &mut crate::Running| {
        let r = app.clients[0].recompute(v1::RecomputeRequest::default()).await.expect("recompute").into_inner();
        let daily = metric_value(&app.app.scrape_metrics().await, "ranking_recompute_phase_seconds{phase=\"daily\"}");
        (r.elapsed_ms as f64, daily)
    };
    let mut plain = Vec::new();
    for _ in 0..RUNS {
        plain.push(recompute(&mut app).await);
    }
    let (health_before, top_before) = top_against_health(&mut app).await;
    for c in thousand(products) {
        let put = v1::PutControlRequest { control: Some(c), expected_revision: 0 };
        app.clients[0].put_control(put).await.expect("put");
    }
    let mut controlled = Vec::new();
    for _ in 0..RUNS {
        controlled.push(recompute(&mut app).await);
    }
    // A put serves the board again: from the call to the new version served by this replica.
    let (mut boosts, mut pins) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        let boost = control(
            "boost-0".into(),
            v1::control::Action::Boost(v1::Boost { product_ids: vec![1, 2, 3], points: 10.0 + run as f64 }),
        );
        boosts.push(put_until_served(&mut app, boost).await);
        // The first of the 1,000 (at most 1,000 per board) pins another product to 1.
        let middle = products / 2 + run as i64;
        let pin = control("pin-0".into(), v1::control::Action::Pin(v1::Pin { product_id: middle, position: 1 }));
        pins.push(put_until_served(&mut app, pin).await);
    }
    let republication = median(boosts.iter().map(|r| r.0).collect());
    let boost_bytes = median(boosts.iter().map(|r| r.1).collect());
    let (pin_served, pin_bytes) =
        (median(pins.iter().map(|r| r.0).collect()), median(pins.iter().map(|r| r.1).collect()));
    let pin_phases: Vec<f64> = (0..PHASES.len()).map(|i| median(pins.iter().map(|r| r.2[i]).collect())).collect();
    let (plain_ms, plain_daily) =
        (median(plain.iter().map(|r| r.0).collect()), median(plain.iter().map(|r| r.1).collect()));
    let (with_ms, with_daily) =
        (median(controlled.iter().map(|r| r.0).collect()), median(controlled.iter().map(|r| r.1).collect()));
    println!("\n## Merchandising controls ({products} products, throwaway PostgreSQL, Redis, layout {layout})\n");
    println!("| measure | without controls | with 1,000 controls | ratio | target |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| recompute, server elapsed ms (median of {RUNS}) | {plain_ms:.0} | {with_ms:.0} | {:.2} | ≤ 1.05 |",
        with_ms / plain_ms
    );
    println!(
        "| daily phase (rank + publish the daily ranking), s | {plain_daily:.3} | {with_daily:.3} | {:.2} | |",
        with_daily / plain_daily
    );
    println!(
        "| a boost put → its version served (daily and weekly served again), s | | {republication:.3} | {:.2} of the daily phase | ≤ 0.25 |",
        republication / with_daily
    );
    println!(
        "| a pin of a product from the middle to 1 → served, s | | {pin_served:.3} | {:.2} of the daily phase | ≤ 0.25 |",
        pin_served / with_daily
    );
    // One board's packed copy and product index: 16 + 4 bytes an entry.
    let board_bytes = products as f64 * 20.0;
    println!(
        "| bytes written to Redis by a put: boost / pin (one board whole: {:.1} MB) | | {:.2} MB / {:.2} MB | {:.3} / {:.3} of a board | |",
        board_bytes / 1e6,
        boost_bytes / 1e6,
        pin_bytes / 1e6,
        boost_bytes / board_bytes,
        pin_bytes / board_bytes
    );

    let phases: Vec<String> = PHASES.iter().zip(&pin_phases).map(|(p, s)| format!("{p} {s:.3}")).collect();
    println!(
        "| a pin's control pass by phase, s summed over the daily, weekly and trending boards (2 cores) | | {} | | |",
        phases.join(", ")
    );

    let (health, served) = top_against_health(&mut app).await;
    println!(
        "| GetTopN(20) calls/s / the health check's (10×50, server in the bench process) | {top_before:.0} / {health_before:.0} = {:.2} | {served:.0} / {health:.0} = {:.2} | {:.2} | as without controls |",
        top_before / health_before,
        served / health,
        (served / health) / (top_before / health_before)
    );
    app.stop().await;
}

/// GetTopN(20) and the health check of the same server, calls/s with h2load (median of
/// [`RUNS`] interleaved runs of 5 s).
async fn top_against_health(app: &mut crate::Running) -> (f64, f64) {
    let addr = app.app.addr;
    let shape = Shape { connections: 10, streams: 50 };
    let top = v1::GetTopNRequest { limit: 20, ..Default::default() };
    let top_len = app.clients[0].get_top_n(top.clone()).await.expect("top").into_inner().encoded_len();
    let health_len = tonic_health::pb::HealthCheckResponse { status: 1 }.encoded_len();
    let mut rates = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let health = h2load(addr, "/grpc.health.v1.Health/Check", &[], health_len, shape, Duration::from_secs(5), None);
        let body = top.encode_to_vec();
        let served =
            h2load(addr, "/ranking.v1.RankingService/GetTopN", &body, top_len, shape, Duration::from_secs(5), None);
        rates.0.push(health.expect("h2load health").0);
        rates.1.push(served.expect("h2load GetTopN").0);
    }
    (median(rates.0), median(rates.1))
}
