//! Retractions (`EVENT_TYPE_RETRACT`): an earlier event taken back exactly once, whichever of
//! the two arrives first, refused when what is stored does not allow it, live like any event,
//! and off the hourly ranking.

use chrono::{Duration as Age, Utc};
use ranking_client::v1;
use ranking_server::test_support::eventually;
use sea_orm::{ConnectionTrait, Database, Statement};

use crate::helpers::{Draw, ReferenceRow, TestApp, count_events, event, retract, views};

const RETRACTED: i32 = v1::RecordOutcome::Retracted as i32;
const ACCEPTED: i32 = v1::RecordOutcome::Accepted as i32;
const DUPLICATE: i32 = v1::RecordOutcome::Duplicate as i32;

/// Every metrics row: `(product, views, likes, orders, order_amount, last_event_at)` of each
/// day in product and day order, then the all-time rows.
async fn rows(url: &str) -> Vec<Vec<i64>> {
    let db = Database::connect(url).await.expect("connect");
    let mut all = Vec::new();
    for sql in [
        "SELECT product_id, views, likes, orders, order_amount, last_event_at FROM product_daily_metrics \
         ORDER BY product_id, metric_date",
        "SELECT product_id, views, likes, orders, order_amount, product_id * 0 FROM product_metrics ORDER BY product_id",
    ] {
        let found = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.expect("rows");
        for r in found {
            all.push((0..6).map(|i| r.try_get_by_index::<i64>(i).expect("column")).collect());
        }
    }
    all
}

/// The daily ranking's `(product, score)` after a recompute.
async fn ranking(app: &mut TestApp) -> Vec<(i64, f64)> {
    app.recompute("").await;
    app.top("", 100).await.products.iter().map(|p| (p.product_id, p.score)).collect()
}

#[tokio::test]
async fn either_arrival_order_gives_the_same_rows_and_ranking() {
    let at = Utc::now() - Age::minutes(30);
    let mut originals = views("v", 1, 5, at);
    originals.push(event("o1", 1, v1::EventType::Order, 10_000, at));
    originals.push(event("o2", 2, v1::EventType::Order, 500, at));
    originals.push(event("l2", 2, v1::EventType::Like, 0, at));
    originals.push(event("v3", 3, v1::EventType::View, 0, at));
    let later = at + Age::minutes(5);
    let retractions =
        vec![retract("r1", 1, "o1", later), retract("r2", 2, "l2", later), retract("r3", 3, "never-sent", later)];

    let mut first = TestApp::spawn(&[]).await;
    let recorded = first.record(originals.clone()).await;
    assert!(recorded.outcomes.iter().all(|o| *o == ACCEPTED));
    let taken = first.record(retractions.clone()).await;
    assert_eq!((taken.accepted, taken.duplicates, taken.retracted), (3, 0, 0));

    let mut late = TestApp::spawn(&[]).await;
    let taken = late.record(retractions.clone()).await;
    assert_eq!(taken.accepted, 3, "kept, waiting for their originals");
    let recorded = late.record(originals.clone()).await;
    let retracted: Vec<&str> = originals
        .iter()
        .zip(&recorded.outcomes)
        .filter(|(_, o)| **o == RETRACTED)
        .map(|(e, _)| e.event_id.as_str())
        .collect();
    assert_eq!(retracted, ["o1", "l2"]);
    assert_eq!(recorded.retracted, 2);

    let url = |app: &TestApp| app.db.as_ref().expect("db").url.clone();
    let (first_rows, late_rows) = (rows(&url(&first)).await, rows(&url(&late)).await);
    assert_eq!(first_rows, late_rows, "the same rows in either order");
    let at_us = at.timestamp_micros();
    let daily: Vec<Vec<i64>> = first_rows.iter().take(3).cloned().collect();
    // Retracted events still count as the day's latest event; their counts are gone.
    assert_eq!(daily, vec![vec![1, 5, 0, 0, 0, at_us], vec![2, 0, 0, 1, 500, at_us], vec![3, 1, 0, 0, 0, at_us]]);
    assert_eq!(ranking(&mut first).await, ranking(&mut late).await);
    for app in [&mut first, &mut late] {
        let explain = |product_id| v1::ExplainRankRequest { product_id, ..Default::default() };
        let one = app.client.explain_rank(explain(1)).await.expect("explain").into_inner();
        assert_eq!((one.views, one.orders, one.order_amount), (5, 0, 0));
        assert_eq!((one.retracted_orders, one.retracted_order_amount, one.retracted_likes), (1, 10_000, 0));
        let two = app.client.explain_rank(explain(2)).await.expect("explain").into_inner();
        assert_eq!((two.likes, two.orders, two.retracted_likes, two.retracted_orders), (0, 1, 1, 0));
    }

    // Redelivered, or sent again under another id: nothing moves.
    let again = first.record(vec![retractions[0].clone(), retract("r1-again", 1, "o1", later)]).await;
    assert_eq!(again.outcomes, [DUPLICATE, DUPLICATE]);
    assert_eq!(rows(&url(&first)).await, late_rows);
    assert_eq!(count_events(&url(&first)).await, 12, "9 originals and 3 retractions, nothing else");
    first.stop().await;
    late.stop().await;
}

#[tokio::test]
async fn retractions_that_what_is_stored_refuses_name_the_field_and_write_nothing() {
    let mut app = TestApp::spawn(&[]).await;
    let at = Utc::now() - Age::minutes(30);
    app.record(vec![event("o", 1, v1::EventType::Order, 900, at), event("u", 1, v1::EventType::Unlike, 0, at)]).await;
    let url = app.db.as_ref().expect("db").url.clone();
    let before = (rows(&url).await, count_events(&url).await);

    let batch =
        |retraction| v1::RecordEventsRequest { events: vec![event("x", 9, v1::EventType::View, 0, at), retraction] };
    for (retraction, field) in [
        (retract("r", 2, "o", at), "events[1].product_id: is 2, but \"o\" is an event of product 1"),
        (retract("r", 1, "u", at), "events[1].retracts: \"u\" is UNLIKE, which cannot be retracted"),
    ] {
        let refused = app.client.record_events(batch(retraction)).await.expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert_eq!(refused.message(), field);
    }
    let single = v1::RecordEventRequest { event: Some(retract("r", 2, "o", at)) };
    let refused = app.client.record_event(single).await.expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(refused.message().starts_with("event.product_id: is 2"), "{}", refused.message());
    assert_eq!((rows(&url).await, count_events(&url).await), before, "nothing written");

    let malformed = v1::RecordEventsRequest { events: vec![retract("r", 1, "", at)] };
    let refused = app.client.record_events(malformed).await.expect_err("refused");
    assert!(refused.message().starts_with("events[0].retracts: is required"), "{}", refused.message());
    app.stop().await;
}

#[tokio::test]
async fn the_hourly_ranking_loses_what_a_retraction_takes_back() {
    let mut app = TestApp::spawn(&[]).await;
    let at = Utc::now();
    app.record(vec![event("o", 1, v1::EventType::Order, 1_000, at), event("v", 2, v1::EventType::View, 0, at)]).await;
    let hourly = |app: &mut TestApp| {
        let mut client = app.client.clone();
        async move {
            let request = v1::GetTopNRequest { window: v1::Window::Hourly.into(), limit: 10, ..Default::default() };
            let top = client.get_top_n(request).await.expect("hourly").into_inner();
            top.products.iter().map(|p| (p.product_id, p.score)).collect::<Vec<_>>()
        }
    };
    let before = hourly(&mut app).await;
    assert_eq!(before.first().map(|e| e.0), Some(1), "{before:?}");
    app.record(vec![retract("r", 1, "o", at)]).await;
    let after = hourly(&mut app).await;
    let score_of = |entries: &[(i64, f64)], product| entries.iter().find(|e| e.0 == product).map(|e| e.1);
    assert_eq!(after.first().map(|e| e.0), Some(2), "{after:?}");
    assert!(score_of(&after, 1).unwrap_or(0.0) < score_of(&before, 1).expect("ranked"), "{before:?} → {after:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_live_pass_takes_a_retracted_order_off_the_board() {
    let mut app = TestApp::spawn(&["--live-interval=100ms"]).await;
    let at = Utc::now() - Age::minutes(1);
    let mut events = views("v", 2, 20, at);
    events.push(event("o", 1, v1::EventType::Order, 100_000, at));
    app.record(events).await;
    let leader = |app: &TestApp| {
        let mut client = app.client.clone();
        async move {
            let request = v1::GetTopNRequest { limit: 1, ..Default::default() };
            client.get_top_n(request).await.ok().and_then(|t| t.into_inner().products.first().map(|p| p.product_id))
        }
    };
    eventually("the order leads the live board", || async { leader(&app).await == Some(1) }).await;
    app.record(vec![retract("r", 1, "o", at + Age::seconds(30))]).await;
    eventually("the views lead once the order is taken back", || async { leader(&app).await == Some(2) }).await;
    app.stop().await;
}

#[tokio::test]
async fn an_original_older_than_the_accept_days_cannot_be_retracted() {
    use ranking_server::adapters::sql::{SqlMetricsStore, SqlOptions};
    use ranking_server::domain::profile::ScoringProfile;
    use ranking_server::domain::vocabulary::{Event, EventKind};
    use ranking_server::ports::{DatedEvent, EventLedger, RecordRules, StoreError};

    let db = crate::helpers::TestDb::create().await;
    let store = SqlMetricsStore::connect(&SqlOptions::new(db.url.clone())).await.expect("connect");
    let profile = ScoringProfile::built_in();
    let at = Utc::now() - Age::hours(2);
    let dated = |id: &str, kind, retracts: &str| DatedEvent {
        event: Event {
            event_id: id.into(),
            product_id: 7,
            kind,
            signal: String::new(),
            retracts: retracts.into(),
            actor_id: String::new(),
            amount: 0,
            occurred_at: at,
        },
        date: at.date_naive(),
    };
    store.record(&[dated("v", EventKind::View, "")], crate::helpers::rules(&profile)).await.expect("recorded");
    // The accept window as ingest gives it, here an hour: the view is two hours old.
    let strict = RecordRules { retractable_since: Utc::now() - Age::hours(1), ..crate::helpers::rules(&profile) };
    let refused = store.record(&[dated("r", EventKind::Retract, "v")], strict).await.expect_err("too old");
    assert!(matches!(refused, StoreError::Refused { index: 0, field: "retracts", .. }), "{refused}");
    assert_eq!(count_events(&db.url).await, 1, "nothing written");
    db.drop_db().await;
}

/// A product's week as the reference sees it: views, likes, orders, order amount, latest
/// event (Unix microseconds).
type Week = (f64, f64, f64, i64, i64);

/// Three days of views, likes and orders of 30 products, with a tenth of the orders and some
/// likes retracted — a third of the retractions sent before their originals, some sent twice,
/// some naming events never sent — recorded by two servers in two arrival orders. Both end
/// with the same rows and the same daily, weekly and segment rankings, and the weekly one is
/// what an independent computation from the events alone gives.
#[tokio::test]
async fn a_three_day_workload_with_retractions_ranks_as_its_events_say_in_either_order() {
    use std::collections::BTreeMap;
    let now = Utc::now() - Age::minutes(2);
    let at = |days_ago: u64| if days_ago == 0 { now } else { ranking_server::test_support::noon(days_ago) };
    let mut draw = Draw(0x9e37_79b9_7f4a_7c15);
    let (mut originals, mut retractions, mut early) = (Vec::new(), Vec::new(), Vec::new());
    // (views, likes, order count, order amount) per product over the week, retractions out.
    let mut week: BTreeMap<i64, Week> = BTreeMap::new();
    for day in 0..3u64 {
        for product in 1..=30i64 {
            let id = |what: &str, n: u64| format!("{what}-{product}-{day}-{n}");
            let entry = week.entry(product).or_insert((0.0, 0.0, 0.0, 0, 0));
            let mut counted = false;
            for n in 0..draw.next(4) {
                originals.push(event(&id("v", n), product, v1::EventType::View, 0, at(day)));
                entry.0 += 1.0;
                counted = true;
            }
            if draw.next(3) == 0 {
                originals.push(event(&id("l", 0), product, v1::EventType::Like, 0, at(day)));
                if draw.next(4) == 0 {
                    retractions.push(retract(&id("rl", 0), product, &id("l", 0), now));
                } else {
                    entry.1 += 1.0;
                }
                counted = true;
            }
            for n in 0..draw.next(3) {
                let amount = 1_000 * (1 + draw.next(50) as i64);
                originals.push(event(&id("o", n), product, v1::EventType::Order, amount, at(day)));
                counted = true;
                if draw.next(10) == 0 {
                    let back = retract(&id("ro", n), product, &id("o", n), now);
                    if draw.next(3) == 0 {
                        early.push(back.clone());
                    }
                    if draw.next(4) == 0 {
                        retractions.push(retract(&id("ro2", n), product, &id("o", n), now));
                    }
                    retractions.push(back);
                } else {
                    entry.2 += 1.0;
                    entry.3 += amount;
                }
            }
            if counted {
                entry.4 = entry.4.max(at(day).timestamp_micros());
            }
        }
    }
    retractions.push(retract("never", 3, "never-sent", now));
    let segments = v1::UpdateCatalogRequest {
        products: (1..=30)
            .map(|p| v1::CatalogEntry {
                product_id: p,
                segments: vec![if p % 2 == 0 { "brand:even" } else { "brand:odd" }.into()],
                ..Default::default()
            })
            .collect(),
    };
    let boards = |app: &mut TestApp| {
        let mut client = app.client.clone();
        async move {
            let mut all = Vec::new();
            for (window, segment) in
                [(v1::Window::Daily, ""), (v1::Window::Weekly, ""), (v1::Window::Daily, "brand:even")]
            {
                let request = v1::GetTopNRequest {
                    window: window.into(),
                    segment: segment.into(),
                    limit: 100,
                    ..Default::default()
                };
                let top = client.get_top_n(request).await.expect("top").into_inner();
                all.push(top.products.iter().map(|p| (p.product_id, p.score)).collect::<Vec<_>>());
            }
            all
        }
    };
    let mut served = Vec::new();
    let mut stored = Vec::new();
    for order in 0..2 {
        let mut app = TestApp::spawn(&[]).await;
        app.client.update_catalog(segments.clone()).await.expect("catalog");
        if order == 0 {
            app.record(originals.clone()).await;
            app.record(retractions.clone()).await;
            app.record(early.clone()).await;
        } else {
            app.record(early.clone()).await;
            for chunk in originals.chunks(97) {
                app.record(chunk.to_vec()).await;
            }
            app.record(retractions.iter().rev().cloned().collect()).await;
        }
        for days_ago in (0..3).rev() {
            app.recompute(&(Utc::now().date_naive() - chrono::Days::new(days_ago)).to_string()).await;
        }
        stored.push(rows(&app.db.as_ref().expect("db").url).await);
        served.push(boards(&mut app).await);
        app.stop().await;
    }
    assert_eq!(stored[0], stored[1], "the same rows in either order");
    assert_eq!(served[0], served[1], "the same rankings in either order");

    // The weekly ranking, computed here from the events alone.
    let ranked: Vec<ReferenceRow> = week
        .into_iter()
        .filter(|(_, w)| w.0 + w.1 + w.2 > 0.0 || w.4 > 0)
        .map(|(product_id, w)| ReferenceRow {
            product_id,
            views: w.0,
            likes: w.1,
            order_amount: w.3,
            last_event_us: w.4,
        })
        .collect();
    let expected = crate::helpers::built_in_reference(&ranked);
    assert_eq!(served[0][1], expected, "the weekly ranking is the events' own");
}

/// Originals and their retractions sent at once by eight writers, each event in a batch of
/// its own writer, in an order of the writer's own: however the transactions interleave
/// (an original and its retraction committing at the same moment included), every retracted
/// order counts for nothing and every other order once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn originals_and_retractions_committing_at_once_settle_exactly() {
    let app = TestApp::spawn(&[]).await;
    let at = Utc::now() - Age::minutes(5);
    let mut draw = Draw(0x2545_f491_4f6c_dd1d);
    // 600 orders of 20 products, every other one retracted.
    let mut all = Vec::new();
    let mut kept = std::collections::BTreeMap::<i64, (i64, i64)>::new();
    for n in 0..600i64 {
        let product = 1 + n % 20;
        let amount = 100 * (1 + n % 7);
        all.push(event(&format!("o{n}"), product, v1::EventType::Order, amount, at));
        // Every product has its all-time row, all of whose orders were taken back or not.
        let k = kept.entry(product).or_default();
        if n % 2 == 0 {
            all.push(retract(&format!("r{n}"), product, &format!("o{n}"), at));
        } else {
            *k = (k.0 + 1, k.1 + amount);
        }
    }
    // Dealt to eight writers at random, each sending batches of 1-8 in its own order.
    let mut hands: Vec<Vec<v1::Event>> = vec![Vec::new(); 8];
    for e in all {
        hands[draw.next(8) as usize].push(e);
    }
    let mut writers = Vec::new();
    for (w, mut hand) in hands.into_iter().enumerate() {
        let mut client = app.client.clone();
        let mut draw = Draw(0x1234_5678 + w as u64);
        writers.push(tokio::spawn(async move {
            while !hand.is_empty() {
                let n = (1 + draw.next(8) as usize).min(hand.len());
                let batch: Vec<v1::Event> = hand.drain(..n).collect();
                client.record_events(v1::RecordEventsRequest { events: batch }).await.expect("recorded");
            }
        }));
    }
    for w in writers {
        w.await.expect("writer");
    }
    let url = app.db.as_ref().expect("db").url.clone();
    let db = Database::connect(&url).await.expect("connect");
    let sql = "SELECT product_id, orders, order_amount FROM product_metrics ORDER BY product_id";
    let found = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.expect("rows");
    let stored: std::collections::BTreeMap<i64, (i64, i64)> = found
        .iter()
        .map(|r| {
            let g = |i| r.try_get_by_index::<i64>(i).expect("column");
            (g(0), (g(1), g(2)))
        })
        .collect();
    assert_eq!(stored, kept, "each retracted order counts for nothing, each other once");
    app.stop().await;
}
