//! Right about shoppers, end to end: three days of events from a skewed population of
//! shoppers (one bot sending a twentieth of the views) under a "distinct viewers" profile,
//! with a tenth of the orders and some views and likes retracted — a third of the order
//! retractions sent before their originals, some redelivered, some sent twice under other
//! ids, one naming an event never sent, and unretractable ones refused — recorded in two
//! arrival orders. Both end with the same SQL rows (per-actor rows included) and the same
//! daily, weekly and segment rankings, each equal to an independent computation from the
//! events alone; ExplainRank's parts sum to the served score and its cap figures are the
//! events'.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration as Age, Utc};
use ranking_client::tonic::Code;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database, Statement};

use crate::caps::{DISTINCT_VIEWERS, view_by};
use crate::helpers::{Draw, ProfileFile, ReferenceRow, TestApp, built_in_reference, event, retract};

/// One product-day as the reference sees it.
#[derive(Debug, Clone, Default)]
struct Day {
    /// Non-retracted views per actor (`None`: without one).
    views: BTreeMap<Option<String>, i64>,
    likes: i64,
    order_amount: i64,
    /// Latest original of the day, retracted or not (Unix microseconds).
    last_us: i64,
}

impl Day {
    /// Distinct viewers: each actor once, each view without an actor.
    fn viewers(&self) -> i64 {
        self.views.iter().map(|(actor, n)| if actor.is_some() { (*n).min(1) } else { *n }).sum()
    }

    fn over_cap(&self) -> i64 {
        self.views.iter().filter(|(a, _)| a.is_some()).map(|(_, n)| (n - 1).max(0)).sum()
    }
}

/// The workload: originals, retractions sent after them, retractions sent first, and the
/// reference's product-days (`(product, days ago)`).
struct Workload {
    originals: Vec<v1::Event>,
    retractions: Vec<v1::Event>,
    early: Vec<v1::Event>,
    days: BTreeMap<(i64, u64), Day>,
}

fn workload(now: DateTime<Utc>) -> Workload {
    let at = |days_ago: u64| if days_ago == 0 { now } else { ranking_server::test_support::noon(days_ago) };
    let mut draw = Draw(0x5851_f42d_4c95_7f2d);
    let mut w = Workload { originals: Vec::new(), retractions: Vec::new(), early: Vec::new(), days: BTreeMap::new() };
    for days_ago in 0..3u64 {
        for product in 1..=30i64 {
            let id = |what: &str, n: u64| format!("{what}-{product}-{days_ago}-{n}");
            let mut day = Day::default();
            let mut any = false;
            for n in 0..draw.next(12) {
                // One view in twenty is the bot's; one in ten has no actor; the others come
                // from 40 shoppers, the first ones far more often.
                let actor = match draw.next(20) {
                    0 => Some("bot".to_string()),
                    1 | 2 => None,
                    _ => {
                        let span = 1 + draw.next(40);
                        Some(format!("shopper-{}", draw.next(span)))
                    }
                };
                w.originals.push(view_by(&id("v", n), product, actor.as_deref().unwrap_or(""), at(days_ago)));
                any = true;
                if draw.next(20) == 0 {
                    w.retractions.push(retract(&id("rv", n), product, &id("v", n), now));
                } else {
                    *day.views.entry(actor).or_default() += 1;
                }
            }
            if draw.next(3) == 0 {
                w.originals.push(event(&id("l", 0), product, v1::EventType::Like, 0, at(days_ago)));
                any = true;
                if draw.next(4) == 0 {
                    w.retractions.push(retract(&id("rl", 0), product, &id("l", 0), now));
                } else {
                    day.likes += 1;
                }
            }
            for n in 0..draw.next(3) {
                let amount = 1_000 * (1 + draw.next(50) as i64);
                w.originals.push(event(&id("o", n), product, v1::EventType::Order, amount, at(days_ago)));
                any = true;
                if draw.next(10) == 0 {
                    let back = retract(&id("ro", n), product, &id("o", n), now);
                    if draw.next(3) == 0 {
                        w.early.push(back.clone());
                    }
                    if draw.next(3) == 0 {
                        // Redelivered: the same retraction again.
                        w.retractions.push(back.clone());
                    }
                    if draw.next(4) == 0 {
                        w.retractions.push(retract(&id("ro2", n), product, &id("o", n), now));
                    }
                    w.retractions.push(back);
                } else {
                    day.order_amount += amount;
                }
            }
            if any {
                day.last_us = at(days_ago).timestamp_micros();
                w.days.insert((product, days_ago), day);
            }
        }
    }
    w.retractions.push(retract("never", 3, "never-sent", now));
    w
}

/// The scores the reference gives `rows` (product → its day or its week), best first.
fn reference(rows: &BTreeMap<i64, Day>) -> Vec<(i64, f64)> {
    let rows: Vec<ReferenceRow> = rows
        .iter()
        .map(|(product_id, d)| ReferenceRow {
            product_id: *product_id,
            views: d.viewers() as f64,
            likes: d.likes as f64,
            order_amount: d.order_amount,
            last_event_us: d.last_us,
        })
        .collect();
    built_in_reference(&rows)
}

/// Every metrics row and every actor row, in key order.
async fn rows(url: &str) -> Vec<Vec<String>> {
    let db = Database::connect(url).await.expect("connect");
    let mut all = Vec::new();
    for (sql, n) in [
        (
            "SELECT product_id, metric_date, views, likes, orders, order_amount, last_event_at, retracted_views \
             FROM product_daily_metrics ORDER BY product_id, metric_date",
            8,
        ),
        ("SELECT product_id, views, likes, orders, order_amount FROM product_metrics ORDER BY product_id", 5),
        (
            "SELECT product_id, metric_date, signal_code, actor_id, events FROM actor_counts \
             ORDER BY product_id, metric_date, signal_code, actor_id",
            5,
        ),
    ] {
        let found = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.expect("rows");
        for r in found {
            all.push(
                (0..n)
                    .map(|i| {
                        r.try_get_by_index::<i64>(i)
                            .map(|v| v.to_string())
                            .or_else(|_| r.try_get_by_index::<i16>(i).map(|v| v.to_string()))
                            .or_else(|_| r.try_get_by_index::<chrono::NaiveDate>(i).map(|v| v.to_string()))
                            .or_else(|_| r.try_get_by_index::<String>(i))
                            .or_else(|_| r.try_get_by_index::<Vec<u8>>(i).map(|v| String::from_utf8_lossy(&v).into()))
                            .expect("column")
                    })
                    .collect(),
            );
        }
    }
    all
}

#[tokio::test]
async fn shoppers_and_retractions_rank_as_their_events_say_in_either_order() {
    let now = Utc::now() - Age::minutes(2);
    let w = workload(now);
    let catalog = v1::UpdateCatalogRequest {
        products: (1..=30)
            .map(|p| v1::CatalogEntry {
                product_id: p,
                segments: vec![if p % 2 == 0 { "brand:even" } else { "brand:odd" }.into()],
                ..Default::default()
            })
            .collect(),
    };
    let profile = ProfileFile::new(DISTINCT_VIEWERS);
    let mut served = Vec::new();
    let mut stored = Vec::new();
    for order in 0..2 {
        let mut app = TestApp::spawn(&[&profile.flag()]).await;
        app.client.update_catalog(catalog.clone()).await.expect("catalog");
        if order == 0 {
            for chunk in w.originals.chunks(500) {
                app.record(chunk.to_vec()).await;
            }
            app.record(w.retractions.clone()).await;
            app.record(w.early.clone()).await;
        } else {
            app.record(w.early.clone()).await;
            for chunk in w.originals.iter().rev().cloned().collect::<Vec<_>>().chunks(97) {
                app.record(chunk.to_vec()).await;
            }
            app.record(w.retractions.iter().rev().cloned().collect()).await;
        }
        // Unretractable: a retraction of a retraction, refused with nothing written.
        let refused = app
            .client
            .record_events(v1::RecordEventsRequest { events: vec![retract("rr", 3, "never", now)] })
            .await
            .expect_err("a retraction cannot be retracted");
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(refused.message().starts_with("events[0].retracts:"), "{}", refused.message());

        for days_ago in (0..3).rev() {
            app.recompute(&(Utc::now().date_naive() - chrono::Days::new(days_ago)).to_string()).await;
        }
        let mut boards = Vec::new();
        for (window, segment) in [(v1::Window::Daily, ""), (v1::Window::Weekly, ""), (v1::Window::Daily, "brand:even")]
        {
            let request =
                v1::GetTopNRequest { window: window.into(), segment: segment.into(), limit: 100, ..Default::default() };
            let top = app.client.get_top_n(request).await.expect("top").into_inner();
            boards.push(top.products.iter().map(|p| (p.product_id, p.score)).collect::<Vec<_>>());
        }
        // ExplainRank: the parts sum to the served score, and the cap figures are the events'.
        for product in [1, 2, 3] {
            let Some(day) = w.days.get(&(product, 0)) else { continue };
            let request = v1::ExplainRankRequest { product_id: product, ..Default::default() };
            let e = app.client.explain_rank(request).await.expect("explain").into_inner();
            let parts: f64 = e.signals.iter().map(|s| s.points).sum::<f64>() + e.carry_points;
            assert!((parts - e.main_score).abs() < 1e-9, "product {product}: {parts} vs {}", e.main_score);
            let views = e.signals.iter().find(|s| s.signal == "views").expect("views");
            assert_eq!(views.value as i64, day.viewers(), "product {product}");
            assert_eq!(views.over_cap as i64, day.over_cap(), "product {product}");
            assert_eq!(
                e.product.expect("entry").score,
                boards[0].iter().find(|(p, _)| *p == product).expect("ranked").1
            );
        }
        stored.push(rows(&app.db.as_ref().expect("db").url).await);
        served.push(boards);
        app.stop().await;
    }
    assert_eq!(stored[0], stored[1], "the same rows in either order");
    assert_eq!(served[0], served[1], "the same rankings in either order");
    assert!(stored[0].iter().any(|r| r.len() == 5 && r[3] == "bot"), "the bot has actor rows");

    let today: BTreeMap<i64, Day> =
        w.days.iter().filter(|((_, d), _)| *d == 0).map(|((p, _), day)| (*p, day.clone())).collect();
    let mut week: BTreeMap<i64, Day> = BTreeMap::new();
    for ((product, _), day) in &w.days {
        let sum = week.entry(*product).or_default();
        // A week's views are the days' distinct viewers summed: fold each day in as its own
        // unattributed views.
        *sum.views.entry(None).or_default() += day.viewers();
        sum.likes += day.likes;
        sum.order_amount += day.order_amount;
        sum.last_us = sum.last_us.max(day.last_us);
    }
    let even: BTreeSet<i64> = (1..=30).filter(|p| p % 2 == 0).collect();
    let daily = reference(&today);
    assert_eq!(served[0][0], daily, "the daily ranking is the events' own");
    assert_eq!(served[0][1], reference(&week), "the weekly ranking is the events' own");
    let segment: Vec<(i64, f64)> = daily.into_iter().filter(|(p, _)| even.contains(p)).collect();
    assert_eq!(served[0][2], segment, "the segment's ranking is the events' own");
}
