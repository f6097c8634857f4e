//! `retention <rows>`: what retention costs on PostgreSQL when a past day's `rows` events go
//! row by row (a day without a partition of its own: `DELETE` in chunks of `PRUNE_CHUNK`, as on
//! the engines without partitions) and when they go with their day's partition (`DROP TABLE`):
//! seconds, WAL bytes written, dead tuples left for VACUUM.

use std::time::Instant;

use chrono::{Days, Utc};
use ranking_server::adapters::sql::{SqlMetricsStore, SqlOptions, partitions};
use ranking_server::ports::EventLedger;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};

use crate::helpers::pg;

async fn scalar(db: &DatabaseConnection, sql: &str) -> i64 {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql.to_string()))
        .await
        .expect("query")
        .expect("row");
    row.try_get_by_index::<i64>(0).expect("integer")
}

/// Writes `rows` events of `day` inside PostgreSQL.
async fn seed(db: &DatabaseConnection, day: chrono::NaiveDate, rows: i64, tag: &str) {
    let noon_us = day.and_hms_opt(12, 0, 0).expect("noon").and_utc().timestamp_micros();
    db.execute_unprepared(&format!(
        "INSERT INTO events (event_id, product_id, event_type, amount, occurred_at, metric_date, recorded_at) \
         SELECT '{tag}-' || g, g % 100000 + 1, 1, 0, {noon_us}, DATE '{day}', {noon_us} \
         FROM generate_series(1::bigint, {rows}::bigint) g"
    ))
    .await
    .expect("seed");
    db.execute_unprepared("ANALYZE events").await.expect("analyze");
}

/// Seconds and WAL bytes of one prune.
async fn timed_prune(store: &SqlMetricsStore, db: &DatabaseConnection, before: chrono::NaiveDate) -> (f64, i64) {
    let wal = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint";
    let wal_before = scalar(db, wal).await;
    let started = Instant::now();
    let cutoff = before.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    store.prune(cutoff, before, ranking_server::app::policy::PRUNE_CHUNK).await.expect("prune");
    (started.elapsed().as_secs_f64(), scalar(db, wal).await - wal_before)
}

pub async fn bench_retention(rows: i64) {
    let pg = pg::ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let store = SqlMetricsStore::connect(&SqlOptions::new(pg.url())).await.expect("connect");
    let db = Database::connect(pg.url()).await.expect("connect");
    let today = Utc::now().date_naive();
    let (by_rows, by_partition) = (today - Days::new(12), today - Days::new(11));

    // A day whose events landed in the default partition: deleted row by row.
    seed(&db, by_rows, rows, "rows").await;
    let (delete_s, delete_wal) = timed_prune(&store, &db, by_rows + Days::new(1)).await;
    db.execute_unprepared("SELECT pg_stat_force_next_flush()").await.ok();
    let dead = scalar(&db, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'events_default'").await;

    // A day with its own partition: dropped whole.
    partitions::ensure(&db, &partitions::ALL_DAILY, by_partition, by_partition).await.expect("partition");
    seed(&db, by_partition, rows, "part").await;
    let (drop_s, drop_wal) = timed_prune(&store, &db, by_partition + Days::new(1)).await;
    let left = scalar(&db, "SELECT COUNT(*) FROM events").await;
    assert_eq!(left, 0, "both days pruned");

    println!("\n## Retention of one past day on PostgreSQL ({rows} events; throwaway server)\n");
    println!("| how | seconds | events/s | WAL MB written | dead tuples left |");
    println!("|---|---:|---:|---:|---:|");
    let mb = |b: i64| b as f64 / 1e6;
    println!(
        "| DELETE in chunks of 5,000 (default partition; MySQL/SQLite path) | {delete_s:.2} | {:.0} | {:.1} | {dead} |",
        rows as f64 / delete_s,
        mb(delete_wal)
    );
    println!("| DROP of the day's partition | {drop_s:.3} | {:.0} | {:.2} | 0 |", rows as f64 / drop_s, mb(drop_wal));
}
