//! The SQL metrics store (sea-orm): PostgreSQL, MySQL/MariaDB and SQLite.
//!
//! - this module: connecting (and migrating), the retry loop around a batch, the day scan
//!   and retention;
//! - [`write`]: the batch write path, a constant number of statements per batch;
//! - [`dialect`]: every difference between the engines;
//! - [`catalog`]: `product_catalog` (UpdateCatalog, and the recompute's scan of it);
//! - [`partitions`]: the day partitions of `events` on PostgreSQL (created ahead, dropped by
//!   retention);
//! - [`rows`]: the column-wise rows of a batch statement and their encodings;
//! - [`runs`]: ExplainRank's inputs (the record of each day's last recompute, one product's
//!   daily rows).

pub mod catalog;
pub mod changes;
pub mod dialect;
pub mod partitions;
mod retractions;
pub mod rows;
pub mod runs;
pub mod signals;
pub mod write;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use futures_util::TryStreamExt;
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, Statement, StreamTrait, TransactionTrait, Value,
};
use tokio::sync::Mutex;

use self::dialect::{Dialect, Read};
use self::write::{Attempt, BatchWrite};
use crate::domain::catalog::CatalogEntry;
use crate::domain::profile::ScoringProfile;
use crate::domain::retraction::Fate;
use crate::domain::vocabulary::DailyMetrics;
use crate::domain::vocabulary::EventKind;
use crate::domain::vocabulary::MAX_CUSTOM_SIGNALS;
use crate::ports::{
    CatalogRows, ChangeFeed, ChangedRow, DailyRow, DatedEvent, DayScans, EventLedger, Outcome, ProductDay, RankingRun,
    RecordRules, Recorded, RunLog, StoreError,
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
    dialect: Dialect,
    /// Writers of this process take turns where the dialect says so
    /// ([`Dialect::serialises_writers`]); held for one attempt, never across a backoff.
    write_gate: Option<Mutex<()>>,
    max_attempts: u32,
    /// The column of each custom signal.
    signals: signals::SignalColumns,
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
        })
    }

    fn statement(&self, sql: String, values: Vec<Value>) -> Statement {
        Statement::from_sql_and_values(self.dialect.backend(), sql, values)
    }

    /// The column of every custom signal of `batch` (registered now when it has none yet:
    /// the profile's are at start-up), and of every signal of `profile` when the batch has a
    /// retraction (of an event of any of them).
    async fn signal_columns(
        &self,
        batch: &[DatedEvent],
        profile: &ScoringProfile,
    ) -> Result<HashMap<String, u8>, StoreError> {
        let mut names: Vec<String> =
            batch.iter().filter(|e| !e.event.signal.is_empty()).map(|e| e.event.signal.clone()).collect();
        if batch.iter().any(|e| e.event.kind == EventKind::Retract) {
            names.extend(profile.custom_names().iter().cloned());
        }
        if names.is_empty() {
            return Ok(HashMap::new());
        }
        names.sort_unstable();
        names.dedup();
        let mut columns = self.signals.of(&self.db, &names).await?;
        if columns.iter().any(Option::is_none) {
            self.register_signals(&names).await?;
            columns = self.signals.of(&self.db, &names).await?;
        }
        Ok(names.into_iter().zip(columns).filter_map(|(n, c)| c.map(|c| (n, c))).collect())
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

    /// One attempt of a batch, in its own transaction, under the write gate.
    async fn record_once(
        &self,
        batch: &[DatedEvent],
        candidates: &[usize],
        signal_columns: &HashMap<String, u8>,
        rules: RecordRules<'_>,
    ) -> Result<HashMap<usize, Fate>, Attempt> {
        let _gate = self.write_turn().await;
        let txn = self
            .db
            .begin_with_config(self.dialect.write_isolation(), None)
            .await
            .map_err(|e| Attempt::Fail(StoreError::database(e)))?;
        let now_us = Utc::now().timestamp_micros();
        let (profile, retractable_since) = (rules.profile, rules.retractable_since);
        let write =
            BatchWrite { dialect: self.dialect, txn: &txn, batch, now_us, signal_columns, profile, retractable_since };
        match write.run(candidates).await {
            Ok(fresh) => {
                txn.commit().await?;
                Ok(fresh)
            }
            Err(e) => {
                txn.rollback().await.ok();
                Err(e)
            }
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
            let get = |i| row.try_get_by_index::<i64>(i).map_err(StoreError::database);
            let mut metrics = DailyMetrics::counts(get(1)?, get(2)?, get(3)?, get(4)?);
            for (slot, value) in metrics.custom.iter_mut().enumerate().take(row_signals) {
                *value = get(6 + slot)?;
            }
            visit(DailyRow { product_id: get(0)?, metrics, last_event_us: get(5)? });
            count += 1;
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
impl EventLedger for SqlMetricsStore {
    async fn record(&self, batch: &[DatedEvent], rules: RecordRules<'_>) -> Result<Recorded, StoreError> {
        let mut seen = HashSet::with_capacity(batch.len());
        let candidates: Vec<usize> =
            (0..batch.len()).filter(|i| seen.insert(batch[*i].event.event_id.as_str())).collect();
        let signal_columns = self.signal_columns(batch, rules.profile).await?;
        let mut attempt = 1;
        let mut delays = transaction_retry_delays();
        let mut fresh = loop {
            let result = match self.record_once(batch, &candidates, &signal_columns, rules).await {
                Err(Attempt::Db(e)) if self.dialect.is_transient(&e) => Err(Attempt::Retry(e.to_string())),
                Err(Attempt::Db(e)) => Err(Attempt::Fail(StoreError::database(e))),
                other => other,
            };
            match result {
                Ok(fresh) => break fresh,
                Err(Attempt::Retry(why)) if attempt < self.max_attempts => {
                    tracing::debug!(attempt, %why, "retrying transaction");
                    tokio::time::sleep(delays.next().unwrap_or(TRANSACTION_RETRY_MAX)).await;
                    attempt += 1;
                }
                Err(Attempt::Retry(why)) => {
                    return Err(StoreError::database(format!("transaction failed {attempt} times: {why}")));
                }
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Db(e)) => return Err(StoreError::database(e)),
            }
        };
        let mut recorded = Recorded::default();
        for i in 0..batch.len() {
            recorded.outcomes.push(match fresh.remove(&i) {
                None | Some(Fate::Duplicate) => Outcome::Duplicate,
                Some(Fate::Retracted) => Outcome::Retracted,
                Some(Fate::Counted | Fate::Waits) => Outcome::Accepted,
                Some(Fate::Withdraws(original)) => {
                    recorded.withdrawn.push((i, original));
                    Outcome::Accepted
                }
            });
        }
        Ok(recorded)
    }

    async fn register_signals(&self, names: &[String]) -> Result<(), StoreError> {
        let _gate = self.write_turn().await;
        self.signals.register(&self.db, names).await
    }

    async fn prune(&self, events_before: DateTime<Utc>, days_before: NaiveDate, chunk: u32) -> Result<u64, StoreError> {
        let chunk = chunk.max(1);
        if self.dialect.partitions_events() {
            // Whole past days go with their partitions; the days to come get theirs.
            let dropped = partitions::drop_before(&self.db, days_before).await?;
            if !dropped.is_empty() {
                tracing::info!(days = ?dropped, "dropped the event partitions of days past retention");
            }
            partitions::ensure_ahead(&self.db, days_before).await?;
        }
        // Rows of days without a partition of their own (every row, on engines without
        // partitions).
        let events = self
            .delete_chunked("events", "event_id", "occurred_at", events_before.timestamp_micros().into(), chunk)
            .await?;
        let days = self
            .delete_chunked(
                "product_daily_metrics",
                "metric_date, product_id",
                "metric_date",
                days_before.into(),
                chunk,
            )
            .await?;
        let retractions =
            self.delete_chunked("retractions", "target_id", "metric_date", days_before.into(), chunk).await?;
        let runs = {
            let _gate = self.write_turn().await;
            let sql = format!("DELETE FROM ranking_runs WHERE metric_date < {}", self.dialect.param(1));
            self.db
                .execute_raw(self.statement(sql, vec![days_before.into()]))
                .await
                .map_err(StoreError::database)?
                .rows_affected()
        };
        Ok(events + days + retractions + runs)
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
}

#[async_trait]
impl RunLog for SqlMetricsStore {
    async fn record_run(&self, run: &RankingRun) -> Result<(), StoreError> {
        let _gate = self.write_turn().await;
        runs::record_run(&self.db, run).await
    }

    async fn ranking_run(&self, date: NaiveDate) -> Result<Option<RankingRun>, StoreError> {
        runs::ranking_run(&self.db, date).await
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
        changes::advance(&self.db, self.dialect).await
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

/// Longest wait before repeating a transaction that met a deadlock or a serialisation
/// failure.
const TRANSACTION_RETRY_MAX: Duration = Duration::from_millis(500);

/// The waits before repeating such a transaction: 5 ms, 10 ms, 20 ms … capped at
/// [`TRANSACTION_RETRY_MAX`], each stretched by up to its own length at random so that the
/// transactions that collided do not collide again.
fn transaction_retry_delays() -> backon::ExponentialBackoff {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(5))
        .with_max_delay(TRANSACTION_RETRY_MAX)
        .with_jitter()
        .without_max_times()
        .build()
}
