//! [`EventLedger`] of the SQL store: a batch recorded in one transaction, run again (after a
//! short, jittered wait) when it lost a race or met a transient refusal; the custom signals'
//! columns; retention.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use sea_orm::{ConnectionTrait, TransactionTrait};

use super::write::{Attempt, BatchWrite, CapReport};
use super::{SqlMetricsStore, partitions};
use crate::domain::profile::ScoringProfile;
use crate::domain::retraction::Fate;
use crate::domain::vocabulary::EventKind;
use crate::ports::{DatedEvent, EventLedger, Outcome, RecordRules, Recorded, StoreError};

impl SqlMetricsStore {
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

    /// One attempt of a batch, in its own transaction, under the write gate.
    async fn record_once(
        &self,
        batch: &[DatedEvent],
        candidates: &[usize],
        signal_columns: &HashMap<String, u8>,
        rules: RecordRules<'_>,
    ) -> Result<(HashMap<usize, Fate>, CapReport), Attempt> {
        let _gate = self.write_turn().await;
        let txn = self
            .db
            .begin_with_config(self.dialect.write_isolation(), None)
            .await
            .map_err(|e| Attempt::Fail(StoreError::database(e)))?;
        let now_us = Utc::now().timestamp_micros();
        let (profile, retractable_since, calendar) = (rules.profile, rules.retractable_since, rules.calendar);
        let write = BatchWrite {
            dialect: self.dialect,
            txn: &txn,
            batch,
            now_us,
            signal_columns,
            profile,
            retractable_since,
            calendar,
        };
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
        let (mut fresh, report) = loop {
            let result = match self.record_once(batch, &candidates, &signal_columns, rules).await {
                Err(Attempt::Db(e)) if self.dialect.is_transient(&e) => {
                    self.count_limit(&e);
                    Err(Attempt::Retry(e.to_string()))
                }
                Err(Attempt::Db(e)) => Err(Attempt::Fail(self.refused(e))),
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
        recorded.uncounted = report.uncounted;
        recorded.uncounted.sort_unstable();
        let name_of = |code: i16| match code {
            super::signals::VIEWS_CODE => Some("views".to_string()),
            column => signal_columns.iter().find(|(_, c)| i16::from(**c) == column).map(|(name, _)| name.clone()),
        };
        recorded.capped =
            report.capped.into_iter().filter_map(|(code, n)| name_of(code).map(|name| (name, n))).collect();
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
            let dropped = partitions::drop_before(&self.db, &partitions::PARTITIONED, days_before).await?;
            if !dropped.is_empty() {
                tracing::info!(days = ?dropped, "dropped the event partitions of days past retention");
            }
            let hours_before = partitions::hours_since(Utc::now().date_naive()).max(days_before);
            partitions::drop_before(&self.db, &partitions::HOURLY, hours_before).await?;
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
        let actor_key = "metric_date, product_id, signal_code, actor_id";
        let actors = self.delete_chunked("actor_counts", actor_key, "metric_date", days_before.into(), chunk).await?;
        // The trending board's hours: seven days (and a margin), or the retention if shorter.
        let hours_before = partitions::hours_since(Utc::now().date_naive()).max(days_before);
        let mut hours = 0;
        for (table, key) in [
            ("product_hourly_metrics", "metric_date, product_id, hour_start"),
            ("actor_hour_counts", "metric_date, product_id, hour_start, signal_code, actor_id"),
        ] {
            hours += self.delete_chunked(table, key, "metric_date", hours_before.into(), chunk).await?;
        }
        let runs = {
            let _gate = self.write_turn().await;
            let mut deleted = 0;
            for table in ["ranking_runs", "profile_runs"] {
                let sql = format!("DELETE FROM {table} WHERE metric_date < {}", self.dialect.param(1));
                deleted += self
                    .db
                    .execute_raw(self.statement(sql, vec![days_before.into()]))
                    .await
                    .map_err(StoreError::database)?
                    .rows_affected();
            }
            deleted
        };
        Ok(events + days + retractions + actors + hours + runs)
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
