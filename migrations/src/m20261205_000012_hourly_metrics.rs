//! The hours of the trending board:
//! - `product_hourly_metrics`: one row per (ranking day, product, hour), the counters of the
//!   events whose `occurred_at` falls in that hour (`hour_start`: the local hour's first
//!   instant, Unix microseconds), custom signals in `signal_1` … `signal_8` as on the daily
//!   rows, the latest counted `occurred_at`, and the change epoch of the last transaction
//!   that wrote the row (indexed: what a live pass finds changed hours by). A retraction
//!   takes its original's counts off the original's hour.
//! - `actor_hour_counts`: `actor_counts` per hour, so that a capped signal's hour counts
//!   Σ over actors of min(N, their events in that hour).
//!
//! Seven days are kept. On PostgreSQL both tables are partitioned by day like `events`
//! (`…_YYYYMMDD`, created ahead and dropped past the seven days by the service); elsewhere
//! the pruning deletes a day's rows.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000012_hourly_metrics"
    }
}

/// The columns after the key, as on the daily rows (`signal_N` nullable: a column a batch
/// does not name stays NULL and counts as 0).
fn counters() -> String {
    let signals: String = (1..=8).map(|n| format!("signal_{n} BIGINT NULL, ")).collect();
    format!(
        "views BIGINT NOT NULL DEFAULT 0, likes BIGINT NOT NULL DEFAULT 0, orders BIGINT NOT NULL DEFAULT 0, \
         order_amount BIGINT NOT NULL DEFAULT 0, {signals}last_event_at BIGINT NOT NULL, \
         change_epoch BIGINT NOT NULL DEFAULT 0, updated_at BIGINT NOT NULL"
    )
}

fn statements(backend: DbBackend) -> Vec<String> {
    // Actor ids are compared byte for byte, as event ids are (`VARBINARY` on MySQL).
    let actor = if backend == DbBackend::MySql { "VARBINARY(128)" } else { "VARCHAR(128)" };
    let partitioned = if backend == DbBackend::Postgres { " PARTITION BY RANGE (metric_date)" } else { "" };
    let mut sql = vec![
        format!(
            "CREATE TABLE product_hourly_metrics (metric_date DATE NOT NULL, hour_start BIGINT NOT NULL, \
             product_id BIGINT NOT NULL, {}, PRIMARY KEY (metric_date, product_id, hour_start)){partitioned}",
            counters()
        ),
        "CREATE INDEX idx_product_hourly_metrics_change_epoch ON product_hourly_metrics (change_epoch)".to_string(),
        format!(
            "CREATE TABLE actor_hour_counts (metric_date DATE NOT NULL, hour_start BIGINT NOT NULL, \
             product_id BIGINT NOT NULL, signal_code SMALLINT NOT NULL, actor_id {actor} NOT NULL, \
             events BIGINT NOT NULL, PRIMARY KEY (metric_date, product_id, hour_start, signal_code, actor_id)){partitioned}"
        ),
    ];
    if backend == DbBackend::Postgres {
        sql.push("CREATE TABLE product_hourly_metrics_default PARTITION OF product_hourly_metrics DEFAULT".into());
        sql.push("CREATE TABLE actor_hour_counts_default PARTITION OF actor_hour_counts DEFAULT".into());
    }
    sql
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for sql in statements(manager.get_database_backend()) {
            db.execute_unprepared(&sql).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared("DROP TABLE IF EXISTS actor_hour_counts").await?;
        db.execute_unprepared("DROP TABLE IF EXISTS product_hourly_metrics").await?;
        Ok(())
    }
}
