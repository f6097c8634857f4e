//! The batch write path: one transaction of a constant number of statements per batch,
//! whatever its size.
//!
//! 1. One query finds the ids already stored (the duplicates).
//! 2. One insert-or-ignore stores the fresh events, in ascending id order so that two
//!    batches sharing ids wait for each other instead of deadlocking on the primary key.
//! 3. The change epoch, read under a shared row lock held to the commit; the metrics rows
//!    written next are stamped with it (what a live pass finds changed rows by:
//!    [`super::changes`]). Taken after the events, the first half of the transaction, so
//!    that a live pass advancing the epoch waits only for the metrics writes in flight.
//! 4. One additive upsert per metrics table applies the deltas folded per row (in batch
//!    order: likes and unlikes are order-sensitive), rows in ascending key order; plus one
//!    clamp upsert per table when an UNLIKE could take likes below zero (see
//!    [`crate::domain::delta`]).
//!    Custom signals (`EVENT_TYPE_SIGNAL`) are columns of the same rows (`signal_1` …, see
//!    [`super::signals`]): they add to the same upserts, so a batch with signals costs no
//!    statement more.
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
use super::signals::SIGNAL_COLUMNS;
use crate::domain::delta::MetricsDelta;
use crate::domain::vocabulary::EventKind;
use crate::domain::vocabulary::SignalKind;
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
    /// Whether the table tracks the latest `occurred_at` and the change epoch of its rows
    /// (what a live pass finds changed rows by).
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
    /// The column of every custom signal of the batch.
    pub signal_columns: &'a HashMap<String, u8>,
}

/// What a batch does to one metrics row: the built-in counters, and the custom signals'
/// sums by column (`signals[k]` is column `signal_{k+1}`).
#[derive(Debug, Default)]
struct RowDelta {
    metrics: MetricsDelta,
    signals: [i64; SIGNAL_COLUMNS as usize],
}

impl RowDelta {
    fn add(&mut self, event: &crate::domain::vocabulary::Event, signal: Option<(u8, i64)>) {
        self.metrics.add(event);
        if let Some((column, value)) = signal {
            let sum = &mut self.signals[usize::from(column - 1)];
            *sum = sum.saturating_add(value);
        }
    }
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

        let mut daily: BTreeMap<(NaiveDate, i64), RowDelta> = BTreeMap::new();
        let mut all_time: BTreeMap<i64, RowDelta> = BTreeMap::new();
        let mut columns: Vec<u8> = Vec::new();
        for i in &fresh {
            let e = &batch[*i];
            let signal = self.signal_of(&e.event)?;
            if let Some((column, _)) = signal
                && !columns.contains(&column)
            {
                columns.push(column);
            }
            daily.entry((e.date, e.event.product_id)).or_default().add(&e.event, signal);
            all_time.entry(e.event.product_id).or_default().add(&e.event, signal);
        }
        columns.sort_unstable();
        // Before the first metrics row, so that the epoch's shared lock covers every one this
        // transaction writes; not earlier: an advance waits for the lock's holders, and a
        // writer still checking and inserting its events has no metrics row to cover yet.
        let epoch = self.change_epoch().await?;
        let daily_keys = |rows: &[(&(NaiveDate, i64), &RowDelta)]| {
            vec![
                Column::Date(rows.iter().map(|((date, _), _)| *date).collect()),
                Column::Int(rows.iter().map(|((_, product), _)| *product).collect()),
            ]
        };
        self.apply_deltas(&DAILY_METRICS, &daily, &columns, epoch, daily_keys).await?;
        let product_keys = |rows: &[(&i64, &RowDelta)]| vec![Column::Int(rows.iter().map(|(p, _)| **p).collect())];
        self.apply_deltas(&PRODUCT_METRICS, &all_time, &columns, epoch, product_keys).await?;
        Ok(fresh.into_iter().collect())
    }

    /// The column and value of a SIGNAL event (a count signal counts 1, an amount signal its
    /// amount); `None` for the built-in types.
    fn signal_of(&self, event: &crate::domain::vocabulary::Event) -> Result<Option<(u8, i64)>, Attempt> {
        let EventKind::Signal(kind) = event.kind else { return Ok(None) };
        let Some(column) = self.signal_columns.get(&event.signal) else {
            let problem = format!("custom signal {:?} has no column", event.signal);
            return Err(Attempt::Fail(StoreError::Corrupt(problem)));
        };
        Ok(Some((*column, if kind == SignalKind::Count { 1 } else { event.amount })))
    }

    /// The current change epoch, locked shared until this transaction ends.
    async fn change_epoch(&self) -> Result<i64, Attempt> {
        let epoch = super::changes::read_epoch(self.txn, self.dialect.change_epoch_lock()).await?;
        epoch.ok_or_else(|| Attempt::Fail(super::changes::no_epoch()))
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
        deltas: &BTreeMap<K, RowDelta>,
        signal_columns: &[u8],
        epoch: i64,
        key_columns: impl Fn(&[(&K, &RowDelta)]) -> Vec<Column>,
    ) -> Result<(), Attempt> {
        let signal_names: Vec<String> = signal_columns.iter().map(|c| super::signals::column(*c)).collect();
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
                    subset
                        .iter()
                        .map(|(_, d)| if clamp { d.metrics.likes.floor } else { d.metrics.likes.net })
                        .collect(),
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
            columns.push(Column::Int(vec![self.now_us; subset.len()]));
            Rows { len: subset.len(), columns }
        };
        let all: Vec<_> = deltas.iter().collect();
        self.upsert(&head, &self.dialect.upsert_tail(table.name, &key, &add), &rows(&all, false)).await?;
        let clamped: Vec<_> = all.iter().copied().filter(|(_, d)| d.metrics.likes.needs_clamp()).collect();
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
