//! Change epochs, what a live pass finds the rows changed since its previous
//! pass by:
//!
//! - `ranking_change_epoch`: one row (`id` 1) holding the current epoch. Every write
//!   transaction of metrics or catalog rows first reads it under a shared row lock (on
//!   SQLite, inside its write lock) and stamps the rows it writes with it; a live pass
//!   advances it, which waits for every transaction still holding the old value, so once
//!   the advance commits no row of an earlier epoch is left uncommitted.
//! - `change_epoch` on `product_daily_metrics` and `product_catalog`, indexed: the epoch of
//!   the last transaction that wrote the row (0 for rows written before this migration).

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261202_000006_change_epochs"
    }
}

#[derive(DeriveIden)]
enum RankingChangeEpoch {
    Table,
    Id,
    Epoch,
}

#[derive(DeriveIden)]
enum ProductDailyMetrics {
    Table,
    ChangeEpoch,
}

#[derive(DeriveIden)]
enum ProductCatalog {
    Table,
    ChangeEpoch,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(RankingChangeEpoch::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(RankingChangeEpoch::Id).small_integer().not_null().primary_key())
                    .col(ColumnDef::new(RankingChangeEpoch::Epoch).big_integer().not_null())
                    .to_owned(),
            )
            .await?;
        let first = Query::insert()
            .into_table(RankingChangeEpoch::Table)
            .columns([RankingChangeEpoch::Id, RankingChangeEpoch::Epoch])
            .values_panic([1.into(), 1.into()])
            .to_owned();
        manager.exec_stmt(first).await?;
        let column = || ColumnDef::new(Alias::new("change_epoch")).big_integer().not_null().default(0).to_owned();
        let alter = Table::alter().table(ProductDailyMetrics::Table).add_column(column()).to_owned();
        manager.alter_table(alter).await?;
        let alter = Table::alter().table(ProductCatalog::Table).add_column(column()).to_owned();
        manager.alter_table(alter).await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_product_daily_metrics_change_epoch")
                    .table(ProductDailyMetrics::Table)
                    .col(ProductDailyMetrics::ChangeEpoch)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_product_catalog_change_epoch")
                    .table(ProductCatalog::Table)
                    .col(ProductCatalog::ChangeEpoch)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (name, table) in [
            ("idx_product_catalog_change_epoch", ProductCatalog::Table.into_iden()),
            ("idx_product_daily_metrics_change_epoch", ProductDailyMetrics::Table.into_iden()),
        ] {
            manager.drop_index(Index::drop().name(name).table(table.clone()).to_owned()).await?;
            let alter = Table::alter().table(table).drop_column(Alias::new("change_epoch")).to_owned();
            manager.alter_table(alter).await?;
        }
        manager.drop_table(Table::drop().table(RankingChangeEpoch::Table).if_exists().to_owned()).await
    }
}
