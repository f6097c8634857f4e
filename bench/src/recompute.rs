//! `recompute`: Recompute end to end on a throwaway PostgreSQL: wall time and peak memory.
//! `explain`: ExplainRank latency on a day of that size, next to GetRank's.

use std::time::{Duration, Instant};

use chrono::Utc;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database};

use crate::bus::Popularity;
use crate::helpers::pg;
use crate::peak_rss_mb;
use crate::serve;

/// A server in this process on a throwaway PostgreSQL seeded with today's `products` rows,
/// its rankings in `redis` under a prefix of its own.
pub(crate) async fn seeded_server(products: i64, redis: &str) -> (pg::ThrowawayPostgres, crate::Running) {
    seeded_server_with(products, redis, &[]).await
}

/// [`seeded_server`] with `flags` added to the server's.
pub(crate) async fn seeded_server_with(
    products: i64,
    redis: &str,
    flags: &[String],
) -> (pg::ThrowawayPostgres, crate::Running) {
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let mut all = vec![
        format!("--database-url={}", pg.url()),
        format!("--redis-url={redis}"),
        format!("--redis-prefix=bench-{:x}", Utc::now().timestamp_micros()),
    ];
    all.extend_from_slice(flags);
    let app = serve(&all).await;
    seed_day(&pg.url(), Utc::now().date_naive(), products).await;
    (pg, app)
}

pub async fn bench_recompute(products: i64, redis: &str) {
    let (_pg, mut app) = seeded_server(products, redis).await;
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
pub(crate) async fn seed_day(url: &str, date: chrono::NaiveDate, products: i64) {
    seed_day_with(url, date, products, false).await;
}

/// [`seed_day`], with values in the first two custom signal columns when `signals`.
pub(crate) async fn seed_day_with(url: &str, date: chrono::NaiveDate, products: i64, signals: bool) {
    let db = Database::connect(url).await.expect("connect");
    let now_us = Utc::now().timestamp_micros();
    // Events within the day: its last instant is now for today, its end for a day before.
    let day_end_us = date.succ_opt().expect("a day after").and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    let last_us = now_us.min(day_end_us.timestamp_micros() - 1);
    db.execute_unprepared(&format!(
        "INSERT INTO product_daily_metrics (metric_date, product_id, views, likes, orders, order_amount, last_event_at, updated_at, \
                signal_1, signal_2) \
         SELECT DATE '{date}', g, (g * 7919) % 5000, (g * 104729) % 300, (g * 31) % 7, ((g * 7127) % 9) * 10000, \
                {last_us} - (g % 86400) * 1000000, {now_us}, {} \
         FROM generate_series(1::bigint, {products}::bigint) g",
        if signals { "(g * 6971) % 40, ((g * 3301) % 600) * 1000" } else { "NULL, NULL" }
    ))
    .await
    .expect("seed");
    db.execute_unprepared("ANALYZE product_daily_metrics").await.expect("analyze");
}

/// Writes `date`'s rows of `products` products inside PostgreSQL as a stream of `views`
/// views at `per_second` events a second with `popularity` leaves them at this instant:
/// product g's views are its share of `views` and its last view an exponential wait at its
/// own rate before now; a product whose wait is longer than the stream (or the day so far)
/// has no row yet. A load of the same popularity and rate then continues this day as its
/// steady state instead of reshaping it (a day's views spread over 24 hours and a load 30
/// times its rate move most recency norms each second). Its hourly rows too (the trending
/// board's population): each product's views in the hour of its last.
pub(crate) async fn seed_streamed_day(
    url: &str,
    date: chrono::NaiveDate,
    products: i64,
    popularity: Popularity,
    (views, per_second): (i64, i64),
) {
    let db = Database::connect(url).await.expect("connect");
    let now = Utc::now();
    let now_us = now.timestamp_micros();
    let since_midnight = (now - date.and_hms_opt(0, 0, 0).expect("midnight").and_utc()).num_seconds().max(1);
    let stream_seconds = (views / per_second.max(1)).clamp(1, since_midnight);
    let share = popularity.share_sql(products);
    // Two fixed uniform draws per product (the fraction of its expected views rounded up, its
    // wait), from multiplicative hashes: the same day on every run.
    db.execute_unprepared(&format!(
        "INSERT INTO product_daily_metrics (metric_date, product_id, views, likes, orders, order_amount, last_event_at, updated_at) \
         SELECT DATE '{date}', g, v, v / 20, 0, 0, {now_us} - (wait * 1000000)::bigint, {now_us} \
         FROM generate_series(1::bigint, {products}::bigint) g \
         CROSS JOIN LATERAL (SELECT {share} AS p, \
                 ((g * 2654435761) % 1000003 + 1) / 1000004.0 AS u1, \
                 ((g * 40503 + 12345) % 999983 + 1) / 999984.0 AS u2) draws \
         CROSS JOIN LATERAL (SELECT -ln(u2) / ({per_second} * p) AS wait, \
                 greatest(1, floor({views} * p + u1))::bigint AS v) stream \
         WHERE wait < {stream_seconds}"
    ))
    .await
    .expect("seed the streamed day");
    // The trending board's hours as the same stream left them: each product's views in the
    // hour of its last one.
    db.execute_unprepared(&format!(
        "INSERT INTO product_hourly_metrics (metric_date, product_id, hour_start, views, likes, orders, order_amount, \
                last_event_at, updated_at) \
         SELECT metric_date, product_id, last_event_at - last_event_at % 3600000000, views, likes, 0, 0, last_event_at, \
                updated_at \
         FROM product_daily_metrics WHERE metric_date = DATE '{date}'"
    ))
    .await
    .expect("seed the streamed hours");
    db.execute_unprepared("ANALYZE product_daily_metrics").await.expect("analyze");
    db.execute_unprepared("ANALYZE product_hourly_metrics").await.expect("analyze");
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

/// Wall seconds of one Recompute of today.
async fn timed_recompute(app: &mut crate::Running) -> f64 {
    let started = Instant::now();
    app.clients[0].recompute(v1::RecomputeRequest { date: String::new() }).await.expect("recompute");
    started.elapsed().as_secs_f64()
}

/// The phases of the server's last recompute, from its metrics.
pub(crate) async fn phases(app: &crate::Running) -> (f64, f64, f64) {
    let text = app.app.scrape_metrics().await;
    let phase = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("ranking_recompute_phase_seconds{{phase=\"{name}\"}}")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    (phase("daily"), phase("weekly"), phase("segments"))
}

/// `MEMORY USAGE` of the current version of a ranking (its packed copy and product index)
/// and of the daily ranking's sorted set ( the others have none: its usage reads 0)
/// per entry.
async fn bytes_per_entry(conn: &mut redis::aio::MultiplexedConnection, base: &str) -> (u64, f64, f64, f64) {
    let version: u64 = redis::cmd("GET").arg(format!("{base}:version")).query_async(conn).await.expect("pointer");
    let key = format!("{base}:v{version}");
    let packed_bytes: u64 = redis::cmd("STRLEN").arg(format!("{key}:packed")).query_async(conn).await.expect("STRLEN");
    let entries = packed_bytes / 16;
    let usage = |k: String| redis::cmd("MEMORY").arg("USAGE").arg(k).arg("SAMPLES").arg(0).to_owned();
    let zset: u64 = usage(base.to_string()).query_async(conn).await.unwrap_or(0);
    let packed: u64 = usage(format!("{key}:packed")).query_async(conn).await.unwrap_or(0);
    let index: u64 = usage(format!("{key}:index")).query_async(conn).await.unwrap_or(0);
    let per = |b: u64| if entries == 0 { f64::NAN } else { b as f64 / entries as f64 };
    (entries, per(zset), per(packed), per(index))
}

/// Recompute of `products` products (rows today and yesterday) first with an empty catalog,
/// then with each product in 3 of 1,000 segments, in one run: each phase's seconds, the
/// process's peak memory, and Redis memory per ranked entry of each kind of ranking.
/// Resets the process's peak resident memory (`VmHWM`) to its current resident memory, so
/// that the next reading is the peak of what follows (Linux `clear_refs`, value 5).
pub(crate) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

pub(crate) fn current_rss_mb() -> f64 {
    crate::status_mb("self", "VmRSS:")
}

/// The original recompute of `date`, composed from the crate's parts: the carry-over
/// chain of the 7 days before, the day's rows, ranking, and the publication of the daily
/// version (staging ZSET + packed copy, one script), with no catalog, weekly ranking or
/// segments: the daily-only time the full recompute is compared with. Seconds.
async fn daily_only(pg_url: &str, redis_url: &str, prefix: &str, date: chrono::NaiveDate) -> f64 {
    use ranking_server::adapters::redis::{RedisOptions, RedisRankingStore};
    use ranking_server::adapters::sql::{SqlMetricsStore, SqlOptions};
    use ranking_server::domain::profile::ScoringProfile;
    use ranking_server::domain::ranking::{Contender, rank_population};
    use ranking_server::domain::score::CarryLedger;
    use ranking_server::domain::vocabulary::DailyMetrics;
    use ranking_server::ports::{DayScans, RankingKey, RankingStore, Scored, VersionLife};

    let store = SqlMetricsStore::connect(&SqlOptions::new(pg_url)).await.expect("sql");
    let mut options = RedisOptions::new(redis_url);
    options.prefix = format!("{prefix}-daily-only");
    let rankings = RedisRankingStore::connect(&options).expect("redis");
    let started = Instant::now();
    let profile = std::sync::Arc::new(ScoringProfile::built_in());
    let mut ledger = CarryLedger::new(profile.clone());
    for back in (1..=7u64).rev() {
        let mut rows: Vec<(i64, DailyMetrics)> = Vec::new();
        store
            .scan_day(date - chrono::Days::new(back), &[], &mut |r| rows.push((r.product_id, r.metrics)))
            .await
            .expect("scan");
        ledger = ledger.close_day(rows);
    }
    let mut contenders = Vec::new();
    store
        .scan_day(date, &[], &mut |r| {
            let standing = ledger.take(r.product_id, r.metrics);
            contenders.push(Contender::new(&profile, r.product_id, standing, Some(r.last_event_us)))
        })
        .await
        .expect("scan");
    contenders
        .extend(ledger.carry_only().map(|(product_id, standing)| Contender::new(&profile, product_id, standing, None)));
    contenders.sort_unstable_by_key(|c| c.product_id);
    let start = date.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp_micros();
    let (mut entries, ..) =
        rank_population(&profile, &contenders, start, start + 86_400_000_000, |product_id, _, score| Scored {
            product_id,
            score,
        });
    entries.sort_unstable_by(ranking_server::domain::snapshot::ranking_order);
    let life = VersionLife { expire_at: Utc::now() + chrono::Duration::hours(1), superseded_for: Duration::ZERO };
    rankings
        .publish(RankingKey::Daily(date), &entries, life, &ranking_server::ports::Fence::unchecked())
        .await
        .expect("publish");
    let elapsed = started.elapsed().as_secs_f64();
    // Its keys go at once: a million-entry ranking left for its hour in a shared Redis would
    // slow the runs after this one.
    let conn = crate::helpers::redis_connection(redis_url, ranking_server::adapters::redis::RedisMode::Single);
    crate::helpers::delete_keys(&conn, &options.prefix).await;
    elapsed
}

pub async fn bench_segments(products: i64, redis_url: &str) {
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let prefix = format!("bench-{:x}", Utc::now().timestamp_micros());
    let mut app = serve(&[
        format!("--database-url={}", pg.url()),
        format!("--redis-url={redis_url}"),
        format!("--redis-prefix={prefix}"),
        "--metrics-listen=127.0.0.1:0".into(),
    ])
    .await;
    let today = Utc::now().date_naive();
    seed_day(&pg.url(), today.pred_opt().expect("a day before"), products).await;
    seed_day(&pg.url(), today, products).await;
    reset_peak_rss();
    let before_plain = current_rss_mb();
    let plain = timed_recompute(&mut app).await;
    let (plain_daily, plain_weekly, _) = phases(&app).await;
    let rss_plain = peak_rss_mb();

    let db = Database::connect(&pg.url()).await.expect("connect");
    db.execute_unprepared(&format!(
        "INSERT INTO product_catalog (product_id, hidden, segments) \
         SELECT g, 0, 'seg' || (g % 1000) || ' seg' || ((g + 337) % 1000) || ' seg' || ((g + 671) % 1000) \
         FROM generate_series(1::bigint, {products}::bigint) g"
    ))
    .await
    .expect("catalog");
    reset_peak_rss();
    let before = current_rss_mb();
    let segmented = timed_recompute(&mut app).await;
    let (daily, weekly, segments) = phases(&app).await;
    let rss = peak_rss_mb();
    // Last, so that its memory is not in the peaks above, and on a warm database cache.
    let baseline = daily_only(&pg.url(), redis_url, &prefix, today).await;

    println!("\n## Recompute with weekly and segments ({products} products on each of 2 days, throwaway PostgreSQL)\n");
    println!(
        "The original daily-only recompute of the same day (carry-over chain, rank, publish the daily \
         version; no catalog, weekly or segments), same run: **{baseline:.2} s**.\n"
    );
    println!(
        "| catalog | wall s | daily phase s | weekly phase s | segments phase s | wall vs daily-only | RSS before MB | peak RSS during MB (bench process, server inside) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| none | {plain:.2} | {plain_daily:.2} | {plain_weekly:.2} | 0 | {:.2}× | {before_plain:.0} | {rss_plain:.0} |",
        plain / baseline
    );
    println!(
        "| 3 of 1,000 segments each | {segmented:.2} | {daily:.2} | {weekly:.2} | {segments:.2} | {:.2}× | {before:.0} | {rss:.0} |",
        segmented / baseline
    );

    let client = redis::Client::open(redis_url).expect("redis url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
    println!(
        "\n| ranking | entries | Redis bytes per entry (ZSET) | packed copy bytes per entry | product index bytes per entry |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (name, base) in [
        ("daily", format!("{prefix}:{{daily:{today}}}")),
        ("weekly", format!("{prefix}:{{daily:{today}}}:weekly")),
        ("daily segment (seg1)", format!("{prefix}:{{daily:{today}}}:dseg:seg1")),
        ("weekly segment (seg1)", format!("{prefix}:{{daily:{today}}}:wseg:seg1")),
    ] {
        let (entries, zset, packed, index) = bytes_per_entry(&mut conn, &base).await;
        println!("| {name} | {entries} | {zset:.1} | {packed:.1} | {index:.1} |");
    }
    app.stop().await;
}
