//! `reads`: GetTopN and GetRank next to redis-benchmark, driven by h2load and by the tonic client.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use prost::Message;
use ranking_client::v1;

use crate::ingest::Rng;
use crate::{Running, percentile, serve};

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

pub async fn bench_reads(redis: &str) {
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
    let daily = ranking_server::ports::RankingKey::Daily(today);
    let life = ranking_server::ports::VersionLife {
        expire_at: Utc::now() + chrono::Duration::hours(1),
        superseded_for: Duration::from_secs(60),
    };
    let version = store.publish(daily, &entries, life).await.expect("seed ranking");
    let key = store.versioned_key(daily, version);
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
    app.stop().await;
    let _ = std::fs::remove_file(db_file);
}
