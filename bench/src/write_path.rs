//! `write-path [events]`: where the time of the ingest path goes on PostgreSQL. RecordEvents
//! of `events` VIEW/LIKE/ORDER events (uniform over 100,000 products, the worst case, then
//! Zipf, both without live passes as the bus benchmark runs; then uniform with live passes
//! at the default interval of 1 s, each advancing the change epoch) in 10,000-event batches from 4 writers into a throwaway PostgreSQL (fsync on, the
//! events table in day partitions with the 8 retained days before today, as in production):
//! events/s; CPU µs per event of this process (server and callers) and of PostgreSQL; and
//! each statement of the write path with its calls, rows and share of the database's
//! execution time (pg_stat_statements). A fourth case, uniform, has a tenth of the orders
//! retracted: the retractions among the events, a third of them before their orders.
//!
//! `--shoppers`: uniform without live passes, with no actors; with every event from one of
//! 1,000,000 actors (uniform) under the distinct-viewers profile (`per_actor = 1` on views);
//! the same with a tenth of the orders retracted; and the bytes a stored actor row takes.

use std::time::Instant;

use chrono::Utc;
use ranking_client::v1;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};

use crate::bus::{Popularity, events};
use crate::helpers::pg;
use crate::runs::{CpuMeter, drop_db, fresh_db, write_batches};
use crate::serve;

const BATCH: usize = 10_000;
const WRITERS: usize = 4;

/// The statements of this database as pg_stat_statements counts them: (query, calls, rows,
/// total ms), most expensive first.
async fn statements(db: &DatabaseConnection) -> Vec<(String, i64, i64, f64)> {
    let sql = "SELECT s.query, s.calls, s.rows, s.total_exec_time FROM pg_stat_statements s \
               JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() \
               AND s.query NOT ILIKE '%pg_stat_statements%' ORDER BY s.total_exec_time DESC";
    let rows = db.query_all_raw(Statement::from_string(db.get_database_backend(), sql)).await.expect("statements");
    rows.iter()
        .map(|r| {
            (
                r.try_get_by_index::<String>(0).expect("query"),
                r.try_get_by_index::<i64>(1).expect("calls"),
                r.try_get_by_index::<i64>(2).expect("rows"),
                r.try_get_by_index::<f64>(3).expect("time"),
            )
        })
        .collect()
}

/// A statement's text cut to what tells it apart.
fn shape(query: &str) -> String {
    let flat: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = flat.chars().take(90).collect();
    cut.replace('|', "\\|")
}

/// The events of `n` with a retraction of every tenth order: the retraction comes 1,000
/// events after its order, or for a third of them 1,000 events before it.
fn with_retractions(events: Vec<v1::Event>, run: &str) -> Vec<v1::Event> {
    // Each event with its place: the originals at 3i + 1, a retraction 1,000 places after
    // its order (3(i + 1000) + 2) or before it (3(i - 1000)).
    let mut placed: Vec<(usize, v1::Event)> = Vec::with_capacity(events.len() + events.len() / 100);
    let mut orders = 0usize;
    for (i, e) in events.into_iter().enumerate() {
        if e.r#type == v1::EventType::Order as i32 {
            orders += 1;
            if orders.is_multiple_of(10) {
                let back = v1::Event {
                    event_id: format!("{run}-r{i:09}"),
                    r#type: v1::EventType::Retract.into(),
                    retracts: e.event_id.clone(),
                    amount: 0,
                    ..e.clone()
                };
                let at = if orders.is_multiple_of(30) { 3 * i.saturating_sub(1_000) } else { 3 * (i + 1_000) + 2 };
                placed.push((at, back));
            }
        }
        placed.push((3 * i + 1, e));
    }
    placed.sort_by_key(|(at, _)| *at);
    placed.into_iter().map(|(_, e)| e).collect()
}

/// Which cases of [`bench_write_path`] run: all, only the one with retractions, or the
/// shoppers' three.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cases {
    All,
    Retractions,
    Shoppers,
}

/// Actors the shoppers' cases draw from.
const ACTORS: u64 = 1_000_000;

/// The distinct-viewers profile, as deployed.
const DISTINCT_VIEWERS: &str = include_str!("../../deploy/profiles/distinct-viewers.toml");

/// One case: popularity, live-pass interval, a tenth of the orders retracted, actors under
/// the distinct-viewers profile.
type Case = (Popularity, &'static str, bool, bool);

/// Every event from one of [`ACTORS`] actors, drawn uniformly (a fixed generator).
fn with_actors(mut events: Vec<v1::Event>) -> Vec<v1::Event> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for e in &mut events {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        e.actor_id = format!("shopper-{}", x % ACTORS);
    }
    events
}

/// The actor rows' count and their bytes on disk (every partition: heap, key index, TOAST).
async fn actor_rows(db: &DatabaseConnection) -> (i64, i64) {
    let sql = "SELECT (SELECT COUNT(*) FROM actor_counts), \
               (SELECT COALESCE(SUM(pg_total_relation_size(relid)), 0)::bigint FROM pg_partition_tree('actor_counts'))";
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .expect("actor rows")
        .expect("a row");
    (row.try_get_by_index(0).expect("count"), row.try_get_by_index(1).expect("bytes"))
}

pub async fn bench_write_path(n: usize, cases: Cases) {
    let throwaway =
        pg::ThrowawayPostgres::start_with("-c shared_preload_libraries=pg_stat_statements -c max_connections=300")
            .expect("PostgreSQL server binaries");
    println!("\n## The ingest path on PostgreSQL: {n} events, {BATCH}-event batches, {WRITERS} writers\n");
    let all: Vec<Case> = match cases {
        Cases::All => vec![
            (Popularity::Uniform, "0", false, false),
            (Popularity::Zipf, "0", false, false),
            (Popularity::Uniform, "1s", false, false),
            (Popularity::Uniform, "0", true, false),
        ],
        Cases::Retractions => vec![(Popularity::Uniform, "0", true, false)],
        Cases::Shoppers => vec![
            (Popularity::Uniform, "0", false, false),
            (Popularity::Uniform, "0", false, true),
            (Popularity::Uniform, "0", true, true),
        ],
    };
    let profile = std::env::temp_dir().join(format!("bench-distinct-viewers-{:x}.toml", Utc::now().timestamp_micros()));
    std::fs::write(&profile, DISTINCT_VIEWERS).expect("profile file");
    for (popularity, live, retracting, shoppers) in all {
        let url = fresh_db(&throwaway.url()).await;
        let mut args =
            vec![format!("--database-url={url}"), "--db-max-connections=32".into(), format!("--live-interval={live}")];
        if shoppers {
            args.push(format!("--profile={}", profile.display()));
        }
        let app = serve(&args).await;
        let db = Database::connect(&url).await.expect("connect");
        db.execute_unprepared("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").await.expect("extension");
        let today = Utc::now().date_naive();
        ranking_server::adapters::sql::partitions::ensure(
            &db,
            &ranking_server::adapters::sql::partitions::ALL_DAILY,
            today - chrono::Days::new(8),
            today,
        )
        .await
        .expect("partitions");
        db.execute_unprepared("SELECT pg_stat_statements_reset()").await.expect("reset");

        let run = format!("{:x}", Utc::now().timestamp_micros());
        let workload = events(n, popularity, &run);
        let workload = if shoppers { with_actors(workload) } else { workload };
        let workload = if retracting { with_retractions(workload, &run) } else { workload };
        let n = workload.len();
        let batches: Vec<Vec<v1::Event>> = workload.chunks(BATCH).map(<[v1::Event]>::to_vec).collect();
        let cpu = CpuMeter::start(&throwaway, &[]);
        let started = Instant::now();
        write_batches(std::slice::from_ref(&app), batches, WRITERS).await;
        let secs = started.elapsed().as_secs_f64();
        let cpu = cpu.per_event(n);
        let (own, database) = (cpu.service, cpu.database);
        let mut passes = if live == "0" { "no live passes".to_string() } else { format!("live passes every {live}") };
        if shoppers {
            passes += ", 1,000,000 actors, views capped per_actor = 1";
        }
        if retracting {
            passes += ", a tenth of the orders retracted";
        }
        println!("### {}, {passes}\n", popularity.name());
        println!("| events/s | service + callers CPU µs/event | PostgreSQL CPU µs/event | seconds |");
        println!("|---:|---:|---:|---:|");
        println!("| {:.0} | {own:.1} | {database:.1} | {secs:.1} |\n", n as f64 / secs);
        let statements = statements(&db).await;
        let total: f64 = statements.iter().map(|s| s.3).sum();
        println!("| statement | calls | rows/call | ms/call | share of execution time |");
        println!("|---|---:|---:|---:|---:|");
        for (query, calls, rows, ms) in statements.iter().take(8) {
            println!(
                "| `{}` | {calls} | {:.0} | {:.2} | {:.0} % |",
                shape(query),
                *rows as f64 / (*calls).max(1) as f64,
                ms / (*calls).max(1) as f64,
                ms / total * 100.0
            );
        }
        let calls: i64 = statements.iter().map(|s| s.1).sum();
        let batches = n.div_ceil(BATCH);
        println!(
            "\nexecution time in all: {:.1} s over {secs:.1} s of wall time; {calls} statements for {batches} batches \
             ({:.1} per batch, retries included)\n",
            total / 1000.0,
            calls as f64 / batches as f64
        );
        if shoppers {
            let (rows, bytes) = actor_rows(&db).await;
            println!(
                "actor rows: {rows}, {:.1} MB on disk with their key, {:.0} bytes per row\n",
                bytes as f64 / 1e6,
                bytes as f64 / rows.max(1) as f64
            );
        }
        app.stop().await;
        drop(db);
        drop_db(&throwaway.url(), &url).await;
    }
    let _ = std::fs::remove_file(&profile);
}
