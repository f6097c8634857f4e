//! `recompute`: Recompute end to end on a throwaway PostgreSQL: wall time and peak memory.
//! `explain`: ExplainRank latency on a day of that size, next to GetRank's.

use std::time::Instant;

use chrono::Utc;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database};

use crate::helpers::pg;
use crate::peak_rss_mb;
use crate::serve;

pub async fn bench_recompute(products: i64, redis: &str) {
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let mut app = serve(&[
        format!("--database-url={}", pg.url()),
        format!("--redis-url={redis}"),
        format!("--redis-prefix=bench-{:x}", Utc::now().timestamp_micros()),
    ])
    .await;
    seed_day(&pg.url(), Utc::now().date_naive(), products).await;
    let rss_before = peak_rss_mb();
    let started = Instant::now();
    let r =
        app.clients[0].recompute(v1::RecomputeRequest { date: String::new() }).await.expect("recompute").into_inner();
    let wall = started.elapsed().as_secs_f64();
    println!("| {products} | {} | {} | {wall:.2} | {rss_before:.0} | {:.0} |", r.products, r.elapsed_ms, peak_rss_mb());
    app.stop().await;
}

/// Writes `products` rows of `date` inside PostgreSQL, so the bench process holds none of
/// them.
async fn seed_day(url: &str, date: chrono::NaiveDate, products: i64) {
    let db = Database::connect(url).await.expect("connect");
    let now_us = Utc::now().timestamp_micros();
    db.execute_unprepared(&format!(
        "INSERT INTO product_daily_metrics (metric_date, product_id, views, likes, orders, order_amount, last_event_at, updated_at) \
         SELECT DATE '{date}', g, (g * 7919) % 5000, (g * 104729) % 300, (g * 31) % 7, ((g * 7127) % 9) * 10000, \
                {now_us} - (g % 86400) * 1000000, {now_us} FROM generate_series(1::bigint, {products}::bigint) g"
    ))
    .await
    .expect("seed");
    db.execute_unprepared("ANALYZE product_daily_metrics").await.expect("analyze");
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// ExplainRank of random products of a day of `products` rows (and the day before, so the
/// carry-over chain has rows to read), one call at a time, next to GetRank measured the
/// same way in the same run.
pub async fn bench_explain(products: i64, redis: &str) {
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let mut app = serve(&[
        format!("--database-url={}", pg.url()),
        format!("--redis-url={redis}"),
        format!("--redis-prefix=bench-{:x}", Utc::now().timestamp_micros()),
    ])
    .await;
    let today = Utc::now().date_naive();
    let yesterday = today.pred_opt().expect("a day before");
    seed_day(&pg.url(), yesterday, products).await;
    seed_day(&pg.url(), today, products).await;
    for date in [yesterday, today] {
        app.clients[0].recompute(v1::RecomputeRequest { date: date.to_string() }).await.expect("recompute");
    }
    let calls = 1_000;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next_product = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % products as u64) as i64 + 1
    };
    let client = &mut app.clients[0];
    let mut explain_ms = Vec::with_capacity(calls);
    let mut rank_ms = Vec::with_capacity(calls);
    for _ in 0..calls {
        let product_id = next_product();
        let started = Instant::now();
        let request = v1::GetRankRequest { product_id, ..Default::default() };
        let ranked = client.get_rank(request).await.is_ok();
        rank_ms.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        let explained = client.explain_rank(v1::ExplainRankRequest { product_id, ..Default::default() }).await;
        explain_ms.push(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(ranked, explained.is_ok(), "product {product_id}: {explained:?}");
    }
    explain_ms.sort_by(f64::total_cmp);
    rank_ms.sort_by(f64::total_cmp);
    println!(
        "\n## ExplainRank at {products} products (throwaway PostgreSQL, {calls} sequential calls of random products)\n"
    );
    println!("| call | p50 ms | p95 ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    for (name, ms) in [("ExplainRank", &explain_ms), ("GetRank (same products)", &rank_ms)] {
        println!("| {name} | {:.2} | {:.2} | {:.2} |", percentile(ms, 0.5), percentile(ms, 0.95), percentile(ms, 0.99));
    }
    app.stop().await;
}
