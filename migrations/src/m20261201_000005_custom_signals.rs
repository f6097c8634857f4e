//! Custom signals of scoring profiles (SPEC §10.3) and what explains a version computed with
//! any profile:
//!
//! - `events.signal_name`: the custom signal of an `EVENT_TYPE_SIGNAL` event (`''` for the
//!   built-in types). `signal` itself is a reserved word of MySQL.
//! - `product_daily_signals` (per ranking day) and `product_signals` (all-time): one row per
//!   product and custom signal, keyed like the built-in tables so that a day is read as one
//!   range of the primary key.
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
enum ProductDailySignals {
    Table,
    MetricDate,
    ProductId,
    SignalName,
    Value,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ProductSignals {
    Table,
    ProductId,
    SignalName,
    Value,
    UpdatedAt,
}

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

fn signal_name<T: IntoIden>(name: T) -> ColumnDef {
    ColumnDef::new(name).string_len(64).not_null().to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let column = ColumnDef::new(Events::SignalName).string_len(64).not_null().default("").to_owned();
        manager.alter_table(Table::alter().table(Events::Table).add_column(column).to_owned()).await?;
        manager
            .create_table(
                Table::create()
                    .table(ProductDailySignals::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ProductDailySignals::MetricDate).date().not_null())
                    .col(ColumnDef::new(ProductDailySignals::ProductId).big_integer().not_null())
                    .col(signal_name(ProductDailySignals::SignalName))
                    .col(ColumnDef::new(ProductDailySignals::Value).big_integer().not_null().default(0))
                    .col(ColumnDef::new(ProductDailySignals::UpdatedAt).big_integer().not_null())
                    .primary_key(
                        Index::create()
                            .col(ProductDailySignals::MetricDate)
                            .col(ProductDailySignals::ProductId)
                            .col(ProductDailySignals::SignalName),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ProductSignals::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ProductSignals::ProductId).big_integer().not_null())
                    .col(signal_name(ProductSignals::SignalName))
                    .col(ColumnDef::new(ProductSignals::Value).big_integer().not_null().default(0))
                    .col(ColumnDef::new(ProductSignals::UpdatedAt).big_integer().not_null())
                    .primary_key(Index::create().col(ProductSignals::ProductId).col(ProductSignals::SignalName))
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
        manager.drop_table(Table::drop().table(ProductSignals::Table).if_exists().to_owned()).await?;
        manager.drop_table(Table::drop().table(ProductDailySignals::Table).if_exists().to_owned()).await?;
        let table = Table::alter().table(Events::Table).drop_column(Events::SignalName).to_owned();
        manager.alter_table(table).await
    }
}
