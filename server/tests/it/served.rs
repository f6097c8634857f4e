//! Boards served under merchandising controls: every read (GetTopN, GetRank and its
//! neighbours, GetRanks, ExplainRank) answers the served board, which equals a reference
//! written from the rules and applied to the organic board read before the controls, for the
//! whole ranking, a segment and the week; organic ranks and controls name each entry; a
//! replica that loads the version, and one that reads it from the store, answer the same.

use chrono::{Duration as Age, Utc};
use ranking_client::v1;

use crate::helpers::{TestApp, TestDb, rand_u64, views};
use crate::previews::{Served, at, boost, exclude, of, pin, reference};
use crate::redis_store::redis_settings;
use ranking_server::test_support::eventually;

fn top(segment: &str, window: v1::Window) -> v1::GetTopNRequest {
    v1::GetTopNRequest { window: window.into(), segment: segment.into(), limit: 100, ..Default::default() }
}

async fn read(app: &mut TestApp, segment: &str, window: v1::Window) -> v1::GetTopNResponse {
    app.client.get_top_n(top(segment, window)).await.expect("GetTopN").into_inner()
}

/// The controls of the tests: a pin first, a product without events second, two pins on one
/// position, a pin past the end, two boosts on one product, a bury, an exclusion, a control of
/// later, one of a segment and one of the week only.
fn controls() -> Vec<v1::Control> {
    let mut later = boost("later-lift", vec![1], 50.0);
    later.active_from = Some(at(Utc::now() + Age::hours(1)));
    let mut segment_pin = pin("shoes-first", 1, 1);
    segment_pin.segment = "brand:x".into();
    let mut weekly = exclude("weekly-only", vec![11]);
    weekly.windows = vec![v1::Window::Weekly.into()];
    vec![
        pin("campaign", 3, 1),
        pin("new-arrival", 99, 2),
        pin("clash", 4, 2),
        pin("far", 5, 900),
        boost("brand-a", vec![6, 8], 1.0),
        boost("brand-b", vec![6], 0.6),
        boost("bury", vec![12], -100.0),
        exclude("recall", vec![7]),
        later,
        segment_pin,
        weekly,
    ]
}

/// Products 1..=12 with 2p views, 1..=6 in segment `brand:x`, ranked; then the controls put
/// and the day recomputed. Returns the organic boards read before (daily, segment, weekly)
/// and the controls as stored.
async fn served_day(app: &mut TestApp) -> ([v1::GetTopNResponse; 3], Vec<v1::Control>) {
    let events =
        (1..=12).flat_map(|p| views(&format!("p{p}"), p, p as usize * 2, Utc::now() - Age::seconds(30))).collect();
    app.record(events).await;
    let catalog = (1..=6)
        .map(|p| v1::CatalogEntry { product_id: p, segments: vec!["brand:x".into()], ..Default::default() })
        .collect();
    app.client.update_catalog(v1::UpdateCatalogRequest { products: catalog }).await.expect("catalog");
    app.recompute("").await;
    let organic = [
        read(app, "", v1::Window::Daily).await,
        read(app, "brand:x", v1::Window::Daily).await,
        read(app, "", v1::Window::Weekly).await,
    ];
    for c in controls() {
        app.client.put_control(v1::PutControlRequest { control: Some(c), expected_revision: 0 }).await.expect("put");
    }
    app.recompute("").await;
    let stored =
        app.client.list_controls(v1::ListControlsRequest::default()).await.expect("list").into_inner().controls;
    (organic, stored)
}

/// The stored controls of `ids`.
fn named(stored: &[v1::Control], ids: &[&str]) -> Vec<v1::Control> {
    stored.iter().filter(|c| ids.contains(&c.control_id.as_str())).cloned().collect()
}

const DAILY: [&str; 8] = ["campaign", "new-arrival", "clash", "far", "brand-a", "brand-b", "bury", "recall"];

/// What every read of `app` answers of the served boards.
async fn check_reads(app: &mut TestApp, organic: &[v1::GetTopNResponse; 3], stored: &[v1::Control]) -> Vec<Served> {
    let daily = read(app, "", v1::Window::Daily).await;
    let expected = reference(&organic[0].products, &named(stored, &DAILY));
    assert_eq!(of(&daily), expected, "the daily board");
    assert_eq!(daily.total, expected.len() as u64);
    let segment = read(app, "brand:x", v1::Window::Daily).await;
    assert_eq!(of(&segment), reference(&organic[1].products, &named(stored, &["shoes-first"])), "the segment's");
    let mut weekly_ids = DAILY.to_vec();
    weekly_ids.push("weekly-only");
    let weekly = read(app, "", v1::Window::Weekly).await;
    assert_eq!(of(&weekly), reference(&organic[2].products, &named(stored, &weekly_ids)), "the weekly board");

    // GetRank and its neighbours, GetRanks: the same places, ranks, organic ranks and controls.
    let request = v1::GetRankRequest { product_id: 6, neighbors: 2, ..Default::default() };
    let rank = app.client.get_rank(request).await.expect("GetRank").into_inner();
    let product = rank.product.expect("entry");
    let place = expected.iter().position(|e| e.0 == 6).expect("served");
    assert_eq!(
        (product.rank, &product.control_ids),
        (place as u64 + 1, &vec!["brand-a".to_string(), "brand-b".to_string()])
    );
    assert_eq!((product.organic_rank, product.tied_rank), (expected[place].2, expected[place].4));
    let around: Vec<i64> = rank.above.iter().chain(&rank.below).map(|p| p.product_id).collect();
    let window: Vec<i64> = expected[place.saturating_sub(2)..(place + 3).min(expected.len())]
        .iter()
        .map(|e| e.0)
        .filter(|p| *p != 6)
        .collect();
    assert_eq!(around, window);
    let ranks = v1::GetRanksRequest { product_ids: vec![99, 7, 12, 3], ..Default::default() };
    let ranks = app.client.get_ranks(ranks).await.expect("GetRanks").into_inner();
    assert_eq!(ranks.missing, vec![7], "excluded");
    let placed: Vec<(i64, u64, u64, Vec<String>)> =
        ranks.products.iter().map(|p| (p.product_id, p.rank, p.organic_rank, p.control_ids.clone())).collect();
    let want = |p: i64| {
        let i = expected.iter().position(|e| e.0 == p).expect("served");
        (p, i as u64 + 1, expected[i].2, expected[i].3.clone())
    };
    assert_eq!(placed, vec![want(99), want(12), want(3)]);
    expected
}

#[tokio::test]
async fn every_read_answers_the_board_the_controls_serve() {
    let mut app = TestApp::spawn(&[]).await;
    let (organic, stored) = served_day(&mut app).await;
    let expected = check_reads(&mut app, &organic, &stored).await;
    assert_eq!((expected[0].0, expected[1].0), (3, 99), "the campaign first, the new arrival second");

    // ExplainRank names the controls acting on the product and its organic rank; the boosted
    // score is not taken for a stale one.
    let explained = app.client.explain_rank(v1::ExplainRankRequest { product_id: 6, ..Default::default() }).await;
    let explained = explained.expect("ExplainRank").into_inner();
    let names: Vec<&str> = explained.controls.iter().map(|c| c.control_id.as_str()).collect();
    assert_eq!(names, ["brand-a", "brand-b"]);
    assert_eq!(
        explained.organic_rank,
        organic[0].products.iter().position(|p| p.product_id == 6).expect("ranked") as u64 + 1
    );
    assert!(!explained.stale);
    // A preview of now is what is served.
    let preview = v1::PreviewTopNRequest { selector: Some(top("", v1::Window::Daily)), ..Default::default() };
    let preview = app.client.preview_top_n(preview).await.expect("preview").into_inner();
    assert_eq!(of(&preview), expected);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs Redis (RANKING_TEST_REDIS): two replicas of one store"]
async fn a_replica_that_loads_the_served_board_and_one_that_reads_the_store_answer_the_same() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut a = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let (organic, stored) = served_day(&mut a).await;
    let served = check_reads(&mut a, &organic, &stored).await;
    // A replica started now loads the served versions; one without copies reads the store.
    let mut loaded = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let mut direct = TestApp::spawn_on(redis_settings(&db.url, &prefix, &["--snapshot-max-entries=0"])).await;
    for replica in [&mut loaded, &mut direct] {
        assert_eq!(check_reads(replica, &organic, &stored).await, served);
    }
    for app in [a, loaded, direct] {
        app.stop().await;
    }
    db.drop_db().await;
}

/// The daily board's (product, control ids) as `app` serves it.
async fn daily_ids(app: &mut TestApp) -> Vec<(i64, Vec<String>)> {
    read(app, "", v1::Window::Daily).await.products.into_iter().map(|p| (p.product_id, p.control_ids)).collect()
}

/// Products 1..=5 with p views each, ranked: 5, 4, 3, 2, 1.
async fn five(app: &mut TestApp) -> Vec<(i64, Vec<String>)> {
    let events = (1..=5).flat_map(|p| views(&format!("p{p}"), p, p as usize, Utc::now() - Age::seconds(30))).collect();
    app.record(events).await;
    app.recompute("").await;
    let organic = daily_ids(app).await;
    assert_eq!(organic.iter().map(|e| e.0).collect::<Vec<_>>(), [5, 4, 3, 2, 1]);
    organic
}

#[tokio::test]
async fn a_put_and_a_delete_serve_the_board_again_without_a_recompute() {
    let mut app = TestApp::spawn(&[]).await;
    let organic = five(&mut app).await;
    let put = v1::PutControlRequest { control: Some(pin("first", 1, 1)), expected_revision: 0 };
    app.client.put_control(put).await.expect("put");
    let pinned = vec![(1, vec!["first".to_string()]), (5, vec![]), (4, vec![]), (3, vec![]), (2, vec![])];
    eventually("the pin served", async || daily_ids(&mut app).await == pinned).await;
    // The pass is counted when all its boards are served (the daily one may be read first).
    eventually("the control pass counted", async || {
        let metrics = app.scrape_metrics().await;
        crate::helpers::metric_or_zero(&metrics, "ranking_control_passes_total{outcome=\"published\"}") >= 1.0
    })
    .await;
    let metrics = app.scrape_metrics().await;
    assert_eq!(crate::helpers::metric_value(&metrics, "ranking_controls_active{kind=\"pin\"}"), 1.0);
    let delete = v1::DeleteControlRequest { control_id: "first".into(), expected_revision: 0 };
    app.client.delete_control(delete).await.expect("delete");
    eventually("the organic board again", async || daily_ids(&mut app).await == organic).await;
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs Redis (RANKING_TEST_REDIS): two replicas of one store"]
async fn a_control_starts_and_ends_on_schedule_on_every_replica() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut a = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let mut b = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let organic = five(&mut a).await;
    // From 2 s from now, for 4 s.
    let mut window = pin("four-seconds", 2, 1);
    let start = Utc::now() + Age::seconds(2);
    window.active_from = Some(at(start));
    window.active_until = Some(at(start + Age::seconds(4)));
    a.client.put_control(v1::PutControlRequest { control: Some(window), expected_revision: 0 }).await.expect("put");
    let pinned = vec![(2, vec!["four-seconds".to_string()]), (5, vec![]), (4, vec![]), (3, vec![]), (1, vec![])];
    // Before its start, then during its window, then after its end, on both replicas: each
    // state is seen in this order (a replica serves the start before the end).
    for (state, wanted) in [("before the start", &organic), ("from the start", &pinned), ("after the end", &organic)] {
        for replica in [&mut a, &mut b] {
            eventually(state, async || daily_ids(replica).await == *wanted).await;
        }
    }
    assert!(Utc::now() >= start + Age::seconds(4), "the end was served after it came");
    for app in [a, b] {
        app.stop().await;
    }
    db.drop_db().await;
}
