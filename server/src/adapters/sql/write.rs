//! The batch write path: one transaction of a constant number of statements per batch,
//! whatever its size.
//!
//! 1. One query finds the ids already stored (the duplicates).
//! 2. One insert-or-ignore stores the fresh events, in ascending id order so that two
//!    batches sharing ids wait for each other instead of deadlocking on the primary key.
//! 3. One additive upsert per metrics table applies the deltas folded per row (in batch
//!    order: likes and unlikes are order-sensitive), rows in ascending key order; plus one
//!    clamp upsert per table when an UNLIKE could take likes below zero (see
//!    [`crate::domain::delta`]).
//! 4. When the batch holds custom signals (`EVENT_TYPE_SIGNAL`), one additive upsert per
//!    signal table (per day, all-time), rows in ascending key order.
//!
//! An attempt that loses a race (an id another transaction committed after step 1) is
//! reported as [`Attempt::Retry`], a refused statement as [`Attempt::Db`]; the store runs the
//! whole transaction again when the race was lost or the dialect finds the refusal
//! transient (a deadlock, a serialization failure).

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::NaiveDate;
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbErr, Statement, Value};

use super::dialect::{Dialect, UpsertOp};
use super::rows::{Column, Rows};
use crate::domain::delta::MetricsDelta;
use crate::domain::event::EventKind;
use crate::domain::profile::SignalKind;
use crate::ports::{DatedEvent, StoreError};

/// Why one attempt of a transaction failed.
pub enum Attempt {
    /// Worth running again: an insert race lost to another transaction.
    Retry(String),
    /// The database refused a statement: worth running again when the dialect says the
    /// error is transient ([`Dialect::is_transient`]: a deadlock, a serialization failure).
    Db(DbErr),
    /// Not worth retrying here.
    Fail(StoreError),
}

impl From<DbErr> for Attempt {
    fn from(e: DbErr) -> Self {
        Self::Db(e)
    }
}

/// A metrics table as the upserts see it.
struct MetricsTable {
    name: &'static str,
    /// Primary-key columns, the conflict target.
    key: &'static [&'static str],
    /// Whether the table tracks the latest `occurred_at`.
    last_event_at: bool,
}

const DAILY_METRICS: MetricsTable =
    MetricsTable { name: "product_daily_metrics", key: &["metric_date", "product_id"], last_event_at: true };
const PRODUCT_METRICS: MetricsTable =
    MetricsTable { name: "product_metrics", key: &["product_id"], last_event_at: false };

/// What an insert-or-ignore of events reports.
enum Inserted {
    /// The ids actually inserted (engines with `RETURNING`).
    Ids(HashSet<String>),
    /// How many rows were inserted (engines where `RETURNING` is not portable).
    Count(u64),
}

/// The content of a stored event, to notice a reused id with different content.
#[derive(Debug, PartialEq, Eq)]
struct StoredEvent {
    product_id: i64,
    event_type: i16,
    amount: i64,
    occurred_at: i64,
}

impl StoredEvent {
    fn of(e: &DatedEvent) -> Self {
        Self {
            product_id: e.event.product_id,
            event_type: e.event.kind.code(),
            amount: e.event.amount,
            occurred_at: e.event.occurred_at.timestamp_micros(),
        }
    }
}

/// One attempt of one batch in one transaction.
pub struct BatchWrite<'a> {
    /// The engine's SQL.
    pub dialect: Dialect,
    /// The transaction the attempt runs in.
    pub txn: &'a DatabaseTransaction,
    /// The batch.
    pub batch: &'a [DatedEvent],
    /// `recorded_at` / `updated_at`, Unix microseconds.
    pub now_us: i64,
}

impl BatchWrite<'_> {
    fn statement(&self, sql: String, values: Vec<Value>) -> Statement {
        Statement::from_sql_and_values(self.dialect.backend(), sql, values)
    }

    /// Writes the events at `candidates` (indexes into the batch, each id once) and their
    /// metrics; returns the indexes that were fresh. Does not commit.
    pub async fn run(&self, candidates: &[usize]) -> Result<HashSet<usize>, Attempt> {
        let batch = self.batch;
        let stored = self.stored_events(candidates).await?;
        let fresh: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|i| match stored.get(batch[*i].event.event_id.as_str()) {
                None => true,
                Some(previous) => {
                    if *previous != StoredEvent::of(&batch[*i]) {
                        tracing::warn!(
                            event_id = %batch[*i].event.event_id,
                            "duplicate event id with different content; the first write wins"
                        );
                    }
                    false
                }
            })
            .collect();
        if fresh.is_empty() {
            return Ok(HashSet::new());
        }

        let mut by_id = fresh.clone();
        by_id.sort_unstable_by(|a, b| batch[*a].event.event_id.cmp(&batch[*b].event.event_id));
        let fresh = match self.insert_events(&by_id).await? {
            // Ids another transaction committed after our filter query were skipped by the
            // insert: they are duplicates, exactly like those the filter found.
            Inserted::Ids(ids) => {
                fresh.into_iter().filter(|i| ids.contains(batch[*i].event.event_id.as_str())).collect()
            }
            Inserted::Count(n) if n == fresh.len() as u64 => fresh,
            Inserted::Count(n) => {
                // Without RETURNING we cannot tell which ids lost the race: start over, and
                // the filter query will report them as duplicates.
                return Err(Attempt::Retry(format!(
                    "{} of {} ids raced with another writer",
                    fresh.len() as u64 - n,
                    fresh.len()
                )));
            }
        };
        if fresh.is_empty() {
            return Ok(HashSet::new());
        }

        let mut daily: BTreeMap<(NaiveDate, i64), MetricsDelta> = BTreeMap::new();
        let mut all_time: BTreeMap<i64, MetricsDelta> = BTreeMap::new();
        for i in &fresh {
            let e = &batch[*i];
            daily.entry((e.date, e.event.product_id)).or_default().add(&e.event);
            all_time.entry(e.event.product_id).or_default().add(&e.event);
        }
        let daily_keys = |rows: &[(&(NaiveDate, i64), &MetricsDelta)]| {
            vec![
                Column::Date(rows.iter().map(|((date, _), _)| *date).collect()),
                Column::Int(rows.iter().map(|((_, product), _)| *product).collect()),
            ]
        };
        self.apply_deltas(&DAILY_METRICS, &daily, daily_keys).await?;
        let product_keys = |rows: &[(&i64, &MetricsDelta)]| vec![Column::Int(rows.iter().map(|(p, _)| **p).collect())];
        self.apply_deltas(&PRODUCT_METRICS, &all_time, product_keys).await?;
        self.apply_signals(&fresh).await?;
        Ok(fresh.into_iter().collect())
    }

    /// Adds the custom signals of the fresh events: one upsert into `product_daily_signals`
    /// and one into `product_signals`, each row once in ascending key order (none when the
    /// batch has no SIGNAL event). A count signal counts 1, an amount signal its amount.
    async fn apply_signals(&self, fresh: &[usize]) -> Result<(), Attempt> {
        let mut daily: BTreeMap<(NaiveDate, i64, &str), i64> = BTreeMap::new();
        let mut all_time: BTreeMap<(i64, &str), i64> = BTreeMap::new();
        for e in fresh.iter().map(|i| &self.batch[*i]) {
            let EventKind::Signal(kind) = e.event.kind else { continue };
            let value = if kind == SignalKind::Count { 1 } else { e.event.amount };
            let name = e.event.signal.as_str();
            let day = daily.entry((e.date, e.event.product_id, name)).or_default();
            *day = day.saturating_add(value);
            let total = all_time.entry((e.event.product_id, name)).or_default();
            *total = total.saturating_add(value);
        }
        if daily.is_empty() {
            return Ok(());
        }
        let ops = [("value", UpsertOp::SaturatingAdd), ("updated_at", UpsertOp::Replace)];
        let rows = Rows {
            len: daily.len(),
            columns: vec![
                Column::Date(daily.keys().map(|(d, _, _)| *d).collect()),
                Column::Int(daily.keys().map(|(_, p, _)| *p).collect()),
                Column::Text(daily.keys().map(|(_, _, s)| (*s).to_owned()).collect()),
                Column::Int(daily.values().copied().collect()),
                Column::Int(vec![self.now_us; daily.len()]),
            ],
        };
        let key = "metric_date, product_id, signal_name";
        let tail = self.dialect.upsert_tail("product_daily_signals", key, &ops);
        self.upsert(&format!("product_daily_signals ({key}, value, updated_at)"), &tail, &rows).await?;
        let rows = Rows {
            len: all_time.len(),
            columns: vec![
                Column::Int(all_time.keys().map(|(p, _)| *p).collect()),
                Column::Text(all_time.keys().map(|(_, s)| (*s).to_owned()).collect()),
                Column::Int(all_time.values().copied().collect()),
                Column::Int(vec![self.now_us; all_time.len()]),
            ],
        };
        let key = "product_id, signal_name";
        let tail = self.dialect.upsert_tail("product_signals", key, &ops);
        self.upsert(&format!("product_signals ({key}, value, updated_at)"), &tail, &rows).await
    }

    async fn stored_events(&self, candidates: &[usize]) -> Result<HashMap<String, StoredEvent>, Attempt> {
        let ids: Vec<String> = candidates.iter().map(|i| self.batch[*i].event.event_id.clone()).collect();
        let (sql, values) = self.dialect.stored_events(ids);
        let mut stored = HashMap::new();
        for row in self.txn.query_all_raw(self.statement(sql, values)).await? {
            let id: String = row.try_get_by_index(0)?;
            let event = StoredEvent {
                product_id: row.try_get_by_index(1)?,
                event_type: row.try_get_by_index(2)?,
                amount: row.try_get_by_index(3)?,
                occurred_at: row.try_get_by_index(4)?,
            };
            stored.insert(id, event);
        }
        Ok(stored)
    }

    async fn insert_events(&self, fresh: &[usize]) -> Result<Inserted, Attempt> {
        let events = || fresh.iter().map(|i| &self.batch[*i]);
        let rows = Rows {
            len: fresh.len(),
            columns: vec![
                Column::Text(events().map(|e| e.event.event_id.clone()).collect()),
                Column::Int(events().map(|e| e.event.product_id).collect()),
                Column::SmallInt(events().map(|e| e.event.kind.code()).collect()),
                Column::Text(events().map(|e| e.event.signal.clone()).collect()),
                Column::Int(events().map(|e| e.event.amount).collect()),
                Column::Int(events().map(|e| e.event.occurred_at.timestamp_micros()).collect()),
                Column::Date(events().map(|e| e.date).collect()),
                Column::Int(vec![self.now_us; fresh.len()]),
            ],
        };
        let mut values = Vec::new();
        let source = self.dialect.row_source(&rows, &mut values);
        let sql = self.dialect.insert_or_ignore(
            "events (event_id, product_id, event_type, signal_name, amount, occurred_at, metric_date, recorded_at)",
            &source,
        );
        if self.dialect.returns_inserted() {
            let rows = self.txn.query_all_raw(self.statement(format!("{sql} RETURNING event_id"), values)).await?;
            let ids = rows.iter().map(|r| r.try_get_by_index::<String>(0)).collect::<Result<HashSet<_>, _>>()?;
            return Ok(Inserted::Ids(ids));
        }
        Ok(Inserted::Count(self.txn.execute_raw(self.statement(sql, values)).await?.rows_affected()))
    }

    /// Applies folded deltas to one metrics table: one additive upsert for every row, then
    /// one clamp upsert (`likes = GREATEST(likes, floor)`) for the rows where an UNLIKE could
    /// have crossed zero. `key_columns` turns the row keys into the table's key columns.
    async fn apply_deltas<K>(
        &self,
        table: &MetricsTable,
        deltas: &BTreeMap<K, MetricsDelta>,
        key_columns: impl Fn(&[(&K, &MetricsDelta)]) -> Vec<Column>,
    ) -> Result<(), Attempt> {
        let mut names: Vec<&str> = table.key.to_vec();
        names.extend(["views", "likes", "orders", "order_amount"]);
        let mut add = vec![
            ("views", UpsertOp::Add),
            ("likes", UpsertOp::Add),
            ("orders", UpsertOp::Add),
            // The only counter a valid event can push towards i64::MAX (10^12 per order).
            ("order_amount", UpsertOp::SaturatingAdd),
        ];
        if table.last_event_at {
            names.push("last_event_at");
            add.push(("last_event_at", UpsertOp::Max));
        }
        names.push("updated_at");
        add.push(("updated_at", UpsertOp::Replace));
        let head = format!("{} ({})", table.name, names.join(", "));
        let key = table.key.join(", ");

        // The clamp rows carry zero counters: only their likes column is read by the upsert.
        let rows = |subset: &[(&K, &MetricsDelta)], clamp: bool| {
            let counter = |f: fn(&MetricsDelta) -> i64| {
                Column::Int(subset.iter().map(|(_, d)| if clamp { 0 } else { f(d) }).collect())
            };
            let mut columns = key_columns(subset);
            columns.extend([
                counter(|d| d.views),
                Column::Int(subset.iter().map(|(_, d)| if clamp { d.likes.floor } else { d.likes.net }).collect()),
                counter(|d| d.orders),
                counter(|d| d.order_amount),
            ]);
            if table.last_event_at {
                columns.push(Column::Int(subset.iter().map(|(_, d)| d.last_event_us).collect()));
            }
            columns.push(Column::Int(vec![self.now_us; subset.len()]));
            Rows { len: subset.len(), columns }
        };
        let all: Vec<_> = deltas.iter().collect();
        self.upsert(&head, &self.dialect.upsert_tail(table.name, &key, &add), &rows(&all, false)).await?;
        let clamped: Vec<_> = all.iter().copied().filter(|(_, d)| d.likes.needs_clamp()).collect();
        let clamp = self.dialect.upsert_tail(table.name, &key, &[("likes", UpsertOp::Max)]);
        self.upsert(&head, &clamp, &rows(&clamped, true)).await
    }

    /// One upsert statement for all `rows` (none when there are no rows).
    async fn upsert(&self, head: &str, tail: &str, rows: &Rows) -> Result<(), Attempt> {
        if rows.len == 0 {
            return Ok(());
        }
        let mut values = Vec::new();
        let source = self.dialect.row_source(rows, &mut values);
        self.txn.execute_raw(self.statement(format!("INSERT INTO {head} {source}{tail}"), values)).await?;
        Ok(())
    }
}
