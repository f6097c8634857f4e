//! `product_catalog`: UpdateCatalog's upserts, GetCatalog's read by key and the recompute's
//! scan.

use futures_util::TryStreamExt;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, OnConflict, Order, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection, StreamTrait, TransactionTrait};

use super::changes;
use super::dialect::Dialect;

use crate::domain::catalog::{CatalogEntry, joined, split};
use crate::ports::StoreError;

/// Rows per INSERT: 5 bind values each stays below every engine's parameter limit.
const CHUNK: usize = 2_000;

fn table() -> Alias {
    Alias::new("product_catalog")
}

/// Replaces the entries' rows in one transaction, in ascending product order (concurrent
/// overlapping calls cannot deadlock), stamped with the change epoch (read first, under its
/// shared lock: see [`Dialect::change_epoch_lock`]). The same entries twice leave the same
/// rows.
pub async fn update(db: &DatabaseConnection, dialect: Dialect, entries: &[CatalogEntry]) -> Result<(), StoreError> {
    let mut sorted: Vec<&CatalogEntry> = entries.iter().collect();
    sorted.sort_by_key(|e| e.product_id);
    let columns = ["product_id", "hidden", "segments", "title", "change_epoch"].map(Alias::new);
    let txn = db.begin().await.map_err(StoreError::database)?;
    let epoch = changes::read_epoch(&txn, dialect.change_epoch_lock())
        .await
        .map_err(StoreError::database)?
        .ok_or_else(changes::no_epoch)?;
    for chunk in sorted.chunks(CHUNK) {
        let mut insert = Query::insert();
        insert.into_table(table()).columns(columns.clone());
        for e in chunk {
            insert.values_panic([
                e.product_id.into(),
                i16::from(e.hidden).into(),
                joined(&e.segments).into(),
                e.title.clone().into(),
                epoch.into(),
            ]);
        }
        insert.on_conflict(
            OnConflict::column(Alias::new("product_id"))
                .update_columns(["hidden", "segments", "title", "change_epoch"].map(Alias::new))
                .to_owned(),
        );
        txn.execute(&insert).await.map_err(StoreError::database)?;
    }
    txn.commit().await.map_err(StoreError::database)
}

/// Which of `ids` the catalog hides (one query; `ids` holds at most one batch's products).
pub async fn hidden_among(db: &DatabaseConnection, ids: &[i64]) -> Result<Vec<i64>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let select = Query::select()
        .column(Alias::new("product_id"))
        .from(table())
        .and_where(Expr::col(Alias::new("hidden")).eq(1))
        .and_where(Expr::col(Alias::new("product_id")).is_in(ids.iter().copied()))
        .to_owned();
    let rows = db.query_all(&select).await.map_err(StoreError::database)?;
    rows.iter().map(|r| r.try_get_by_index::<i64>(0).map_err(StoreError::database)).collect()
}

/// Every hidden product, ascending (one query over the catalog, returning only the hidden).
pub async fn hidden(db: &DatabaseConnection) -> Result<Vec<i64>, StoreError> {
    let select = Query::select()
        .column(Alias::new("product_id"))
        .from(table())
        .and_where(Expr::col(Alias::new("hidden")).eq(1))
        .order_by(Alias::new("product_id"), Order::Asc)
        .to_owned();
    let rows = db.query_all(&select).await.map_err(StoreError::database)?;
    rows.iter().map(|r| r.try_get_by_index::<i64>(0).map_err(StoreError::database)).collect()
}

/// The rows of `ids` (at most a page's products), in ascending product order.
pub async fn entries(db: &DatabaseConnection, ids: &[i64]) -> Result<Vec<CatalogEntry>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let select = Query::select()
        .columns(["product_id", "hidden", "segments", "title"].map(Alias::new))
        .from(table())
        .and_where(Expr::col(Alias::new("product_id")).is_in(ids.iter().copied()))
        .order_by(Alias::new("product_id"), Order::Asc)
        .to_owned();
    let rows = db.query_all(&select).await.map_err(StoreError::database)?;
    rows.iter().map(|row| entry_of(row).map_err(StoreError::database)).collect()
}

fn entry_of(row: &sea_orm::QueryResult) -> Result<CatalogEntry, sea_orm::DbErr> {
    Ok(CatalogEntry {
        product_id: row.try_get_by_index::<i64>(0)?,
        hidden: row.try_get_by_index::<i16>(1)? != 0,
        segments: split(&row.try_get_by_index::<String>(2)?),
        title: row.try_get_by_index::<String>(3)?,
    })
}

/// Visits every catalog row in ascending product order, streaming.
pub async fn scan(db: &DatabaseConnection, visit: &mut (dyn FnMut(CatalogEntry) + Send)) -> Result<u64, StoreError> {
    let select = Query::select()
        .columns(["product_id", "hidden", "segments", "title"].map(Alias::new))
        .from(table())
        .order_by(Alias::new("product_id"), Order::Asc)
        .to_owned();
    let statement = db.get_database_backend().build(&select);
    let mut rows = db.stream_raw(statement).await.map_err(StoreError::database)?;
    let mut count = 0;
    while let Some(row) = rows.try_next().await.map_err(StoreError::database)? {
        visit(entry_of(&row).map_err(StoreError::database)?);
        count += 1;
    }
    Ok(count)
}
