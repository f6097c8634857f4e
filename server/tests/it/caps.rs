//! Per-shopper caps: a "distinct viewers" profile counts each actor's views of a product once
//! a day, whatever the arrival order and however the writers interleave; a retraction frees
//! its actor's slot; ExplainRank and `ranking_events_capped_total` show what the caps
//! removed; an actor required by the profile is refused when missing, nothing written.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration as Age, Timelike, Utc};
use ranking_client::tonic::Code;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database, Statement};

use ranking_server::test_support::eventually;

use crate::helpers::{ProfileFile, TestApp, count_events, event, metric_value, retract};

/// The built-in profile with views counted once per actor, product and day, a custom count
/// signal counted at most twice per actor and required to name one, and no carry-over (so a
/// day's ranking is its own events').
pub const DISTINCT_VIEWERS: &str = r#"
carry_over = 0.0
carry_days = 0
[signals.views]
per_actor = 1
[signals.cart_adds]
kind = "count"
per_actor = 2
actor_required = true
[[main]]
signal = "views"
weight = 0.1
[[main]]
signal = "likes"
weight = 0.2
[[main]]
signal = "order_amount"
weight = 0.6
transform = "log1p"
[[main]]
signal = "cart_adds"
weight = 0.3
[[axes]]
signal = "views"
digits = 3
[[axes]]
signal = "likes"
digits = 3
[[axes]]
signal = "recency"
digits = 3
"#;

pub fn view_by(id: &str, product_id: i64, actor: &str, at: DateTime<Utc>) -> v1::Event {
    v1::Event { actor_id: actor.into(), ..event(id, product_id, v1::EventType::View, 0, at) }
}

fn cart_add(id: &str, product_id: i64, actor: &str, at: DateTime<Utc>) -> v1::Event {
    v1::Event {
        signal: "cart_adds".into(),
        actor_id: actor.into(),
        ..event(id, product_id, v1::EventType::Signal, 0, at)
    }
}

async fn explain(app: &mut TestApp, product_id: i64) -> v1::ExplainRankResponse {
    let request = v1::ExplainRankRequest { product_id, ..Default::default() };
    app.client.explain_rank(request).await.expect("explain").into_inner()
}

fn signal<'a>(e: &'a v1::ExplainRankResponse, name: &str) -> &'a v1::SignalExplanation {
    e.signals.iter().find(|s| s.signal == name).unwrap_or_else(|| panic!("{name} in {:?}", e.signals))
}

#[tokio::test]
async fn ten_views_from_one_actor_move_a_product_by_one_view() {
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let mut app = TestApp::spawn(&[&profile.flag()]).await;
    let at = Utc::now() - Age::minutes(5);
    let mut batch: Vec<v1::Event> = (0..10).map(|i| view_by(&format!("bot-{i}"), 1, "bot", at)).collect();
    batch.extend((0..3).map(|i| view_by(&format!("shopper-{i}"), 2, &format!("shopper-{i}"), at)));
    // Views without an actor count each.
    batch.push(event("anonymous-1", 2, v1::EventType::View, 0, at));
    let recorded = app.record(batch).await;
    assert_eq!(recorded.accepted, 14, "every view is recorded; the cap decides what counts");
    app.recompute("").await;

    let top = app.top("", 10).await;
    let ranked: Vec<i64> = top.products.iter().map(|p| p.product_id).collect();
    assert_eq!(ranked, [2, 1], "four shoppers beat one client's ten views");
    let one = explain(&mut app, 1).await;
    let views = signal(&one, "views");
    assert_eq!((views.value, views.per_actor, views.events, views.over_cap), (1.0, 1, 10, 9));
    assert_eq!(one.views, 1);
    assert!((views.points - 0.1).abs() < 1e-12, "one view's points: {}", views.points);
    let two = explain(&mut app, 2).await;
    let views = signal(&two, "views");
    assert_eq!((views.value, views.events, views.over_cap), (4.0, 4, 0));
    let parts: f64 = two.signals.iter().map(|s| s.points).sum::<f64>() + two.carry_points;
    assert!((parts - two.main_score).abs() < 1e-9, "the parts sum to the main score");
    // An uncapped signal has no cap figures.
    assert_eq!((signal(&two, "likes").per_actor, signal(&two, "likes").events), (0, 0));

    let metrics = app.scrape_metrics().await;
    assert_eq!(metric_value(&metrics, "ranking_events_capped_total{signal=\"views\"}"), 9.0);
    app.stop().await;
}

#[tokio::test]
async fn an_actor_required_by_the_profile_is_refused_when_missing_and_nothing_is_written() {
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let mut app = TestApp::spawn(&[&profile.flag()]).await;
    let at = Utc::now() - Age::minutes(5);
    let batch = vec![view_by("v", 1, "a", at), cart_add("c", 1, "", at)];
    let refused = app.client.record_events(v1::RecordEventsRequest { events: batch }).await.expect_err("refused");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(refused.message(), "events[1].actor_id: is required for cart_adds by the scoring profile");
    let single = app.client.record_event(v1::RecordEventRequest { event: Some(cart_add("c", 1, "", at)) }).await;
    assert_eq!(single.expect_err("refused").code(), Code::InvalidArgument);
    assert_eq!(count_events(&app.db.as_ref().expect("db").url).await, 0, "nothing written");
    app.stop().await;
}

/// What the day's rows say of product `product_id`: `(views, cart_adds)`.
async fn counted(app: &TestApp, product_id: i64) -> (i64, i64) {
    let db = Database::connect(&app.db.as_ref().expect("db").url).await.expect("connect");
    let sql = format!(
        "SELECT d.views, COALESCE(d.signal_1, 0) FROM product_daily_metrics d WHERE d.product_id = {product_id}"
    );
    let row = db.query_one_raw(Statement::from_string(db.get_database_backend(), sql)).await.expect("row");
    let row = row.expect("a row of the day");
    (row.try_get_by_index(0).expect("views"), row.try_get_by_index(1).expect("cart adds"))
}

#[tokio::test]
async fn a_retraction_frees_its_actors_slot() {
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let mut app = TestApp::spawn(&[&profile.flag()]).await;
    let at = Utc::now() - Age::minutes(10);
    app.record(vec![view_by("v1", 1, "a", at), view_by("v2", 1, "a", at)]).await;
    assert_eq!(counted(&app, 1).await.0, 1);
    app.record(vec![retract("r1", 1, "v1", at)]).await;
    assert_eq!(counted(&app, 1).await.0, 1, "v2 still counts for a");
    app.record(vec![retract("r2", 1, "v2", at)]).await;
    assert_eq!(counted(&app, 1).await.0, 0, "a has no view left");
    app.record(vec![view_by("v3", 1, "a", at)]).await;
    assert_eq!(counted(&app, 1).await.0, 1, "the slot is a's again");

    // Cart adds: at most two per actor.
    let adds: Vec<v1::Event> = (0..5).map(|i| cart_add(&format!("c{i}"), 1, "a", at)).collect();
    app.record(adds).await;
    assert_eq!(counted(&app, 1).await.1, 2);
    app.record(vec![retract("rc0", 1, "c0", at), retract("rc1", 1, "c1", at), retract("rc2", 1, "c2", at)]).await;
    assert_eq!(counted(&app, 1).await.1, 2, "two of a's cart adds are left");
    app.record(vec![retract("rc3", 1, "c3", at)]).await;
    assert_eq!(counted(&app, 1).await.1, 1);
    let metrics = app.scrape_metrics().await;
    assert_eq!(metric_value(&metrics, "ranking_events_capped_total{signal=\"views\"}"), 1.0);
    assert_eq!(metric_value(&metrics, "ranking_events_capped_total{signal=\"cart_adds\"}"), 3.0);
    app.stop().await;
}

/// Hourly points come only from what the caps count: a bot's hundred views are one view.
#[tokio::test]
async fn the_hourly_ranking_counts_what_the_caps_let_through() {
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let mut app = TestApp::spawn(&[&profile.flag()]).await;
    // In the current hour, which the hourly read names: at most 30 s ago, never before the
    // hour began.
    let now = Utc::now();
    let at = now - Age::seconds(30).min(Age::seconds(i64::from(now.minute() * 60 + now.second())));
    let mut batch: Vec<v1::Event> = (0..100).map(|i| view_by(&format!("bot-{i}"), 1, "bot", at)).collect();
    batch.extend((0..2).map(|i| view_by(&format!("s-{i}"), 2, &format!("s-{i}"), at)));
    app.record(batch).await;
    let request = v1::GetTopNRequest { window: v1::Window::Hourly.into(), limit: 10, ..Default::default() };
    let hourly = app.client.get_top_n(request).await.expect("hourly").into_inner();
    let scores: Vec<(i64, f64)> = hourly.products.iter().map(|p| (p.product_id, p.score)).collect();
    assert_eq!(scores.len(), 2, "{scores:?}");
    assert_eq!(scores[0].0, 2);
    assert!((scores[0].1 - 0.2).abs() < 1e-9 && (scores[1].1 - 0.1).abs() < 1e-9, "{scores:?}");
    app.stop().await;
}

/// Eight writers sending the same actors' views at once, each event in a batch of its own:
/// however the transactions interleave, each actor counts once per product.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_count_each_actor_once() {
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let app = TestApp::spawn(&[&profile.flag()]).await;
    let at = Utc::now() - Age::minutes(5);
    let mut writers = Vec::new();
    for w in 0..8 {
        let mut client = app.client.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..30 {
                // Five actors over three products, every writer sending every pair.
                let (product, actor) = (1 + (i + w) % 3, format!("actor-{}", (i * 7 + w) % 5));
                let e = view_by(&format!("w{w}-{i}"), product as i64, &actor, at);
                client.record_event(v1::RecordEventRequest { event: Some(e) }).await.expect("record");
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
    let mut seen: BTreeMap<i64, std::collections::BTreeSet<String>> = BTreeMap::new();
    for w in 0..8 {
        for i in 0..30 {
            seen.entry(1 + (i + w) % 3).or_default().insert(format!("actor-{}", (i * 7 + w) % 5));
        }
    }
    for (product, actors) in seen {
        assert_eq!(counted(&app, product).await.0, actors.len() as i64, "product {product}");
    }
    app.stop().await;
}

/// Live passes see capped events like any change: a bot's views leave its product behind
/// one with more shoppers, and a new shopper's view moves it ahead, without a recompute.
#[tokio::test]
async fn live_passes_rank_what_the_caps_count() {
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let mut app = TestApp::spawn(&[&profile.flag(), "--live-interval=100ms"]).await;
    let at = Utc::now() - Age::minutes(1);
    let mut batch: Vec<v1::Event> = (0..50).map(|i| view_by(&format!("bot-{i}"), 1, "bot", at)).collect();
    batch.extend((0..2).map(|i| view_by(&format!("s-{i}"), 2, &format!("shopper-{i}"), at)));
    app.record(batch).await;
    let board = |app: &TestApp| {
        let mut client = app.client.clone();
        async move {
            let request = v1::GetTopNRequest { limit: 2, ..Default::default() };
            let top = client.get_top_n(request).await.ok().map(|t| t.into_inner().products).unwrap_or_default();
            top.iter().map(|p| p.product_id).collect::<Vec<_>>()
        }
    };
    eventually("two shoppers lead one bot", || async { board(&app).await == [2, 1] }).await;
    let more = (2..5).map(|i| view_by(&format!("p1-{i}"), 1, &format!("shopper-{i}"), at)).collect();
    app.record(more).await;
    eventually("four shoppers lead two", || async { board(&app).await == [1, 2] }).await;
    app.stop().await;
}
