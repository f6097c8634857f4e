//! Per-shopper caps:
//! - `actor_counts`: one row per (day, product, capped signal, actor), the actor's
//!   non-retracted events of that signal; a day's capped value is Σ min(N, events) over its
//!   rows plus the events without an actor. `signal_code` is 0 for views and a custom signal's
//!   column number (`signal_N`) for the others. Only capped signals have rows. On PostgreSQL
//!   the table is partitioned by day like `events` (`actor_counts_YYYYMMDD`, created ahead
//!   and dropped past retention by the service); elsewhere retention deletes a day's rows.
//! - `events.actor_id`: the actor whose count an event went into, empty when it counted
//!   without one, so that a retraction of it frees that actor's slot.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261204_000008_actor_counts"
    }
}

#[derive(DeriveIden)]
enum Events {
    Table,
    ActorId,
}

#[derive(DeriveIden)]
enum ActorCounts {
    Table,
    MetricDate,
    ProductId,
    SignalCode,
    ActorId,
    Events,
}

const POSTGRES_UP: &str = r"
CREATE TABLE actor_counts (
    metric_date date NOT NULL,
    product_id bigint NOT NULL,
    signal_code smallint NOT NULL,
    actor_id varchar(128) NOT NULL,
    events bigint NOT NULL,
    PRIMARY KEY (metric_date, product_id, signal_code, actor_id)
) PARTITION BY RANGE (metric_date);
CREATE TABLE actor_counts_default PARTITION OF actor_counts DEFAULT;
";

/// Actor ids are compared byte for byte, as event ids are (`VARBINARY` on MySQL).
fn actor_column<T: IntoIden>(backend: DbBackend, name: T) -> ColumnDef {
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
        let actor = actor_column(backend, Events::ActorId).default("").to_owned();
        manager.alter_table(Table::alter().table(Events::Table).add_column(actor).to_owned()).await?;
        if backend == DbBackend::Postgres {
            return manager.get_connection().execute_unprepared(POSTGRES_UP).await.map(drop);
        }
        manager
            .create_table(
                Table::create()
                    .table(ActorCounts::Table)
                    .if_not_exists()
                    .col(ColumnDef::new(ActorCounts::MetricDate).date().not_null())
                    .col(ColumnDef::new(ActorCounts::ProductId).big_integer().not_null())
                    .col(ColumnDef::new(ActorCounts::SignalCode).small_integer().not_null())
                    .col(actor_column(backend, ActorCounts::ActorId))
                    .col(ColumnDef::new(ActorCounts::Events).big_integer().not_null())
                    .primary_key(
                        Index::create()
                            .col(ActorCounts::MetricDate)
                            .col(ActorCounts::ProductId)
                            .col(ActorCounts::SignalCode)
                            .col(ActorCounts::ActorId),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(ActorCounts::Table).to_owned()).await?;
        let drop = Table::alter().table(Events::Table).drop_column(Events::ActorId).to_owned();
        manager.alter_table(drop).await
    }
}
