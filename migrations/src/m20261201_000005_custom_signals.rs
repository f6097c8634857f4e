//! Custom signals of scoring profiles and what explains a version computed with
//! any profile:
//!
//! - `events.signal_name`: the custom signal of an `EVENT_TYPE_SIGNAL` event (`''` for the
//!   built-in types). `signal` itself is a reserved word of MySQL.
//! - `signal_1` … `signal_8` on `product_daily_metrics` and `product_metrics`: the values of
//!   custom signals beside the built-in counters, so that a day is still read as one range
//!   of one table's primary key and a batch still writes one upsert per table.
//!   `signal_slots` assigns each custom signal name its column once and for good (a profile
//!   that drops a signal leaves its column to it; at most 8 names over the database's life).
//! - `ranking_runs.axis_stats`: the statistics of every tie-break axis of the version, in the
//!   profile's order (`mean std count` per axis, `;`-separated, each number in its shortest
//!   exact decimal form); `''` for rows recorded before it, whose three axes are in the
//!   `view_*`, `like_*` and `recency_*` columns.
//! - `scoring_profiles`: every profile a version was computed with, by fingerprint, as its
//!   canonical TOML text, so that ExplainRank explains a version with its own profile after
//!   the profile changed.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261201_000005_custom_signals"
    }
}

#[derive(DeriveIden)]
enum Events {
    Table,
    SignalName,
}

#[derive(DeriveIden)]
enum ProductDailyMetrics {
    Table,
}

#[derive(DeriveIden)]
enum ProductMetrics {
    Table,
}

#[derive(DeriveIden)]
enum SignalSlots {
    Table,
    SignalName,
    Slot,
}

/// Columns of custom signals per metrics table (the server's `adapters::sql::signals` holds
/// the same number).
const SIGNAL_COLUMNS: u8 = 8;

#[derive(DeriveIden)]
enum RankingRuns {
    Table,
    AxisStats,
}

#[derive(DeriveIden)]
enum ScoringProfiles {
    Table,
    Fingerprint,
    Body,
}

/// NULL until a row gets a value of the column's signal: a row of a platform without custom
/// signals stores nothing more than before (a bit of the null bitmap).
fn signal_column(slot: u8) -> ColumnDef {
    ColumnDef::new(Alias::new(format!("signal_{slot}"))).big_integer().null().to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let column = ColumnDef::new(Events::SignalName).string_len(64).not_null().default("").to_owned();
        manager.alter_table(Table::alter().table(Events::Table).add_column(column).to_owned()).await?;
        // One column per statement: SQLite alters a table one column at a time.
        for table in [ProductDailyMetrics::Table.into_iden(), ProductMetrics::Table.into_iden()] {
            for slot in 1..=SIGNAL_COLUMNS {
                let alter = Table::alter().table(table.clone()).add_column(signal_column(slot)).to_owned();
                manager.alter_table(alter).await?;
            }
        }
        manager
            .create_table(
                Table::create()
                    .table(SignalSlots::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(SignalSlots::SignalName).string_len(64).not_null().primary_key())
                    .col(ColumnDef::new(SignalSlots::Slot).small_integer().not_null().unique_key())
                    .to_owned(),
            )
            .await?;
        let column = ColumnDef::new(RankingRuns::AxisStats).string_len(512).not_null().default("").to_owned();
        manager.alter_table(Table::alter().table(RankingRuns::Table).add_column(column).to_owned()).await?;
        manager
            .create_table(
                Table::create()
                    .table(ScoringProfiles::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ScoringProfiles::Fingerprint).string_len(16).not_null().primary_key())
                    .col(ColumnDef::new(ScoringProfiles::Body).text().not_null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ScoringProfiles::Table).if_exists().to_owned()).await?;
        let table = Table::alter().table(RankingRuns::Table).drop_column(RankingRuns::AxisStats).to_owned();
        manager.alter_table(table).await?;
        manager.drop_table(Table::drop().table(SignalSlots::Table).if_exists().to_owned()).await?;
        for table in [ProductDailyMetrics::Table.into_iden(), ProductMetrics::Table.into_iden()] {
            for slot in 1..=SIGNAL_COLUMNS {
                let column = Alias::new(format!("signal_{slot}"));
                manager.alter_table(Table::alter().table(table.clone()).drop_column(column).to_owned()).await?;
            }
        }
        let table = Table::alter().table(Events::Table).drop_column(Events::SignalName).to_owned();
        manager.alter_table(table).await
    }
}
