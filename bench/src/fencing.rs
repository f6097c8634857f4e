//! `fencing PRODUCTS REDIS SEEDS`: what fenced writes cost and what ranking off the async
//! workers buys.
//!
//! 1. Publication of a `PRODUCTS`-entry daily ranking (its packed copy, product index and
//!    sorted set, then the script), fenced by the day's lease and unchecked, in interleaved
//!    rounds on one Redis and on a Redis Cluster: median seconds and their ratio (target
//!    ≤ 1.02×).
//! 2. The health check and GetRank answered by a release server while it recomputes a day of
//!    `PRODUCTS` products (throwaway PostgreSQL, the same Redis): latency percentiles of
//!    back-to-back calls, idle and during the recompute, in the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use ranking_client::v1;
use ranking_server::adapters::redis::{RedisMode, RedisOptions, RedisRankingStore};
use ranking_server::domain::snapshot::Snapshot;
use ranking_server::ports::{
    Fence, Form, LeaseLock, Publishing, RankingKey, RankingStore, Scored, VersionLife, day_lease,
};

use crate::helpers::pg;

/// Interleaved rounds of each publication.
const ROUNDS: usize = 5;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Fenced and unchecked publications of one copy on one topology: each round's seconds,
/// (fenced, unchecked).
async fn publications(url: &str, mode: RedisMode, copy: &Arc<Snapshot>) -> (Vec<f64>, Vec<f64>) {
    let mut options = RedisOptions::new(url);
    options.mode = mode;
    options.prefix = format!("bench-fencing-{:x}", Utc::now().timestamp_micros());
    options.response_timeout = Duration::from_secs(60);
    let store = RedisRankingStore::connect(&options).expect("redis");
    let today = Utc::now().date_naive();
    let lease = store.try_acquire(&day_lease(today), Duration::from_secs(3_600)).await.expect("lease").expect("free");
    let life = VersionLife { expire_at: Utc::now() + chrono::Duration::hours(1), superseded_for: Duration::ZERO };
    let key = RankingKey::Daily(today);
    let (mut fenced, mut unchecked) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS * 2 {
        let with_fence = round % 2 == 0;
        let fence = if with_fence { Fence::of(&lease) } else { Fence::unchecked() };
        let started = Instant::now();
        store.publish_copy(key, Publishing::copy(copy), life, Form::Full, &fence).await.expect("publish");
        let seconds = started.elapsed().as_secs_f64();
        if with_fence { fenced.push(seconds) } else { unchecked.push(seconds) }
    }
    store.release(&lease).await.expect("release");
    let conn = crate::helpers::redis_connection(url, mode);
    crate::helpers::delete_keys(&conn, &options.prefix).await;
    (fenced, unchecked)
}

/// Back-to-back health checks and GetRank calls for `window`: their latencies in ms, sorted.
async fn probe(addr: std::net::SocketAddr, window: Duration, product: i64) -> (Vec<f64>, Vec<f64>) {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).expect("endpoint");
    let channel = channel.connect().await.expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let mut client = v1::ranking_service_client::RankingServiceClient::new(channel);
    let (mut checks, mut ranks) = (Vec::new(), Vec::new());
    let until = Instant::now() + window;
    while Instant::now() < until {
        let started = Instant::now();
        health.check(tonic_health::pb::HealthCheckRequest::default()).await.expect("health");
        checks.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        let _ = client.get_rank(v1::GetRankRequest { product_id: product, ..Default::default() }).await;
        ranks.push(started.elapsed().as_secs_f64() * 1e3);
    }
    checks.sort_by(f64::total_cmp);
    ranks.sort_by(f64::total_cmp);
    (checks, ranks)
}

pub async fn bench_fencing(products: i64, redis: &str, seeds: &str) {
    println!("\n## Fenced writes: {products} products\n");
    let entries: Vec<Scored> =
        (1..=products).rev().map(|p| Scored { product_id: p, score: p as f64 / 1_000.0 }).collect();
    let copy = Arc::new(Snapshot::from_unordered(entries).expect("copy"));
    println!(
        "| topology | fenced s (median of {ROUNDS}) | unchecked s | fenced / unchecked (target ≤ 1.02×) | rounds, fenced · unchecked |"
    );
    println!("|---|---:|---:|---:|---|");
    for (name, url, mode) in [("one Redis", redis, RedisMode::Single), ("Redis Cluster", seeds, RedisMode::Cluster)] {
        let (mut fenced, mut unchecked) = publications(url, mode, &copy).await;
        let rounds = |v: &[f64]| v.iter().map(|s| format!("{s:.3}")).collect::<Vec<_>>().join(", ");
        let each = format!("{} · {}", rounds(&fenced), rounds(&unchecked));
        let (f, u) = (median(&mut fenced), median(&mut unchecked));
        println!("| {name} | {f:.3} | {u:.3} | {:.3}× | {each} |", f / u);
    }
    drop(copy);

    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let prefix = format!("bench-fencing-rc-{:x}", Utc::now().timestamp_micros());
    // Migrations first, from a server that is then stopped; the day seeded; then the release
    // server, whose start-up recompute is awaited before anything is measured.
    crate::serve(&[format!("--database-url={}", pg.url())]).await.stop().await;
    crate::helpers::faults::seed_day(&pg.url(), Utc::now().date_naive(), products).await;
    let envs = vec![
        ("DATABASE_URL", pg.url()),
        ("REDIS_URL", redis.to_string()),
        ("RANKING_REDIS_PREFIX", prefix.clone()),
        ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
        ("RANKING_LIVE_INTERVAL", "0".to_string()),
    ];
    let server = crate::helpers::process::ServerProcess::start(&envs).await;
    let mut client = ranking_client::connect(format!("http://{}", server.addr)).await.expect("connect");
    ranking_server::test_support::eventually("the start-up recompute published today", || {
        let mut c = client.clone();
        async move {
            c.get_top_n(v1::GetTopNRequest::default()).await.is_ok_and(|r| r.into_inner().total == products as u64)
        }
    })
    .await;
    let product = products / 2;
    let idle = probe(server.addr, Duration::from_secs(5), product).await;
    let recompute = tokio::spawn({
        let mut c = client.clone();
        async move {
            let started = Instant::now();
            c.recompute(v1::RecomputeRequest::default()).await.expect("recompute");
            started.elapsed()
        }
    });
    // Probed for as long as the recompute runs (it takes seconds at a million products).
    let mut busy = (Vec::new(), Vec::new());
    while !recompute.is_finished() {
        let (checks, ranks) = probe(server.addr, Duration::from_millis(500), product).await;
        busy.0.extend(checks);
        busy.1.extend(ranks);
    }
    let took = recompute.await.expect("joined");
    busy.0.sort_by(f64::total_cmp);
    busy.1.sort_by(f64::total_cmp);
    println!(
        "\n### Answered during a recompute of {products} products ({:.1} s, release server, throwaway PostgreSQL)\n",
        took.as_secs_f64()
    );
    println!("| call | when | calls | p50 ms | p99 ms | p99.9 ms | max ms | over 50 ms |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (name, (checks, ranks)) in [("idle", &idle), ("recomputing", &busy)] {
        for (call, ms) in [("health check", checks), ("GetRank", ranks)] {
            println!(
                "| {call} | {name} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
                ms.len(),
                percentile(ms, 0.5),
                percentile(ms, 0.99),
                percentile(ms, 0.999),
                ms.last().copied().unwrap_or(0.0),
                ms.iter().filter(|m| **m > 50.0).count()
            );
        }
    }
    let _ = client.get_top_n(v1::GetTopNRequest::default()).await;
    server.terminate();
    server.wait().await;
    let conn = crate::helpers::redis_connection(redis, RedisMode::Single);
    crate::helpers::delete_keys(&conn, &prefix).await;
}
