//! What a live pass reads: the change epoch advanced, the metrics rows and
//! catalog rows stamped with the epochs since the previous pass, and the rows of a few
//! products over a range of days.
//!
//! Why no row can be missed: every writer of metrics or catalog rows reads the epoch, before
//! it writes the first of them, under a shared row lock held to its commit
//! ([`super::dialect::Dialect::change_epoch_lock`]) and stamps its
//! rows with it; [`advance`] updates that row, which waits until every transaction holding the
//! old epoch has committed or rolled back. When the advance to `n` commits, each row stamped
//! with an epoch below `n` is committed, and each transaction still to commit stamps `n` or
//! more: a pass that read `[from, n)` leaves nothing behind for the epochs it read, however
//! late a transaction commits or however early its events' timestamps.

use std::ops::Range;

use chrono::NaiveDate;
use futures_util::TryStreamExt;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query, SelectStatement};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, QueryResult, Statement, StreamTrait, TransactionTrait};

use super::metrics_row;
use crate::domain::live::ProductRow;
use crate::ports::{ChangedRow, StoreError};

/// Products per query of [`product_rows`].
const PRODUCTS_PER_QUERY: usize = 1_000;

/// The epoch `sql` reads from the one row of `ranking_change_epoch` in `conn` (the write
/// path's locking read, or the advance's plain one); `None` when the row is missing.
pub async fn read_epoch(conn: &impl ConnectionTrait, sql: &str) -> Result<Option<i64>, DbErr> {
    let row = conn.query_one_raw(Statement::from_string(conn.get_database_backend(), sql)).await?;
    row.map(|r| r.try_get_by_index::<i64>(0)).transpose()
}

/// What a missing epoch row means: a database the migrations did not make.
pub fn no_epoch() -> StoreError {
    StoreError::Corrupt("ranking_change_epoch has no row".into())
}

/// Advances the change epoch by one and returns the new value (`None`: the row is missing),
/// once every transaction that read the old one has ended: a frozen writer holds it at most
/// the session's lock wait ([`super::session`]).
pub async fn advance(db: &DatabaseConnection) -> Result<Option<i64>, DbErr> {
    let backend = db.get_database_backend();
    let txn = db.begin().await?;
    let bump = "UPDATE ranking_change_epoch SET epoch = epoch + 1 WHERE id = 1";
    txn.execute_raw(Statement::from_string(backend, bump)).await?;
    let epoch = read_epoch(&txn, "SELECT epoch FROM ranking_change_epoch WHERE id = 1").await?;
    txn.commit().await?;
    Ok(epoch)
}

/// The metrics columns every read here selects, then the custom signals' (`None`: a signal
/// without a column, read as 0), then `metric_date` and `updated_at`.
fn metrics_select(signals: &[Option<u8>]) -> SelectStatement {
    metrics_row::select("product_daily_metrics", signals)
        .columns(["metric_date", "updated_at"].map(Alias::new))
        .to_owned()
}

fn changed_row(row: &QueryResult, signals: usize) -> Result<ChangedRow, StoreError> {
    let (metrics, last_event_us) = metrics_row::read(row, 1, signals).map_err(StoreError::database)?;
    let next = metrics_row::after(1, signals);
    Ok(ChangedRow {
        row: ProductRow {
            date: row.try_get_by_index::<NaiveDate>(next).map_err(StoreError::database)?,
            product_id: row.try_get_by_index::<i64>(0).map_err(StoreError::database)?,
            metrics,
            last_event_us,
        },
        updated_us: row.try_get_by_index::<i64>(next + 1).map_err(StoreError::database)?,
    })
}

async fn stream(
    db: &DatabaseConnection,
    select: &SelectStatement,
    signals: usize,
    visit: &mut (dyn FnMut(ChangedRow) + Send),
) -> Result<u64, StoreError> {
    let statement = db.get_database_backend().build(select);
    let mut rows = db.stream_raw(statement).await.map_err(StoreError::database)?;
    let mut count = 0;
    while let Some(row) = rows.try_next().await.map_err(StoreError::database)? {
        visit(changed_row(&row, signals)?);
        count += 1;
    }
    Ok(count)
}

/// Every metrics row of `days` stamped with an epoch of `epochs` (through the epoch index).
pub async fn changed_rows(
    db: &DatabaseConnection,
    epochs: Range<i64>,
    days: (NaiveDate, NaiveDate),
    signals: &[Option<u8>],
    visit: &mut (dyn FnMut(ChangedRow) + Send),
) -> Result<u64, StoreError> {
    let select = metrics_select(signals)
        .and_where(Expr::col(Alias::new("change_epoch")).gte(epochs.start))
        .and_where(Expr::col(Alias::new("change_epoch")).lt(epochs.end))
        .and_where(Expr::col(Alias::new("metric_date")).between(days.0, days.1))
        .to_owned();
    stream(db, &select, signals.len(), visit).await
}

/// Every metrics row of `products` in `days` (by primary key), a bounded number of products
/// per query.
pub async fn product_rows(
    db: &DatabaseConnection,
    products: &[i64],
    days: (NaiveDate, NaiveDate),
    signals: &[Option<u8>],
    visit: &mut (dyn FnMut(ChangedRow) + Send),
) -> Result<u64, StoreError> {
    let mut count = 0;
    for chunk in products.chunks(PRODUCTS_PER_QUERY) {
        let select = metrics_select(signals)
            .and_where(Expr::col(Alias::new("metric_date")).between(days.0, days.1))
            .and_where(Expr::col(Alias::new("product_id")).is_in(chunk.iter().copied()))
            .to_owned();
        count += stream(db, &select, signals.len(), visit).await?;
    }
    Ok(count)
}

/// Whether a catalog row was written with an epoch of `epochs`.
pub async fn catalog_changed(db: &DatabaseConnection, epochs: Range<i64>) -> Result<bool, StoreError> {
    let select = Query::select()
        .column(Alias::new("product_id"))
        .from(Alias::new("product_catalog"))
        .and_where(Expr::col(Alias::new("change_epoch")).gte(epochs.start))
        .and_where(Expr::col(Alias::new("change_epoch")).lt(epochs.end))
        .limit(1)
        .to_owned();
    Ok(db.query_one(&select).await.map_err(StoreError::database)?.is_some())
}
