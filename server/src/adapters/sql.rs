//! The SQL metrics store (sea-orm): PostgreSQL, MySQL/MariaDB and SQLite.
//!
//! A batch is one transaction of a constant number of statements, whatever its size:
//! one query filters already-stored ids, one insert-or-ignore stores the fresh events, and
//! one upsert per metrics table applies the folded deltas (plus one clamp upsert per table
//! when an UNLIKE could take likes below zero, see [`crate::domain::delta`]). On PostgreSQL
//! each statement binds one array per column (`UNNEST`); elsewhere numbers are written as
//! literals so only event ids are bound (10,000 ids stay below every engine's parameter
//! limit). Rows are applied in
//! ascending primary-key order so overlapping batches lock in the same order; a transaction
//! that still hits a deadlock, a serialization failure or a concurrent insert of the same id
//! is retried from scratch with jittered backoff.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use futures_util::TryStreamExt;
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    IsolationLevel, RuntimeErr, Statement, StreamTrait, TransactionTrait, Value,
};
use tokio::sync::Mutex;

use crate::domain::delta::MetricsDelta;
use crate::domain::score::DailyMetrics;
use crate::ports::{DailyRow, DatedEvent, MetricsStore, Outcome, StoreError};

/// Connection settings of the SQL store.
#[derive(Debug, Clone)]
pub struct SqlOptions {
    /// `postgres://…`, `mysql://…` or `sqlite://…`.
    pub url: String,
    /// Pool size.
    pub max_connections: u32,
    /// Time to establish a connection, and to wait for a pooled one.
    pub connect_timeout: Duration,
    /// Attempts of a transaction that hits a deadlock or serialization failure.
    pub max_attempts: u32,
}

impl SqlOptions {
    /// Defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), max_connections: 16, connect_timeout: Duration::from_secs(5), max_attempts: 20 }
    }
}

/// The SQL single source of truth.
pub struct SqlMetricsStore {
    db: DatabaseConnection,
    backend: DbBackend,
    /// SQLite has one writer at a time; queueing writers here instead of in SQLite avoids
    /// `SQLITE_BUSY` on read-to-write upgrades.
    write_gate: Option<Mutex<()>>,
    max_attempts: u32,
}

/// Why one attempt of a transaction failed.
enum Attempt {
    /// Worth running again: deadlock, serialization failure, lost insert race.
    Retry(String),
    /// Not worth retrying here.
    Fail(StoreError),
}

impl From<DbErr> for Attempt {
    fn from(e: DbErr) -> Self {
        if is_transient(&e) { Self::Retry(e.to_string()) } else { Self::Fail(StoreError::database(e)) }
    }
}

/// Deadlocks, serialization failures and SQLite lock contention: another transaction won,
/// running again will succeed.
fn is_transient(e: &DbErr) -> bool {
    let sqlx_err = match e {
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => e,
        _ => return false,
    };
    let sea_orm::sqlx::Error::Database(db) = sqlx_err.as_ref() else { return false };
    let code = db.code().unwrap_or_default();
    let message = db.message();
    matches!(code.as_ref(), "40001" | "40P01" | "5" | "6" | "517" | "261")
        || message.contains("Deadlock found")
        || message.contains("Lock wait timeout")
        || message.contains("database is locked")
}

impl SqlMetricsStore {
    /// Connects and applies pending migrations.
    pub async fn connect(options: &SqlOptions) -> Result<Self, StoreError> {
        let mut connect = ConnectOptions::new(options.url.clone());
        connect
            .max_connections(options.max_connections)
            .min_connections(0)
            .connect_timeout(options.connect_timeout)
            .acquire_timeout(options.connect_timeout)
            .sqlx_logging(false);
        let db = Database::connect(connect).await.map_err(StoreError::database)?;
        use ranking_migrations::MigratorTrait;
        ranking_migrations::Migrator::up(&db, None)
            .await
            .map_err(|e| StoreError::database(format!("migration failed: {e}")))?;
        let backend = db.get_database_backend();
        Ok(Self {
            db,
            backend,
            write_gate: matches!(backend, DbBackend::Sqlite | DbBackend::MySql).then(|| Mutex::new(())),
            max_attempts: options.max_attempts.max(1),
        })
    }

    fn statement(&self, sql: String, values: Vec<Value>) -> Statement {
        Statement::from_sql_and_values(self.backend, sql, values)
    }

    /// The row source of an `INSERT … SELECT`/`INSERT … VALUES`, one statement for the whole
    /// batch: on PostgreSQL an `UNNEST` of one typed array per column, on MySQL a `JSON_TABLE`
    /// over one JSON document, on SQLite a `VALUES` list with numbers and dates written as
    /// literals and strings bound. The PostgreSQL and MySQL texts do not depend on the row
    /// count, so each is prepared once per connection: a statement text per batch would churn
    /// the prepared-statement cache, and on MySQL every eviction costs a delayed-ACK stall
    /// (about 40 ms) because the close message gets no reply.
    fn row_source(&self, rows: &Rows, values: &mut Vec<Value>) -> String {
        match self.backend {
            DbBackend::Postgres => {
                let arrays: Vec<String> = rows
                    .columns
                    .iter()
                    .map(|c| {
                        let (value, ty) = c.array();
                        values.push(value);
                        format!("${}::{ty}[]", values.len())
                    })
                    .collect();
                return format!("SELECT * FROM UNNEST({})", arrays.join(", "));
            }
            DbBackend::MySql => {
                values.push(Value::from(rows.to_json()));
                let columns: Vec<String> = rows
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("c{i} {} PATH '$[{i}]'", c.mysql_type()))
                    .collect();
                return format!("SELECT * FROM JSON_TABLE(?, '$[*]' COLUMNS ({})) AS j", columns.join(", "));
            }
            _ => {}
        }
        let mut out = String::with_capacity(rows.len * rows.columns.len() * 12 + 8);
        out.push_str("VALUES ");
        for r in 0..rows.len {
            out.push_str(if r == 0 { "(" } else { ",(" });
            for (i, c) in rows.columns.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                c.literal_or_bind(r, &mut out, values);
            }
            out.push(')');
        }
        out
    }

    fn greatest(&self) -> &'static str {
        if self.backend == DbBackend::Sqlite { "MAX" } else { "GREATEST" }
    }

    /// `ON CONFLICT … DO UPDATE SET` / `ON DUPLICATE KEY UPDATE` with `col = expr(old, new)`.
    fn upsert_tail(&self, table: &str, key: &str, sets: &[(&str, UpsertOp)]) -> String {
        let mysql = self.backend == DbBackend::MySql;
        let old = |c: &str| if mysql { c.to_string() } else { format!("{table}.{c}") };
        let new = |c: &str| if mysql { format!("VALUES({c})") } else { format!("excluded.{c}") };
        let greatest = self.greatest();
        let assignments: Vec<String> = sets
            .iter()
            .map(|(col, op)| {
                let expr = match op {
                    UpsertOp::Add => format!("{} + {}", old(col), new(col)),
                    UpsertOp::Max => format!("{greatest}({}, {})", old(col), new(col)),
                    UpsertOp::Replace => new(col),
                };
                format!("{col} = {expr}")
            })
            .collect();
        match self.backend {
            DbBackend::MySql => format!(" ON DUPLICATE KEY UPDATE {}", assignments.join(", ")),
            _ => format!(" ON CONFLICT ({key}) DO UPDATE SET {}", assignments.join(", ")),
        }
    }

    fn insert_or_ignore(&self, table_and_cols: &str, source: &str) -> String {
        match self.backend {
            DbBackend::MySql => format!("INSERT IGNORE INTO {table_and_cols} {source}"),
            DbBackend::Sqlite => format!("INSERT OR IGNORE INTO {table_and_cols} {source}"),
            _ => format!("INSERT INTO {table_and_cols} {source} ON CONFLICT DO NOTHING"),
        }
    }

    async fn record_once(
        &self,
        batch: &[DatedEvent],
        candidates: &[usize],
        now_us: i64,
    ) -> Result<HashSet<usize>, Attempt> {
        // InnoDB's default REPEATABLE READ takes gap locks on every upserted key range, which
        // makes overlapping batches wait on (and deadlock with) rows they never touch. READ
        // COMMITTED locks only the rows written, as PostgreSQL does by default.
        let txn = match self.backend {
            DbBackend::MySql => self.db.begin_with_config(Some(IsolationLevel::ReadCommitted), None).await,
            _ => self.db.begin().await,
        }
        .map_err(|e| Attempt::Fail(StoreError::database(e)))?;
        let stored = self.stored_events(&txn, batch, candidates).await?;
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
            txn.commit().await?;
            return Ok(HashSet::new());
        }

        // Every writer inserts ids in the same (byte) order, so two batches sharing ids wait
        // for each other instead of deadlocking on the primary key.
        let mut by_id = fresh.clone();
        by_id.sort_unstable_by(|a, b| batch[*a].event.event_id.cmp(&batch[*b].event.event_id));
        let fresh = match self.insert_events(&txn, batch, &by_id, now_us).await? {
            Inserted::Ids(ids) => {
                // Ids another transaction committed after our filter query were skipped by the
                // insert: they are duplicates, exactly like those the filter found.
                fresh.into_iter().filter(|i| ids.contains(batch[*i].event.event_id.as_str())).collect()
            }
            Inserted::Count(n) if n == fresh.len() as u64 => fresh,
            Inserted::Count(n) => {
                // Without RETURNING we cannot tell which ids lost the race: start over, and
                // the filter query will report them as duplicates.
                txn.rollback().await.ok();
                return Err(Attempt::Retry(format!(
                    "{} of {} ids raced with another writer",
                    fresh.len() as u64 - n,
                    fresh.len()
                )));
            }
        };
        if fresh.is_empty() {
            txn.commit().await?;
            return Ok(HashSet::new());
        }

        // Folded in batch order: likes and unlikes are order-sensitive.
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
        self.apply_deltas(&txn, &DAILY_METRICS, &daily, daily_keys, now_us).await?;
        let product_keys = |rows: &[(&i64, &MetricsDelta)]| vec![Column::Int(rows.iter().map(|(p, _)| **p).collect())];
        self.apply_deltas(&txn, &PRODUCT_METRICS, &all_time, product_keys, now_us).await?;
        txn.commit().await?;
        Ok(fresh.into_iter().collect())
    }

    async fn stored_events(
        &self,
        txn: &DatabaseTransaction,
        batch: &[DatedEvent],
        candidates: &[usize],
    ) -> Result<HashMap<String, StoredEvent>, Attempt> {
        let ids: Vec<String> = candidates.iter().map(|i| batch[*i].event.event_id.clone()).collect();
        let columns = "product_id, event_type, amount, occurred_at FROM events";
        let (sql, values) = match self.backend {
            DbBackend::Postgres => {
                // A join on UNNEST rather than `= ANY($1)`: the statement is prepared once and
                // PostgreSQL's generic plan for `ANY` may scan the whole ledger.
                let sql = "SELECT e.event_id, e.product_id, e.event_type, e.amount, e.occurred_at \
                           FROM UNNEST($1::text[]) AS ids(id) JOIN events e ON e.event_id = ids.id";
                (sql.to_string(), vec![Value::from(ids)])
            }
            DbBackend::MySql => {
                let sql = "SELECT CAST(e.event_id AS CHAR(128)), e.product_id, e.event_type, e.amount, e.occurred_at \
                           FROM JSON_TABLE(?, '$[*]' COLUMNS (id VARCHAR(128) CHARACTER SET ascii PATH '$')) AS j \
                           JOIN events e ON e.event_id = CAST(j.id AS BINARY)";
                let ids = Rows { len: ids.len(), columns: vec![Column::Text(ids)] };
                (sql.to_string(), vec![Value::from(ids.to_json_flat())])
            }
            _ => {
                let placeholders = vec!["?"; ids.len()].join(",");
                (
                    format!("SELECT event_id, {columns} WHERE event_id IN ({placeholders})"),
                    ids.into_iter().map(Value::from).collect(),
                )
            }
        };
        let mut stored = HashMap::new();
        for row in txn.query_all_raw(self.statement(sql, values)).await? {
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

    async fn insert_events(
        &self,
        txn: &DatabaseTransaction,
        batch: &[DatedEvent],
        fresh: &[usize],
        now_us: i64,
    ) -> Result<Inserted, Attempt> {
        let events = || fresh.iter().map(|i| &batch[*i]);
        let rows = Rows {
            len: fresh.len(),
            columns: vec![
                Column::Text(events().map(|e| e.event.event_id.clone()).collect()),
                Column::Int(events().map(|e| e.event.product_id).collect()),
                Column::SmallInt(events().map(|e| e.event.kind.code()).collect()),
                Column::Int(events().map(|e| e.event.amount).collect()),
                Column::Int(events().map(|e| e.event.occurred_at.timestamp_micros()).collect()),
                Column::Date(events().map(|e| e.date).collect()),
                Column::Int(vec![now_us; fresh.len()]),
            ],
        };
        let mut values = Vec::new();
        let source = self.row_source(&rows, &mut values);
        let sql = self.insert_or_ignore(
            "events (event_id, product_id, event_type, amount, occurred_at, metric_date, recorded_at)",
            &source,
        );
        if self.backend == DbBackend::Postgres {
            let rows = txn.query_all_raw(self.statement(format!("{sql} RETURNING event_id"), values)).await?;
            let ids = rows.iter().map(|r| r.try_get_by_index::<String>(0)).collect::<Result<HashSet<_>, _>>()?;
            return Ok(Inserted::Ids(ids));
        }
        Ok(Inserted::Count(txn.execute_raw(self.statement(sql, values)).await?.rows_affected()))
    }

    /// Applies folded deltas to one metrics table: one additive upsert for every row, then one
    /// clamp upsert (`likes = GREATEST(likes, floor)`) for the rows where an UNLIKE could have
    /// crossed zero. `key_columns` turns the row keys into the table's key columns.
    async fn apply_deltas<K>(
        &self,
        txn: &DatabaseTransaction,
        table: &MetricsTable,
        deltas: &BTreeMap<K, MetricsDelta>,
        key_columns: impl Fn(&[(&K, &MetricsDelta)]) -> Vec<Column>,
        now_us: i64,
    ) -> Result<(), Attempt> {
        let mut names: Vec<&str> = table.key.to_vec();
        names.extend(["views", "likes", "orders", "order_amount"]);
        let mut add = vec![
            ("views", UpsertOp::Add),
            ("likes", UpsertOp::Add),
            ("orders", UpsertOp::Add),
            ("order_amount", UpsertOp::Add),
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
            columns.push(Column::Int(vec![now_us; subset.len()]));
            Rows { len: subset.len(), columns }
        };
        let all: Vec<_> = deltas.iter().collect();
        self.upsert(txn, &head, &self.upsert_tail(table.name, &key, &add), &rows(&all, false)).await?;
        let clamped: Vec<_> = all.iter().copied().filter(|(_, d)| d.likes.needs_clamp()).collect();
        let clamp = self.upsert_tail(table.name, &key, &[("likes", UpsertOp::Max)]);
        self.upsert(txn, &head, &clamp, &rows(&clamped, true)).await
    }

    /// One upsert statement for all `rows` (none when there are no rows).
    async fn upsert(&self, txn: &DatabaseTransaction, head: &str, tail: &str, rows: &Rows) -> Result<(), Attempt> {
        if rows.len == 0 {
            return Ok(());
        }
        let mut values = Vec::new();
        let source = self.row_source(rows, &mut values);
        txn.execute_raw(self.statement(format!("INSERT INTO {head} {source}{tail}"), values)).await?;
        Ok(())
    }

    async fn delete_chunked(
        &self,
        table: &str,
        key: &str,
        condition: &str,
        bound: Value,
        chunk: u32,
    ) -> Result<u64, StoreError> {
        let sql = match self.backend {
            DbBackend::MySql => format!("DELETE FROM {table} WHERE {condition} LIMIT {chunk}"),
            DbBackend::Postgres => format!(
                "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE {} LIMIT {chunk})",
                condition.replace('?', "$1")
            ),
            _ => format!(
                "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE {condition} LIMIT {chunk})"
            ),
        };
        let mut total = 0;
        loop {
            let _gate = self.write_gate.as_ref().map(|g| g.lock());
            let _gate = match _gate {
                Some(g) => Some(g.await),
                None => None,
            };
            let deleted = self
                .db
                .execute_raw(self.statement(sql.clone(), vec![bound.clone()]))
                .await
                .map_err(StoreError::database)?
                .rows_affected();
            total += deleted;
            if deleted < u64::from(chunk) {
                return Ok(total);
            }
        }
    }
}

/// What an insert-or-ignore of events reports.
enum Inserted {
    /// The ids actually inserted (PostgreSQL, through `RETURNING`).
    Ids(HashSet<String>),
    /// How many rows were inserted (engines where `RETURNING` is not portable).
    Count(u64),
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

/// Rows of one statement, column by column.
struct Rows {
    len: usize,
    columns: Vec<Column>,
}

impl Rows {
    /// `[[row 0 values…], [row 1 values…], …]`.
    fn to_json(&self) -> String {
        let mut out = String::with_capacity(self.len * self.columns.len() * 12 + 2);
        out.push('[');
        for r in 0..self.len {
            out.push_str(if r == 0 { "[" } else { ",[" });
            for (i, c) in self.columns.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                c.json(r, &mut out);
            }
            out.push(']');
        }
        out.push(']');
        out
    }

    /// `[value, value, …]` of a single-column set.
    fn to_json_flat(&self) -> String {
        let mut out = String::with_capacity(self.len * 32 + 2);
        out.push('[');
        for r in 0..self.len {
            if r > 0 {
                out.push(',');
            }
            for c in &self.columns {
                c.json(r, &mut out);
            }
        }
        out.push(']');
        out
    }
}

/// One typed column of [`Rows`].
enum Column {
    Int(Vec<i64>),
    SmallInt(Vec<i16>),
    Date(Vec<NaiveDate>),
    Text(Vec<String>),
}

impl Column {
    /// The column as one PostgreSQL array parameter and its element type.
    fn array(&self) -> (Value, &'static str) {
        match self {
            Self::Int(v) => (Value::from(v.clone()), "bigint"),
            Self::SmallInt(v) => (Value::from(v.clone()), "smallint"),
            Self::Date(v) => (Value::from(v.clone()), "date"),
            Self::Text(v) => (Value::from(v.clone()), "text"),
        }
    }

    /// The `JSON_TABLE` column type.
    fn mysql_type(&self) -> &'static str {
        match self {
            Self::Int(_) => "BIGINT",
            Self::SmallInt(_) => "SMALLINT",
            Self::Date(_) => "DATE",
            Self::Text(_) => "VARCHAR(128) CHARACTER SET ascii",
        }
    }

    /// Writes row `r` as a JSON value.
    fn json(&self, r: usize, out: &mut String) {
        use std::fmt::Write;
        // Writing into a String cannot fail.
        let _ = match self {
            Self::Int(v) => write!(out, "{}", v[r]),
            Self::SmallInt(v) => write!(out, "{}", v[r]),
            Self::Date(v) => write!(out, "\"{}\"", v[r].format("%Y-%m-%d")),
            Self::Text(v) => {
                // Event ids are printable ASCII: only the quote and the backslash need escaping.
                out.push('"');
                for ch in v[r].chars() {
                    if ch == '"' || ch == '\\' {
                        out.push('\\');
                    }
                    out.push(ch);
                }
                out.push('"');
                Ok(())
            }
        };
    }

    /// Writes row `r` of the column: numbers and dates as literals (their text cannot carry
    /// SQL), strings as bound parameters.
    fn literal_or_bind(&self, r: usize, out: &mut String, values: &mut Vec<Value>) {
        use std::fmt::Write;
        // Writing into a String cannot fail.
        let _ = match self {
            Self::Int(v) => write!(out, "{}", v[r]),
            Self::SmallInt(v) => write!(out, "{}", v[r]),
            Self::Date(v) => write!(out, "'{}'", v[r].format("%Y-%m-%d")),
            Self::Text(v) => {
                values.push(Value::from(v[r].clone()));
                out.push('?');
                Ok(())
            }
        };
    }
}

/// How an upsert combines the stored value with the new one.
#[derive(Debug, Clone, Copy)]
enum UpsertOp {
    Add,
    Max,
    Replace,
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

#[async_trait]
impl MetricsStore for SqlMetricsStore {
    async fn record(&self, batch: &[DatedEvent]) -> Result<Vec<Outcome>, StoreError> {
        let mut seen = HashSet::with_capacity(batch.len());
        let candidates: Vec<usize> =
            (0..batch.len()).filter(|i| seen.insert(batch[*i].event.event_id.as_str())).collect();
        let _gate = match &self.write_gate {
            Some(g) => Some(g.lock().await),
            None => None,
        };
        let mut attempt = 1;
        let fresh = loop {
            let now_us = Utc::now().timestamp_micros();
            match self.record_once(batch, &candidates, now_us).await {
                Ok(fresh) => break fresh,
                Err(Attempt::Retry(why)) if attempt < self.max_attempts => {
                    tracing::debug!(attempt, %why, "retrying transaction");
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                Err(Attempt::Retry(why)) => {
                    return Err(StoreError::database(format!("transaction failed {attempt} times: {why}")));
                }
                Err(Attempt::Fail(e)) => return Err(e),
            }
        };
        Ok((0..batch.len()).map(|i| if fresh.contains(&i) { Outcome::Accepted } else { Outcome::Duplicate }).collect())
    }

    async fn scan_day(&self, date: NaiveDate, visit: &mut (dyn FnMut(DailyRow) + Send)) -> Result<u64, StoreError> {
        let placeholder = if self.backend == DbBackend::Postgres { "$1" } else { "?" };
        let sql = format!(
            "SELECT product_id, views, likes, order_amount, last_event_at FROM product_daily_metrics \
             WHERE metric_date = {placeholder} ORDER BY product_id"
        );
        let mut rows =
            self.db.stream_raw(self.statement(sql, vec![date.into()])).await.map_err(StoreError::database)?;
        let mut count = 0;
        while let Some(row) = rows.try_next().await.map_err(StoreError::database)? {
            let get = |i| row.try_get_by_index::<i64>(i).map_err(StoreError::database);
            visit(DailyRow {
                product_id: get(0)?,
                metrics: DailyMetrics { views: get(1)?, likes: get(2)?, order_amount: get(3)? },
                last_event_us: get(4)?,
            });
            count += 1;
        }
        Ok(count)
    }

    async fn prune(&self, events_before: DateTime<Utc>, days_before: NaiveDate, chunk: u32) -> Result<u64, StoreError> {
        let chunk = chunk.max(1);
        let events = self
            .delete_chunked("events", "event_id", "occurred_at < ?", events_before.timestamp_micros().into(), chunk)
            .await?;
        let days = self
            .delete_chunked(
                "product_daily_metrics",
                "metric_date, product_id",
                "metric_date < ?",
                days_before.into(),
                chunk,
            )
            .await?;
        Ok(events + days)
    }
}

/// Exponential backoff with full jitter: 5 ms, 10 ms, 20 ms … capped at 500 ms.
fn backoff(attempt: u32) -> Duration {
    let cap = 5u64.saturating_mul(1 << attempt.min(7)).min(500);
    Duration::from_millis(rand::random_range(1..=cap))
}
