//! SQL schema of the ranking service, as sea-orm migrations.
//!
//! Tables are named through local `Iden` enums so that migrations never depend on the
//! server's entities, and statements are built with sea-query where the engines agree, so the
//! same migration runs on PostgreSQL, MySQL/MariaDB and SQLite; PostgreSQL's partitioned
//! tables, which sea-query does not describe, are written out.
//!
//! Instants are stored as `BIGINT` Unix microseconds (UTC): one representation with the same
//! precision and ordering on all three engines (MySQL `DATETIME` would otherwise truncate to
//! seconds and SQLite has no native timestamp type).

pub use sea_orm_migration::prelude::*;

mod m20261130_000001_create_tables;
mod m20261201_000001_create_ranking_runs;
mod m20261201_000002_create_product_catalog;
mod m20261201_000003_partition_events;
mod m20261201_000004_ranking_runs_profile;
mod m20261201_000005_custom_signals;
mod m20261202_000006_change_epochs;
mod m20261204_000007_retractions;
mod m20261204_000008_actor_counts;
mod m20261205_000009_merchandising_controls;
mod m20261205_000010_rank_history;
mod m20261205_000011_profile_runs;
mod m20261205_000012_hourly_metrics;

/// Applies the schema in order.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261130_000001_create_tables::Migration),
            Box::new(m20261201_000001_create_ranking_runs::Migration),
            Box::new(m20261201_000002_create_product_catalog::Migration),
            Box::new(m20261201_000003_partition_events::Migration),
            Box::new(m20261201_000004_ranking_runs_profile::Migration),
            Box::new(m20261201_000005_custom_signals::Migration),
            Box::new(m20261202_000006_change_epochs::Migration),
            Box::new(m20261204_000007_retractions::Migration),
            Box::new(m20261204_000008_actor_counts::Migration),
            Box::new(m20261205_000009_merchandising_controls::Migration),
            Box::new(m20261205_000010_rank_history::Migration),
            Box::new(m20261205_000011_profile_runs::Migration),
            Box::new(m20261205_000012_hourly_metrics::Migration),
        ]
    }
}
