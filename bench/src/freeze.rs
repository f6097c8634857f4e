//! `freeze REDIS`: what one replica frozen inside its write transaction costs the others.
//!
//! Two release replicas over one throwaway database (PostgreSQL, then MariaDB) and `REDIS`,
//! both taking batches of 200 views of the same 50 products (so every batch of either locks
//! the rows of the other's), live passes every second. Replica A is stopped (SIGSTOP) at a
//! moment it is caught inside its write transaction and kept so for 30 s; replica B's
//! RecordEvents calls are timed throughout, a Recompute is asked of B just after the freeze,
//! and views of a new product recorded on B just after the freeze are waited for in B's
//! served ranking (the write, then a live pass). The same with no freeze is the baseline;
//! each engine runs under `RANKING_SQL_TX_TIMEOUT` 5 s (the default) and 2 s.
//!
//! Then A as the holder of the day's leases: A takes the live lease first (B starts once it
//! holds it), and is stopped at a moment it holds the day's lease too (inside a live pass):
//! what B waits for is A's leases, whose life is the limit, and no longer the 30 s of
//! `RANKING_RECOMPUTE_LEASE`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database};

use crate::helpers::faults::{freeze_inside_a_write_transaction, signal};
use crate::helpers::process::ServerProcess;
use crate::helpers::{event, mariadb, pg};

/// Products both replicas write.
const SHARED: i64 = 50;
/// How long replica A stays frozen.
const FREEZE: Duration = Duration::from_secs(30);

/// Views of the shared products, ids `{prefix}-{i}`.
fn views(prefix: &str) -> Vec<v1::Event> {
    let at = Utc::now() - chrono::Duration::seconds(1);
    (0..200).map(|i| event(&format!("{prefix}-{i}"), 1 + i % SHARED, v1::EventType::View, 0, at)).collect()
}

/// A channel without a call deadline (a call may span the freeze).
async fn client(addr: std::net::SocketAddr) -> crate::Client {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).expect("endpoint");
    v1::ranking_service_client::RankingServiceClient::new(endpoint.connect().await.expect("connect"))
}

/// Batches sent back to back until `stop`, each retried until acknowledged: every call's
/// start (since `origin`) and seconds, and the codes of the calls refused.
async fn produce(
    addr: std::net::SocketAddr,
    name: String,
    origin: Instant,
    stop: Arc<AtomicBool>,
) -> (Vec<(f64, f64)>, Vec<tonic::Code>) {
    let mut client = client(addr).await;
    let (mut calls, mut refused) = (Vec::new(), Vec::new());
    let mut batch = 0;
    while !stop.load(Ordering::Relaxed) {
        let events = views(&format!("{name}-{batch}"));
        loop {
            let started = Instant::now();
            let answer = client.record_events(v1::RecordEventsRequest { events: events.clone() }).await;
            calls.push(((started - origin).as_secs_f64(), started.elapsed().as_secs_f64()));
            match answer {
                Ok(_) => break,
                Err(status) => refused.push(status.code()),
            }
        }
        batch += 1;
    }
    (calls, refused)
}

/// The product recorded on B just after the freeze, in no ranking before.
const MARKER: i64 = 9_999;

/// Whether B serves [`MARKER`] in today's ranking.
async fn marker_is_served(client: &mut crate::Client) -> bool {
    client.get_rank(v1::GetRankRequest { product_id: MARKER, ..Default::default() }).await.is_ok()
}

/// How replica A is frozen, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freeze {
    None,
    /// Inside its write transaction.
    InTransaction,
    /// Holding the live lease and the day's lease, inside a live pass.
    HoldingTheDay,
}

/// Whether `key` exists in `redis`.
async fn exists(redis: &str, key: &str) -> bool {
    let mut conn = crate::helpers::redis_connection(redis, ranking_server::adapters::redis::RedisMode::Single);
    redis::AsyncCommands::exists(&mut conn, key).await.unwrap_or(false)
}

/// Stops A at a moment it holds the day's lease (only A takes it: B holds no live lease):
/// stopped, looked at, and let go again until it is caught so. Returns the attempts.
async fn freeze_holding_the_day(pid: u32, redis: &str, prefix: &str) -> u32 {
    let day = format!("{prefix}:{{daily:{}}}:lock", Utc::now().date_naive());
    let mut attempts = 0;
    loop {
        attempts += 1;
        assert!(attempts < 2_000, "never caught A holding the day's lease");
        while !exists(redis, &day).await {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        signal(pid, "STOP");
        if exists(redis, &day).await {
            return attempts;
        }
        signal(pid, "CONT");
    }
}

/// What one run measured.
struct Run {
    /// B's longest RecordEvents call that started after the freeze (the whole run without one).
    longest_call: f64,
    /// B's calls refused.
    refused: usize,
    /// Seconds from the freeze to B serving the views it recorded just after it.
    marker_served: f64,
    /// B's Recompute asked just after the freeze.
    recompute: f64,
    /// A's calls refused (its interrupted batch).
    frozen_refused: Vec<tonic::Code>,
    /// Attempts it took to catch A inside a transaction.
    attempts: u32,
}

async fn run(url: &str, redis: &str, limit: &str, mode: Freeze) -> Run {
    let freeze = mode != Freeze::None;
    let prefix = format!("bench-freeze-{:x}", crate::helpers::rand_u64());
    let env = |live: &str| {
        vec![
            ("DATABASE_URL", url.to_string()),
            ("REDIS_URL", redis.to_string()),
            ("RANKING_REDIS_PREFIX", prefix.clone()),
            ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
            ("RANKING_LIVE_INTERVAL", live.to_string()),
            ("RANKING_SQL_TX_TIMEOUT", limit.to_string()),
        ]
    };
    let holder = mode == Freeze::HoldingTheDay;
    let a = ServerProcess::start(&env(if holder { "1s" } else { "0" })).await;
    if holder {
        let live = format!("{prefix}:lock:live:{}", Utc::now().date_naive());
        while !exists(redis, &live).await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let b = ServerProcess::start(&env("1s")).await;
    let admin = Database::connect(url).await.expect("admin connection");
    let origin = Instant::now();
    let (stop_a, stop_b) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let run_id = crate::helpers::rand_u64();
    let producer_a = tokio::spawn(produce(a.addr, format!("a{run_id:x}"), origin, stop_a.clone()));
    let producer_b = tokio::spawn(produce(b.addr, format!("b{run_id:x}"), origin, stop_b.clone()));
    tokio::time::sleep(Duration::from_secs(3)).await;

    let attempts = match mode {
        Freeze::None => 0,
        Freeze::InTransaction => freeze_inside_a_write_transaction(a.pid(), &admin).await,
        Freeze::HoldingTheDay => freeze_holding_the_day(a.pid(), redis, &prefix).await,
    };
    let frozen_at = Instant::now();
    let mut b_client = client(b.addr).await;
    let marker = {
        let mut c = b_client.clone();
        let at = Utc::now();
        let events = (0..300).map(|i| event(&format!("m{run_id:x}-{i}"), MARKER, v1::EventType::View, 0, at)).collect();
        tokio::spawn(async move { c.record_events(v1::RecordEventsRequest { events }).await.map(drop) })
    };
    let recompute = {
        let mut c = b_client.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            c.recompute(v1::RecomputeRequest::default()).await.expect("recompute on B");
            started.elapsed().as_secs_f64()
        })
    };
    let mut marker_served = f64::NAN;
    while frozen_at.elapsed() < FREEZE {
        if marker_served.is_nan() && marker_is_served(&mut b_client).await {
            marker_served = frozen_at.elapsed().as_secs_f64();
        }
        if !marker_served.is_nan() && recompute.is_finished() && frozen_at.elapsed() > Duration::from_secs(12) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    marker.await.expect("marker joined").expect("the marker's views recorded on B");
    if freeze {
        signal(a.pid(), "CONT");
    }
    let recompute = recompute.await.expect("recompute joined");
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_a.store(true, Ordering::Relaxed);
    stop_b.store(true, Ordering::Relaxed);
    let (_, frozen_refused) = producer_a.await.expect("producer A");
    let (calls, refused) = producer_b.await.expect("producer B");
    let since = (frozen_at - origin).as_secs_f64();
    let longest_call = calls.iter().filter(|(at, _)| *at >= since - 1.0).map(|(_, s)| *s).fold(0.0, f64::max);
    for server in [a, b] {
        server.terminate();
        server.wait().await;
    }
    let conn = crate::helpers::redis_connection(redis, ranking_server::adapters::redis::RedisMode::Single);
    crate::helpers::delete_keys(&conn, &prefix).await;
    Run { longest_call, refused: refused.len(), marker_served, recompute, frozen_refused, attempts }
}

pub async fn bench_freeze(redis: &str) {
    println!(
        "\n## A replica frozen inside its write transaction, or holding the day's leases (SIGSTOP, {} s)\n",
        FREEZE.as_secs()
    );
    println!(
        "| engine | RANKING_SQL_TX_TIMEOUT | freeze | B's longest RecordEvents s | B's calls refused | B's new views served after s | B's Recompute s | A's interrupted caller | attempts to catch A |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---|---:|");
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let maria = mariadb::ThrowawayMariaDb::start().expect("MariaDB server binaries");
    for (engine, server_url) in [("PostgreSQL", pg.url()), ("MariaDB", maria.url())] {
        for limit in ["5s", "2s"] {
            for mode in [Freeze::None, Freeze::InTransaction, Freeze::HoldingTheDay] {
                // A database of its own per run: migrations applied by the first replica.
                let name = format!("freeze_{:x}", crate::helpers::rand_u64());
                let admin = Database::connect(&server_url).await.expect("admin");
                admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create database");
                let url = format!("{}/{name}", server_url.rsplit_once('/').expect("a database path").0);
                let r = run(&url, redis, limit, mode).await;
                let caller = match (mode, r.frozen_refused.as_slice()) {
                    (Freeze::None, _) => "—".to_string(),
                    (_, []) => "retry not needed".to_string(),
                    (_, codes) => format!("{codes:?}, then retried: OK"),
                };
                let frozen = match mode {
                    Freeze::None => "none",
                    Freeze::InTransaction => "A frozen in its transaction",
                    Freeze::HoldingTheDay => "A frozen holding the day's leases",
                };
                println!(
                    "| {engine} | {limit} | {frozen} | {:.2} | {} | {:.2} | {:.2} | {caller} | {} |",
                    r.longest_call, r.refused, r.marker_served, r.recompute, r.attempts
                );
            }
        }
    }
}
