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
mod m20261207_000013_replica_layouts;

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
            Box::new(m20261207_000013_replica_layouts::Migration),
        ]
    }
}

/// The schema a start-up found, once [`up_or_newer`] is done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    /// This release's schema: its pending migrations, if any, applied.
    Current,
    /// A newer release's: every migration of this release applied, and these too, which this
    /// release does not know. Left as it is: a release's migrations only add what the release
    /// before it can run beside (expand, then contract a release later), so this one runs on it.
    Newer(Vec<String>),
}

/// Applies this release's pending migrations, or leaves a schema that a newer release migrated
/// forward as it is ([`Schema::Newer`]): a rolling upgrade runs the old and the new release on
/// one database, and a rollback starts the old one on the schema the new one left. A schema
/// with migrations this release does not know that also lacks some of its own is another line
/// of releases: refused, naming both.
pub async fn up_or_newer(db: &sea_orm_migration::sea_orm::DatabaseConnection) -> Result<Schema, DbErr> {
    let known: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_string()).collect();
    let applied: Vec<String> = Migrator::get_migration_models(db).await?.into_iter().map(|m| m.version).collect();
    let unknown: Vec<String> = applied.iter().filter(|v| !known.contains(v)).cloned().collect();
    if unknown.is_empty() {
        Migrator::up(db, None).await?;
        return Ok(Schema::Current);
    }
    let missing: Vec<&String> = known.iter().filter(|k| !applied.contains(k)).collect();
    if !missing.is_empty() {
        return Err(DbErr::Custom(format!(
            "the schema has migrations this release does not know ({}) and lacks some of its own ({}): \
             it was migrated by another line of releases",
            unknown.join(", "),
            missing.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(Schema::Newer(unknown))
}
