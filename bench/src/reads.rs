//! `reads`: GetTopN(20) and GetRank against the same server's health check, raw
//! `redis-benchmark` and, for GetTopN, a bare tonic server answering the same bytes
//! ([`crate::bare`]: the transport's own limit), driven by `h2load` (a separate process) in
//! two shapes, 10 connections × 50 streams and 500 connections × 1 stream, on 100,000 and
//! 1,000,000 ranked products.
//! The server is the release binary in a process of its own, so its CPU time per call comes
//! from `/proc/<pid>/stat` and the load generator cannot distort it. Also measured: how
//! long a published version takes to be served from the server's in-memory copy, and the
//! resident memory that copy adds.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use chrono::Utc;
use prost::Message;
use ranking_client::v1;
use ranking_server::adapters::redis::RedisMode;
use ranking_server::ports::{RankingKey, RankingStore, Scored, VersionLife};

use crate::helpers::process::ServerProcess;
use crate::hostile::rss_mb;
use crate::percentile;

/// A measured call: name, gRPC path, encoded request, answer size, the redis-benchmark
/// command of the same shape, the server answering it (address, pid).
type Call<'a> = (&'a str, &'a str, Vec<u8>, usize, Vec<&'a str>, (SocketAddr, u32));

/// The calls' places in the table: the health check (what every call is compared with),
/// GetTopN(20) and the bare server's GetTopN (its limit on this stack).
const HEALTH: usize = 0;
const TOP: usize = 1;
const BARE_TOP: usize = 6;

/// The offered load (calls/s) of the fixed-rate CPU measurement, below every call's maximum.
const FIXED_RATE: usize = 10_000;

/// Interleaved runs of each call per shape; the median is reported.
const ROUNDS: usize = 5;

/// One load shape: HTTP/2 connections × concurrent streams on each.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) connections: usize,
    pub(crate) streams: usize,
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}×{}", self.connections, self.streams)
    }
}

/// One h2load run of one call: calls/s, p95 and p99 ms, CPU µs per call of the server and of
/// h2load.
#[derive(Debug, Clone, Copy)]
struct Round {
    rps: f64,
    p95: f64,
    p99: f64,
    server_us: f64,
    generator_us: f64,
}

// `children_cpu_seconds`: the finished children's CPU (`h2load`, run and waited for one at a
// time: the load generator's own cost per call).
pub use crate::helpers::process::{children_cpu_seconds, cpu_seconds};

/// `redis-benchmark` requests/s of one command in a shape (streams = pipelined requests).
fn redis_benchmark(redis: &str, shape: Shape, args: &[&str]) -> f64 {
    let url = redis.trim_start_matches("redis://");
    let (host, port) = url.split_once(':').unwrap_or((url, "6379"));
    let port = port.trim_end_matches('/');
    let out = std::process::Command::new("redis-benchmark")
        .args(["-h", host, "-p", port, "-c", &shape.connections.to_string(), "-P", &shape.streams.to_string()])
        .args(["-n", "300000", "-q", "--csv"])
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

/// Unary gRPC calls of `path` with the encoded request `body` from `h2load` in `shape`:
/// calls/s, calls done, and p50/p95/p99 ms. Fails unless every call returned an answer of
/// `answer_len` bytes.
pub(crate) fn h2load(
    addr: SocketAddr,
    path: &str,
    body: &[u8],
    answer_len: usize,
    shape: Shape,
    duration: Duration,
    rate: Option<usize>,
) -> Result<(f64, u64, f64, f64, f64), String> {
    let dir = std::env::temp_dir();
    let stamp = Utc::now().timestamp_micros();
    let body_file = dir.join(format!("rk-h2load-{stamp}.bin"));
    let log_file = dir.join(format!("rk-h2load-{stamp}.log"));
    // gRPC message framing: uncompressed flag, big-endian length, message.
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(body.len()).expect("small request").to_be_bytes());
    framed.extend_from_slice(body);
    std::fs::write(&body_file, framed).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("h2load")
        .args(["-c", &shape.connections.to_string(), "-m", &shape.streams.to_string()])
        .args(["-t", "1"])
        .args(["-D", &duration.as_secs().to_string()])
        // A fixed offered load: calls/s per connection.
        .args(rate.map(|r| format!("--rps={}", (r / shape.connections).max(1))))
        .arg(format!("--log-file={}", log_file.display()))
        .arg("-d")
        .arg(&body_file)
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg(format!("http://{addr}{path}"))
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
    // Answers still arriving when the run ends (at most one per stream, possibly cut short)
    // are counted in the bytes but not as done.
    let frame = 5 + answer_len as u64;
    let expected = done * frame;
    let in_flight = (shape.connections * shape.streams) as u64 * frame;
    // `answer_len` 0: answers of varying length (a ranking moving under the calls), unchecked.
    if answer_len > 0 && !data.is_some_and(|d| d >= expected && d <= expected + in_flight) {
        return Err(format!("{data:?} body bytes for {done} calls of {frame} bytes: some calls failed"));
    }
    Ok((rps, done, percentile(&lat, 0.5), percentile(&lat, 0.95), percentile(&lat, 0.99)))
}

/// Publishes a ranking of `n` products into Redis under `prefix`, as a recompute would.
async fn publish(store: &ranking_server::adapters::redis::RedisRankingStore, n: i64) -> (u64, RankingKey) {
    let today = ranking_server::domain::calendar::RankingCalendar::new(chrono_tz::UTC).day_of(Utc::now());
    let mut entries: Vec<_> =
        (1..=n).map(|p| Scored { product_id: p, score: ((p * 7919) % 1_000_003) as f64 / 1000.0 }).collect();
    entries.sort_unstable_by(ranking_server::domain::snapshot::ranking_order);
    let key = RankingKey::Daily(today);
    let life =
        VersionLife { expire_at: Utc::now() + chrono::Duration::hours(1), superseded_for: Duration::from_secs(600) };
    (store.publish(key, &entries, life, &ranking_server::ports::Fence::unchecked()).await.expect("publish"), key)
}

/// Waits until the server answers GetTopN from `version`; the time it took.
async fn served_after(addr: SocketAddr, version: u64, published: Instant) -> Duration {
    let mut client = ranking_client::connect(format!("http://{addr}")).await.expect("connect");
    loop {
        let r = client.get_top_n(v1::GetTopNRequest { limit: 1, ..Default::default() }).await.expect("GetTopN");
        if r.into_inner().version == version {
            return published.elapsed();
        }
        assert!(published.elapsed() < Duration::from_secs(120), "version {version} never served");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub async fn bench_reads(redis: &str) {
    let shapes = [Shape { connections: 10, streams: 50 }, Shape { connections: 500, streams: 1 }];
    let mut rows = Vec::new();
    let mut against_bare = Vec::new();
    let mut loads = Vec::new();
    // `RANKING_BENCH_READ_SIZES=100000` runs one size only (a quicker run).
    let sizes: Vec<i64> = std::env::var("RANKING_BENCH_READ_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100_000, 1_000_000]);
    for n in sizes {
        let prefix = format!("bench-{:x}", Utc::now().timestamp_micros());
        let server = ServerProcess::start(&[
            ("REDIS_URL", redis.to_string()),
            ("RANKING_REDIS_PREFIX", prefix.clone()),
            ("RANKING_RECOMPUTE_INTERVAL", "0".into()),
            ("RANKING_MAX_CONCURRENT_CALLS", "100000".into()),
            // Reads carrying an actor are routed by it: every bucket to the service's profile,
            // so the routed call reads the same board as the plain one.
            ("RANKING_EXPERIMENT", "reads-bench:default=100".into()),
        ])
        .await;
        let (addr, pid) = (server.addr, server.pid());
        let store = ranking_server::adapters::redis::RedisRankingStore::connect(&{
            let mut o = ranking_server::adapters::redis::RedisOptions::new(redis);
            o.prefix = prefix.clone();
            o
        })
        .expect("redis");
        // The start-up recompute found an empty day; wait until its version is served.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let rss_before = rss_mb(pid);
        let published = Instant::now();
        let (version, key) = publish(&store, n).await;
        let publish_took = published.elapsed();
        let announced = Instant::now();
        let load = served_after(addr, version, announced).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        loads.push((n, publish_took, load, rss_mb(pid) - rss_before));

        let redis_key = store.sorted_set_key(key);
        let member = ranking_server::adapters::redis::member(n / 2);
        let top_request = v1::GetTopNRequest { limit: 20, ..Default::default() };
        let rank_request = v1::GetRankRequest { product_id: n / 2, ..Default::default() };
        let mut c = ranking_client::connect(format!("http://{addr}")).await.expect("connect");
        let top_len = c.get_top_n(top_request.clone()).await.expect("GetTopN").into_inner().encoded_len();
        let routed_request = v1::GetTopNRequest { actor_id: "shopper-42".into(), ..top_request.clone() };
        let routed_len = c.get_top_n(routed_request.clone()).await.expect("GetTopN").into_inner().encoded_len();
        let rank_len = c.get_rank(rank_request.clone()).await.expect("GetRank").into_inner().encoded_len();
        // A listing page's 48 badges, spread over the ranking; a product page's neighbours.
        let ranks_request =
            v1::GetRanksRequest { product_ids: (0..48).map(|i| 1 + i * (n / 48)).collect(), ..Default::default() };
        let ranks_len = c.get_ranks(ranks_request.clone()).await.expect("GetRanks").into_inner().encoded_len();
        let neighbors_request = v1::GetRankRequest { neighbors: 5, ..rank_request.clone() };
        let neighbors_len = c.get_rank(neighbors_request.clone()).await.expect("GetRank").into_inner().encoded_len();
        let health_len = tonic_health::pb::HealthCheckResponse { status: 1 }.encoded_len();
        // The same answer's bytes from a bare tonic server: the transport's limit for them.
        let top_answer = c.get_top_n(top_request.clone()).await.expect("GetTopN").into_inner().encode_to_vec();
        let (bare, bare_addr) = crate::bare::start(&top_answer).await;
        let served = (addr, pid);
        let bare_served = (bare_addr, bare.id().expect("the bare server's pid"));
        let calls: [Call; 7] = [
            ("health check", "/grpc.health.v1.Health/Check", Vec::new(), health_len, vec!["PING"], served),
            (
                "GetTopN(20)",
                "/ranking.v1.RankingService/GetTopN",
                top_request.encode_to_vec(),
                top_len,
                vec!["ZREVRANGE", &redis_key, "0", "19", "WITHSCORES"],
                served,
            ),
            (
                "GetTopN(20), actor-routed (experiment)",
                "/ranking.v1.RankingService/GetTopN",
                routed_request.encode_to_vec(),
                routed_len,
                vec!["ZREVRANGE", &redis_key, "0", "19", "WITHSCORES"],
                served,
            ),
            (
                "GetRank",
                "/ranking.v1.RankingService/GetRank",
                rank_request.encode_to_vec(),
                rank_len,
                vec!["ZREVRANK", &redis_key, &member],
                served,
            ),
            (
                "GetRanks(48)",
                "/ranking.v1.RankingService/GetRanks",
                ranks_request.encode_to_vec(),
                ranks_len,
                vec!["ZREVRANK", &redis_key, &member],
                served,
            ),
            (
                "GetRank(neighbors 5)",
                "/ranking.v1.RankingService/GetRank",
                neighbors_request.encode_to_vec(),
                neighbors_len,
                vec!["ZREVRANGE", &redis_key, "0", "10", "WITHSCORES"],
                served,
            ),
            (
                "GetTopN(20), bare tonic server",
                "/ranking.v1.RankingService/GetTopN",
                top_request.encode_to_vec(),
                top_len,
                vec!["ZREVRANGE", &redis_key, "0", "19", "WITHSCORES"],
                bare_served,
            ),
        ];
        for shape in shapes {
            // The machine is shared: each call runs ROUNDS times, interleaved with the
            // others, and the median round is reported.
            let mut figures: Vec<Vec<Round>> = vec![Vec::new(); calls.len()];
            let mut failures: Vec<Option<String>> = vec![None; calls.len()];
            let mut fixed: Vec<Vec<f64>> = vec![Vec::new(); calls.len()];
            for _ in 0..ROUNDS {
                for (i, (_, path, body, answer_len, _, (addr, pid))) in calls.iter().enumerate() {
                    let (addr, pid) = (*addr, *pid);
                    let (cpu, generator) = (cpu_seconds(pid), children_cpu_seconds());
                    let measured = h2load(addr, path, body, *answer_len, shape, Duration::from_secs(4), None);
                    let (cpu, generator) = (cpu_seconds(pid) - cpu, children_cpu_seconds() - generator);
                    match measured {
                        Ok((rps, done, _p50, p95, p99)) => {
                            let per_call = |seconds: f64| seconds * 1e6 / done.max(1) as f64;
                            figures[i].push(Round {
                                rps,
                                p95,
                                p99,
                                server_us: per_call(cpu),
                                generator_us: per_call(generator),
                            })
                        }
                        Err(e) => failures[i] = Some(e),
                    }
                    // CPU per call at the same offered load for every call, so that it does
                    // not depend on how many calls each wake-up of the server batches.
                    let cpu = cpu_seconds(pid);
                    let measured =
                        h2load(addr, path, body, *answer_len, shape, Duration::from_secs(4), Some(FIXED_RATE));
                    let cpu = cpu_seconds(pid) - cpu;
                    if let Ok((_, done, ..)) = measured {
                        fixed[i].push(cpu * 1e6 / done.max(1) as f64);
                    }
                }
            }
            let median = |runs: &mut Vec<Round>| {
                runs.sort_by(|a, b| a.rps.total_cmp(&b.rps));
                runs.get(runs.len() / 2).copied()
            };
            // Each round's call against the health check of the same round (minutes apart at
            // most): the shared machine's drift between rounds cancels out of these ratios.
            let paired: Vec<(f64, f64)> = figures.iter().map(|runs| paired_ratios(runs, &figures[HEALTH])).collect();
            let (rps, cpu) = paired_ratios(&figures[TOP], &figures[BARE_TOP]);
            against_bare.push(format!("| {n} | {shape} | {:.0} % | {cpu:.2}× |", 100.0 * rps));
            let medians: Vec<_> = figures.iter_mut().map(median).collect();
            let fixed: Vec<f64> = fixed
                .iter_mut()
                .map(|runs| {
                    runs.sort_by(f64::total_cmp);
                    runs.get(runs.len() / 2).copied().unwrap_or(f64::NAN)
                })
                .collect();
            for (i, (name, _, _, _, raw, _)) in calls.iter().enumerate() {
                let raw = redis_benchmark(redis, shape, raw);
                let row = match (medians[i], medians[0], &failures[i]) {
                    (Some(r), Some(health), None) => format!(
                        "| {n} | {shape} | {name} | {:.0} | {:.2} | {:.2} | {:.1} | {:.1} | {:.0} % | {:.2}× | {:.0} % | {:.2}× | {:.1} | {:.2}× | {raw:.0} |",
                        r.rps,
                        r.p95,
                        r.p99,
                        r.server_us,
                        r.generator_us,
                        100.0 * r.rps / health.rps,
                        r.server_us / health.server_us,
                        100.0 * paired[i].0,
                        paired[i].1,
                        fixed[i],
                        fixed[i] / fixed[0]
                    ),
                    (_, _, e) => format!("| {n} | {shape} | {name} | h2load: {e:?} | | | | | | | | | | | {raw:.0} |"),
                };
                eprintln!("{row}");
                rows.push(row);
            }
        }
        drop(c);
        drop(bare);
        server.terminate();
        server.wait().await;
        crate::helpers::delete_keys(&crate::helpers::redis_connection(redis, RedisMode::Single), &prefix).await;
    }
    println!("\n## Reads from the in-process snapshot (server: release binary, own process; h2load -t 1)\n");
    println!(
        "| products | shape (conns×streams) | call | calls/s (median of {ROUNDS}) | p95 ms | p99 ms | server CPU µs/call | h2load CPU µs/call | calls/s vs health | CPU vs health | calls/s vs health, paired by round (median) | CPU vs health, paired | CPU µs/call at {FIXED_RATE} calls/s | CPU vs health there | redis-benchmark rps (same shape, -P streams) |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        println!("{row}");
    }
    println!("\n## GetTopN(20) against a bare tonic server answering the same bytes (no layers, no metrics)\n");
    println!(
        "| products | shape | calls/s, GetTopN / bare, paired by round (median) | server CPU per call, GetTopN / bare |"
    );
    println!("|---:|---|---:|---:|");
    for row in &against_bare {
        println!("{row}");
    }
    println!("\n## Snapshot load of a published version\n");
    println!(
        "| products | publish into Redis s | announced → served by the replica ms | replica RSS added MB | snapshot heap MB |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for (n, publish, load, rss) in loads {
        let entries: Vec<Scored> = (1..=n).map(|p| Scored { product_id: p, score: -(p as f64) }).collect();
        // The same structure as the replica's copy of `n` entries.
        let heap = ranking_server::domain::snapshot::Snapshot::from_ranked(entries).expect("ranked").heap_bytes();
        println!(
            "| {n} | {:.2} | {:.0} | {rss:.1} | {:.1} |",
            publish.as_secs_f64(),
            load.as_secs_f64() * 1e3,
            heap as f64 / 1048576.0
        );
    }
}

/// Per round, `runs`' calls/s and server CPU per call against `base`'s of the same round
/// (minutes apart at most, so the shared machine's drift cancels out): the medians.
fn paired_ratios(runs: &[Round], base: &[Round]) -> (f64, f64) {
    let mut rps: Vec<f64> = runs.iter().zip(base).map(|(r, b)| r.rps / b.rps).collect();
    let mut cpu: Vec<f64> = runs.iter().zip(base).map(|(r, b)| r.server_us / b.server_us).collect();
    rps.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    (rps.get(rps.len() / 2).copied().unwrap_or(f64::NAN), cpu.get(cpu.len() / 2).copied().unwrap_or(f64::NAN))
}

/// `read-path`: the service's own work for one GetTopN(20) and one GetRank answered from a
/// snapshot (rules, conversion, protobuf encoding), without the transport, in µs per call.
pub async fn bench_read_path() {
    use std::sync::Arc;

    use ranking_server::adapters::memory::MemoryRankingStore;
    use ranking_server::app::policy::Clock;
    use ranking_server::app::queries::{RankQuery, TopQuery};
    use ranking_server::grpc::convert;
    use ranking_server::test_support::Wired;

    let store = Arc::new(MemoryRankingStore::new());
    let wired = Wired::bounded(&store, Clock::System, 5_000_000);
    let snapshots = wired.snapshots.clone();
    let queries = wired.queries(&store);
    let mut entries: Vec<_> =
        (1..=100_000i64).map(|p| Scored { product_id: p, score: (p % 977) as f64 + 0.5 }).collect();
    entries.sort_unstable_by(ranking_server::domain::snapshot::ranking_order);
    let key = RankingKey::Daily(Utc::now().date_naive());
    let life = VersionLife { expire_at: Utc::now() + chrono::Duration::hours(1), superseded_for: Duration::ZERO };
    let version =
        store.publish(key, &entries, life, &ranking_server::ports::Fence::unchecked()).await.expect("publish");
    snapshots.load(key, version).await.expect("load");
    // As a running replica's poll does: it notes that yesterday has no ranking.
    snapshots.refresh().await.expect("poll");
    let n = 200_000;
    let started = Instant::now();
    let mut bytes = 0;
    for _ in 0..n {
        let answer = queries.top(TopQuery { limit: 20, ..Default::default() }).await.expect("top");
        bytes += convert::encoded_top(&answer, "default").bytes().len();
    }
    let top = started.elapsed().as_secs_f64() * 1e6 / n as f64;
    let started = Instant::now();
    for i in 0..n {
        let answer = queries.rank(RankQuery { product_id: 1 + (i % 100_000) as i64, ..Default::default() }).await;
        bytes += convert::rank_response(answer.expect("rank"), "default").encode_to_vec().len();
    }
    let rank = started.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("\n## The service's own work per read (snapshot, no transport)\n");
    println!("| call | µs per call |\n|---|---:|\n| GetTopN(20) | {top:.2} |\n| GetRank | {rank:.2} |");
    assert!(bytes > 0);
}
