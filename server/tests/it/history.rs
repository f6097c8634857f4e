//! Rank history: the top of each ended day's final served board, kept in SQL and answered by
//! GetRankHistory; restated when an ended day changes; pruned by retention; bad ranges
//! refused naming the field.

use std::collections::BTreeMap;

use chrono::{Days, NaiveDate, NaiveTime, Utc};
use ranking_client::tonic::Code;
use ranking_client::v1;
use ranking_server::adapters::sql::{SqlMetricsStore, SqlOptions, partitions};
use ranking_server::domain::board::{Board as HistoryBoard, Window};
use ranking_server::domain::history::{KeptEntry, pack};
use ranking_server::ports::{HistoryRows, Kept};
use sea_orm::{ConnectionTrait, Database, DbBackend, Statement};

use crate::helpers::{TestApp, TestDb, event, retract};

/// The served rank, organic rank and main floor of every product on a served board.
type Board = BTreeMap<i64, (u64, u64, i64)>;

fn board_of(top: &v1::GetTopNResponse) -> Board {
    top.products
        .iter()
        .map(|p| (p.product_id, (p.rank, p.organic_rank, p.breakdown.as_ref().map_or(-1, |b| b.main_floor))))
        .collect()
}

async fn served(app: &mut TestApp, window: v1::Window, date: NaiveDate, segment: &str, limit: u32) -> Board {
    let request = v1::GetTopNRequest {
        window: window.into(),
        date: date.to_string(),
        segment: segment.into(),
        limit,
        ..Default::default()
    };
    board_of(&app.client.get_top_n(request).await.expect("GetTopN").into_inner())
}

async fn history(
    app: &mut TestApp,
    product_id: i64,
    window: v1::Window,
    segment: &str,
    from: NaiveDate,
    to: NaiveDate,
) -> v1::GetRankHistoryResponse {
    let request = v1::GetRankHistoryRequest {
        product_id,
        segment: segment.into(),
        window: window.into(),
        from: from.to_string(),
        to: to.to_string(),
        profile: String::new(),
    };
    app.client.get_rank_history(request).await.expect("GetRankHistory").into_inner()
}

/// Events of `products` products on `date` (noon UTC), their order changing with the day.
fn day_of_events(date: NaiveDate, products: i64) -> Vec<v1::Event> {
    let noon = date.and_time(NaiveTime::from_hms_opt(12, 0, 0).expect("noon")).and_utc();
    let salt = date.to_string();
    let mut events = Vec::new();
    for p in 1..=products {
        let weight = (p * (7 + i64::from(date.day0())) * 13) % 41;
        for i in 0..(1 + weight % 9) {
            events.push(event(&format!("{salt}-v-{p}-{i}"), p, v1::EventType::View, 0, noon));
        }
        if weight % 3 == 0 {
            events.push(event(&format!("{salt}-o-{p}"), p, v1::EventType::Order, 100 * weight, noon));
        }
    }
    events
}

use chrono::Datelike;

#[tokio::test]
async fn three_ended_days_keep_each_days_final_served_board() {
    let mut app = TestApp::spawn(&["--history-top=25"]).await;
    let today = Utc::now().date_naive();
    let days: Vec<NaiveDate> = (1..=3).rev().map(|d| today - Days::new(d)).collect();
    let members: Vec<v1::CatalogEntry> = (1..=20)
        .map(|p| v1::CatalogEntry { product_id: p, segments: vec!["category:a".into()], ..Default::default() })
        .collect();
    app.client.update_catalog(v1::UpdateCatalogRequest { products: members }).await.expect("UpdateCatalog");
    for day in &days {
        app.record(day_of_events(*day, 40)).await;
    }
    for day in &days {
        app.recompute(&day.to_string()).await;
    }
    // A recompute of today keeps nothing: its day has not ended.
    app.recompute("").await;

    let (from, to) = (days[0], days[2]);
    for (window, segment, kept) in
        [(v1::Window::Daily, "", 25), (v1::Window::Weekly, "", 25), (v1::Window::Daily, "category:a", 20)]
    {
        let mut boards = Vec::new();
        for day in &days {
            boards.push(served(&mut app, window, *day, segment, 1_000).await);
        }
        assert!(boards.iter().all(|b| b.len() >= kept), "{window:?} {segment}: boards of every day");
        for product in 1..=40 {
            let h = history(&mut app, product, window, segment, from, to).await;
            let dates: Vec<&str> = h.days.iter().map(|d| d.date.as_str()).collect();
            assert_eq!(
                dates,
                days.iter().map(|d| d.to_string()).collect::<Vec<_>>().iter().map(String::as_str).collect::<Vec<_>>()
            );
            let mut expected_best: Option<(u64, String)> = None;
            for ((got, board), day) in h.days.iter().zip(&boards).zip(&days) {
                let want = board.get(&product).filter(|(rank, ..)| *rank <= kept as u64);
                match want {
                    Some(&(rank, organic, main)) => {
                        assert_eq!(
                            (got.rank, got.organic_rank, got.main_floor),
                            (rank, organic, main),
                            "{window:?} {segment} {product} {day}"
                        );
                        if expected_best.as_ref().is_none_or(|(best, _)| rank <= *best) {
                            expected_best = Some((rank, day.to_string()));
                        }
                    }
                    None => assert_eq!(got.rank, 0, "{window:?} {segment} {product} {day}: not in the kept top"),
                }
            }
            assert_eq!(
                (h.best_rank, h.best_rank_date.clone()),
                expected_best.unwrap_or((0, String::new())),
                "{window:?} {segment} {product}: best rank"
            );
            let ranks: Vec<u64> = h.days.iter().map(|d| d.rank).collect();
            assert_eq!(h.days_in_top_10, ranks.iter().filter(|r| (1..=10).contains(*r)).count() as u32);
            assert_eq!(h.days_in_top_100, ranks.iter().filter(|r| **r > 0).count() as u32);
            let streak = ranks.iter().rev().take_while(|r| **r > 0).count() as u32;
            assert_eq!(h.streak_in_top_100, streak);
            assert_eq!(h.restated_days, 0);
        }
    }
    // Today has no history: the day has not ended.
    let h = history(&mut app, 1, v1::Window::Daily, "", today, today).await;
    assert_eq!(h.days.iter().map(|d| d.rank).collect::<Vec<_>>(), vec![0]);
    app.stop().await;
}

#[tokio::test]
async fn a_retraction_of_an_ended_days_order_restates_that_day() {
    let mut app = TestApp::spawn(&[]).await;
    let today = Utc::now().date_naive();
    let yesterday = today - Days::new(1);
    let noon = yesterday.and_time(NaiveTime::from_hms_opt(12, 0, 0).expect("noon")).and_utc();
    app.record(vec![
        event("small", 1, v1::EventType::Order, 1_000, noon),
        event("big", 2, v1::EventType::Order, 100_000, noon),
    ])
    .await;
    app.recompute(&yesterday.to_string()).await;
    let h = history(&mut app, 2, v1::Window::Daily, "", yesterday, yesterday).await;
    assert_eq!((h.days[0].rank, h.restated_days), (1, 0));

    // The same day recomputed again, unchanged: nothing restated.
    app.recompute(&yesterday.to_string()).await;
    assert_eq!(history(&mut app, 2, v1::Window::Daily, "", yesterday, yesterday).await.restated_days, 0);

    // The big order taken back: the ended day's top changes and is restated.
    app.record(vec![retract("big-back", 2, "big", Utc::now())]).await;
    app.recompute(&yesterday.to_string()).await;
    let now_first = served(&mut app, v1::Window::Daily, yesterday, "", 10).await;
    assert_eq!(now_first.get(&1).map(|e| e.0), Some(1), "product 1 leads the day now");
    let one = history(&mut app, 1, v1::Window::Daily, "", yesterday, yesterday).await;
    assert_eq!((one.days[0].rank, one.restated_days), (1, 1));
    let two = history(&mut app, 2, v1::Window::Daily, "", yesterday, yesterday).await;
    assert_eq!(two.days[0].rank, now_first.get(&2).map_or(0, |e| e.0));
    // The best rank is over the kept history as it stands: the day was rewritten whole.
    assert_eq!(one.best_rank, 1);
    app.stop().await;
}

#[tokio::test]
async fn bad_ranges_are_refused_naming_the_field() {
    let mut app = TestApp::spawn(&[]).await;
    let ok = v1::GetRankHistoryRequest { product_id: 1, ..Default::default() };
    let cases = [
        (v1::GetRankHistoryRequest { from: "2026-13-01".into(), ..ok.clone() }, Code::InvalidArgument, "from:"),
        (v1::GetRankHistoryRequest { to: "yesterday".into(), ..ok.clone() }, Code::InvalidArgument, "to:"),
        (
            v1::GetRankHistoryRequest { from: "2026-03-02".into(), to: "2026-03-01".into(), ..ok.clone() },
            Code::InvalidArgument,
            "from:",
        ),
        (
            v1::GetRankHistoryRequest { from: "2025-01-01".into(), to: "2026-03-01".into(), ..ok.clone() },
            Code::InvalidArgument,
            "from:",
        ),
        (v1::GetRankHistoryRequest { product_id: 0, ..ok.clone() }, Code::InvalidArgument, "product_id:"),
        (
            v1::GetRankHistoryRequest { window: v1::Window::Hourly.into(), ..ok.clone() },
            Code::InvalidArgument,
            "window:",
        ),
        (
            v1::GetRankHistoryRequest { segment: "Not A Segment".into(), ..ok.clone() },
            Code::InvalidArgument,
            "segment:",
        ),
        (v1::GetRankHistoryRequest { profile: "candidate".into(), ..ok.clone() }, Code::NotFound, "no scoring profile"),
    ];
    for (request, code, start) in cases {
        let err = app.client.get_rank_history(request).await.expect_err("refused");
        assert_eq!(err.code(), code, "{start}");
        assert!(err.message().starts_with(start), "{start}: {}", err.message());
    }
    // The default range: the 90 days up to yesterday, each present.
    let h = app.client.get_rank_history(ok).await.expect("default range").into_inner();
    let yesterday = Utc::now().date_naive() - Days::new(1);
    assert_eq!(h.days.len(), 90);
    assert_eq!(h.days.last().map(|d| d.date.clone()), Some(yesterday.to_string()));
    app.stop().await;
}

#[tokio::test]
async fn a_kept_day_is_replaced_only_by_a_newer_version_and_retention_prunes() {
    let db = TestDb::create().await;
    let store = SqlMetricsStore::connect(&SqlOptions::new(db.url.clone())).await.expect("connect");
    let date = |m: u32, d: u32| NaiveDate::from_ymd_opt(2026, m, d).expect("a date");
    let board = HistoryBoard { window: Window::Daily, segment: None, profile: None };
    let top = |ids: &[i64]| {
        pack(
            &ids.iter().map(|&product_id| KeptEntry { product_id, organic_rank: 1, main_floor: 5 }).collect::<Vec<_>>(),
        )
    };
    let conn = Database::connect(&db.url).await.expect("connect");
    if conn.get_database_backend() == DbBackend::Postgres {
        partitions::ensure_months(&conn, date(1, 1), date(4, 30)).await.expect("months");
    }
    assert_eq!(store.keep_day(board, date(3, 15), 5, &top(&[1, 2]), 0).await.expect("keep"), Kept::First);
    assert_eq!(store.keep_day(board, date(3, 15), 5, &top(&[2, 1]), 0).await.expect("keep"), Kept::Stale);
    assert_eq!(store.keep_day(board, date(3, 15), 4, &top(&[2, 1]), 0).await.expect("keep"), Kept::Stale);
    assert_eq!(store.keep_day(board, date(3, 15), 6, &top(&[1, 2]), 0).await.expect("keep"), Kept::Unchanged);
    assert_eq!(store.keep_day(board, date(3, 15), 7, &top(&[2, 1]), 0).await.expect("keep"), Kept::Restated);
    for (m, d) in [(1, 15), (2, 15), (3, 20)] {
        assert_eq!(store.keep_day(board, date(m, d), 1, &top(&[9]), 0).await.expect("keep"), Kept::First);
    }
    let weekly = HistoryBoard { window: Window::Weekly, ..board };
    store.keep_day(weekly, date(3, 15), 1, &top(&[3]), 0).await.expect("keep");

    let kept = store.kept_days(board).await.expect("read");
    assert_eq!(
        kept.iter().map(|d| d.date).collect::<Vec<_>>(),
        vec![date(1, 15), date(2, 15), date(3, 15), date(3, 20)]
    );
    assert_eq!(kept[2].top, top(&[2, 1]));
    assert_eq!(kept[2].restated, 1);

    store.prune_history(date(3, 16)).await.expect("prune");
    let kept = store.kept_days(board).await.expect("read");
    assert_eq!(kept.iter().map(|d| d.date).collect::<Vec<_>>(), vec![date(3, 20)]);
    assert!(store.kept_days(weekly).await.expect("read").is_empty());
    if conn.get_database_backend() == DbBackend::Postgres {
        // Whole months before the cutoff went as partitions; March stays, holding what is kept.
        let sql = "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
                   WHERE i.inhparent = 'rank_history'::regclass ORDER BY 1";
        let rows = conn.query_all_raw(Statement::from_string(DbBackend::Postgres, sql)).await.expect("partitions");
        let names: Vec<String> = rows.iter().map(|r| r.try_get_by_index(0).expect("name")).collect();
        let months: Vec<&str> = names.iter().filter_map(|n| n.strip_prefix("rank_history_2026")).collect();
        assert!(months.starts_with(&["03", "04"]), "January and February dropped whole: {names:?}");
        assert!(names.iter().any(|n| n == "rank_history_default"));
    }
    db.drop_db().await;
}
