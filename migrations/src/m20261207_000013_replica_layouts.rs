//! `replica_layouts`: one row per running replica, announcing the storage layouts of the
//! ranking store it reads (`reads_min ..= reads_max`), its release (`release_name`), and when it last said so
//! (`seen_at`, Unix milliseconds). Replicas of two releases run side by side during a rolling
//! upgrade; every publisher writes the newest layout that every live replica reads, so a new
//! layout is written only once no replica that cannot read it is left.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261207_000013_replica_layouts"
    }
}

#[derive(DeriveIden)]
enum ReplicaLayouts {
    Table,
    Replica,
    ReadsMin,
    ReadsMax,
    ReleaseName,
    SeenAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ReplicaLayouts::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ReplicaLayouts::Replica).string_len(128).not_null().primary_key())
                    .col(ColumnDef::new(ReplicaLayouts::ReadsMin).integer().not_null())
                    .col(ColumnDef::new(ReplicaLayouts::ReadsMax).integer().not_null())
                    .col(ColumnDef::new(ReplicaLayouts::ReleaseName).string_len(64).not_null())
                    .col(ColumnDef::new(ReplicaLayouts::SeenAt).big_integer().not_null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ReplicaLayouts::Table).if_exists().to_owned()).await
    }
}
