//! The SQL metrics store (sea-orm): PostgreSQL, MySQL/MariaDB and SQLite.
//!
//! - this module: connecting (and migrating), the day scans, and the ports but the ledger;
//! - `ledger`: the ledger port: the retry loop around a batch, signal columns, retention;
//! - [`write`]: the batch write path, a constant number of statements per batch, with
//!   `deltas` (the metrics rows it changes, folded and upserted), `retractions` and
//!   `actors` (the per-actor counts of capped signals);
//! - [`dialect`]: every difference between the engines;
//! - [`catalog`]: `product_catalog` (UpdateCatalog, and the recompute's scan of it);
//! - [`controls`]: the merchandising controls and their revision;
//! - [`history`]: the kept tops of ended days (rank history);
//! - [`partitions`]: the day partitions of `events` and `actor_counts` on PostgreSQL
//!   (created ahead, dropped by retention);
//! - `replicas`: each running replica's announcement of the ranking store's layouts it reads;
//! - [`rows`]: the column-wise rows of a batch statement and their encodings;
//! - [`runs`]: ExplainRank's inputs (the record of each day's last recompute, one product's
//!   daily rows);
//! - [`session`]: the limits every session runs under, so that a frozen replica's open
//!   transaction holds the others for a bounded time.

pub mod catalog;
pub mod changes;
mod codes;
pub mod controls;
pub mod dialect;
pub mod history;
mod hours;
mod ledger;
mod metrics_row;
pub mod partitions;
mod replicas;
pub mod rows;
pub mod runs;
pub mod session;
pub mod signals;
pub mod write;

use std::time::Duration;

use async_trait::async_trait;
use chrono::{NaiveDate, Utc};
use futures_util::TryStreamExt;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbErr, Statement, StreamTrait, TransactionTrait,
    Value,
};
use tokio::sync::Mutex;

use self::dialect::{Dialect, Read};
use crate::domain::board::Board;
use crate::domain::catalog::CatalogEntry;
use crate::domain::controls::Control;
use crate::domain::history::KeptDay;
use crate::domain::vocabulary::MAX_CUSTOM_SIGNALS;
use crate::metrics::SqlLimitLabels;
use crate::ports::{
    CatalogRows, ChangeFeed, ChangedRow, ControlRows, DailyRow, DayScans, DeleteOutcome, HistoryRows, Kept, ProductDay,
    PutOutcome, RankingRun, RunLog, StoreError,
};

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
    /// Longest a transaction may sit idle between statements, and a statement wait for a
    /// lock, on every session ([`session`]).
    pub tx_timeout: Duration,
    /// Where statements refused by those limits are counted.
    pub limits: Family<SqlLimitLabels, Counter>,
}

impl SqlOptions {
    /// Defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            max_connections: 16,
            connect_timeout: Duration::from_secs(5),
            max_attempts: 20,
            tx_timeout: Duration::from_secs(5),
            limits: Family::default(),
        }
    }
}

/// The SQL single source of truth.
pub struct SqlMetricsStore {
    db: DatabaseConnection,
    dialect: Dialect,
    /// Writers of this process take turns where the dialect says so
    /// ([`Dialect::serialises_writers`]); held for one attempt, never across a backoff.
    write_gate: Option<Mutex<()>>,
    max_attempts: u32,
    /// The column of each custom signal.
    signals: signals::SignalColumns,
    /// Statements refused by a session limit, by limit.
    limits: Family<SqlLimitLabels, Counter>,
}

impl SqlMetricsStore {
    /// Connects and applies pending migrations; a schema a newer release migrated forward is
    /// run on as it is (a rolling upgrade, or a rollback to this release).
    pub async fn connect(options: &SqlOptions) -> Result<Self, StoreError> {
        let mut connect = ConnectOptions::new(options.url.clone());
        connect
            .max_connections(options.max_connections)
            .min_connections(0)
            .connect_timeout(options.connect_timeout)
            .acquire_timeout(options.connect_timeout)
            .sqlx_logging(false);
        session::bound_transactions(&mut connect, options.tx_timeout);
        let db = Database::connect(connect).await.map_err(StoreError::database)?;
        let schema = ranking_migrations::up_or_newer(&db)
            .await
            .map_err(|e| StoreError::database(format!("migration failed: {e}")))?;
        if let ranking_migrations::Schema::Newer(unknown) = schema {
            tracing::warn!(
                newer = %unknown.join(", "),
                "the schema was migrated by a newer release; this one runs on it as it is"
            );
        }
        let dialect = Dialect::of(db.get_database_backend());
        if dialect.partitions_events() {
            partitions::ensure_ahead(&db, Utc::now().date_naive()).await?;
        }
        Ok(Self {
            db,
            dialect,
            write_gate: dialect.serialises_writers().then(|| Mutex::new(())),
            max_attempts: options.max_attempts.max(1),
            signals: signals::SignalColumns::default(),
            limits: options.limits.clone(),
        })
    }

    /// A refused statement as the store's error, counted when a session limit refused it.
    fn refused(&self, e: DbErr) -> StoreError {
        self.count_limit(&e);
        StoreError::database(e)
    }

    /// Counts `e` when a session limit ([`session`]) refused the statement.
    fn count_limit(&self, e: &DbErr) {
        if let Some(limit) = self.dialect.limit_hit(e) {
            self.limits.get_or_create(&SqlLimitLabels { limit: limit.label() }).inc();
        }
    }

    fn statement(&self, sql: String, values: Vec<Value>) -> Statement {
        Statement::from_sql_and_values(self.dialect.backend(), sql, values)
    }

    /// The column of each custom signal of `signals` (`None`: one without a column yet).
    async fn columns_of(&self, signals: &[String]) -> Result<Vec<Option<u8>>, StoreError> {
        self.signals.of(&self.db, &signals[..signals.len().min(MAX_CUSTOM_SIGNALS)]).await
    }

    /// This writer's turn at the write gate, where writers take turns.
    async fn write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.write_gate {
            Some(gate) => Some(gate.lock().await),
            None => None,
        }
    }

    /// Streams the `(product_id, views, likes, orders, order_amount, last_event_at, custom
    /// signals…)` rows of `read` into `visit` (`signals` custom columns), in a transaction of
    /// its own under the read's settings when it has any.
    async fn stream_read(
        &self,
        read: Read,
        signals: usize,
        visit: &mut (dyn FnMut(DailyRow) + Send),
    ) -> Result<u64, StoreError> {
        if read.settings.is_empty() {
            return Self::stream_from(&self.db, self.statement(read.sql, read.values), signals, visit).await;
        }
        let txn = self.db.begin().await.map_err(StoreError::database)?;
        for setting in read.settings {
            txn.execute_unprepared(setting).await.map_err(StoreError::database)?;
        }
        let count = Self::stream_from(&txn, self.statement(read.sql, read.values), signals, visit).await?;
        txn.commit().await.map_err(StoreError::database)?;
        Ok(count)
    }

    async fn stream_from(
        db: &impl StreamTrait,
        statement: Statement,
        row_signals: usize,
        visit: &mut (dyn FnMut(DailyRow) + Send),
    ) -> Result<u64, StoreError> {
        let rows = db.stream_raw(statement).await.map_err(StoreError::database)?;
        let mut rows = std::pin::pin!(rows);
        let mut count = 0;
        while let Some(row) = rows.try_next().await.map_err(StoreError::database)? {
            let product_id = row.try_get_by_index::<i64>(0).map_err(StoreError::database)?;
            let (metrics, last_event_us) = metrics_row::read(&row, 1, row_signals).map_err(StoreError::database)?;
            visit(DailyRow { product_id, metrics, last_event_us });
            count += 1;
            // A driver with rows buffered hands them over without ever returning Pending: a
            // million of them would hold this worker (and the tasks queued behind it) for
            // hundreds of milliseconds. The runtime's budget makes the scan yield now and then.
            tokio::task::consume_budget().await;
        }
        Ok(count)
    }

    async fn delete_chunked(
        &self,
        table: &str,
        key: &str,
        column: &str,
        bound: Value,
        chunk: u32,
    ) -> Result<u64, StoreError> {
        let sql = self.dialect.delete_chunk(table, key, column, chunk);
        let mut total = 0;
        loop {
            let deleted = {
                let _gate = self.write_turn().await;
                self.db
                    .execute_raw(self.statement(sql.clone(), vec![bound.clone()]))
                    .await
                    .map_err(StoreError::database)?
                    .rows_affected()
            };
            total += deleted;
            if deleted < u64::from(chunk) {
                return Ok(total);
            }
        }
    }
}

#[async_trait]
impl DayScans for SqlMetricsStore {
    async fn scan_day(
        &self,
        date: NaiveDate,
        signals: &[String],
        visit: &mut (dyn FnMut(DailyRow) + Send),
    ) -> Result<u64, StoreError> {
        let columns = self.columns_of(signals).await?;
        self.stream_read(self.dialect.scan_day(date, &columns), columns.len(), visit).await
    }

    async fn scan_days(
        &self,
        first: NaiveDate,
        last: NaiveDate,
        signals: &[String],
        visit: &mut (dyn FnMut(DailyRow) + Send),
    ) -> Result<u64, StoreError> {
        let columns = self.columns_of(signals).await?;
        self.stream_read(self.dialect.scan_days(first, last, &columns), columns.len(), visit).await
    }

    async fn product_days(
        &self,
        product_id: i64,
        days: &[NaiveDate],
        signals: &[String],
    ) -> Result<Vec<ProductDay>, StoreError> {
        let columns = self.columns_of(signals).await?;
        runs::product_days(&self.db, product_id, days, &columns).await
    }

    async fn over_caps(
        &self,
        product_id: i64,
        date: NaiveDate,
        caps: &[(String, u32)],
    ) -> Result<Vec<u64>, StoreError> {
        let custom: Vec<String> = caps.iter().filter(|(n, _)| n != "views").map(|(n, _)| n.clone()).collect();
        let mut columns = self.columns_of(&custom).await?.into_iter();
        // A custom signal without a column has no rows yet.
        let codes: Vec<Option<i16>> = caps
            .iter()
            .map(
                |(name, _)| {
                    if name == "views" { Some(signals::VIEWS_CODE) } else { columns.next().flatten().map(i16::from) }
                },
            )
            .collect();
        let known: Vec<(i16, u32)> = caps.iter().zip(&codes).filter_map(|((_, n), c)| c.map(|c| (c, *n))).collect();
        let mut over = vec![0; caps.len()];
        if known.is_empty() {
            return Ok(over);
        }
        let (sql, values) = self.dialect.actor_totals(date, product_id, &known);
        let rows = self.db.query_all_raw(self.statement(sql, values)).await.map_err(StoreError::database)?;
        for row in rows {
            let code: i16 = row.try_get_by_index(0).map_err(StoreError::database)?;
            let n: i64 = row.try_get_by_index(1).map_err(StoreError::database)?;
            if let Some(at) = codes.iter().position(|c| *c == Some(code)) {
                over[at] = u64::try_from(n).unwrap_or(0);
            }
        }
        Ok(over)
    }
}

#[async_trait]
impl CatalogRows for SqlMetricsStore {
    async fn update_catalog(&self, entries: &[CatalogEntry]) -> Result<(), StoreError> {
        let _gate = self.write_turn().await;
        catalog::update(&self.db, self.dialect, entries).await
    }

    async fn hidden_among(&self, ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        catalog::hidden_among(&self.db, ids).await
    }

    async fn hidden_products(&self) -> Result<Vec<i64>, StoreError> {
        catalog::hidden(&self.db).await
    }

    async fn scan_catalog(&self, visit: &mut (dyn FnMut(CatalogEntry) + Send)) -> Result<u64, StoreError> {
        catalog::scan(&self.db, visit).await
    }

    async fn catalog_entries(&self, ids: &[i64]) -> Result<Vec<CatalogEntry>, StoreError> {
        catalog::entries(&self.db, ids).await
    }
}

#[async_trait]
impl ControlRows for SqlMetricsStore {
    async fn put_control(
        &self,
        control: Control,
        expected_revision: u64,
        updated_at_us: i64,
    ) -> Result<PutOutcome, StoreError> {
        let _gate = self.write_turn().await;
        controls::put(&self.db, control, expected_revision, updated_at_us).await
    }

    async fn delete_control(&self, id: &str, expected_revision: u64) -> Result<DeleteOutcome, StoreError> {
        let _gate = self.write_turn().await;
        controls::delete(&self.db, id, expected_revision).await
    }

    async fn controls(&self) -> Result<(u64, Vec<Control>), StoreError> {
        controls::all(&self.db).await
    }

    async fn control_revision(&self) -> Result<u64, StoreError> {
        controls::current_revision(&self.db).await
    }
}

#[async_trait]
impl HistoryRows for SqlMetricsStore {
    async fn keep_day(
        &self,
        board: Board<'_>,
        date: NaiveDate,
        version: u64,
        top: &[u8],
        kept_at_us: i64,
    ) -> Result<Kept, StoreError> {
        let _gate = self.write_turn().await;
        history::keep_day(&self.db, board, date, version, top, kept_at_us).await
    }

    async fn kept_days(&self, board: Board<'_>) -> Result<Vec<KeptDay>, StoreError> {
        history::kept_days(&self.db, board).await
    }

    async fn prune_history(&self, before: NaiveDate) -> Result<u64, StoreError> {
        let _gate = self.write_turn().await;
        history::prune(&self.db, before).await
    }
}

#[async_trait]
impl RunLog for SqlMetricsStore {
    async fn record_run(&self, run: &RankingRun) -> Result<(), StoreError> {
        let _gate = self.write_turn().await;
        runs::record_run(&self.db, run).await
    }

    async fn ranking_run(&self, date: NaiveDate, profile_name: &str) -> Result<Option<RankingRun>, StoreError> {
        runs::ranking_run(&self.db, date, profile_name).await
    }

    async fn record_profile(&self, fingerprint: &str, body: &str) -> Result<(), StoreError> {
        runs::record_profile(&self.db, fingerprint, body).await
    }

    async fn stored_profile(&self, fingerprint: &str) -> Result<Option<String>, StoreError> {
        runs::stored_profile(&self.db, fingerprint).await
    }
}

#[async_trait]
impl ChangeFeed for SqlMetricsStore {
    async fn advance_epoch(&self) -> Result<i64, StoreError> {
        // A write on SQLite: it takes its turn like every writer of this process.
        let _gate = self.write_turn().await;
        changes::advance(&self.db).await.map_err(|e| self.refused(e))?.ok_or_else(changes::no_epoch)
    }

    async fn scan_changes(
        &self,
        epochs: std::ops::Range<i64>,
        first: NaiveDate,
        last: NaiveDate,
        signals: &[String],
        visit: &mut (dyn FnMut(ChangedRow) + Send),
    ) -> Result<u64, StoreError> {
        let columns = self.columns_of(signals).await?;
        changes::changed_rows(&self.db, epochs, (first, last), &columns, visit).await
    }

    async fn scan_products(
        &self,
        products: &[i64],
        first: NaiveDate,
        last: NaiveDate,
        signals: &[String],
        visit: &mut (dyn FnMut(ChangedRow) + Send),
    ) -> Result<u64, StoreError> {
        let columns = self.columns_of(signals).await?;
        changes::product_rows(&self.db, products, (first, last), &columns, visit).await
    }

    async fn catalog_changed(&self, epochs: std::ops::Range<i64>) -> Result<bool, StoreError> {
        changes::catalog_changed(&self.db, epochs).await
    }
}
