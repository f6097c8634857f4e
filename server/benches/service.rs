//! `make bench`: throughput and latency of the service on this machine, printed as tables.
//!
//! Scenarios (first argument; the rest are options):
//! - `ingest <database-url|throwaway-postgres>`: RecordEvents throughput for batches of 100,
//!   1,000 and 10,000 (Zipf-like product popularity, 5 % duplicate ids), statements per batch
//!   as counted by the database, and RecordEvent throughput at 256 concurrent callers.
//! - `recompute <products> <redis-url>`: Recompute end to end on a throwaway PostgreSQL with
//!   `<products>` products ranked today: wall time and the process's peak memory.
//! - `reads <redis-url>`: GetTopN(limit 20) and GetRank throughput and latency at 50 and 500
//!   concurrent callers on a 100,000-product ranking, next to `redis-benchmark` on the same key.
//!   Two load generators: `h2load` (nghttp2's HTTP/2 benchmark, a separate C process like
//!   `redis-benchmark`; Debian package `nghttp2-client`) and this crate's own tonic client
//!   running inside the bench process.
//!
//! The server runs in this process on port 0; figures include the gRPC round trip.

#[allow(dead_code)]
#[path = "../tests/common/pg.rs"]
mod pg;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use clap::Parser;
use prost::Message;
use ranking_client::tonic::transport::Channel;
use ranking_client::{RankingServiceClient, v1};
use ranking_server::config::Settings;
use ranking_server::startup::Application;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement};
use tokio::sync::oneshot;

type Client = RankingServiceClient<Channel>;

// The same allocator as the `ranking-server` binary, since the server runs in this process.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Running {
    clients: Vec<Client>,
    stop: oneshot::Sender<()>,
    addr: std::net::SocketAddr,
}

async fn serve(args: &[String]) -> Running {
    let mut argv = vec!["ranking-server".to_string(), "--listen=127.0.0.1:0".into(), "--recompute-interval=0".into()];
    argv.extend(args.iter().cloned());
    let settings = Settings::try_parse_from(argv).expect("bench settings");
    let app = Application::build(settings).await.expect("server builds");
    let addr = app.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(app.run_until_stopped(async {
        let _ = stopped.await;
    }));
    let mut clients = Vec::new();
    // Several HTTP/2 connections, as a fleet of callers would open.
    for _ in 0..8 {
        clients.push(ranking_client::connect(format!("http://{addr}")).await.expect("connect"));
    }
    Running { clients, stop, addr }
}

/// Deterministic xorshift generator: the same workload on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A product id with Zipf-like popularity (s ≈ 1) over `n` products.
    fn zipf(&mut self, n: u64) -> i64 {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((n as f64).powf(u)).floor() as i64
    }
}

fn ts() -> prost_types::Timestamp {
    let now = Utc::now();
    prost_types::Timestamp { seconds: now.timestamp(), nanos: 0 }
}

/// A workload of `total` events in batches of `size`, 5 % of each batch re-sending earlier ids.
fn workload(size: usize, total: usize, run: &str) -> Vec<Vec<v1::Event>> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ size as u64);
    let at = ts();
    let mut sent: Vec<v1::Event> = Vec::new();
    let mut batches = Vec::new();
    let mut n = 0usize;
    while n < total {
        let mut batch = Vec::with_capacity(size);
        for _ in 0..size {
            let dup = !sent.is_empty() && rng.next() % 100 < 5;
            let e = if dup {
                sent[(rng.next() % sent.len() as u64) as usize].clone()
            } else {
                let r = rng.next();
                let (kind, amount) = match r % 20 {
                    0 => (v1::EventType::Order, ((r >> 8) % 200_000) as i64),
                    1..=3 => (v1::EventType::Like, 0),
                    4 => (v1::EventType::Unlike, 0),
                    _ => (v1::EventType::View, 0),
                };
                let e = v1::Event {
                    event_id: format!("{run}-{size}-{n}"),
                    product_id: rng.zipf(100_000),
                    r#type: kind.into(),
                    amount,
                    occurred_at: Some(at),
                };
                sent.push(e.clone());
                e
            };
            batch.push(e);
            n += 1;
        }
        batches.push(batch);
    }
    batches
}

/// Statements executed so far, as the database counts them.
async fn statements(db: &DatabaseConnection) -> Option<i64> {
    let (sql, col) = match db.get_database_backend() {
        DbBackend::Postgres => (
            "SELECT COALESCE(SUM(calls), 0)::bigint FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
             WHERE d.datname = current_database() AND s.query NOT ILIKE '%pg_stat_statements%'",
            0,
        ),
        DbBackend::MySql => ("SHOW GLOBAL STATUS LIKE 'Questions'", 1),
        _ => return None,
    };
    let row = db.query_one_raw(Statement::from_string(db.get_database_backend(), sql)).await.ok()??;
    match col {
        0 => row.try_get_by_index::<i64>(0).ok(),
        _ => row.try_get_by_index::<String>(1).ok()?.parse().ok(),
    }
}

async fn bench_ingest(target: &str) {
    let throwaway;
    let url = if target == "throwaway-postgres" {
        throwaway =
            pg::ThrowawayPostgres::start_with("-c shared_preload_libraries=pg_stat_statements -c max_connections=300")
                .expect("PostgreSQL server binaries");
        let url = throwaway.url();
        let db = Database::connect(&url).await.expect("connect");
        db.execute_unprepared("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").await.expect("extension");
        url
    } else if let Some((server, _)) = target.rsplit_once('/') {
        // A database of its own, so every run starts from empty tables.
        let admin = Database::connect(target).await.expect("connect");
        let name = format!("rk_bench_{:x}", Utc::now().timestamp_micros());
        admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create database");
        format!("{server}/{name}")
    } else {
        target.to_string()
    };
    let run = format!("{:x}", Utc::now().timestamp_micros());
    let app = serve(&[format!("--database-url={url}"), "--db-max-connections=32".into()]).await;
    let db = Database::connect(&url).await.expect("connect");
    let engine = match db.get_database_backend() {
        DbBackend::Postgres => "PostgreSQL",
        DbBackend::MySql => "MariaDB/MySQL",
        _ => "SQLite",
    };
    // Single events through the group commit.
    let callers = 256;
    let duration = Duration::from_secs(5);
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..callers {
        let mut c = app.clients[i % app.clients.len()].clone();
        let (done, stop, run) = (done.clone(), stop.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            let mut rng = Rng(0x9E37_79B9 + i as u64);
            while !stop.load(Ordering::Relaxed) {
                let e = v1::Event {
                    event_id: format!("{run}-single-{i}-{n}"),
                    product_id: rng.zipf(100_000),
                    r#type: v1::EventType::View.into(),
                    amount: 0,
                    occurred_at: Some(ts()),
                };
                c.record_event(v1::RecordEventRequest { event: Some(e) }).await.expect("RecordEvent");
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let before = statements(&db).await;
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("caller");
    }
    let secs = started.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    let stmts = match (before, statements(&db).await) {
        (Some(a), Some(b)) => format!("{}", b - a),
        _ => "n/a".into(),
    };
    println!("\n## RecordEvent (group commit) on {engine} ({target}), fresh database\n");
    println!("| RecordEvent callers | events | seconds | events/s | statements |\n|---:|---:|---:|---:|---:|");
    println!("| {callers} | {n} | {secs:.2} | {:.0} | {stmts} |", n as f64 / secs);
    let batch_sizes: &[(usize, usize)] = if std::env::var_os("BENCH_SINGLE_ONLY").is_some() {
        &[]
    } else {
        &[(100, 100_000), (1_000, 200_000), (10_000, 300_000)]
    };
    println!("\n## RecordEvents on {engine} ({target})\n");
    println!("| batch | events | seconds | events/s | duplicates | statements/batch |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for &(size, total) in batch_sizes {
        let batches = workload(size, total, &run);
        let count = batches.len();
        let before = statements(&db).await;
        let started = Instant::now();
        let queue = Arc::new(tokio::sync::Mutex::new(batches.into_iter()));
        let dups = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for c in app.clients.iter().take(4) {
            let (mut c, queue, dups) = (c.clone(), queue.clone(), dups.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let Some(batch) = queue.lock().await.next() else { return };
                    let r = c.record_events(v1::RecordEventsRequest { events: batch }).await.expect("RecordEvents");
                    dups.fetch_add(u64::from(r.into_inner().duplicates), Ordering::Relaxed);
                }
            }));
        }
        for t in tasks {
            t.await.expect("writer");
        }
        let secs = started.elapsed().as_secs_f64();
        let per_batch = match (before, statements(&db).await) {
            (Some(a), Some(b)) => format!("{:.1}", (b - a - 1) as f64 / count as f64),
            _ => "n/a".into(),
        };
        println!(
            "| {size} | {total} | {secs:.2} | {:.0} | {} | {per_batch} |",
            total as f64 / secs,
            dups.load(Ordering::Relaxed)
        );
    }

    let _ = app.stop.send(());
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

async fn bench_recompute(products: i64, redis: &str) {
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
    let _ = app.stop.send(());
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

async fn drive_reads(app: &Running, callers: usize, duration: Duration, rank: bool) -> (f64, f64, f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..callers {
        let mut c = app.clients[i % app.clients.len()].clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut rng = Rng(0xABCD_0000 + i as u64);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                if rank {
                    let product_id = 1 + (rng.next() % 100_000) as i64;
                    c.get_rank(v1::GetRankRequest { product_id, ..Default::default() }).await.expect("GetRank");
                } else {
                    c.get_top_n(v1::GetTopNRequest { limit: 20, ..Default::default() }).await.expect("GetTopN");
                }
                lat.push(t.elapsed().as_micros() as u32);
            }
            lat
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("reader"));
    }
    let secs = started.elapsed().as_secs_f64();
    all.sort_unstable();
    (all.len() as f64 / secs, percentile(&all, 0.5), percentile(&all, 0.95), percentile(&all, 0.99))
}

fn redis_benchmark(redis: &str, callers: usize, args: &[&str]) -> f64 {
    let url = redis.trim_start_matches("redis://");
    let (host, port) = url.split_once(':').unwrap_or((url, "6379"));
    let port = port.trim_end_matches('/');
    let out = std::process::Command::new("redis-benchmark")
        .args(["-h", host, "-p", port, "-c", &callers.to_string(), "-n", "200000", "-q", "--csv"])
        .args(args)
        .output();
    let Ok(out) = out else { return f64::NAN };
    // CSV: "test","rps",…  — the second line holds the figures.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.split(',').nth(1))
        .and_then(|v| v.trim_matches('"').parse().ok())
        .unwrap_or(f64::NAN)
}

/// Unary gRPC calls of `method` with the encoded request `body` from `h2load` over 10
/// connections, `callers` streams in flight: calls/s and p50/p95/p99 ms. Fails unless every
/// call returned an answer of `answer_len` bytes.
fn h2load(
    addr: std::net::SocketAddr,
    method: &str,
    body: &[u8],
    answer_len: usize,
    callers: usize,
    duration: Duration,
) -> Result<(f64, f64, f64, f64), String> {
    let dir = std::env::temp_dir();
    let stamp = Utc::now().timestamp_micros();
    let body_file = dir.join(format!("rk-h2load-{stamp}.bin"));
    let log_file = dir.join(format!("rk-h2load-{stamp}.log"));
    // gRPC message framing: uncompressed flag, big-endian length, message.
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(body.len()).expect("small request").to_be_bytes());
    framed.extend_from_slice(body);
    std::fs::write(&body_file, framed).map_err(|e| e.to_string())?;
    let connections = 10.min(callers);
    let out = std::process::Command::new("h2load")
        .args(["-c", &connections.to_string(), "-m", &(callers / connections).to_string()])
        .args(["-D", &duration.as_secs().to_string()])
        .arg(format!("--log-file={}", log_file.display()))
        .arg("-d")
        .arg(&body_file)
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg(format!("http://{addr}/ranking.v1.RankingService/{method}"))
        .output()
        .map_err(|e| format!("not run ({e}); install nghttp2-client"))?;
    let _ = std::fs::remove_file(&body_file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = std::fs::read_to_string(&log_file).unwrap_or_default();
    let _ = std::fs::remove_file(&log_file);
    // "finished in 5.00s, 60000.00 req/s, …" and "traffic: … total, … headers (…), N data".
    let field = |line: &str, after: &str| -> Option<f64> {
        stdout.lines().find(|l| l.starts_with(line))?.split(after).next()?.rsplit([' ', '(']).next()?.parse().ok()
    };
    let rps = field("finished in", " req/s").ok_or_else(|| format!("unexpected output: {stdout}"))?;
    let data = stdout
        .lines()
        .find(|l| l.starts_with("traffic:"))
        .and_then(|l| l.trim_end().strip_suffix(" data"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim_start_matches('(').trim_end_matches(')').parse::<u64>().ok());
    // Latencies: one line per call, "start-µs status duration-µs".
    let mut lat: Vec<u32> = log.lines().filter_map(|l| l.split('\t').nth(2)?.trim().parse().ok()).collect();
    lat.sort_unstable();
    let done = field("requests:", " done").unwrap_or(0.0) as u64;
    let expected = done * (5 + answer_len as u64);
    if data != Some(expected) {
        return Err(format!("{data:?} body bytes for {done} calls, expected {expected}: some calls failed"));
    }
    Ok((rps, percentile(&lat, 0.5), percentile(&lat, 0.95), percentile(&lat, 0.99)))
}

async fn bench_reads(redis: &str) {
    let db_file = std::env::temp_dir().join(format!("rk-bench-{:x}.db", Utc::now().timestamp_micros()));
    let prefix = format!("bench-{:x}", Utc::now().timestamp_micros());
    let app = serve(&[
        format!("--database-url=sqlite://{}?mode=rwc", db_file.display()),
        format!("--redis-url={redis}"),
        format!("--redis-prefix={prefix}"),
    ])
    .await;
    // A 100,000-product ranking written straight into Redis, as a recompute would.
    let store = ranking_server::adapters::redis::RedisRankingStore::connect(&{
        let mut o = ranking_server::adapters::redis::RedisOptions::new(redis);
        o.prefix = prefix.clone();
        o
    })
    .expect("redis");
    let today = ranking_server::domain::calendar::RankingCalendar::new(chrono_tz::UTC).day_of(Utc::now());
    let entries: Vec<_> = (1..=100_000i64)
        .map(|p| ranking_server::ports::Scored { product_id: p, score: ((p * 7919) % 1_000_000) as f64 / 1000.0 })
        .collect();
    use ranking_server::ports::RankingStore;
    store.replace_daily(today, &entries, Utc::now() + chrono::Duration::hours(1)).await.expect("seed ranking");
    let key = store.key(ranking_server::ports::RankingKey::Daily(today));
    let member = ranking_server::adapters::redis::member(50_000);

    let top_request = v1::GetTopNRequest { limit: 20, ..Default::default() };
    let rank_request = v1::GetRankRequest { product_id: 50_000, ..Default::default() };
    // Every successful answer has the same size, so h2load's byte count proves that all of
    // its calls succeeded (a gRPC error is a trailers-only response with no body).
    let mut c = app.clients[0].clone();
    let top_len = c.get_top_n(top_request.clone()).await.expect("GetTopN").into_inner().encoded_len();
    let rank_len = c.get_rank(rank_request.clone()).await.expect("GetRank").into_inner().encoded_len();

    println!("\n## Reads on a 100,000-product daily ranking (server {})\n", app.addr);
    println!(
        "| call | callers | load generator | calls/s | p50 ms | p95 ms | p99 ms | redis-benchmark rps (same command shape) | service / raw |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for callers in [50usize, 500] {
        for rank in [false, true] {
            let raw = if rank {
                redis_benchmark(redis, callers, &["ZREVRANK", &key, &member])
            } else {
                redis_benchmark(redis, callers, &["ZREVRANGE", &key, "0", "19", "WITHSCORES"])
            };
            let (name, path, body, answer_len) = if rank {
                ("GetRank", "GetRank", rank_request.encode_to_vec(), rank_len)
            } else {
                ("GetTopN(20)", "GetTopN", top_request.encode_to_vec(), top_len)
            };
            let row = |generator: &str, (rps, p50, p95, p99): (f64, f64, f64, f64)| {
                println!(
                    "| {name} | {callers} | {generator} | {rps:.0} | {p50:.2} | {p95:.2} | {p99:.2} | {raw:.0} | {:.0} % |",
                    100.0 * rps / raw
                );
            };
            match h2load(app.addr, path, &body, answer_len, callers, Duration::from_secs(5)) {
                Ok(figures) => row("h2load", figures),
                Err(e) => println!("| {name} | {callers} | h2load: {e} | | | | | {raw:.0} | |"),
            }
            row("tonic client, in process", drive_reads(&app, callers, Duration::from_secs(5), rank).await);
        }
    }
    let _ = app.stop.send(());
    let _ = std::fs::remove_file(db_file);
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    match args.first().map(String::as_str) {
        Some("ingest") => bench_ingest(args.get(1).map(String::as_str).unwrap_or("throwaway-postgres")).await,
        Some("recompute") => {
            let n = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
            let redis = args.get(2).map(String::as_str).unwrap_or("redis://127.0.0.1:6379");
            bench_recompute(n, redis).await;
        }
        Some("recompute-header") => {
            println!("\n## Recompute end to end (throwaway PostgreSQL → engine → Redis staging → RENAME)\n");
            println!("| products | ranked | server elapsed ms | wall s | RSS before MB | peak RSS MB |");
            println!("|---:|---:|---:|---:|---:|---:|");
        }
        Some("reads") => bench_reads(args.get(1).map(String::as_str).unwrap_or("redis://127.0.0.1:6379")).await,
        _ => eprintln!(
            "usage: service ingest <db-url|throwaway-postgres> | recompute <products> [redis-url] | reads [redis-url]"
        ),
    }
}
