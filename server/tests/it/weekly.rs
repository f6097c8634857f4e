//! The rolling weekly window through the client, on every engine: checked
//! against an independent computation of the 7-day sums and §4's normalisation written out
//! here, over 8 days of events.

use chrono::{Days, Duration, NaiveTime, Utc};
use ranking_client::v1;

use ranking_server::test_support::noon;

use crate::helpers::{TestApp, event, views};

fn weekly(date: &str, limit: u32) -> v1::GetTopNRequest {
    v1::GetTopNRequest { window: v1::Window::Weekly.into(), date: date.into(), limit, ..Default::default() }
}

/// §4's norm, computed independently (see the helper).
fn norm(values: &[f64], x: f64) -> i64 {
    i64::from(crate::helpers::independent_norm(values, x))
}

#[tokio::test]
async fn the_weekly_ranking_sums_the_last_seven_days_exactly() {
    // Events 7 days old must be accepted to show that they do not count.
    let mut app = TestApp::spawn(&["--accept-days=9", "--retention-days=10"]).await;
    let now = Utc::now() - Duration::seconds(30);
    let at = |days_ago: u64| if days_ago == 0 { now } else { noon(days_ago) };
    let mut events = Vec::new();
    // 301: one view a day on D-7 … D, a like on D-3, a 5,000 order on D-5.
    for d in 0..=7u64 {
        events.extend(views(&format!("a{d}"), 301, 1, at(d)));
    }
    events.push(event("a-like", 301, v1::EventType::Like, 0, at(3)));
    events.push(event("a-order", 301, v1::EventType::Order, 5_000, at(5)));
    // 302: only D-6 (inside the week); 303: only D-7 (outside); 304: today.
    events.extend(views("b", 302, 4, at(6)));
    events.push(event("b-like-1", 302, v1::EventType::Like, 0, at(6)));
    events.push(event("b-like-2", 302, v1::EventType::Like, 0, at(6)));
    events.extend(views("c", 303, 10, at(7)));
    events.extend(views("d", 304, 2, at(0)));
    app.record(events).await;
    let recomputed = app.recompute("").await;
    assert_eq!(recomputed.products, 2, "the daily ranking has today's products only");

    let top = app.client.get_top_n(weekly("", 10)).await.expect("weekly").into_inner();
    assert!(top.version > 0, "weekly rankings are versioned");
    // (product, views, likes, order amount, latest event) over D-6 … D.
    let day_end = (Utc::now().date_naive() + Days::new(1)).and_time(NaiveTime::MIN).and_utc();
    let elapsed = |t: chrono::DateTime<Utc>| (day_end - t).num_microseconds().expect("fits") as f64 / 1e6;
    let week = [
        (301, 7.0, 1.0, 5_000.0, elapsed(now)),
        (302, 4.0, 2.0, 0.0, elapsed(at(6))),
        (304, 2.0, 0.0, 0.0, elapsed(now)),
    ];
    let views_of: Vec<f64> = week.iter().map(|w| w.1).collect();
    let likes_of: Vec<f64> = week.iter().map(|w| w.2).collect();
    let recency_of: Vec<f64> = week.iter().map(|w| w.4).collect();
    let mut expected: Vec<(i64, f64)> = week
        .iter()
        .map(|&(id, views, likes, amount, recency)| {
            let main = views * 0.1 + likes * 0.2 + f64::ln_1p(amount) * 0.6;
            let n = main.floor() as i64 * 1_000_000_000
                + norm(&views_of, views) * 1_000_000
                + norm(&likes_of, likes) * 1_000
                + (999 - norm(&recency_of, recency));
            (id, n as f64 / 1e9)
        })
        .collect();
    expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    let served: Vec<(i64, f64)> = top.products.iter().map(|p| (p.product_id, p.score)).collect();
    assert_eq!(served, expected, "303's events are 7 days old and do not count");
    assert_eq!(top.total, 3);
    assert!(top.products.iter().all(|p| p.breakdown.is_some() && p.previous_rank == 0));

    // A rank and a page token in the weekly window.
    let rank = v1::GetRankRequest { product_id: 302, window: v1::Window::Weekly.into(), ..Default::default() };
    let rank = app.client.get_rank(rank).await.expect("weekly rank").into_inner();
    assert_eq!(rank.version, top.version);
    let first = app.client.get_top_n(weekly("", 1)).await.expect("page 1").into_inner();
    let next = v1::GetTopNRequest { page_token: first.next_page_token.clone(), ..weekly("", 0) };
    let second = app.client.get_top_n(next).await.expect("page 2").into_inner();
    assert_eq!((second.products[0].rank, second.version), (2, first.version));
    let daily_token = v1::GetTopNRequest {
        page_token: first.next_page_token,
        window: v1::Window::Daily.into(),
        ..Default::default()
    };
    let e = app.client.get_top_n(daily_token).await.expect_err("a weekly token is not a daily one");
    assert_eq!(e.code(), ranking_client::tonic::Code::InvalidArgument);
    app.stop().await;
}

#[tokio::test]
async fn the_previous_weekly_rank_is_yesterdays_week() {
    let mut app = TestApp::spawn(&[]).await;
    // Yesterday 401 led the week; today 402 overtakes it.
    app.record(views("y401", 401, 9, noon(1))).await;
    app.record(views("y402", 402, 3, noon(1))).await;
    app.recompute(&(Utc::now().date_naive() - Days::new(1)).to_string()).await;
    app.record(views("t402", 402, 20, Utc::now() - Duration::seconds(5))).await;
    app.recompute("").await;
    let top = app.client.get_top_n(weekly("", 10)).await.expect("weekly").into_inner();
    let seen: Vec<_> = top.products.iter().map(|p| (p.product_id, p.rank, p.previous_rank, p.rank_change)).collect();
    assert_eq!(seen, vec![(402, 1, 2, 1), (401, 2, 1, -1)]);
    let movers = v1::ListMoversRequest { window: v1::Window::Weekly.into(), ..Default::default() };
    let movers = app.client.list_movers(movers).await.expect("weekly movers").into_inner();
    assert_eq!(movers.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), vec![402]);
    app.stop().await;
}
