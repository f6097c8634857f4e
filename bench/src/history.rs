//! `history`: the rank history on a throwaway PostgreSQL: 400 ended days of the whole daily
//! and weekly boards kept (`top` entries each) and 100 segments' top 100, then the bytes each
//! kept entry takes on disk (every partition of `rank_history`, indexes and TOAST included),
//! and GetRankHistory of 400 days against GetRank of the same server, sequential calls.

use std::time::Instant;

use chrono::{Days, Utc};
use ranking_client::v1;
use ranking_server::adapters::sql::{SqlMetricsStore, SqlOptions, partitions};
use ranking_server::domain::board::{Board, Window};
use ranking_server::domain::catalog::Segment;
use ranking_server::domain::history::{KeptEntry, pack};
use ranking_server::ports::HistoryRows;
use sea_orm::{ConnectionTrait, Database, Statement};

use crate::helpers::pg;
use crate::recompute::seed_day;
use crate::serve;

/// Calls of each read measured.
const CALLS: usize = 300;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

pub async fn bench_history(top: usize) {
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let store = SqlMetricsStore::connect(&SqlOptions::new(pg.url())).await.expect("connect");
    let today = Utc::now().date_naive();
    let first = today - Days::new(400);
    let conn = Database::connect(&pg.url()).await.expect("connect");
    partitions::ensure_months(&conn, first, today).await.expect("month partitions");
    let whole = |window| Board { window, segment: None, profile: None };
    let segments: Vec<Segment> =
        (0..100).map(|i| Segment::parse(&format!("category:c{i}")).expect("segment")).collect();
    let mut entries = 0u64;
    let started = Instant::now();
    for d in 1..=400u64 {
        let day = today - Days::new(d);
        // Each day its own order: the top rotates with the day.
        let board = |n: usize| -> Vec<u8> {
            let shift = d as i64 * 37;
            pack(
                &(0..n as i64)
                    .map(|i| KeptEntry {
                        product_id: 1 + (i * 7_919 + shift) % 1_000_000,
                        organic_rank: i as u32 + 1,
                        main_floor: 1_000_000 - i,
                    })
                    .collect::<Vec<_>>(),
            )
        };
        for window in [Window::Daily, Window::Weekly] {
            store.keep_day(whole(window), day, d, &board(top), 0).await.expect("keep");
            entries += top as u64;
        }
        for segment in &segments {
            let kept = Board { window: Window::Daily, segment: Some(*segment), profile: None };
            store.keep_day(kept, day, d, &board(100), 0).await.expect("keep");
            entries += 100;
        }
    }
    let kept_in = started.elapsed();
    conn.execute_unprepared("VACUUM ANALYZE rank_history").await.expect("vacuum");
    let sql = "SELECT COALESCE(SUM(pg_total_relation_size(relid)), 0)::bigint FROM pg_partition_tree('rank_history')";
    let row = conn.query_one_raw(Statement::from_string(conn.get_database_backend(), sql)).await.expect("size");
    let bytes: i64 = row.expect("a row").try_get_by_index(0).expect("bytes");

    // A served day for GetRank, and the history of a product in every kept day's top.
    seed_day(&pg.url(), today, 100_000).await;
    let mut app = serve(&[format!("--database-url={}", pg.url()), format!("--history-top={top}")]).await;
    // Rank 6 of the most recent kept day (its shift is 37).
    let product = 1 + 5 * 7_919 + 37;
    let history = v1::GetRankHistoryRequest {
        product_id: product,
        from: first.to_string(),
        to: (today - Days::new(1)).to_string(),
        ..Default::default()
    };
    let h = app.clients[0].get_rank_history(history.clone()).await.expect("history").into_inner();
    assert_eq!(h.days.len(), 400);
    let rank = v1::GetRankRequest { product_id: 5, ..Default::default() };
    let mut times = (Vec::new(), Vec::new());
    for _ in 0..CALLS {
        let t = Instant::now();
        app.clients[0].get_rank_history(history.clone()).await.expect("history");
        times.0.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        app.clients[0].get_rank(rank.clone()).await.expect("rank");
        times.1.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.0.sort_by(f64::total_cmp);
    times.1.sort_by(f64::total_cmp);
    println!("\n## Rank history (throwaway PostgreSQL, {top} entries per whole board and day)\n");
    println!("| measure | value | target |");
    println!("|---|---:|---:|");
    println!(
        "| kept entries (400 days × daily and weekly top {top} + 100 segments' top 100) | {entries} (written in {:.1} s) | |",
        kept_in.as_secs_f64()
    );
    println!(
        "| bytes on disk per kept entry (every partition, TOAST and index) | {:.1} | ≤ 64 |",
        bytes as f64 / entries as f64
    );
    println!(
        "| GetRankHistory of 400 days, ms p50 / p99 ({CALLS} sequential calls) | {:.2} / {:.2} | |",
        percentile(&times.0, 0.5),
        percentile(&times.0, 0.99)
    );
    println!(
        "| GetRank of the same server, ms p50 / p99 | {:.2} / {:.2} | |",
        percentile(&times.1, 0.5),
        percentile(&times.1, 0.99)
    );
    app.stop().await;
    drop(store);
}
