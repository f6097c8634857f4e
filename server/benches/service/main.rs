//! `make bench`: throughput and latency of the service on this machine, printed as tables.
//!
//! Scenarios (first argument; the rest are options):
//! - `ingest <database-url|throwaway-postgres>`: RecordEvents throughput for batches of 100,
//!   1,000 and 10,000 (Zipf-like product popularity, 5 % duplicate ids), statements per batch
//!   as counted by the database, and RecordEvent throughput at 256 concurrent callers.
//! - `write-path [events]`: where the ingest path's time goes on PostgreSQL: RecordEvents
//!   of 1,000,000 events (uniform over 100,000 products, then Zipf) in 10,000-event batches
//!   from 4 writers, CPU µs per event of the service and of PostgreSQL, and each statement's
//!   share of the database's execution time (pg_stat_statements).
//! - `recompute <products> <redis-url>`: Recompute end to end on a throwaway PostgreSQL with
//!   `<products>` products ranked today: wall time and the process's peak memory.
//! - `explain <products> <redis-url>`: ExplainRank p50/p95/p99 of random products of a day
//!   of that size, next to GetRank's.
//! - `segments <products> <redis-url>`: Recompute with the weekly ranking and with each
//!   product in 3 of 1,000 segments, next to the same run's daily phase without a catalog:
//!   phase seconds, peak memory, Redis bytes per ranked entry.
//! - `watch <redis-url>`: 10,000 WatchTopN streams on a release server in its own process:
//!   its memory with them open, Recompute → 99 % of watchers with the new version, CPU per
//!   message.
//! - `reads <redis-url>`: GetTopN(limit 20) and GetRank next to the same server's health
//!   check and to `redis-benchmark`, in two shapes (10 connections × 50 streams, 500 × 1), on
//!   100,000 and 1,000,000 ranked products: calls/s, p95/p99, server CPU µs per call; and the
//!   time and memory of loading a published version into the replica's snapshot. Load from
//!   `h2load` (nghttp2's HTTP/2 benchmark, a separate process; Debian `nghttp2-client`), the
//!   server being the release binary in a process of its own.
//! - `live <redis-url> [products…] [interval:popularity…]`: live exact ranking under a steady
//!   10,000 events/s, two release replicas: event commit → the other replica's GetRank
//!   (p50/p99/max) and → the holder's publication, SQL rows read, the holder's CPU and each
//!   phase's time per pass against a full Recompute, GetRank next to the health check while
//!   passes run; uniform and Zipf popularity, 100,000 and 1,000,000 products (`1s:uniform`
//!   and the like run only those cases).
//! - `bus <kafka-brokers> [events] [nats-url] [shared|split|database…] [rounds=N]`: a backlog
//!   of 1,000,000 events (uniform over 100,000 products, then Zipf) on Kafka (4 partitions)
//!   and on JetStream, drained into a throwaway PostgreSQL by one and two replicas, next to
//!   the broker's read-only rate and RecordEvents at the same batch size, on one server and on
//!   as many servers as replicas (`-` skips a broker); with every party on both cores, then
//!   with the broker on a core of its own, then PostgreSQL (`cores`; by default all three);
//!   `rounds=N` interleaves N drains with N RecordEvents runs per case and prints the median
//!   ratios; `format=protobuf` publishes the records in protobuf binary instead of proto3
//!   JSON (`RANKING_BUS_FORMAT`); `popularity=uniform|zipf` runs that case only.
//! - `cluster <products> <redis-url> <cluster-seeds>`: Recompute and reads on one Redis node
//!   and on a Redis Cluster in one run (reads from the in-process copy and from Redis).
//! - `retention <rows>`: one past day's events pruned row by row (DELETE in chunks) and with
//!   its day partition (DROP) on PostgreSQL: seconds, WAL bytes, dead tuples.
//! - `read-path`: the service's own work (rules, conversion, encoding) per GetTopN(20) and
//!   GetRank answered from a snapshot, without the transport.
//!
//! Other scenarios run the server in this process on port 0 (the integration tests' fixture,
//! `TestApp`); figures include the gRPC round trip. One module per scenario.

mod bus;
mod cluster;
mod cores;
#[allow(dead_code, unused_imports)]
#[path = "../../tests/it/helpers/mod.rs"]
mod helpers;
mod hostile;
mod ingest;
mod live;
mod profiles;
mod reads;
mod recompute;
mod retention;
mod runs;
mod watch;
mod write_path;

use clap::Parser;
use ranking_client::RankingServiceClient;
use ranking_client::tonic::transport::Channel;
use ranking_server::bus::decode::Format;
use ranking_server::config::Settings;

type Client = RankingServiceClient<Channel>;

// The same allocator as the `ranking-server` binary, since the server runs in this process.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A server in this process and several connections to it.
struct Running {
    app: helpers::TestApp,
    clients: Vec<Client>,
}

impl Running {
    async fn stop(self) {
        self.app.stop().await;
    }
}

async fn serve(args: &[String]) -> Running {
    let mut argv = vec![
        "ranking-server".to_string(),
        "--listen=127.0.0.1:0".into(),
        "--recompute-interval=0".into(),
        "--metrics-listen=127.0.0.1:0".into(),
    ];
    argv.extend(args.iter().cloned());
    let settings = Settings::try_parse_from(argv).expect("bench settings");
    let app = helpers::TestApp::spawn_on(settings).await;
    let addr = app.addr;
    let mut clients = Vec::new();
    // Several HTTP/2 connections, as a fleet of callers would open.
    for _ in 0..8 {
        clients.push(ranking_client::connect(format!("http://{addr}")).await.expect("connect"));
    }
    Running { app, clients }
}

/// A memory figure of `/proc/<process>/status` (`self` or a pid), by its field name
/// (`VmRSS:`, `VmHWM:`), in MB; NaN when the process is gone.
fn status_mb(process: &str, field: &str) -> f64 {
    let process = match process {
        "self" => procfs::process::Process::myself(),
        pid => procfs::process::Process::new(pid.parse().unwrap_or(-1)),
    };
    let Ok(status) = process.and_then(|p| p.status()) else { return f64::NAN };
    let kb = match field {
        "VmRSS:" => status.vmrss,
        "VmHWM:" => status.vmhwm,
        _ => None,
    };
    kb.map_or(f64::NAN, |kb| kb as f64 / 1024.0)
}

/// This process's peak resident memory, MB.
fn peak_rss_mb() -> f64 {
    status_mb("self", "VmHWM:")
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
    // Interrupted, the scenario is dropped where it stands: its destructors stop the
    // throwaway servers it started and give the machine's broker back both cores, which a
    // killed process would leave running and pinned.
    tokio::select! {
        () = run(&args) => {}
        _ = tokio::signal::ctrl_c() => eprintln!("interrupted: throwaway servers stopped, cores released"),
        _ = terminate.recv() => eprintln!("terminated: throwaway servers stopped, cores released"),
    }
}

async fn run(args: &[String]) {
    match args.first().map(String::as_str) {
        Some("ingest") => {
            ingest::bench_ingest(args.get(1).map(String::as_str).unwrap_or("throwaway-postgres"), false).await
        }
        Some("write-path") => {
            write_path::bench_write_path(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000)).await
        }
        Some("ingest-signals") => {
            ingest::bench_ingest(args.get(1).map(String::as_str).unwrap_or("throwaway-postgres"), true).await
        }
        Some("profiles") => {
            let n = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
            let redis = args.get(2).map(String::as_str).unwrap_or("redis://127.0.0.1:6379");
            profiles::bench_profiles(n, redis).await;
        }
        Some("live") => {
            let redis = args.get(1).map(String::as_str).unwrap_or("redis://127.0.0.1:6379");
            let sizes: Vec<i64> = args.iter().skip(2).filter_map(|s| s.parse().ok()).collect();
            // `interval:popularity` arguments (`1s:uniform`) run those cases alone.
            let cases: Vec<&str> = args.iter().skip(2).map(String::as_str).filter(|s| s.contains(':')).collect();
            live::bench_live(redis, if sizes.is_empty() { &[100_000, 1_000_000] } else { &sizes }, &cases).await;
        }
        Some("bus") => {
            let given = |i: usize, default: &'static str| {
                Some(args.get(i).map(String::as_str).unwrap_or(default)).filter(|b| *b != "-")
            };
            let n = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
            let layouts: Vec<cores::Layout> = args.iter().skip(4).filter_map(|s| cores::Layout::parse(s)).collect();
            let layouts = if layouts.is_empty() {
                vec![cores::Layout::Shared, cores::Layout::Split, cores::Layout::Database]
            } else {
                layouts
            };
            let option = |name: &str| args.iter().find_map(|s| s.strip_prefix(name));
            let cases = bus::BusCases {
                layouts,
                // `rounds=3`: each case three times, bus and RecordEvents interleaved.
                rounds: option("rounds=").and_then(|s| s.parse().ok()).unwrap_or(1),
                // `format=protobuf`: records in protobuf binary, as RecordEvents carries them.
                format: option("format=").map_or(Ok(Format::Json), str::parse).expect("format=json|protobuf"),
                // `popularity=zipf`: only that case.
                popularity: option("popularity=").map(|s| bus::Popularity::parse(s).expect("popularity=uniform|zipf")),
            };
            bus::bench_bus(given(1, "127.0.0.1:19092"), given(3, "nats://127.0.0.1:4222"), n, &cases).await;
        }
        Some("recompute") => {
            let n = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
            let redis = args.get(2).map(String::as_str).unwrap_or("redis://127.0.0.1:6379");
            recompute::bench_recompute(n, redis).await;
        }
        Some("explain") => {
            let n = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
            let redis = args.get(2).map(String::as_str).unwrap_or("redis://127.0.0.1:6379");
            recompute::bench_explain(n, redis).await;
        }
        Some("watch") => watch::bench_watch(args.get(1).map(String::as_str).unwrap_or("redis://127.0.0.1:6379")).await,
        Some("segments") => {
            let n = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
            let redis = args.get(2).map(String::as_str).unwrap_or("redis://127.0.0.1:6379");
            recompute::bench_segments(n, redis).await;
        }
        Some("recompute-header") => {
            println!("\n## Recompute end to end (throwaway PostgreSQL → engine → Redis staging → RENAME)\n");
            println!("| products | ranked | server elapsed ms | wall s | RSS before MB | peak RSS MB |");
            println!("|---:|---:|---:|---:|---:|---:|");
        }
        Some("read-path") => reads::bench_read_path().await,
        Some("retention") => {
            retention::bench_retention(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000)).await
        }
        Some("cluster") => {
            let n = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
            let single = args.get(2).map(String::as_str).unwrap_or("redis://127.0.0.1:6379");
            let seeds = args.get(3).map(String::as_str).expect("cluster <products> <redis-url> <cluster-seeds>");
            cluster::bench_cluster(n, single, seeds).await;
        }
        Some("reads") => reads::bench_reads(args.get(1).map(String::as_str).unwrap_or("redis://127.0.0.1:6379")).await,
        Some("hostile") => {
            let addr = args.get(1).and_then(|a| a.parse().ok()).expect("hostile <addr> <pid>");
            let pid = args.get(2).and_then(|p| p.parse().ok()).expect("hostile <addr> <pid>");
            hostile::bench_hostile(addr, pid).await;
        }
        Some("hostile-reads") => {
            let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
            let addr = arg(1).parse().expect("hostile-reads <addr> <pid> <redis-pid>");
            let (pid, redis) = (arg(2).parse().expect("server pid"), arg(3).parse().expect("redis pid"));
            hostile::bench_hostile_reads(addr, pid, redis).await;
        }
        _ => eprintln!(
            "usage: service ingest|ingest-signals <db-url|throwaway-postgres> | recompute <products> [redis-url] \
             | profiles <products> [redis-url] | reads [redis-url] | read-path \
             | cluster <products> <redis-url> <cluster-seeds> | retention <rows> \
             | hostile <addr> <pid> | hostile-reads <addr> <pid> <redis-pid>"
        ),
    }
}
