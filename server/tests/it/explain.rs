//! ExplainRank through the client, on every engine: its numbers are checked
//! against an independent computation of §4 written out here, not against the service's
//! score engine.

use chrono::{Days, Duration, NaiveTime, Utc};
use ranking_client::tonic::Code;
use ranking_client::{RankingClient, v1};

use crate::helpers::{TestApp, event, views};

/// One product's inputs on the day explained.
#[derive(Clone, Copy)]
struct Inputs {
    product_id: i64,
    views: f64,
    likes: f64,
    order_amount: f64,
    /// floor(main of the day before).
    carried: f64,
    /// Seconds from the latest event (or the start of the day) to the end of the day.
    elapsed: f64,
}

/// mean, population std, z and norm of `x` over `values`, as §4 defines them.
fn axis(values: &[f64], x: f64) -> (f64, f64, f64, u32) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let z = if std == 0.0 || values.len() == 1 { 0.0 } else { (x - mean) / std };
    (mean, std, z, (999.0 / (1.0 + (-z).exp())).round() as u32)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn check_axis(got: Option<v1::AxisExplanation>, values: &[f64], x: f64, what: &str) -> u32 {
    let got = got.unwrap_or_else(|| panic!("{what} axis present"));
    let (mean, std, z, norm) = axis(values, x);
    assert_eq!(got.raw, x, "{what} raw");
    assert!(close(got.mean, mean) && close(got.std, std) && close(got.z, z), "{what}: {got:?} vs {mean} {std} {z}");
    assert_eq!(got.norm, norm, "{what} norm");
    norm
}

#[tokio::test]
async fn explanations_reproduce_the_served_scores() {
    let mut app = TestApp::spawn(&[]).await;
    let today = Utc::now().date_naive();
    let yesterday_noon = (today - Days::new(1)).and_time(NaiveTime::from_hms_opt(12, 0, 0).expect("noon")).and_utc();
    // Whole microseconds, as the store keeps them: the elapsed time below is then the
    // server's exactly, whatever the time of day (a relative tolerance is tight near midnight).
    let at = chrono::SubsecRound::trunc_subsecs(Utc::now() - Duration::seconds(30), 6);
    let day_end = (today + Days::new(1)).and_time(NaiveTime::MIN).and_utc();
    let elapsed = (day_end - at).num_microseconds().expect("fits") as f64 / 1e6;

    // The day before: 201 reaches main 2.0 (carries 2), 202 main 3.0… (carries 3).
    app.record(views("y201", 201, 20, yesterday_noon)).await;
    app.record(views("y202", 202, 30, yesterday_noon)).await;
    // Today: 201 with views, likes, an order and its carry; 202 carry only; 203 and 204 plain.
    let mut events = views("t201", 201, 3, at);
    events.push(event("t201-like-0", 201, v1::EventType::Like, 0, at));
    events.push(event("t201-like-1", 201, v1::EventType::Like, 0, at));
    events.push(event("t201-order", 201, v1::EventType::Order, 10_000, at));
    events.extend(views("t203", 203, 12, at));
    events.push(event("t203-like", 203, v1::EventType::Like, 0, at));
    events.extend(views("t204", 204, 1, at));
    app.record(events).await;
    app.recompute("").await;

    let population = [
        Inputs { product_id: 201, views: 3.0, likes: 2.0, order_amount: 10_000.0, carried: 2.0, elapsed },
        Inputs { product_id: 202, views: 0.0, likes: 0.0, order_amount: 0.0, carried: 3.0, elapsed: 86_400.0 },
        Inputs { product_id: 203, views: 12.0, likes: 1.0, order_amount: 0.0, carried: 0.0, elapsed },
        Inputs { product_id: 204, views: 1.0, likes: 0.0, order_amount: 0.0, carried: 0.0, elapsed },
    ];
    let views_of: Vec<f64> = population.iter().map(|p| p.views).collect();
    let likes_of: Vec<f64> = population.iter().map(|p| p.likes).collect();
    let elapsed_of: Vec<f64> = population.iter().map(|p| p.elapsed).collect();

    let client = RankingClient::builder(format!("http://{}", app.addr)).connect().await.expect("client");
    for p in population {
        let e = client.explain_rank(p.product_id).await.expect("explained");
        let served = e.product.expect("entry");
        let b = served.breakdown.clone().expect("breakdown");
        assert_eq!(served.product_id, p.product_id);
        assert_eq!((e.views as f64, e.likes as f64, e.order_amount as f64), (p.views, p.likes, p.order_amount));
        assert_eq!(e.orders, u64::from(p.order_amount > 0.0));
        let main = p.views * 0.1 + p.likes * 0.2 + p.order_amount.ln_1p() * 0.6 + p.carried * 0.1;
        assert_eq!(e.main_score, main, "main of {}", p.product_id);
        assert_eq!(e.carry_points, p.carried * 0.1);
        assert_eq!(e.view_points + e.like_points + e.order_points + e.carry_points, e.main_score);
        assert_eq!(b.main_floor, main.floor() as i64);
        assert_eq!(check_axis(e.views_axis, &views_of, p.views, "views"), b.view_norm);
        assert_eq!(check_axis(e.likes_axis, &likes_of, p.likes, "likes"), b.like_norm);
        let recency = e.recency_axis.expect("recency");
        let (.., norm) = axis(&elapsed_of, p.elapsed);
        assert!(close(recency.raw, p.elapsed), "recency raw {} vs {}", recency.raw, p.elapsed);
        assert_eq!((recency.norm, b.recency_norm), (999 - norm, 999 - norm), "recency of {}", p.product_id);
        let encoded = (b.main_floor * 1_000_000_000
            + i64::from(b.view_norm) * 1_000_000
            + i64::from(b.like_norm) * 1_000
            + i64::from(b.recency_norm)) as f64
            / 1e9;
        assert_eq!(served.score, encoded);
        assert!(!e.stale);
        match e.above {
            None => assert_eq!((served.rank, e.points_to_overtake), (1, 0.0)),
            Some(above) => {
                assert_eq!(above.rank + 1, served.rank);
                let floor = above.breakdown.clone().expect("breakdown").main_floor as f64;
                assert_eq!(e.points_to_overtake, floor + 1.0 - main);
            }
        }
    }
    // 201 leads (main 6.4…), the carry-only 202 (0.3…) is last.
    let first = client.explain_rank(201).await.expect("201");
    assert_eq!(first.product.map(|p| p.rank), Some(1));

    // Events after the recompute: the explanation shows the current counts and says so.
    app.record(views("late204", 204, 5, at)).await;
    let late = client.explain_rank(204).await.expect("204");
    assert_eq!(late.views, 6);
    assert!(late.stale, "the served score no longer matches the counts");
    app.stop().await;
}

#[tokio::test]
async fn explain_validates_and_answers_not_found() {
    let mut app = TestApp::spawn(&[]).await;
    app.record(views("v", 7, 2, Utc::now() - Duration::seconds(5))).await;
    app.recompute("").await;
    let explain =
        |product_id, date: &str| v1::ExplainRankRequest { product_id, date: date.into(), ..Default::default() };
    let e = app.client.explain_rank(explain(0, "")).await.expect_err("product 0");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("product_id:"), "{}", e.message());
    let e = app.client.explain_rank(explain(7, "2026-13-01")).await.expect_err("bad date");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("date:"), "{}", e.message());
    let e = app.client.explain_rank(explain(8, "")).await.expect_err("not ranked");
    assert_eq!(e.code(), Code::NotFound);
    let ok = app.client.explain_rank(explain(7, "")).await.expect("ranked").into_inner();
    assert_eq!((ok.views, ok.product.map(|p| p.rank)), (2, Some(1)));
    app.stop().await;
}

/// ExplainRank of `product_id` on `window` answers, from the version the board serves: from
/// its own statistics, with SQL's record of the day's runs (what the release before this one
/// explains from) emptied first.
async fn explains(app: &mut TestApp, product_id: i64, window: v1::Window, what: &str) -> v1::ExplainRankResponse {
    use sea_orm::ConnectionTrait;
    let url = app.db.as_ref().expect("database").url.clone();
    let db = sea_orm::Database::connect(&url).await.expect("connect");
    for table in ["ranking_runs", "profile_runs"] {
        db.execute_unprepared(&format!("DELETE FROM {table}")).await.expect("forget the runs");
    }
    db.close().await.expect("close");
    let request = v1::ExplainRankRequest { product_id, window: window as i32, ..Default::default() };
    let explained = app.client.explain_rank(request).await;
    let explained = explained.unwrap_or_else(|e| panic!("{what}: ExplainRank of {product_id} on {window:?}: {e}"));
    explained.into_inner()
}

/// The served top `limit` of `window`: (product ids, version).
async fn top(app: &mut TestApp, window: v1::Window, limit: u32) -> (Vec<i64>, u64) {
    let request = v1::GetTopNRequest { limit, window: window as i32, ..Default::default() };
    let top = app.client.get_top_n(request).await.expect("GetTopN").into_inner();
    (top.products.iter().map(|p| p.product_id).collect(), top.version)
}

/// Every version a publication serves explains at once, whatever made it: a recompute, a
/// control pass (a put and a delete), a live pass and a withdrawal, on the daily and the
/// trending board alike, and on every store (the control pass's versions once answered
/// UNAVAILABLE on Redis until the next recompute).
#[tokio::test]
async fn every_kind_of_publication_explains_at_once() {
    let mut app = TestApp::spawn(&["--live-interval=100ms"]).await;
    let at = Utc::now() - Duration::seconds(30);
    // 1,000 views over 100 products, product p with more views the higher p is.
    let mut events = Vec::new();
    for p in 1..=100i64 {
        let n = if p <= 10 { 19 } else { 9 };
        events.extend(views(&format!("p{p}"), p, n, at));
    }
    assert_eq!(events.len(), 1_000);
    app.record(events).await;
    app.recompute("").await;
    let (ranked, _) = top(&mut app, v1::Window::Daily, 100).await;
    let thirty_first = ranked[30];
    let boards = [v1::Window::Daily, v1::Window::Trending];
    for window in boards {
        explains(&mut app, thirty_first, window, "after a recompute").await;
    }

    // A pin of the 31st product at position 1 acts on every board: served by control passes.
    let pin = v1::Control {
        control_id: "pin-31st".into(),
        action: Some(v1::control::Action::Pin(v1::Pin { product_id: thirty_first, position: 1 })),
        ..Default::default()
    };
    let put = v1::PutControlRequest { control: Some(pin), expected_revision: 0 };
    let revision =
        app.client.put_control(put).await.expect("PutControl").into_inner().control.expect("control").revision;
    for window in boards {
        let mut versions = Vec::new();
        ranking_server::test_support::eventually("the pin served", async || {
            let (ids, version) = top(&mut app, window, 1).await;
            versions.push(version);
            ids == [thirty_first]
        })
        .await;
        let served = *versions.last().expect("read");
        let pinned = explains(&mut app, thirty_first, window, "after a control pass").await;
        // The version served then, or a later one (a live pass may publish meanwhile).
        assert!(pinned.version >= served, "{window:?}: {} before {served}", pinned.version);
        assert_eq!(pinned.product.map(|p| p.rank), Some(1), "{window:?}");
        explains(&mut app, ranked[0], window, "after a control pass").await;
    }

    // A live pass: one more view of the last product, which then passes every product of its
    // views on both boards. Every version read meanwhile ranks it.
    app.record(views("late", ranked[99], 1, Utc::now())).await;
    for window in boards {
        ranking_server::test_support::eventually("a live pass served the late view", async || {
            let request = v1::GetRankRequest { product_id: ranked[99], window: window as i32, ..Default::default() };
            let rank = app.client.get_rank(request).await.unwrap_or_else(|e| panic!("{window:?}: {e}")).into_inner();
            rank.product.is_some_and(|p| p.rank < 50)
        })
        .await;
        explains(&mut app, ranked[99], window, "after a live pass").await;
    }

    // A withdrawal: the first product hidden from every board.
    let hide = v1::CatalogEntry { product_id: ranked[0], hidden: true, ..Default::default() };
    app.client.update_catalog(v1::UpdateCatalogRequest { products: vec![hide] }).await.expect("UpdateCatalog");
    for window in boards {
        let (ids, _) = top(&mut app, window, 100).await;
        assert!(!ids.contains(&ranked[0]), "{window:?}: withdrawn at once");
        explains(&mut app, ranked[1], window, "after a withdrawal").await;
    }

    // The pin deleted: the boards served organically again, by another control pass.
    let delete = v1::DeleteControlRequest { control_id: "pin-31st".into(), expected_revision: revision };
    assert!(app.client.delete_control(delete).await.expect("DeleteControl").into_inner().deleted);
    for window in boards {
        ranking_server::test_support::eventually("the pin gone", async || {
            top(&mut app, window, 1).await.0 == [ranked[1]]
        })
        .await;
        let organic = explains(&mut app, thirty_first, window, "after a control delete").await;
        // One place up (the first product hidden), one down (the last one passed it with its view).
        assert_eq!(organic.product.map(|p| p.rank), Some(31), "{window:?}: back in its organic place");
    }
    app.stop().await;
}
