//! `events` (the idempotency ledger), `product_metrics` (all-time) and
//! `product_daily_metrics` (per ranking day).

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000001_create_tables"
    }
}

#[derive(DeriveIden)]
enum Events {
    Table,
    EventId,
    ProductId,
    EventType,
    Amount,
    /// Unix microseconds.
    OccurredAt,
    /// Ranking day of `occurred_at` in `RANKING_TZ`, fixed at ingest.
    MetricDate,
    /// Unix microseconds of the commit that stored the event.
    RecordedAt,
}

#[derive(DeriveIden)]
enum ProductMetrics {
    Table,
    ProductId,
    Views,
    Likes,
    Orders,
    OrderAmount,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ProductDailyMetrics {
    Table,
    MetricDate,
    ProductId,
    Views,
    Likes,
    Orders,
    OrderAmount,
    /// Latest `occurred_at` of the product that day, Unix microseconds.
    LastEventAt,
    UpdatedAt,
}

/// Event ids are compared byte for byte. MySQL's string collations ignore case or trailing
/// spaces, which would make distinct ids collide, so MySQL stores them as `VARBINARY`.
fn event_id_column(backend: sea_orm_migration::sea_orm::DbBackend) -> ColumnDef {
    let mut col = ColumnDef::new(Events::EventId);
    match backend {
        sea_orm_migration::sea_orm::DbBackend::MySql => col.custom(Alias::new("VARBINARY(128)")),
        _ => col.string_len(128),
    };
    col.not_null().primary_key().to_owned()
}

fn counter<T: IntoIden>(name: T) -> ColumnDef {
    ColumnDef::new(name).big_integer().not_null().default(0).to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Events::Table)
                    .if_not_exists()
                    .col(event_id_column(manager.get_database_backend()))
                    .col(ColumnDef::new(Events::ProductId).big_integer().not_null())
                    .col(ColumnDef::new(Events::EventType).small_integer().not_null())
                    .col(ColumnDef::new(Events::Amount).big_integer().not_null())
                    .col(ColumnDef::new(Events::OccurredAt).big_integer().not_null())
                    .col(ColumnDef::new(Events::MetricDate).date().not_null())
                    .col(ColumnDef::new(Events::RecordedAt).big_integer().not_null())
                    .to_owned(),
            )
            .await?;
        // Retention prunes by age; without this index every prune would scan the ledger.
        manager
            .create_index(
                Index::create()
                    .if_not_exists()
                    .name("idx_events_occurred_at")
                    .table(Events::Table)
                    .col(Events::OccurredAt)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(ProductMetrics::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ProductMetrics::ProductId).big_integer().not_null().primary_key())
                    .col(counter(ProductMetrics::Views))
                    .col(counter(ProductMetrics::Likes))
                    .col(counter(ProductMetrics::Orders))
                    .col(counter(ProductMetrics::OrderAmount))
                    .col(ColumnDef::new(ProductMetrics::UpdatedAt).big_integer().not_null())
                    .to_owned(),
            )
            .await?;

        // Keyed (metric_date, product_id): a recompute reads one day in product order and
        // retention deletes whole days, both as range scans of the primary key.
        manager
            .create_table(
                Table::create()
                    .table(ProductDailyMetrics::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ProductDailyMetrics::MetricDate).date().not_null())
                    .col(ColumnDef::new(ProductDailyMetrics::ProductId).big_integer().not_null())
                    .col(counter(ProductDailyMetrics::Views))
                    .col(counter(ProductDailyMetrics::Likes))
                    .col(counter(ProductDailyMetrics::Orders))
                    .col(counter(ProductDailyMetrics::OrderAmount))
                    .col(ColumnDef::new(ProductDailyMetrics::LastEventAt).big_integer().not_null())
                    .col(ColumnDef::new(ProductDailyMetrics::UpdatedAt).big_integer().not_null())
                    .primary_key(
                        Index::create().col(ProductDailyMetrics::MetricDate).col(ProductDailyMetrics::ProductId),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in
            [ProductDailyMetrics::Table.into_iden(), ProductMetrics::Table.into_iden(), Events::Table.into_iden()]
        {
            manager.drop_table(Table::drop().table(table).if_exists().to_owned()).await?;
        }
        Ok(())
    }
}
