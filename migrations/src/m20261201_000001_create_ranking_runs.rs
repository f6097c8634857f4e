//! `ranking_runs`: per ranking day, the population statistics of the version last published,
//! so that ExplainRank can reproduce any product's norms without scanning the day.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261201_000001_create_ranking_runs"
    }
}

#[derive(DeriveIden)]
enum RankingRuns {
    Table,
    MetricDate,
    /// The version the statistics belong to.
    Version,
    /// Population size (N of every axis).
    Products,
    ViewMean,
    ViewStd,
    LikeMean,
    LikeStd,
    RecencyMean,
    RecencyStd,
    /// Start of the ranking day, Unix microseconds: the recency origin of carry-only products.
    RecencyOriginAt,
    /// The instant recency is measured to, Unix microseconds.
    RecencyReferenceAt,
    /// Unix microseconds of the recompute.
    ComputedAt,
}

fn real<T: IntoIden>(name: T) -> ColumnDef {
    ColumnDef::new(name).double().not_null().to_owned()
}

fn integer<T: IntoIden>(name: T) -> ColumnDef {
    ColumnDef::new(name).big_integer().not_null().to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(RankingRuns::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(RankingRuns::MetricDate).date().not_null().primary_key())
                    .col(integer(RankingRuns::Version))
                    .col(integer(RankingRuns::Products))
                    .col(real(RankingRuns::ViewMean))
                    .col(real(RankingRuns::ViewStd))
                    .col(real(RankingRuns::LikeMean))
                    .col(real(RankingRuns::LikeStd))
                    .col(real(RankingRuns::RecencyMean))
                    .col(real(RankingRuns::RecencyStd))
                    .col(integer(RankingRuns::RecencyOriginAt))
                    .col(integer(RankingRuns::RecencyReferenceAt))
                    .col(integer(RankingRuns::ComputedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(RankingRuns::Table).if_exists().to_owned()).await
    }
}
