//! What every entry says beyond its place: `tied_rank` (competition ranking),
//! `top_percent`, and `previous_rank` / `rank_change` against the same window one period
//! earlier, through the client, on every engine.

use chrono::{Duration, Timelike, Utc};
use ranking_client::v1;

use ranking_server::test_support::{day, noon};

use crate::helpers::{TestApp, views};

/// (product, rank, tied_rank, previous_rank, rank_change) of a whole daily ranking.
async fn board(app: &mut TestApp, date: &str) -> Vec<(i64, u64, u64, u64, i64)> {
    let top = app.top(date, 100).await;
    for p in &top.products {
        assert_eq!(p.top_percent, 100.0 * p.rank as f64 / top.total as f64, "top_percent of {}", p.product_id);
        let above = top.products.iter().filter(|q| q.score > p.score).count() as u64;
        assert_eq!(p.tied_rank, above + 1, "tied_rank of {}", p.product_id);
    }
    top.products.iter().map(|p| (p.product_id, p.rank, p.tied_rank, p.previous_rank, p.rank_change)).collect()
}

#[tokio::test]
async fn entries_carry_ties_shares_and_the_previous_days_rank() {
    let mut app = TestApp::spawn(&[]).await;
    // Day D-2: 10 and 11 identical (5 views at the same instant), 12 behind.
    // Day D-1: 12 (6 views), 13 (4, new), 11 (2); 10 left the ranking.
    // Day D:   14 (8, new), 10 (3, back after a day away), 12 (1).
    // Fewer than 10 views each: every main score stays below 1, so nothing carries over.
    let plan: [(u64, &[(i64, usize)]); 3] =
        [(2, &[(10, 5), (11, 5), (12, 3)]), (1, &[(12, 6), (13, 4), (11, 2)]), (0, &[(14, 8), (10, 3), (12, 1)])];
    for (days_ago, products) in plan {
        let at = if days_ago == 0 { Utc::now() - Duration::seconds(5) } else { noon(days_ago) };
        for (product, n) in products {
            app.record(views(&format!("d{days_ago}p{product}"), *product, *n, at)).await;
        }
        app.recompute(&day(days_ago)).await;
    }
    assert_eq!(board(&mut app, &day(2)).await, vec![(11, 1, 1, 0, 0), (10, 2, 1, 0, 0), (12, 3, 3, 0, 0)]);
    assert_eq!(board(&mut app, &day(1)).await, vec![(12, 1, 1, 3, 2), (13, 2, 2, 0, 0), (11, 3, 3, 1, -2)]);
    assert_eq!(board(&mut app, "").await, vec![(14, 1, 1, 0, 0), (10, 2, 2, 0, 0), (12, 3, 3, 1, -2)]);

    let rank = app.rank(12, "").await.expect("ranked").product.expect("entry");
    assert_eq!((rank.rank, rank.tied_rank, rank.previous_rank, rank.rank_change), (3, 3, 1, -2));
    assert_eq!(rank.top_percent, 100.0);
    let tied = app.rank(10, &day(2)).await.expect("ranked").product.expect("entry");
    assert_eq!((tied.rank, tied.tied_rank), (2, 1), "equal scores share a competition rank");
    // A day no replica holds in memory is read from the ranking store the same way.
    let request = v1::GetRankRequest { product_id: 10, date: day(2), neighbors: 1, ..Default::default() };
    let around = app.client.get_rank(request).await.expect("neighbours").into_inner();
    assert_eq!((ids(&around.above), ids(&around.below)), (vec![11], vec![12]));
    assert_eq!(around.above[0].tied_rank, 1);
    let request = v1::GetRanksRequest { product_ids: vec![12, 10, 99], date: day(2), ..Default::default() };
    let many = app.client.get_ranks(request).await.expect("ranks").into_inner();
    let seen: Vec<_> = many.products.iter().map(|p| (p.product_id, p.rank, p.tied_rank)).collect();
    assert_eq!((seen, many.missing), (vec![(12, 3, 3), (10, 2, 1)], vec![99]));
    app.stop().await;
}

#[tokio::test]
async fn hourly_entries_compare_with_the_hour_before() {
    let mut app = TestApp::spawn(&[]).await;
    let at = Utc::now() - Duration::seconds(5);
    let before = at - Duration::hours(1);
    app.record(views("b20", 20, 2, before)).await;
    app.record(views("b21", 21, 1, before)).await;
    app.record(views("a21", 21, 3, at)).await;
    app.record(views("a20", 20, 1, at)).await;
    let hourly = v1::GetTopNRequest {
        window: v1::Window::Hourly.into(),
        date: at.date_naive().to_string(),
        hour: Some(at.hour()),
        limit: 10,
        ..Default::default()
    };
    let top = app.client.get_top_n(hourly).await.expect("hourly").into_inner();
    let seen: Vec<_> = top.products.iter().map(|p| (p.product_id, p.rank, p.previous_rank, p.rank_change)).collect();
    assert_eq!(seen, vec![(21, 1, 2, 1), (20, 2, 1, -1)]);
    app.stop().await;
}

/// Products 1..=n with p views each today: product p is ranked n + 1 - p.
async fn ladder(app: &mut TestApp, n: i64) {
    let at = Utc::now() - Duration::seconds(5);
    let events: Vec<_> = (1..=n).flat_map(|p| views(&format!("l{p}"), p, p as usize, at)).collect();
    app.record(events).await;
    app.recompute("").await;
}

fn ids(entries: &[v1::RankedProduct]) -> Vec<i64> {
    entries.iter().map(|p| p.product_id).collect()
}

#[tokio::test]
async fn neighbours_come_from_the_same_version_at_the_top_the_bottom_and_the_middle() {
    let mut app = TestApp::spawn(&[]).await;
    ladder(&mut app, 30).await;
    let around = |product_id, neighbors| v1::GetRankRequest { product_id, neighbors, ..Default::default() };
    let mid = app.client.get_rank(around(15, 3)).await.expect("middle").into_inner();
    assert_eq!(mid.product.as_ref().map(|p| p.rank), Some(16));
    assert_eq!((ids(&mid.above), ids(&mid.below)), (vec![18, 17, 16], vec![14, 13, 12]));
    assert_eq!(mid.above.iter().map(|p| p.rank).collect::<Vec<_>>(), vec![13, 14, 15]);
    let top = app.client.get_rank(around(30, 3)).await.expect("top").into_inner();
    assert_eq!((ids(&top.above), ids(&top.below)), (vec![], vec![29, 28, 27]));
    let bottom = app.client.get_rank(around(1, 50)).await.expect("bottom").into_inner();
    assert_eq!((bottom.above.len(), bottom.below.len()), (29, 0), "a ranking shorter than 2k+1");
    assert_eq!(bottom.above.first().map(|p| p.rank), Some(1));
    assert!(bottom.above.iter().all(|p| p.top_percent > 0.0 && p.tied_rank == p.rank));
    let none = app.client.get_rank(around(15, 0)).await.expect("no neighbours").into_inner();
    assert!(none.above.is_empty() && none.below.is_empty());
    let e = app.client.get_rank(around(15, 51)).await.expect_err("too many");
    assert_eq!(e.code(), ranking_client::tonic::Code::InvalidArgument);
    assert!(e.message().starts_with("neighbors:"), "{}", e.message());
    app.stop().await;
}

#[tokio::test]
async fn many_ranks_in_one_call_keep_request_order_and_list_the_missing() {
    let mut app = TestApp::spawn(&[]).await;
    ladder(&mut app, 30).await;
    let ranks = |product_ids: Vec<i64>| v1::GetRanksRequest { product_ids, ..Default::default() };
    let r = app.client.get_ranks(ranks(vec![5, 999, 30, 5, 12, 777])).await.expect("ranks").into_inner();
    assert_eq!(ids(&r.products), vec![5, 30, 12], "request order, a repeated id once");
    assert_eq!(r.products.iter().map(|p| p.rank).collect::<Vec<_>>(), vec![26, 1, 19]);
    assert_eq!(r.missing, vec![999, 777]);
    assert_eq!(r.total, 30);
    assert_eq!(r.version, app.top("", 1).await.version);
    let single = app.rank(12, "").await.expect("ranked").product.expect("entry");
    assert_eq!(r.products[2], single, "the same entry as GetRank gives");

    let thousand: Vec<i64> = (1..=1_000).collect();
    let r = app.client.get_ranks(ranks(thousand)).await.expect("1,000 ids").into_inner();
    assert_eq!((r.products.len(), r.missing.len()), (30, 970));
    for (bad, field) in
        [(vec![], "product_ids:"), ((1..=1_001).collect(), "product_ids:"), (vec![1, 2, 3, 4, 0], "product_ids[4]:")]
    {
        let e = app.client.get_ranks(ranks(bad)).await.expect_err("invalid");
        assert_eq!(e.code(), ranking_client::tonic::Code::InvalidArgument);
        assert!(e.message().starts_with(field), "{}", e.message());
    }
    app.stop().await;
}

#[tokio::test]
async fn movers_rise_and_fall_largest_first_within_the_guard() {
    let mut app = TestApp::spawn(&[]).await;
    // Yesterday: product p had p views (1..=8: 8 is #1, 1 is #8).
    let yesterday = noon(1);
    app.record((1..=8i64).flat_map(|p| views(&format!("y{p}"), p, p as usize, yesterday)).collect()).await;
    app.recompute(&day(1)).await;
    // Today: the order is reversed for 1..=6 (1 is #1 … 6 is #6), 7 and 8 are gone, 9 is new.
    let now = Utc::now() - Duration::seconds(5);
    let today: Vec<(i64, usize)> = vec![(1, 9), (2, 8), (3, 7), (4, 6), (5, 5), (6, 4), (9, 1)];
    for (p, n) in &today {
        app.record(views(&format!("t{p}"), *p, *n, now)).await;
    }
    app.recompute("").await;
    // Ranks now → before: 1: 1←8 (+7), 2: 2←7 (+5), 3: 3←6 (+3), 4: 4←5 (+1), 5: 5←4 (-1),
    // 6: 6←3 (-3), 9: new.
    let movers = |direction: v1::MoverDirection, within_top: u64, limit: u32| v1::ListMoversRequest {
        direction: direction.into(),
        within_top,
        limit,
        ..Default::default()
    };
    let moved = |r: v1::ListMoversResponse| -> Vec<(i64, u64, u64, i64)> {
        r.products.iter().map(|p| (p.product_id, p.rank, p.previous_rank, p.rank_change)).collect()
    };
    let rising = app.client.list_movers(movers(v1::MoverDirection::Unspecified, 0, 0)).await.expect("rising");
    assert_eq!(moved(rising.into_inner()), vec![(1, 1, 8, 7), (2, 2, 7, 5), (3, 3, 6, 3), (4, 4, 5, 1)]);
    let guarded = app.client.list_movers(movers(v1::MoverDirection::Rising, 2, 1)).await.expect("guarded");
    assert_eq!(moved(guarded.into_inner()), vec![(1, 1, 8, 7)]);
    let falling = app.client.list_movers(movers(v1::MoverDirection::Falling, 0, 0)).await.expect("falling");
    assert_eq!(moved(falling.into_inner()), vec![(6, 6, 3, -3), (5, 5, 4, -1)]);
    let guarded = app.client.list_movers(movers(v1::MoverDirection::Falling, 3, 10)).await.expect("guarded");
    assert_eq!(moved(guarded.into_inner()), vec![(6, 6, 3, -3)], "only products ranked <= 3 before");
    let bad = v1::ListMoversRequest { direction: 7, ..Default::default() };
    let e = app.client.list_movers(bad).await.expect_err("unknown direction");
    assert!(e.message().starts_with("direction:"), "{}", e.message());
    app.stop().await;
}
