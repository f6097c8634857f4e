//! The statements on `actor_counts` (one row per day, product, capped signal and shopper):
//! the batch's shoppers' rows upserted in one statement in ascending key order, and the
//! counts they hold afterwards (returned by the upsert, or read back under its row locks on
//! MySQL), which the plan settles into the metrics rows ([`super::plan::Deltas::settle_caps`]).
//!
//! The rows are locked by the upsert until the commit, so two batches changing one shopper's
//! count take turns, and the second settles against the first's count: the value stays
//! Σ min(N, count) whatever the interleaving.

use std::collections::{BTreeMap, HashMap};

use sea_orm::DbErr;

use super::plan::{ActorKey, ActorRow};
use super::tx::Tx;
use crate::adapters::sql::rows::{Column, Rows};

/// Upserts every shoppers' row of `rows`; the counts they hold now.
pub async fn upsert(tx: Tx<'_>, rows: &BTreeMap<ActorKey, ActorRow>) -> Result<HashMap<ActorKey, i64>, DbErr> {
    let keys = || rows.keys();
    let key_columns = || {
        vec![
            Column::Date(keys().map(|k| k.date).collect()),
            Column::Int(keys().map(|k| k.product_id).collect()),
            Column::SmallInt(keys().map(|k| k.code).collect()),
            Column::Text(keys().map(|k| k.actor_id.clone()).collect()),
        ]
    };
    let mut columns = key_columns();
    columns.push(Column::Int(rows.values().map(|r| r.change().net()).collect()));
    let mut values = Vec::new();
    let source = tx.source(&Rows { len: rows.len(), columns }, &mut values);
    let upsert = tx.dialect.actor_upsert(&source);
    let returned = if tx.dialect.returns_upserted() {
        tx.query(upsert, values).await?
    } else {
        tx.execute(upsert, values).await?;
        let mut values = Vec::new();
        let source = tx.source(&Rows { len: rows.len(), columns: key_columns() }, &mut values);
        tx.query(tx.dialect.actor_counts_of(&source), values).await?
    };
    let mut after = HashMap::with_capacity(returned.len());
    for row in returned {
        let key = ActorKey {
            date: row.try_get_by_index(0)?,
            product_id: row.try_get_by_index(1)?,
            code: row.try_get_by_index(2)?,
            actor_id: row.try_get_by_index(3)?,
        };
        after.insert(key, row.try_get_by_index(4)?);
    }
    Ok(after)
}
