//! `live <redis-url> [products…]`: live exact ranking under a steady 10,000
//! events/s. Two release server processes on one throwaway PostgreSQL and one Redis: the
//! first holds the live lease (and takes no calls, so that its CPU is the passes'); the
//! second takes the RecordEvents load and the probes. A probe records one view of a product
//! never ranked before and asks the second replica for its rank until it has one: the time
//! from RecordEvents' answer (just after the commit) to that answer is the freshness the
//! target speaks of. Per pass: SQL rows read (the holder's `ranking_live_rows_read_total`)
//! against the rows the load changed (distinct products written per second, each pass taking
//! about a second's changes), and the holder's CPU; a full Recompute of the same day beside
//! them. Then GetRank on the second replica next to its health check (h2load, interleaved
//! rounds) while live passes keep running. Uniform and Zipf product popularity, each on a day
//! seeded as 20 M views of that popularity left it (see [`seeded`]).
//! `RANKING_BENCH_PROFILES` (`name=path,…`) runs the replicas with those variants beside the
//! service's profile: the same table, every pass ranking and publishing each profile.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use prost::Message;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database, Statement};

use crate::bus::Popularity;
use crate::helpers::metric_or_zero as sample;
use crate::helpers::pg;
use crate::helpers::process::ServerProcess;
use crate::ingest::Rng;
use crate::reads::{Shape, cpu_seconds, h2load};

type Client = ranking_client::v1::ranking_service_client::RankingServiceClient<tonic::transport::Channel>;

use scrape::{bucket_quantile, median, scrape, slowest};

mod feed;
mod report;
mod scrape;

pub use feed::bench_feed;

/// Offered load of the live bench: batches per second × events per batch.
const BATCHES_PER_SECOND: u64 = 20;
/// The feed bench's: 20,000 events a second.
const FEED_BATCHES_PER_SECOND: u64 = 40;
const BATCH: u64 = 500;
/// Writers sending them, each its share of the batches.
const WRITERS: u64 = 2;
/// The kinds of board a pass publishes, as the store's counters name them.
const BOARDS: [&str; 4] = ["daily", "weekly", "trending", "segment"];
/// How long each distribution's load runs.
const RUN: Duration = Duration::from_secs(30);
/// Pins put (and deleted) one after another while the load runs: where a put lands in the
/// live pass in flight moves its time by up to a pass.
const CONTROL_PUTS: i64 = 5;
/// One probe every this long.
const PROBE_EVERY: Duration = Duration::from_millis(200);

pub(crate) struct Figures {
    products: i64,
    interval: &'static str,
    distribution: &'static str,
    events_per_second: f64,
    freshness_ms: Vec<f64>,
    passes: f64,
    /// Passes that found the day's lease taken, and passes that failed (an epoch advance
    /// past its deadline among them): what a stall in the freshness column comes from.
    busy_failed: (f64, f64),
    /// The upper bound of the slowest pass's histogram bucket.
    slowest_pass_ms: f64,
    /// The holder's `ranking_freshness_seconds` (commit → version published), p50 and p99
    /// as bucket bounds in ms.
    published_ms: (f64, f64),
    /// Mean ms of each phase: epoch, read, rank, publish, trending (the trending board ranked
    /// and published after the daily and weekly boards).
    phases_ms: [f64; 5],
    rows_read_per_pass: f64,
    rows_changed_per_pass: f64,
    /// Bytes of entries the holder wrote to Redis per published pass: written whole, and as
    /// deltas (the store's `ranking_published_bytes_total`, every board).
    bytes_per_pass: (f64, f64),
    /// The same by board: (board, whole, delta) per published pass.
    bytes_by_board: Vec<(&'static str, f64, f64)>,
    cpu_ms_per_pass: f64,
    pass_ms: f64,
    recompute_ms: f64,
    recompute_cpu_ms: f64,
    recompute_rows: i64,
    rank_vs_health: f64,
    /// GetTopN (a page of 20) on the other replica against its health check's rate.
    top_vs_health: f64,
    /// Pins put on the other replica while the load runs, one after another
    /// ([`CONTROL_PUTS`]): the first pinned product's rank before; ms from PutControl's answer
    /// to that replica serving it first, median and slowest; the same from DeleteControl's
    /// answer to it serving the board without it.
    control: (u64, (f64, f64), (f64, f64)),
    /// Resident memory (MB) of the holder and of the other replica after the load.
    rss_mb: (f64, f64),
    /// Redis's `used_memory` at its highest (sampled every second from the holder's start to
    /// the end of the Recompute), MB.
    redis_peak_mb: f64,
    /// The holder's feed: records acknowledged per second, and its lag p50 and p99 (bucket
    /// bounds, ms).
    feed: (f64, f64, f64),
}

/// Views of today before the load starts: the day the load continues.
const VIEWS_SO_FAR: i64 = 20_000_000;

/// A throwaway PostgreSQL migrated (by a server then stopped) and seeded with yesterday of
/// `products` products (a carry-over chain and a week to sum) and today, with its hours, as
/// a stream of [`VIEWS_SO_FAR`] views at the load's own rate and `popularity` leaves it (so
/// the load continues the day rather than reshaping it); vacuumed, analysed and written out
/// now rather than by autovacuum and a checkpoint inside a measured window.
async fn seeded(products: i64, popularity: Popularity) -> pg::ThrowawayPostgres {
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let today = Utc::now().date_naive();
    crate::serve(&[format!("--database-url={}", pg.url())]).await.stop().await;
    crate::recompute::seed_day(&pg.url(), today.pred_opt().expect("yesterday"), products).await;
    let rate = (BATCHES_PER_SECOND * BATCH) as i64;
    crate::recompute::seed_streamed_day(&pg.url(), today, products, popularity, (VIEWS_SO_FAR, rate)).await;
    let db = Database::connect(pg.url()).await.expect("connect");
    db.execute_unprepared("VACUUM ANALYZE").await.expect("vacuum");
    db.execute_unprepared("CHECKPOINT").await.expect("checkpoint");
    pg
}

/// Every case of `sizes`, or only those of `cases` (`interval:popularity`) when some are given.
pub async fn bench_live(redis: &str, sizes: &[i64], cases: &[&str]) {
    let mut all = Vec::new();
    for &products in sizes {
        for popularity in [Popularity::Uniform, Popularity::Zipf] {
            let distribution = popularity.name();
            let case = |interval: &str| format!("{interval}:{}", distribution.to_ascii_lowercase());
            let wanted = |interval: &str| cases.is_empty() || cases.contains(&case(interval).as_str());
            if !["1s", "500ms"].iter().any(|interval| wanted(interval)) {
                continue;
            }
            let pg = seeded(products, popularity).await;
            for interval in ["1s", "500ms"].into_iter().filter(|interval| wanted(interval)) {
                all.push(run(&pg, redis, products, distribution, interval, None, BATCHES_PER_SECOND).await);
            }
        }
    }
    report::print(&all);
}

async fn run(
    pg: &pg::ThrowawayPostgres,
    redis: &str,
    products: i64,
    distribution: &'static str,
    interval: &'static str,
    feed: Option<(&str, &str)>,
    batches_per_second: u64,
) -> Figures {
    let prefix = format!("bench-live-{:x}", Utc::now().timestamp_micros());
    let holder_metrics = crate::helpers::free_port();
    let envs = |metrics: u16| {
        let mut envs = vec![
            ("DATABASE_URL", pg.url()),
            ("REDIS_URL", redis.to_string()),
            ("RANKING_REDIS_PREFIX", prefix.clone()),
            ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
            ("RANKING_LIVE_INTERVAL", interval.to_string()),
            ("RANKING_MAX_CONCURRENT_CALLS", "100000".to_string()),
            // The full Recompute of ten million products takes longer than the default 30 s.
            ("RANKING_REQUEST_TIMEOUT", "300s".to_string()),
            ("RANKING_METRICS_LISTEN", format!("127.0.0.1:{metrics}")),
        ];
        // Each replica holds today's daily, weekly and trending boards and yesterday's daily
        // and weekly of every profile. Past the default bound of held copies (5,000,000
        // entries) it is raised to hold them, as an operator would set it (a board not held
        // is read from Redis at a fraction of a held copy's rate).
        let profiles = 1 + std::env::var("RANKING_BENCH_PROFILES").map_or(0, |p| p.split(',').count() as i64);
        if 5 * profiles * products > 5_000_000 {
            envs.push(("RANKING_SNAPSHOT_MAX_ENTRIES", (6 * profiles * products).to_string()));
        }
        // At ten million, superseded versions stay a minute, not ten: Redis keeps about 14
        // versions of each board for page tokens (one a tenth of the time, and the last 30 s),
        // 3.5 GB a board of ten million written whole, past this machine's memory at the
        // default.
        if products > 5_000_000 {
            envs.push(("RANKING_SNAPSHOT_TTL", "1m".to_string()));
        }
        // `RANKING_BENCH_PROFILES=name=path,…`: the replicas serve these variants too (their
        // passes rank and publish every profile from one read).
        if let Ok(profiles) = std::env::var("RANKING_BENCH_PROFILES") {
            envs.push(("RANKING_PROFILES", profiles));
        }
        if let Some((brokers, topic)) = feed {
            envs.push(("RANKING_FEED_KAFKA_BROKERS", brokers.to_string()));
            envs.push(("RANKING_FEED_KAFKA_TOPIC", topic.to_string()));
        }
        envs
    };
    let redis_peak = Arc::new(AtomicU64::new(0));
    let sampler = tokio::spawn(redis_memory(redis.to_string(), redis_peak.clone()));
    let holder = ServerProcess::start(&envs(holder_metrics)).await;
    // The holder has read the day whole and published it before the other replica starts.
    let started = Instant::now();
    while sample(&scrape(holder_metrics).await, "ranking_live_passes_total{outcome=\"loaded\"}") < 1.0 {
        assert!(started.elapsed() < Duration::from_secs(600), "the holder never loaded the day");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let other_metrics = crate::helpers::free_port();
    let other = ServerProcess::start(&envs(other_metrics)).await;
    let client = ranking_client::connect(format!("http://{}", other.addr)).await.expect("connect");
    // Its start-up recompute holds the day's lease a while (the holder's passes wait) and
    // has the holder load its versions: over, on both, before the measurement starts.
    let mut c = client.clone();
    // (Not every product is ranked: a day as a stream left it ranks those with a view today or
    // a carry from yesterday.)
    while !c.get_top_n(v1::GetTopNRequest::default()).await.is_ok_and(|t| t.into_inner().total > 0) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for port in [holder_metrics, other_metrics] {
        while sample(&scrape(port).await, "ranking_seconds_since_last_recompute") < 0.0 {
            assert!(started.elapsed() < Duration::from_secs(600), "a replica's start-up recompute never ended");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let changed = Arc::new(std::sync::Mutex::new(Vec::<usize>::new()));
    let before = scrape(holder_metrics).await;
    let cpu_before = cpu_seconds(holder.pid());
    let load_started = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (stop, sent, changed, mut client) = (stop.clone(), sent.clone(), changed.clone(), client.clone());
            tokio::spawn(async move {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ products as u64 ^ (w << 40));
                let mut tick = tokio::time::interval(Duration::from_secs(WRITERS) / batches_per_second as u32);
                let mut second = HashSet::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    let at = Some(crate::helpers::ts(Utc::now()));
                    let events: Vec<v1::Event> = (0..BATCH)
                        .map(|i| {
                            let product_id = match distribution {
                                "uniform" => 1 + (rng.next_u64() % products as u64) as i64,
                                _ => rng.zipf(products as u64).max(1),
                            };
                            second.insert(product_id);
                            v1::Event {
                                event_id: format!("{distribution}-{interval}-{w}-{n}-{i}"),
                                product_id,
                                r#type: v1::EventType::View.into(),
                                occurred_at: at,
                                ..Default::default()
                            }
                        })
                        .collect();
                    client.record_events(v1::RecordEventsRequest { events }).await.expect("RecordEvents");
                    sent.fetch_add(BATCH, Ordering::Relaxed);
                    n += 1;
                    if n.is_multiple_of(batches_per_second / WRITERS) {
                        changed.lock().expect("changed").push(std::mem::take(&mut second).len());
                    }
                }
            })
        })
        .collect();
    // Probes: a product above every ranked one, one view, then its rank on the other replica.
    let mut probes = Vec::new();
    let mut k = 0;
    let probe_base = products * 10 + (Utc::now().timestamp_micros() % 1_000_000_000) * 1_000;
    while load_started.elapsed() < RUN {
        tokio::time::sleep(PROBE_EVERY).await;
        k += 1;
        // Above every product any run of this database wrote.
        let product_id = probe_base + k;
        let mut c = client.clone();
        probes.push(tokio::spawn(async move {
            let events = vec![v1::Event {
                event_id: format!("probe-{distribution}-{product_id}"),
                product_id,
                r#type: v1::EventType::View.into(),
                occurred_at: Some(crate::helpers::ts(Utc::now())),
                ..Default::default()
            }];
            c.record_events(v1::RecordEventsRequest { events }).await.expect("probe");
            let committed = Instant::now();
            let rank = v1::GetRankRequest { product_id, ..Default::default() };
            while c.get_rank(rank.clone()).await.is_err() {
                if committed.elapsed() > Duration::from_secs(60) {
                    return f64::NAN;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            committed.elapsed().as_secs_f64() * 1e3
        }));
    }
    let mut freshness_ms = Vec::new();
    for p in probes {
        freshness_ms.push(p.await.expect("probe task"));
    }
    let mut puts = Vec::new();
    for k in 0..CONTROL_PUTS {
        puts.push(control_put(&mut client.clone(), products / 2 + k).await);
    }
    let (served, gone): (Vec<f64>, Vec<f64>) = puts.iter().map(|&(_, served, gone)| (served, gone)).unzip();
    let longest = |ms: &[f64]| ms.iter().copied().fold(f64::NAN, f64::max);
    let control = (puts[0].0, (median(served.clone()), longest(&served)), (median(gone.clone()), longest(&gone)));
    let load_seconds = load_started.elapsed().as_secs_f64();
    let sent_in_load = sent.load(Ordering::Relaxed);
    let after = scrape(holder_metrics).await;
    let cpu = cpu_seconds(holder.pid()) - cpu_before;

    // GetRank on the other replica next to its health check, passes still running.
    let rank_body = v1::GetRankRequest { product_id: products / 2, ..Default::default() }.encode_to_vec();
    let mut probe = client.clone();
    probe.get_rank(v1::GetRankRequest { product_id: products / 2, ..Default::default() }).await.expect("GetRank");
    // Its answer's length moves with the product's place as versions move: unchecked.
    let rank_len = 0;
    let health_len = tonic_health::pb::HealthCheckResponse { status: 1 }.encoded_len();
    let shape = Shape { connections: 10, streams: 50 };
    let top_body = v1::GetTopNRequest { limit: 20, ..Default::default() }.encode_to_vec();
    let (mut ratios, mut top_ratios) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let health =
            h2load(other.addr, "/grpc.health.v1.Health/Check", &[], health_len, shape, Duration::from_secs(3), None);
        let rank = h2load(
            other.addr,
            "/ranking.v1.RankingService/GetRank",
            &rank_body,
            rank_len,
            shape,
            Duration::from_secs(3),
            None,
        );
        match (health, rank) {
            (Ok(h), Ok(r)) => ratios.push(r.0 / h.0),
            (h, r) => eprintln!("h2load round left out: {:?} {:?}", h.err(), r.err()),
        }
        let health =
            h2load(other.addr, "/grpc.health.v1.Health/Check", &[], health_len, shape, Duration::from_secs(3), None);
        let top =
            h2load(other.addr, "/ranking.v1.RankingService/GetTopN", &top_body, 0, shape, Duration::from_secs(3), None);
        match (health, top) {
            (Ok(h), Ok(t)) => top_ratios.push(t.0 / h.0),
            (h, t) => eprintln!("h2load round left out: {:?} {:?}", h.err(), t.err()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.expect("writer");
    }

    // The full recompute of the same day beside the passes.
    let mut c = ranking_client::connect(format!("http://{}", holder.addr)).await.expect("connect");
    let cpu_recompute = cpu_seconds(holder.pid());
    let r = c.recompute(v1::RecomputeRequest::default()).await.expect("Recompute").into_inner();
    let recompute_cpu_ms = (cpu_seconds(holder.pid()) - cpu_recompute) * 1e3;
    let db = Database::connect(&pg.url()).await.expect("connect");
    let today = Utc::now().date_naive();
    let first = today.checked_sub_days(chrono::Days::new(7)).expect("a week back");
    let counted = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            format!(
                "SELECT COUNT(*) FROM product_daily_metrics WHERE metric_date BETWEEN DATE '{first}' AND DATE '{today}'"
            ),
        ))
        .await
        .expect("count")
        .expect("row");
    // A recompute reads the chain's days, today, and the week again (grouped).
    let rows_in_days: i64 = counted.try_get_by_index(0).expect("count");

    sampler.abort();
    let rss_mb =
        (crate::status_mb(&holder.pid().to_string(), "VmRSS:"), crate::status_mb(&other.pid().to_string(), "VmRSS:"));
    let delta = |name: &str| sample(&after, name) - sample(&before, name);
    let passes = delta("ranking_live_passes_total{outcome=\"published\"}");
    let changed = changed.lock().expect("changed").clone();
    let figures = Figures {
        products,
        interval,
        distribution,
        events_per_second: sent_in_load as f64 / load_seconds,
        freshness_ms,
        passes,
        busy_failed: (
            delta("ranking_live_passes_total{outcome=\"busy\"}"),
            delta("ranking_live_passes_total{outcome=\"failed\"}"),
        ),
        slowest_pass_ms: slowest(&before, &after, "ranking_live_pass_seconds") * 1e3,
        rows_read_per_pass: delta("ranking_live_rows_read_total") / passes.max(1.0),
        bytes_by_board: BOARDS
            .iter()
            .map(|board| {
                let written = |form: &str| {
                    delta(&format!("ranking_published_bytes_total{{form=\"{form}\",board=\"{board}\"}}"))
                        / passes.max(1.0)
                };
                (*board, written("whole"), written("delta"))
            })
            .collect(),
        bytes_per_pass: {
            let written = |form: &str| -> f64 {
                BOARDS
                    .iter()
                    .map(|board| delta(&format!("ranking_published_bytes_total{{form=\"{form}\",board=\"{board}\"}}")))
                    .sum()
            };
            (written("whole") / passes.max(1.0), written("delta") / passes.max(1.0))
        },
        // Each writer's distinct products per second, summed over the writers (an upper
        // bound: their products overlap), times the seconds between passes.
        rows_changed_per_pass: changed.iter().sum::<usize>() as f64 / (changed.len().max(1) as f64 / WRITERS as f64)
            * (load_seconds / passes.max(1.0)),
        cpu_ms_per_pass: cpu * 1e3 / passes.max(1.0),
        pass_ms: delta("ranking_live_pass_seconds_sum") * 1e3 / delta("ranking_live_pass_seconds_count").max(1.0),
        published_ms: (
            bucket_quantile(&before, &after, "ranking_freshness_seconds", 0.5) * 1e3,
            bucket_quantile(&before, &after, "ranking_freshness_seconds", 0.99) * 1e3,
        ),
        phases_ms: ["epoch", "read", "rank", "publish", "trending"].map(|phase| {
            let series = |what: &str| format!("ranking_live_phase_seconds_{what}{{phase=\"{phase}\"}}");
            delta(&series("sum")) * 1e3 / delta(&series("count")).max(1.0)
        }),
        recompute_ms: r.elapsed_ms as f64,
        recompute_cpu_ms,
        recompute_rows: rows_in_days * 2,
        rank_vs_health: median(ratios),
        top_vs_health: median(top_ratios),
        control,
        rss_mb,
        redis_peak_mb: redis_peak.load(Ordering::Relaxed) as f64 / 1048576.0,
        feed: (
            (delta("ranking_feed_records_total{sink=\"kafka\",kind=\"change\"}")
                + delta("ranking_feed_records_total{sink=\"kafka\",kind=\"version\"}"))
                / load_seconds,
            bucket_quantile(&before, &after, "ranking_feed_lag_seconds", 0.5) * 1e3,
            bucket_quantile(&before, &after, "ranking_feed_lag_seconds", 0.99) * 1e3,
        ),
    };
    for server in [holder, other] {
        server.terminate();
        server.wait().await;
    }
    let conn = crate::helpers::redis_connection(redis, ranking_server::adapters::redis::RedisMode::Single);
    crate::helpers::delete_keys(&conn, &prefix).await;
    figures
}

/// A pin of `product_id` at position 1 put on `replica` (which holds no lease: the pass runs
/// where the day's lease is), then deleted: its rank before, and ms from each answer to the
/// replica serving the change.
async fn control_put(replica: &mut Client, product_id: i64) -> (u64, f64, f64) {
    let rank = v1::GetRankRequest { product_id, ..Default::default() };
    let before = replica.get_rank(rank).await.ok().and_then(|r| r.into_inner().product).map_or(0, |p| p.rank);
    let first = async |replica: &mut Client| {
        let top = v1::GetTopNRequest { limit: 1, ..Default::default() };
        replica.get_top_n(top).await.ok()?.into_inner().products.first().map(|p| p.product_id)
    };
    let control = v1::Control {
        control_id: format!("bench-pin-{product_id}"),
        action: Some(v1::control::Action::Pin(v1::Pin { product_id, position: 1 })),
        ..Default::default()
    };
    let id = control.control_id.clone();
    replica
        .put_control(v1::PutControlRequest { control: Some(control), expected_revision: 0 })
        .await
        .expect("PutControl");
    let put = Instant::now();
    while first(replica).await != Some(product_id) {
        assert!(put.elapsed() < Duration::from_secs(300), "the pin never served");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let served = put.elapsed().as_secs_f64() * 1e3;
    replica
        .delete_control(v1::DeleteControlRequest { control_id: id, expected_revision: 0 })
        .await
        .expect("DeleteControl");
    let deleted = Instant::now();
    while first(replica).await == Some(product_id) {
        assert!(deleted.elapsed() < Duration::from_secs(300), "the pin never went");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (before, served, deleted.elapsed().as_secs_f64() * 1e3)
}

/// Samples Redis's `used_memory` every second into `peak` (its highest) until aborted.
async fn redis_memory(redis: String, peak: Arc<AtomicU64>) {
    let mut conn = crate::helpers::redis_connection(&redis, ranking_server::adapters::redis::RedisMode::Single);
    loop {
        let info: Result<String, _> = redis::cmd("INFO").arg("memory").query_async(&mut conn).await;
        let used = info.ok().and_then(|info| {
            info.lines().find_map(|l| l.strip_prefix("used_memory:")).and_then(|v| v.trim().parse::<u64>().ok())
        });
        if let Some(used) = used {
            peak.fetch_max(used, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
