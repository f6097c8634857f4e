//! `profile_runs`: the record of each day's last version of every further scoring profile
//! (`RANKING_PROFILES`), what `ranking_runs` is to the service's own profile: keyed by the
//! profile's name and the day, with the version, the population statistics of every axis
//! (`mean std count` per axis, `;`-separated, as `ranking_runs.axis_stats`), the recency
//! clock, the time of the run and the profile's fingerprint, so that ExplainRank explains a
//! variant's version with its own profile and statistics.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000011_profile_runs"
    }
}

#[derive(DeriveIden)]
enum ProfileRuns {
    Table,
    Profile,
    MetricDate,
    Version,
    Products,
    RecencyOriginAt,
    RecencyReferenceAt,
    ComputedAt,
    ProfileFingerprint,
    AxisStats,
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
                    .table(ProfileRuns::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ProfileRuns::Profile).string_len(64).not_null())
                    .col(ColumnDef::new(ProfileRuns::MetricDate).date().not_null())
                    .col(integer(ProfileRuns::Version))
                    .col(integer(ProfileRuns::Products))
                    .col(integer(ProfileRuns::RecencyOriginAt))
                    .col(integer(ProfileRuns::RecencyReferenceAt))
                    .col(integer(ProfileRuns::ComputedAt))
                    .col(ColumnDef::new(ProfileRuns::ProfileFingerprint).string_len(16).not_null())
                    .col(ColumnDef::new(ProfileRuns::AxisStats).string_len(512).not_null())
                    .primary_key(Index::create().col(ProfileRuns::Profile).col(ProfileRuns::MetricDate))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ProfileRuns::Table).if_exists().to_owned()).await
    }
}
