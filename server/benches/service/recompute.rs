//! `recompute`: Recompute end to end on a throwaway PostgreSQL: wall time and peak memory.

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
    let db = Database::connect(&pg.url()).await.expect("connect");
    let today = Utc::now().date_naive();
    let now_us = Utc::now().timestamp_micros();
    // Seeded inside PostgreSQL so the bench process holds none of the rows.
    db.execute_unprepared(&format!(
        "INSERT INTO product_daily_metrics (metric_date, product_id, views, likes, orders, order_amount, last_event_at, updated_at) \
         SELECT DATE '{today}', g, (g * 7919) % 5000, (g * 104729) % 300, (g * 31) % 7, ((g * 7127) % 9) * 10000, \
                {now_us} - (g % 86400) * 1000000, {now_us} FROM generate_series(1::bigint, {products}::bigint) g"
    ))
    .await
    .expect("seed");
    db.execute_unprepared("ANALYZE product_daily_metrics").await.expect("analyze");
    let rss_before = peak_rss_mb();
    let started = Instant::now();
    let r =
        app.clients[0].recompute(v1::RecomputeRequest { date: String::new() }).await.expect("recompute").into_inner();
    let wall = started.elapsed().as_secs_f64();
    println!("| {products} | {} | {} | {wall:.2} | {rss_before:.0} | {:.0} |", r.products, r.elapsed_ms, peak_rss_mb());
    app.stop().await;
}
