//! The upserts of the metrics rows: a batch's deltas ([`super::plan::Deltas`]), once its
//! shoppers' rows are settled, written with one additive upsert per table (the day's, the
//! hour's, the product's all-time rows), plus one clamp upsert where an UNLIKE (or a
//! retracted like) could have crossed zero. Rows go in ascending key order; the daily and
//! hourly rows are stamped with the change epoch (what a live pass finds changed rows by).

use std::collections::BTreeMap;

use chrono::NaiveDate;

use super::plan::{Deltas, HourKey, RowDelta};
use super::tx::Tx;
use crate::adapters::sql::dialect::UpsertOp;
use crate::adapters::sql::rows::{Column, Rows};
use crate::adapters::sql::signals;

/// A metrics table as the upserts see it.
struct MetricsTable {
    name: &'static str,
    /// Primary-key columns, the conflict target.
    key: &'static [&'static str],
    /// Whether the table tracks the latest `occurred_at` and the change epoch of its rows
    /// (what a live pass finds changed rows by).
    last_event_at: bool,
    /// Whether the table keeps what retractions took beside its counters.
    retracted: bool,
}

/// What retractions took from a daily row, beside its counters.
const RETRACTED_COLUMNS: [&str; 4] =
    ["retracted_views", "retracted_likes", "retracted_orders", "retracted_order_amount"];

const DAILY_METRICS: MetricsTable = MetricsTable {
    name: "product_daily_metrics",
    key: &["metric_date", "product_id"],
    last_event_at: true,
    retracted: true,
};
const HOURLY_METRICS: MetricsTable = MetricsTable {
    name: "product_hourly_metrics",
    key: &["metric_date", "product_id", "hour_start"],
    last_event_at: true,
    retracted: false,
};
const PRODUCT_METRICS: MetricsTable =
    MetricsTable { name: "product_metrics", key: &["product_id"], last_event_at: false, retracted: false };

/// Writes `deltas` (its shoppers' rows settled) to the metrics tables, the daily and hourly
/// rows stamped with `epoch`.
pub async fn apply(tx: Tx<'_>, deltas: &Deltas, epoch: i64) -> Result<(), sea_orm::DbErr> {
    let daily_keys = |rows: &[(&(NaiveDate, i64), &RowDelta)]| {
        vec![
            Column::Date(rows.iter().map(|((date, _), _)| *date).collect()),
            Column::Int(rows.iter().map(|((_, product), _)| *product).collect()),
        ]
    };
    apply_table(tx, &DAILY_METRICS, &deltas.daily, &deltas.columns, epoch, daily_keys).await?;
    let hourly_keys = |rows: &[(&HourKey, &RowDelta)]| {
        vec![
            Column::Date(rows.iter().map(|(k, _)| k.date).collect()),
            Column::Int(rows.iter().map(|(k, _)| k.product_id).collect()),
            Column::Int(rows.iter().map(|(k, _)| k.hour_start_us).collect()),
        ]
    };
    apply_table(tx, &HOURLY_METRICS, &deltas.hourly, &deltas.columns, epoch, hourly_keys).await?;
    let product_keys = |rows: &[(&i64, &RowDelta)]| vec![Column::Int(rows.iter().map(|(p, _)| **p).collect())];
    apply_table(tx, &PRODUCT_METRICS, &deltas.all_time, &deltas.columns, epoch, product_keys).await
}

/// Applies folded deltas to one metrics table: one additive upsert for every row, then
/// one clamp upsert (`likes = GREATEST(likes, floor)`) for the rows where an UNLIKE could
/// have crossed zero. `key_columns` turns the row keys into the table's key columns.
async fn apply_table<K>(
    tx: Tx<'_>,
    table: &MetricsTable,
    deltas: &BTreeMap<K, RowDelta>,
    signal_columns: &[u8],
    epoch: i64,
    key_columns: impl Fn(&[(&K, &RowDelta)]) -> Vec<Column>,
) -> Result<(), sea_orm::DbErr> {
    let signal_names: Vec<String> = signal_columns.iter().map(|c| signals::column(*c)).collect();
    let mut names: Vec<&str> = table.key.to_vec();
    names.extend(["views", "likes", "orders", "order_amount"]);
    names.extend(signal_names.iter().map(String::as_str));
    let mut add = vec![
        ("views", UpsertOp::Add),
        ("likes", UpsertOp::Add),
        ("orders", UpsertOp::Add),
        // The counters a valid event can push towards i64::MAX (10^12 per order).
        ("order_amount", UpsertOp::SaturatingAdd),
    ];
    add.extend(signal_names.iter().map(|n| (n.as_str(), UpsertOp::SaturatingAddNullable)));
    if table.last_event_at {
        names.extend(["last_event_at", "change_epoch"]);
        add.extend([("last_event_at", UpsertOp::Max), ("change_epoch", UpsertOp::Max)]);
    }
    if table.retracted {
        names.extend(RETRACTED_COLUMNS);
        add.extend(RETRACTED_COLUMNS.map(|c| (c, UpsertOp::SaturatingAdd)));
    }
    names.push("updated_at");
    add.push(("updated_at", UpsertOp::Replace));
    let head = format!("{} ({})", table.name, names.join(", "));
    let key = table.key.join(", ");

    // The clamp rows carry zero counters: only their likes column is read by the upsert.
    let rows = |subset: &[(&K, &RowDelta)], clamp: bool| {
        let counter = |f: &dyn Fn(&RowDelta) -> i64| {
            Column::Int(subset.iter().map(|(_, d)| if clamp { 0 } else { f(d) }).collect())
        };
        let mut columns = key_columns(subset);
        columns.extend([
            counter(&|d| d.metrics.views),
            Column::Int(
                subset.iter().map(|(_, d)| if clamp { d.metrics.likes.floor } else { d.metrics.likes.net }).collect(),
            ),
            counter(&|d| d.metrics.orders),
            counter(&|d| d.metrics.order_amount),
        ]);
        for c in signal_columns {
            columns.push(counter(&|d| d.signals[usize::from(*c - 1)]));
        }
        if table.last_event_at {
            columns.push(Column::Int(subset.iter().map(|(_, d)| d.metrics.last_event_us).collect()));
            columns.push(Column::Int(vec![epoch; subset.len()]));
        }
        if table.retracted {
            columns.extend([
                counter(&|d| d.retracted.views),
                counter(&|d| d.retracted.likes),
                counter(&|d| d.retracted.orders),
                counter(&|d| d.retracted.order_amount),
            ]);
        }
        columns.push(Column::Int(vec![tx.now_us; subset.len()]));
        Rows { len: subset.len(), columns }
    };
    let all: Vec<_> = deltas.iter().collect();
    upsert(tx, &head, &tx.dialect.upsert_tail(table.name, &key, &add), &rows(&all, false)).await?;
    let clamped: Vec<_> = all.iter().copied().filter(|(_, d)| d.metrics.likes.needs_clamp()).collect();
    let clamp = tx.dialect.upsert_tail(table.name, &key, &[("likes", UpsertOp::Max)]);
    upsert(tx, &head, &clamp, &rows(&clamped, true)).await
}

/// One upsert statement for all `rows` (none when there are no rows).
async fn upsert(tx: Tx<'_>, head: &str, tail: &str, rows: &Rows) -> Result<(), sea_orm::DbErr> {
    if rows.len == 0 {
        return Ok(());
    }
    let mut values = Vec::new();
    let source = tx.source(rows, &mut values);
    tx.execute(format!("INSERT INTO {head} {source}{tail}"), values).await?;
    Ok(())
}
