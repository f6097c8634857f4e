//! `replica_layouts`: each running replica's announcement of the ranking store's layouts it
//! reads (see [`crate::ports::ReplicaRows`]).

use async_trait::async_trait;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, OnConflict, Order, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult};

use super::SqlMetricsStore;
use crate::ports::{Announced, Layout, ReplicaRows, StoreError};

#[async_trait]
impl ReplicaRows for SqlMetricsStore {
    async fn announce(&self, announced: &Announced) -> Result<(), StoreError> {
        let _gate = self.write_turn().await;
        announce(&self.db, announced).await
    }

    async fn forget(&self, replica: Option<&str>, stale_before_ms: i64) -> Result<(), StoreError> {
        let _gate = self.write_turn().await;
        forget(&self.db, replica, stale_before_ms).await
    }

    async fn announced_since(&self, since_ms: i64) -> Result<Vec<Announced>, StoreError> {
        announced_since(&self.db, since_ms).await
    }
}

fn table() -> Alias {
    Alias::new("replica_layouts")
}

const COLUMNS: [&str; 5] = ["replica", "reads_min", "reads_max", "release_name", "seen_at"];

/// Inserts or refreshes `announced`'s row.
async fn announce(db: &DatabaseConnection, announced: &Announced) -> Result<(), StoreError> {
    let insert = Query::insert()
        .into_table(table())
        .columns(COLUMNS.map(Alias::new))
        .values_panic([
            announced.replica.clone().into(),
            i32::from(*announced.reads.start()).into(),
            i32::from(*announced.reads.end()).into(),
            announced.release.clone().into(),
            announced.seen_at_ms.into(),
        ])
        .on_conflict(
            OnConflict::column(Alias::new("replica"))
                .update_columns(COLUMNS[1..].iter().copied().map(Alias::new))
                .to_owned(),
        )
        .to_owned();
    db.execute(&insert).await.map_err(StoreError::database)?;
    Ok(())
}

/// Deletes `replica`'s row, if named, and every row last seen before `stale_before_ms`.
async fn forget(db: &DatabaseConnection, replica: Option<&str>, stale_before_ms: i64) -> Result<(), StoreError> {
    let stale = Expr::col(Alias::new("seen_at")).lt(stale_before_ms);
    let condition = match replica {
        Some(replica) => Expr::col(Alias::new("replica")).eq(replica).or(stale),
        None => stale,
    };
    let delete = Query::delete().from_table(table()).cond_where(condition).to_owned();
    db.execute(&delete).await.map_err(StoreError::database)?;
    Ok(())
}

/// Every row seen at or after `since_ms`, by replica.
async fn announced_since(db: &DatabaseConnection, since_ms: i64) -> Result<Vec<Announced>, StoreError> {
    let select = Query::select()
        .columns(COLUMNS.map(Alias::new))
        .from(table())
        .and_where(Expr::col(Alias::new("seen_at")).gte(since_ms))
        .order_by(Alias::new("replica"), Order::Asc)
        .to_owned();
    let rows = db.query_all(&select).await.map_err(StoreError::database)?;
    rows.iter().map(announced_of).collect()
}

fn announced_of(row: &QueryResult) -> Result<Announced, StoreError> {
    let layout = |i: usize| -> Result<Layout, StoreError> {
        let n: i32 = row.try_get_by_index(i).map_err(StoreError::database)?;
        Layout::try_from(n).map_err(|_| StoreError::Corrupt(format!("replica_layouts: layout {n} is out of range")))
    };
    Ok(Announced {
        replica: row.try_get_by_index(0).map_err(StoreError::database)?,
        reads: layout(1)?..=layout(2)?,
        release: row.try_get_by_index(3).map_err(StoreError::database)?,
        seen_at_ms: row.try_get_by_index(4).map_err(StoreError::database)?,
    })
}
