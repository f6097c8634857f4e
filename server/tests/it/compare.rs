//! CompareRankings from outside: two boards of the served rankings compared, equal to a
//! computation from the two tops GetTopN serves (RBO over prefix sets, overlaps, shifts); a
//! board with itself is 1 and 1; bad requests name their field. (The weighted tau's figures
//! against `scipy.stats.weightedtau` are the domain's tests.)

use std::collections::{HashMap, HashSet};

use chrono::{Days, NaiveTime, Utc};
use ranking_client::tonic::Code;
use ranking_client::v1;

use crate::helpers::{TestApp, event};

fn board(date: &str, limit: u32) -> v1::GetTopNRequest {
    v1::GetTopNRequest { date: date.into(), limit, ..Default::default() }
}

/// RBO_ext from its formula, over the prefix sets of the two tops cut to `k`.
fn rbo_ext(a: &[i64], b: &[i64], p: f64) -> f64 {
    let k = a.len().min(b.len());
    let x = |d: usize| {
        let sa: HashSet<&i64> = a[..d].iter().collect();
        b[..d].iter().filter(|q| sa.contains(q)).count() as f64
    };
    let sum: f64 = (1..=k).map(|d| x(d) / d as f64 * p.powi(d as i32)).sum();
    x(k) / k as f64 * p.powi(k as i32) + (1.0 - p) / p * sum
}

#[tokio::test]
async fn two_boards_compare_as_their_served_tops_do() {
    let mut app = TestApp::spawn(&[]).await;
    let today = Utc::now().date_naive();
    let yesterday = today - Days::new(1);
    for (day, salt) in [(yesterday, 3), (today, 7)] {
        let noon = day.and_time(NaiveTime::from_hms_opt(12, 0, 0).expect("noon")).and_utc().min(Utc::now());
        let events = (1..=60)
            .map(|p| event(&format!("{day}-{p}"), p, v1::EventType::Order, 100 * ((p * salt) % 61 + 1), noon))
            .collect();
        app.record(events).await;
        app.recompute(&day.to_string()).await;
    }
    let ids = |t: &v1::GetTopNResponse| t.products.iter().map(|p| p.product_id).collect::<Vec<i64>>();
    let a = app.client.get_top_n(board(&today.to_string(), 40)).await.expect("top").into_inner();
    let b = app.client.get_top_n(board(&yesterday.to_string(), 40)).await.expect("top").into_inner();
    let request = v1::CompareRankingsRequest {
        a: Some(board(&today.to_string(), 40)),
        b: Some(board(&yesterday.to_string(), 0)),
        persistence: 0.8,
    };
    let c = app.client.compare_rankings(request).await.expect("compare").into_inner();
    let (ta, tb) = (ids(&a), ids(&b));
    assert!((c.rbo_ext - rbo_ext(&ta, &tb, 0.8)).abs() < 1e-12, "{} vs {}", c.rbo_ext, rbo_ext(&ta, &tb, 0.8));
    assert!(c.rbo_min <= c.rbo_ext && c.weighted_tau.abs() <= 1.0);
    let top10: HashSet<&i64> = ta[..10].iter().collect();
    assert_eq!(c.overlap_at_10, tb[..10].iter().filter(|p| top10.contains(p)).count() as f64 / 10.0);
    assert_eq!((c.version_a, c.version_b), (a.version, b.version));
    let (ra, rb): (HashMap<i64, u64>, HashMap<i64, u64>) =
        (ta.iter().zip(1u64..).map(|(p, r)| (*p, r)).collect(), tb.iter().zip(1u64..).map(|(p, r)| (*p, r)).collect());
    assert_eq!(c.largest_shifts.len(), 20);
    let moved = |s: &v1::ProductShift| {
        let (x, y) = (if s.rank_a == 0 { 41 } else { s.rank_a }, if s.rank_b == 0 { 41 } else { s.rank_b });
        x.abs_diff(y)
    };
    for s in &c.largest_shifts {
        assert_eq!(s.rank_a, ra.get(&s.product_id).copied().unwrap_or(0), "{s:?}");
        assert_eq!(s.rank_b, rb.get(&s.product_id).copied().unwrap_or(0), "{s:?}");
    }
    assert!(c.largest_shifts.windows(2).all(|w| moved(&w[0]) >= moved(&w[1])), "largest first");

    // A board with itself.
    let same = v1::CompareRankingsRequest { a: Some(board("", 50)), b: Some(board("", 50)), persistence: 0.0 };
    let c = app.client.compare_rankings(same).await.expect("compare").into_inner();
    assert_eq!((c.rbo_ext, c.weighted_tau, c.overlap_at_10), (1.0, 1.0, 1.0));
    app.stop().await;
}

#[tokio::test]
async fn a_bad_comparison_names_its_field() {
    let mut app = TestApp::spawn(&[]).await;
    let ok = v1::CompareRankingsRequest { a: Some(board("", 10)), b: Some(board("", 10)), persistence: 0.9 };
    let cases = [
        (v1::CompareRankingsRequest { persistence: 1.0, ..ok.clone() }, "persistence:"),
        (v1::CompareRankingsRequest { persistence: -0.5, ..ok.clone() }, "persistence:"),
        (v1::CompareRankingsRequest { a: Some(board("", 1_001)), ..ok.clone() }, "a.limit:"),
        (v1::CompareRankingsRequest { b: Some(board("2026-13-01", 10)), ..ok.clone() }, "b.date:"),
        (
            v1::CompareRankingsRequest {
                a: Some(v1::GetTopNRequest { page_token: "x".into(), ..board("", 10) }),
                ..ok.clone()
            },
            "a.page_token:",
        ),
        (
            v1::CompareRankingsRequest { b: Some(v1::GetTopNRequest { offset: 5, ..board("", 10) }), ..ok.clone() },
            "b.offset:",
        ),
    ];
    for (request, field) in cases {
        let err = app.client.compare_rankings(request).await.expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{field}");
        assert!(err.message().starts_with(field), "{field}: {}", err.message());
    }
    app.stop().await;
}
