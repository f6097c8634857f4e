//! `cluster <products> <redis-url> <cluster-seeds>`: the same work on one Redis node and on a
//! Redis Cluster (3 masters, 3 replicas on this machine), in one run: Recompute of
//! `<products>` products (wall time and the daily publication phase), then GetTopN(20) and
//! GetRank answered from the replica's in-process copy and, with the copy turned off
//! (`RANKING_SNAPSHOT_MAX_ENTRIES=0`), from Redis itself. The load comes from 64 concurrent
//! callers in this process over 8 connections, so the figures compare the two topologies
//! rather than measure the server alone (the `reads` scenario does that).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use ranking_client::v1;

use crate::helpers::pg;
use crate::{Client, percentile, serve};

/// Seconds of each read measurement.
const READ_SECONDS: u64 = 3;
/// Concurrent callers during a read measurement.
const CALLERS: usize = 64;

/// Calls/s and p95 ms of `call` made by [`CALLERS`] callers for [`READ_SECONDS`].
async fn load<F, Fut>(clients: &[Client], call: F) -> (f64, f64)
where
    F: Fn(Client, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|i| {
            let (client, call, stop) = (clients[i % clients.len()].clone(), call.clone(), stop.clone());
            tokio::spawn(async move {
                let mut micros = Vec::new();
                let mut draw = crate::helpers::Draw::seeded(i as u64);
                let mut n = i as u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    call(client.clone(), n).await;
                    micros.push(t.elapsed().as_micros() as u32);
                    n = draw.next_u64();
                }
                micros
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(READ_SECONDS)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("caller"));
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    (all.len() as f64 / elapsed, percentile(&all, 0.95))
}

/// GetTopN(20) and GetRank of random products: (calls/s, p95 ms) each.
async fn reads(clients: &[Client], products: i64) -> [(f64, f64); 2] {
    let top = load(clients, |mut c: Client, _| async move {
        c.get_top_n(v1::GetTopNRequest { limit: 20, ..Default::default() }).await.expect("GetTopN");
    })
    .await;
    let rank = load(clients, move |mut c: Client, n| async move {
        let product_id = (n % products as u64) as i64 + 1;
        c.get_rank(v1::GetRankRequest { product_id, ..Default::default() }).await.expect("GetRank");
    })
    .await;
    [top, rank]
}

pub async fn bench_cluster(products: i64, single: &str, seeds: &str) {
    let mut rows = Vec::new();
    for (topology, url, mode) in [("single node", single, "single"), ("cluster 3×2", seeds, "cluster")] {
        let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
        let prefix = format!("bench-{:x}", Utc::now().timestamp_micros());
        let args = |extra: &[&str]| {
            let mut args = vec![
                format!("--database-url={}", pg.url()),
                format!("--redis-url={url}"),
                format!("--redis-mode={mode}"),
                format!("--redis-prefix={prefix}"),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            args
        };
        let mut app = serve(&args(&[])).await;
        crate::recompute::seed_day(&pg.url(), Utc::now().date_naive(), products).await;
        let started = Instant::now();
        app.clients[0].recompute(v1::RecomputeRequest::default()).await.expect("recompute");
        let wall = started.elapsed().as_secs_f64();
        let (daily, _, _) = crate::recompute::phases(&app).await;
        let from_copy = reads(&app.clients, products).await;
        // A second replica on the same database and prefix that holds no copy: every read
        // goes to Redis.
        let direct = serve(&args(&["--snapshot-max-entries=0"])).await;
        let from_redis = reads(&direct.clients, products).await;
        direct.stop().await;
        app.stop().await;
        rows.push(format!(
            "| {topology} | {products} | {wall:.2} | {daily:.2} | {:.0} / {:.2} | {:.0} / {:.2} | {:.0} / {:.2} | {:.0} / {:.2} |",
            from_copy[0].0,
            from_copy[0].1,
            from_copy[1].0,
            from_copy[1].1,
            from_redis[0].0,
            from_redis[0].1,
            from_redis[1].0,
            from_redis[1].1
        ));
        eprintln!("{}", rows.last().expect("row"));
    }
    println!(
        "\n## One Redis node vs Redis Cluster (3 masters + 3 replicas on this machine; throwaway PostgreSQL; \
         {CALLERS} callers in the bench process, {READ_SECONDS} s per cell)\n"
    );
    println!(
        "| topology | products | Recompute wall s | daily phase s | GetTopN(20) from copy calls/s / p95 ms | GetRank from copy | \
         GetTopN(20) from Redis | GetRank from Redis |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
}
