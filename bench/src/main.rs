//! `ranking-bench`: the benchmarks of `make bench`, one subcommand per scenario
//! (`ranking-bench --help` lists them), figures printed as Markdown tables. Scenarios that
//! need a server either run it in this process on port 0 (the integration tests' fixture,
//! `TestApp`: figures include the gRPC round trip) or start the release `ranking-server`
//! binary beside this one as a process of its own, so its CPU is measured apart from the
//! load. One module per scenario; the fixtures come from `ranking-test-kit`.

mod bare;
mod bus;
mod changes;
mod cluster;
mod controls;
mod cores;
mod fencing;
mod freeze;
mod grpc_web;
mod history;
mod hostile;
mod hostile_web;
mod ingest;
mod live;
mod profiles;
mod reads;
mod recompute;
mod retention;
mod runs;
mod served_parts;
mod watch;
mod write_path;

use clap::Parser;
use ranking_client::RankingServiceClient;
use ranking_client::tonic::transport::Channel;
use ranking_server::bus::decode::Format;
use ranking_server::config::Settings;
use ranking_test_kit as helpers;

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
pub(crate) fn status_mb(process: &str, field: &str) -> f64 {
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

/// `make bench`: throughput and latency of the service on this machine, printed as
/// Markdown tables. One subcommand per scenario.
#[derive(Parser)]
#[command(name = "ranking-bench")]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

/// Redis of the scenarios that need one.
const REDIS: &str = "redis://127.0.0.1:6379";

#[derive(clap::Subcommand)]
enum Scenario {
    /// RecordEvents throughput for batches of 100, 1,000 and 10,000, statements per batch,
    /// RecordEvent at 256 concurrent callers.
    Ingest {
        /// A database URL, or `throwaway-postgres`.
        #[arg(default_value = "throwaway-postgres")]
        database: String,
    },
    /// The same with a profile of custom signals.
    IngestSignals {
        #[arg(default_value = "throwaway-postgres")]
        database: String,
    },
    /// Where the ingest path's time goes on PostgreSQL.
    WritePath {
        #[arg(default_value_t = 1_000_000)]
        events: usize,
        /// Only the case with a tenth of the orders retracted.
        #[arg(long)]
        retractions_only: bool,
        /// Only the shoppers' cases: no actors, 1,000,000 actors with views capped, and
        /// capped with a tenth of the orders retracted.
        #[arg(long, conflicts_with = "retractions_only")]
        shoppers: bool,
    },
    /// Built-in and 6-signal profiles' recompute time and memory.
    Profiles {
        #[arg(default_value_t = 1_000_000)]
        products: i64,
        #[arg(default_value = REDIS)]
        redis: String,
        /// Compare the built-in profile with the distinct-viewers one instead of 6 signals.
        #[arg(long, conflicts_with = "variants")]
        caps: bool,
        /// Compare the built-in profile alone with it and a variant live beside it
        /// (RANKING_PROFILES=likes=deploy/profiles/likes-first.toml): the recompute of both.
        #[arg(long)]
        variants: bool,
    },
    /// Live exact ranking under a steady 10,000 events/s, two release replicas.
    Live {
        #[arg(default_value = REDIS)]
        redis: String,
        /// Population sizes (default 100000 1000000) and `interval:popularity` cases
        /// (`1s:uniform`) to run alone.
        cases: Vec<String>,
    },
    /// A backlog drained from Kafka and JetStream by one and two replicas, next to the
    /// broker's own rate and RecordEvents.
    Bus {
        /// Kafka bootstrap servers (`-` skips Kafka).
        #[arg(default_value = "127.0.0.1:19092")]
        kafka: String,
        #[arg(default_value_t = 1_000_000)]
        events: usize,
        /// NATS URL (`-` skips JetStream).
        #[arg(default_value = "nats://127.0.0.1:4222")]
        nats: String,
        /// Core layouts: shared, split, database (default all three).
        #[arg(long = "layout")]
        layouts: Vec<String>,
        /// Drains interleaved with RecordEvents runs per case; the median ratios printed.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// Record encoding: json or protobuf.
        #[arg(long, default_value = "json")]
        format: Format,
        /// Only this popularity: uniform or zipf.
        #[arg(long)]
        popularity: Option<String>,
    },
    /// Recompute end to end: wall time and peak memory.
    Recompute {
        #[arg(default_value_t = 100_000)]
        products: i64,
        #[arg(default_value = REDIS)]
        redis: String,
    },
    /// The header of the recompute table (printed once before several `recompute` runs).
    RecomputeHeader,
    /// ExplainRank latency next to GetRank's.
    Explain {
        #[arg(default_value_t = 1_000_000)]
        products: i64,
        #[arg(default_value = REDIS)]
        redis: String,
    },
    /// 10,000 WatchTopN streams on a release server.
    Watch {
        #[arg(default_value = REDIS)]
        redis: String,
    },
    /// Merchandising controls: a recompute with 1,000 controls against none, the
    /// republication after a put (a boost, a pin) and the bytes it wrote to Redis,
    /// GetTopN(20) of the controlled board.
    Controls {
        #[arg(default_value_t = 1_000_000)]
        products: i64,
        #[arg(default_value = REDIS)]
        redis: String,
        /// The ranking store's layout written (RANKING_STORE_LAYOUT; 3: boards with pins as
        /// what changed too).
        #[arg(long, default_value_t = ranking_server::ports::WRITES)]
        layout: u16,
    },
    /// The ranking feed during live passes, off then on (Kafka at `brokers`).
    Feed {
        #[arg(default_value = REDIS)]
        redis: String,
        brokers: String,
        #[arg(default_value_t = 100_000)]
        products: i64,
    },
    /// The rank history on PostgreSQL: bytes per kept entry, GetRankHistory of 400 days
    /// against GetRank.
    History {
        #[arg(default_value_t = 1_000)]
        top: usize,
    },
    /// A pass's copy of a board built whole against built from the changed scores, and a served
    /// board's product index built whole against mapped from the board before, in process.
    Changes {
        #[arg(default_value_t = 1_000_000)]
        products: i64,
    },
    /// Where a served board's time goes, step by step, in process (no store).
    ServedParts {
        #[arg(default_value_t = 1_000_000)]
        products: i64,
    },
    /// Recompute with the weekly ranking and 1,000 segments.
    Segments {
        #[arg(default_value_t = 1_000_000)]
        products: i64,
        #[arg(default_value = REDIS)]
        redis: String,
    },
    /// GetTopN(20) and GetRank next to the health check and redis-benchmark (h2load).
    Reads {
        #[arg(default_value = REDIS)]
        redis: String,
    },
    /// The service's own work per GetTopN(20) and GetRank, without the transport.
    ReadPath,
    /// GetTopN(20) over gRPC-Web (HTTP/1.1) next to gRPC and the health check.
    GrpcWeb,
    /// One past day pruned row by row and by its partition on PostgreSQL.
    Retention {
        #[arg(default_value_t = 1_000_000)]
        rows: i64,
    },
    /// Fenced and unchecked publications on one Redis and a cluster; health and GetRank
    /// during a recompute.
    Fencing {
        products: i64,
        redis: String,
        /// Comma-separated seed URLs of the cluster.
        seeds: String,
    },
    /// One replica frozen inside its write transaction: what the other's writes, live
    /// passes and Recompute wait (throwaway PostgreSQL and MariaDB).
    Freeze { redis: String },
    /// Recompute and reads on one Redis node and on a Redis Cluster.
    Cluster {
        products: i64,
        redis: String,
        /// Comma-separated seed URLs of the cluster.
        seeds: String,
    },
    /// The HTTP/1.1 and gRPC-Web attacks against release servers started here.
    HostileWeb,
    /// Hostile peers against a running server (its address and pid).
    Hostile { addr: std::net::SocketAddr, pid: u32 },
    /// Reads while hostile peers hold connections (server pid, Redis pid).
    HostileReads { addr: std::net::SocketAddr, pid: u32, redis_pid: u32 },
    /// A bare tonic server answering every GetTopN with the encoded message in a file (the
    /// read benchmark starts it in a process of its own).
    BareTop { answer: std::path::PathBuf },
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
    // Interrupted, the scenario is dropped where it stands: its destructors stop the
    // throwaway servers it started and give the machine's broker back both cores, which a
    // killed process would leave running and pinned.
    tokio::select! {
        () = run(cli.scenario) => {}
        _ = tokio::signal::ctrl_c() => eprintln!("interrupted: throwaway servers stopped, cores released"),
        _ = terminate.recv() => eprintln!("terminated: throwaway servers stopped, cores released"),
    }
}

async fn run(scenario: Scenario) {
    match scenario {
        Scenario::Ingest { database } => ingest::bench_ingest(&database, false).await,
        Scenario::IngestSignals { database } => ingest::bench_ingest(&database, true).await,
        Scenario::WritePath { events, retractions_only, shoppers } => {
            let cases = match (retractions_only, shoppers) {
                (true, _) => write_path::Cases::Retractions,
                (_, true) => write_path::Cases::Shoppers,
                _ => write_path::Cases::All,
            };
            write_path::bench_write_path(events, cases).await
        }
        Scenario::Profiles { products, redis, caps, variants } => {
            let other = match (caps, variants) {
                (true, _) => profiles::Other::Capped,
                (_, true) => profiles::Other::Variant,
                _ => profiles::Other::SixSignals,
            };
            profiles::bench_profiles(products, &redis, other).await
        }
        Scenario::Live { redis, cases } => {
            let sizes: Vec<i64> = cases.iter().filter_map(|s| s.parse().ok()).collect();
            let only: Vec<&str> = cases.iter().map(String::as_str).filter(|s| s.contains(':')).collect();
            live::bench_live(&redis, if sizes.is_empty() { &[100_000, 1_000_000] } else { &sizes }, &only).await;
        }
        Scenario::Bus { kafka, events, nats, layouts, rounds, format, popularity } => {
            let layouts: Vec<cores::Layout> =
                layouts.iter().map(|s| cores::Layout::parse(s).expect("--layout shared|split|database")).collect();
            let cases = bus::BusCases {
                layouts: if layouts.is_empty() {
                    vec![cores::Layout::Shared, cores::Layout::Split, cores::Layout::Database]
                } else {
                    layouts
                },
                rounds,
                format,
                popularity: popularity.map(|s| bus::Popularity::parse(&s).expect("--popularity uniform|zipf")),
            };
            let given = |s: &str| Some(s.to_string()).filter(|b| b != "-");
            bus::bench_bus(given(&kafka).as_deref(), given(&nats).as_deref(), events, &cases).await;
        }
        Scenario::Recompute { products, redis } => recompute::bench_recompute(products, &redis).await,
        Scenario::RecomputeHeader => {
            println!("\n## Recompute end to end (throwaway PostgreSQL → engine → Redis staging → RENAME)\n");
            println!("| products | ranked | server elapsed ms | wall s | RSS before MB | peak RSS MB |");
            println!("|---:|---:|---:|---:|---:|---:|");
        }
        Scenario::Explain { products, redis } => recompute::bench_explain(products, &redis).await,
        Scenario::Watch { redis } => watch::bench_watch(&redis).await,
        Scenario::Segments { products, redis } => recompute::bench_segments(products, &redis).await,
        Scenario::Controls { products, redis, layout } => controls::bench_controls(products, &redis, layout).await,
        Scenario::ServedParts { products } => served_parts::bench_served_parts(products),
        Scenario::Changes { products } => {
            changes::bench_changes(products);
            changes::bench_served_index(products);
        }
        Scenario::History { top } => history::bench_history(top).await,
        Scenario::Feed { redis, brokers, products } => live::bench_feed(&redis, &brokers, products).await,
        Scenario::Reads { redis } => reads::bench_reads(&redis).await,
        Scenario::ReadPath => reads::bench_read_path().await,
        Scenario::GrpcWeb => grpc_web::bench_grpc_web().await,
        Scenario::Retention { rows } => retention::bench_retention(rows).await,
        Scenario::Cluster { products, redis, seeds } => cluster::bench_cluster(products, &redis, &seeds).await,
        Scenario::Fencing { products, redis, seeds } => fencing::bench_fencing(products, &redis, &seeds).await,
        Scenario::Freeze { redis } => freeze::bench_freeze(&redis).await,
        Scenario::Hostile { addr, pid } => hostile::bench_hostile(addr, pid).await,
        Scenario::HostileWeb => hostile_web::bench_hostile_web().await,
        Scenario::HostileReads { addr, pid, redis_pid } => hostile::bench_hostile_reads(addr, pid, redis_pid).await,
        Scenario::BareTop { answer } => bare::serve(&answer).await,
    }
}
