//! - `retractions`: one row per event that a retraction (`EVENT_TYPE_RETRACT`) named, keyed
//!   by that event's id. The write path reads it to tell an original recorded after its
//!   retraction (it counts for nothing) and a second retraction of the same event (a
//!   duplicate); a retraction that arrives before its original costs this one row, found by
//!   its key, never a scan of the events. Not partitioned: it holds only retractions, and
//!   retention deletes the rows of past days with the events.
//! - `retracted_views`, `retracted_likes`, `retracted_orders`, `retracted_order_amount` on
//!   `product_daily_metrics`: what retractions took from the day's counts, for ExplainRank.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261204_000007_retractions"
    }
}

#[derive(DeriveIden)]
enum ProductDailyMetrics {
    Table,
}

/// The day's counters of what retractions took back.
const RETRACTED: [&str; 4] = ["retracted_views", "retracted_likes", "retracted_orders", "retracted_order_amount"];

#[derive(DeriveIden)]
enum Retractions {
    Table,
    /// The id of the event taken back.
    TargetId,
    /// The retraction's own event id.
    EventId,
    /// The retraction's product (an original of another product is not its to take back).
    ProductId,
    /// The retraction's ranking day, what retention deletes it by.
    MetricDate,
    RecordedAt,
}

/// Ids are compared byte for byte, as `events.event_id` is (`VARBINARY` on MySQL).
fn id_column(backend: DbBackend, name: Retractions) -> ColumnDef {
    let mut col = ColumnDef::new(name);
    match backend {
        DbBackend::MySql => col.custom(Alias::new("VARBINARY(128)")),
        _ => col.string_len(128),
    };
    col.not_null().to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        manager
            .create_table(
                Table::create()
                    .table(Retractions::Table)
                    .if_not_exists()
                    .col(id_column(backend, Retractions::TargetId).primary_key())
                    .col(id_column(backend, Retractions::EventId))
                    .col(ColumnDef::new(Retractions::ProductId).big_integer().not_null())
                    .col(ColumnDef::new(Retractions::MetricDate).date().not_null())
                    .col(ColumnDef::new(Retractions::RecordedAt).big_integer().not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_retractions_metric_date")
                    .table(Retractions::Table)
                    .col(Retractions::MetricDate)
                    .to_owned(),
            )
            .await?;
        for column in RETRACTED {
            let counter = ColumnDef::new(Alias::new(column)).big_integer().not_null().default(0).to_owned();
            manager
                .alter_table(Table::alter().table(ProductDailyMetrics::Table).add_column(counter).to_owned())
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in RETRACTED {
            let drop = Table::alter().table(ProductDailyMetrics::Table).drop_column(Alias::new(column)).to_owned();
            manager.alter_table(drop).await?;
        }
        manager.drop_table(Table::drop().table(Retractions::Table).to_owned()).await
    }
}
