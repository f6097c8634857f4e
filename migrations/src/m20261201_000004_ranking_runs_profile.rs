//! `ranking_runs.profile_fingerprint`: the fingerprint of the scoring profile each recorded
//! version was computed with, so that a version is explained with its own
//! profile. Rows recorded before it read `''`: the built-in profile, the only one then.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261201_000004_ranking_runs_profile"
    }
}

#[derive(DeriveIden)]
enum RankingRuns {
    Table,
    ProfileFingerprint,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let column = ColumnDef::new(RankingRuns::ProfileFingerprint).string_len(16).not_null().default("").to_owned();
        manager.alter_table(Table::alter().table(RankingRuns::Table).add_column(column).to_owned()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let table = Table::alter().table(RankingRuns::Table).drop_column(RankingRuns::ProfileFingerprint).to_owned();
        manager.alter_table(table).await
    }
}
