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
/// One probe every this long.
const PROBE_EVERY: Duration = Duration::from_millis(200);

async fn scrape(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("metrics endpoint");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n").await.expect("write");
    let mut body = String::new();
    conn.read_to_string(&mut body).await.expect("read");
    body
}

/// The smallest bucket bound of histogram `name` holding every observation made between the
/// two scrapes: an upper bound of the slowest one (`NaN` when none was made).
fn slowest(before: &str, after: &str, name: &str) -> f64 {
    bucket_quantile(before, after, name, 1.0)
}

/// The smallest bucket bound of histogram `name` holding at least `q` of the observations
/// made between the two scrapes (`NaN` when none was made).
fn bucket_quantile(before: &str, after: &str, name: &str, q: f64) -> f64 {
    let count = sample(after, &format!("{name}_count")) - sample(before, &format!("{name}_count"));
    let bucket = format!("{name}_bucket{{le=\"");
    let bounds = after.lines().filter_map(|l| l.strip_prefix(bucket.as_str())?.split('"').next());
    bounds
        .filter_map(|le| {
            let series = format!("{bucket}{le}\"}}");
            let within = sample(after, &series) - sample(before, &series);
            (count > 0.0 && within >= q * count).then(|| le.parse::<f64>().unwrap_or(f64::INFINITY))
        })
        .fold(f64::NAN, f64::min)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

struct Figures {
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
    println!("\n## Live exact ranking under RecordEvents load (throwaway PostgreSQL, one Redis, 2 release replicas)\n");
    println!(
        "| products | RANKING_LIVE_INTERVAL | popularity | events/s | commit → other replica's GetRank p50 / p99 / max ms (probes) | commit → published p50 / p99 ≤ ms | passes (busy, failed) | SQL rows read / rows changed per pass | holder CPU ms per pass | pass wall ms (mean, slowest ≤) | phases ms: epoch / read / rank / publish / trending (trending ÷ rank + publish) | full Recompute: wall ms, CPU ms, rows read | GetRank / health rate while passes run |"
    );
    println!("|---:|---|---|---:|---|---|---:|---|---:|---:|---|---|---:|");
    for f in &all {
        let mut sorted = f.freshness_ms.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "| {} | {} | {} | {:.0} | {:.0} / {:.0} / {:.0} ({}) | {:.0} / {:.0} | {:.0} ({:.0}, {:.0}) | {:.0} / {:.0} ({:.2}×) | {:.0} | {:.0}, {:.0} | {:.0} / {:.0} / {:.0} / {:.0} / {:.0} ({:.2}×) | {:.0}, {:.0}, {} | {:.2} |",
            f.products,
            f.interval,
            f.distribution,
            f.events_per_second,
            percentile(&sorted, 0.5),
            percentile(&sorted, 0.99),
            sorted.last().copied().unwrap_or(f64::NAN),
            sorted.len(),
            f.published_ms.0,
            f.published_ms.1,
            f.passes,
            f.busy_failed.0,
            f.busy_failed.1,
            f.rows_read_per_pass,
            f.rows_changed_per_pass,
            f.rows_read_per_pass / f.rows_changed_per_pass.max(1.0),
            f.cpu_ms_per_pass,
            f.pass_ms,
            f.slowest_pass_ms,
            f.phases_ms[0],
            f.phases_ms[1],
            f.phases_ms[2],
            f.phases_ms[3],
            f.phases_ms[4],
            f.phases_ms[4] / (f.phases_ms[2] + f.phases_ms[3]).max(1e-9),
            f.recompute_ms,
            f.recompute_cpu_ms,
            f.recompute_rows,
            f.rank_vs_health,
        );
    }
    println!(
        "\nTargets: p99 ≤ 1,000 ms at 100,000 products, ≤ 2,500 ms at 1,000,000; rows read proportional to rows changed; GetRank within 10 % of the health check; the trending board ≤ 0.3 × the daily board's rank + publish."
    );
    println!(
        "\n| products | RANKING_LIVE_INTERVAL | popularity | bytes to Redis per pass: whole / delta | by board: whole / delta | one board's packed copy | share of it |"
    );
    println!("|---:|---|---|---|---|---:|---:|");
    for f in &all {
        let board = f.products as f64 * 16.0;
        let (whole, delta) = f.bytes_per_pass;
        let by_board: Vec<String> = f
            .bytes_by_board
            .iter()
            .filter(|(_, w, d)| w + d > 0.0)
            .map(|(board, w, d)| format!("{board} {w:.0} / {d:.0}"))
            .collect();
        println!(
            "| {} | {} | {} | {:.0} / {:.0} | {} | {:.0} | {:.1} % |",
            f.products,
            f.interval,
            f.distribution,
            whole,
            delta,
            by_board.join(", "),
            board,
            (whole + delta) / board * 100.0
        );
    }
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
    let mut ratios = Vec::new();
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

/// The feed during live passes: the same load with the feed off, then on (to a topic of
/// `brokers`), on `products` products: the publication phase's time in both, the feed's records
/// per second and its lag from publication to the closing record acknowledged.
pub async fn bench_feed(redis: &str, brokers: &str, products: i64) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;

    let pg = seeded(products, Popularity::Zipf).await;
    let topic = format!("bench-feed-{:x}", Utc::now().timestamp_micros());
    let admin: AdminClient<DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin");
    let topics = [NewTopic::new(&topic, 1, TopicReplication::Fixed(1))];
    admin.create_topics(&topics, &AdminOptions::new()).await.expect("create topic");
    let rate = FEED_BATCHES_PER_SECOND;
    let off = run(&pg, redis, products, "zipf", "1s", None, rate).await;
    let on = run(&pg, redis, products, "zipf", "1s", Some((brokers, &topic)), rate).await;
    println!(
        "\n## The ranking feed during live passes ({products} products, RANKING_LIVE_INTERVAL 1s, Zipf popularity)\n"
    );
    println!(
        "| feed | events/s | passes | publish phase ms (mean) | pass wall ms (mean) | feed records/s | publication → version acknowledged p50 / p99 ≤ ms | target |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---|");
    for (name, f) in [("off", &off), ("on (Kafka, top 1,000)", &on)] {
        println!(
            "| {name} | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} | {:.0} / {:.0} | |",
            f.events_per_second, f.passes, f.phases_ms[3], f.pass_ms, f.feed.0, f.feed.1, f.feed.2
        );
    }
    println!(
        "| on ÷ off | | | {:.2} | {:.2} | | | publication ≤ 1.05 ×; lag p99 ≤ 1,000 ms |",
        on.phases_ms[3] / off.phases_ms[3].max(1e-9),
        on.pass_ms / off.pass_ms.max(1e-9)
    );
}
