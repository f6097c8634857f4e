//! `rank_history`: the kept top of each board's ended days. One row per board (`board_window`
//! as the API numbers windows, `segment` and `profile`, empty for the whole ranking and the
//! service's profile) and `day`: `top_entries` packs the day's final served top, 20 bytes per
//! entry in rank order (product id, organic rank, main score's integer part), `version` is
//! the published version it was kept from (a row is replaced only by a newer one), `restated`
//! counts the rewrites after the day was first kept, `kept_at_us` the last write.
//!
//! The primary key `(board_window, segment, profile, day)` is the index a product's history
//! is read through (one range read of its board's rows). On PostgreSQL the table is
//! partitioned by month of `day` (`rank_history_YYYYMM`, created ahead by the service, and a
//! default partition), so retention drops whole months.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000010_rank_history"
    }
}

#[derive(DeriveIden)]
enum RankHistory {
    Table,
    BoardWindow,
    Segment,
    Profile,
    Day,
    Version,
    TopEntries,
    Restated,
    KeptAtUs,
}

const POSTGRES: &str = r"
CREATE TABLE IF NOT EXISTS rank_history (
    board_window smallint NOT NULL,
    segment varchar(64) NOT NULL,
    profile varchar(64) NOT NULL,
    day date NOT NULL,
    version bigint NOT NULL,
    top_entries bytea NOT NULL,
    restated integer NOT NULL,
    kept_at_us bigint NOT NULL,
    PRIMARY KEY (board_window, segment, profile, day)
) PARTITION BY RANGE (day);
CREATE TABLE IF NOT EXISTS rank_history_default PARTITION OF rank_history DEFAULT;
";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        if backend == DbBackend::Postgres {
            return manager.get_connection().execute_unprepared(POSTGRES).await.map(drop);
        }
        let mut top = ColumnDef::new(RankHistory::TopEntries);
        match backend {
            // BLOB stops at 64 KB: a kept top of more than 3,276 entries needs more.
            DbBackend::MySql => top.custom(Alias::new("MEDIUMBLOB")),
            _ => top.blob(),
        };
        manager
            .create_table(
                Table::create()
                    .table(RankHistory::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(RankHistory::BoardWindow).small_integer().not_null())
                    .col(ColumnDef::new(RankHistory::Segment).string_len(64).not_null())
                    .col(ColumnDef::new(RankHistory::Profile).string_len(64).not_null())
                    .col(ColumnDef::new(RankHistory::Day).date().not_null())
                    .col(ColumnDef::new(RankHistory::Version).big_integer().not_null())
                    .col(top.not_null())
                    .col(ColumnDef::new(RankHistory::Restated).integer().not_null())
                    .col(ColumnDef::new(RankHistory::KeptAtUs).big_integer().not_null())
                    .primary_key(
                        Index::create()
                            .col(RankHistory::BoardWindow)
                            .col(RankHistory::Segment)
                            .col(RankHistory::Profile)
                            .col(RankHistory::Day),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(RankHistory::Table).if_exists().to_owned()).await
    }
}
