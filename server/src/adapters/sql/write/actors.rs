//! The statements on the shoppers' rows, `actor_counts` (one row per day, product, capped
//! signal and shopper) and `actor_hour_counts` (the same per hour): each table's rows of the
//! batch upserted in one statement in ascending key order, and the counts they hold
//! afterwards (returned by the upsert, or read back under its row locks on MySQL), which the
//! plan settles into the metrics rows ([`super::plan::Deltas::settle_caps`]).
//!
//! The rows are locked by the upsert until the commit, so two batches changing one shopper's
//! count take turns, and the second settles against the first's count: the value stays
//! Σ min(N, count) whatever the interleaving.

use std::collections::{BTreeMap, HashMap};

use sea_orm::{DbErr, QueryResult};

use super::plan::{ActorHourKey, ActorKey, ActorRow, HourKey};
use super::tx::Tx;
use crate::adapters::sql::dialect::{ACTOR_COUNTS, ACTOR_HOUR_COUNTS, ActorTable};
use crate::adapters::sql::rows::{Column, Rows};

/// Upserts every shoppers' row of a day in `rows`; the counts they hold now.
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
    let returned = upsert_table(tx, ACTOR_COUNTS, rows.values(), key_columns).await?;
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

/// Upserts every shoppers' row of an hour in `rows`; the counts they hold now.
pub async fn upsert_hours(
    tx: Tx<'_>,
    rows: &BTreeMap<ActorHourKey, ActorRow>,
) -> Result<HashMap<ActorHourKey, i64>, DbErr> {
    let keys = || rows.keys();
    let key_columns = || {
        vec![
            Column::Date(keys().map(|k| k.hour.date).collect()),
            Column::Int(keys().map(|k| k.hour.product_id).collect()),
            Column::Int(keys().map(|k| k.hour.hour_start_us).collect()),
            Column::SmallInt(keys().map(|k| k.code).collect()),
            Column::Text(keys().map(|k| k.actor_id.clone()).collect()),
        ]
    };
    let returned = upsert_table(tx, ACTOR_HOUR_COUNTS, rows.values(), key_columns).await?;
    let mut after = HashMap::with_capacity(returned.len());
    for row in returned {
        let hour = HourKey {
            date: row.try_get_by_index(0)?,
            product_id: row.try_get_by_index(1)?,
            hour_start_us: row.try_get_by_index(2)?,
        };
        let key = ActorHourKey { hour, code: row.try_get_by_index(3)?, actor_id: row.try_get_by_index(4)? };
        after.insert(key, row.try_get_by_index(5)?);
    }
    Ok(after)
}

/// One upsert of `table`'s rows (their key columns by `key_columns`, their changes from
/// `rows` in the same order); the rows as the upsert left them, key columns then `events`.
async fn upsert_table<'r>(
    tx: Tx<'_>,
    table: ActorTable,
    rows: impl ExactSizeIterator<Item = &'r ActorRow>,
    key_columns: impl Fn() -> Vec<Column>,
) -> Result<Vec<QueryResult>, DbErr> {
    let len = rows.len();
    let mut columns = key_columns();
    columns.push(Column::Int(rows.map(|r| r.change().net()).collect()));
    let mut values = Vec::new();
    let source = tx.source(&Rows { len, columns }, &mut values);
    let upsert = tx.dialect.actor_upsert(table, &source);
    if tx.dialect.returns_upserted() {
        return tx.query(upsert, values).await;
    }
    tx.execute(upsert, values).await?;
    let mut values = Vec::new();
    let source = tx.source(&Rows { len, columns: key_columns() }, &mut values);
    tx.query(tx.dialect.actor_counts_of(table, &source), values).await
}
