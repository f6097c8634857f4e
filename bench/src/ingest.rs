//! `ingest`: RecordEvents throughput per batch size, statements per batch, RecordEvent at 256 callers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement};

use crate::helpers::pg;
use crate::serve;

/// The workloads' generator: the test kit's, deterministic.
pub(crate) use crate::helpers::Draw as Rng;

fn ts() -> prost_types::Timestamp {
    let now = Utc::now();
    prost_types::Timestamp { seconds: now.timestamp(), nanos: 0 }
}

/// A workload of `total` events in batches of `size`, 5 % of each batch re-sending earlier ids;
/// with `signals`, 10 % of the events are the custom signals of [`TWO_SIGNALS`] (cart adds
/// and dwell time).
fn workload(size: usize, total: usize, run: &str, signals: bool) -> Vec<Vec<v1::Event>> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ size as u64);
    let at = ts();
    let mut sent: Vec<v1::Event> = Vec::new();
    let mut batches = Vec::new();
    let mut n = 0usize;
    while n < total {
        let mut batch = Vec::with_capacity(size);
        for _ in 0..size {
            let dup = !sent.is_empty() && rng.next_u64() % 100 < 5;
            let e = if dup {
                sent[(rng.next_u64() % sent.len() as u64) as usize].clone()
            } else {
                let r = rng.next_u64();
                let (kind, amount, signal) = match r % 20 {
                    0 => (v1::EventType::Order, ((r >> 8) % 200_000) as i64, ""),
                    1..=3 => (v1::EventType::Like, 0, ""),
                    4 => (v1::EventType::Unlike, 0, ""),
                    5 if signals => (v1::EventType::Signal, 0, "cart_adds"),
                    6 if signals => (v1::EventType::Signal, ((r >> 8) % 600_000) as i64, "dwell_ms"),
                    _ => (v1::EventType::View, 0, ""),
                };
                let e = v1::Event {
                    event_id: format!("{run}-{size}-{n}"),
                    product_id: rng.zipf(100_000),
                    r#type: kind.into(),
                    amount,
                    occurred_at: Some(at),
                    signal: signal.into(),
                    ..Default::default()
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

/// The profile of the ingest run with custom signals: the built-in terms and axes, and two
/// custom signals scored as log1p terms.
const TWO_SIGNALS: &str = "carry_over = 0.1\ncarry_days = 7\n[signals.cart_adds]\nkind = \"count\"\n\
    [signals.dwell_ms]\nkind = \"amount\"\n[[main]]\nsignal = \"views\"\nweight = 0.1\n[[main]]\nsignal = \"likes\"\n\
    weight = 0.2\n[[main]]\nsignal = \"order_amount\"\nweight = 0.6\ntransform = \"log1p\"\n[[main]]\n\
    signal = \"cart_adds\"\nweight = 0.3\ntransform = \"log1p\"\n[[main]]\nsignal = \"dwell_ms\"\nweight = 0.05\n\
    transform = \"log1p\"\n[[axes]]\nsignal = \"views\"\ndigits = 3\n[[axes]]\nsignal = \"likes\"\ndigits = 3\n\
    [[axes]]\nsignal = \"recency\"\ndigits = 3\n";

/// RecordEvent and RecordEvents on `target`, built-in events only; with `signals`, also the
/// same batches with 2 custom signals in the mix under [`TWO_SIGNALS`]. (The original
/// comparison with a plain `events` table is in the history: the tables of later
/// migrations are not on it.)
pub async fn bench_ingest(target: &str, signals: bool) {
    ingest_on(target, None).await;
    if signals {
        let path = std::env::temp_dir().join(format!("bench-ingest-profile-{:x}.toml", Utc::now().timestamp_micros()));
        std::fs::write(&path, TWO_SIGNALS).expect("profile file");
        ingest_on(target, Some(&path)).await;
        let _ = std::fs::remove_file(&path);
    }
}

async fn ingest_on(target: &str, profile: Option<&std::path::Path>) {
    let partitioned = true;
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
    let mut args = vec![format!("--database-url={url}"), "--db-max-connections=32".into()];
    args.extend(profile.map(|p| format!("--profile={}", p.display())));
    let app = serve(&args).await;
    let db = Database::connect(&url).await.expect("connect");
    if partitioned && db.get_database_backend() == DbBackend::Postgres {
        // The partitions a deployment holds in steady state: the 8 retained days before
        // today (the store created today's and the days ahead), so every id lookup probes as
        // many partitions as it would in production.
        let today = Utc::now().date_naive();
        let oldest = today - chrono::Days::new(8);
        ranking_server::adapters::sql::partitions::ensure(
            &db,
            &ranking_server::adapters::sql::partitions::ALL_DAILY,
            oldest,
            today,
        )
        .await
        .expect("partitions");
    }
    let engine = match (db.get_database_backend(), profile) {
        (DbBackend::Postgres, None) => "PostgreSQL, events in 12 day partitions + default",
        (DbBackend::Postgres, Some(_)) => "PostgreSQL, events in day partitions, 10 % custom signals (2 signals)",
        (DbBackend::MySql, _) => "MariaDB/MySQL",
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
                    signal: String::new(),
                    ..Default::default()
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
        let batches = workload(size, total, &run, profile.is_some());
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

    app.stop().await;
}
