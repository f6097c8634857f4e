//! The batch write path: one transaction of a constant number of statements per batch,
//! whatever its size.
//!
//! 1. One query finds the ids already stored (the duplicates).
//! 2. Retractions: one query finds the stored events the batch's retractions name, one the
//!    retractions already stored that name any event of the batch (`retractions`); the
//!    domain decides what each fresh event does ([`crate::domain::retraction`]).
//! 3. One insert-or-ignore stores the fresh events (a second retraction of an event is not
//!    stored), in ascending id order so that two batches sharing ids wait for each other
//!    instead of deadlocking on the primary key.
//! 4. The change epoch, read under a shared row lock held to the commit; the metrics rows
//!    written next are stamped with it (what a live pass finds changed rows by:
//!    [`super::changes`]). Taken after the events, the first half of the transaction, so
//!    that a live pass advancing the epoch waits only for the metrics writes in flight.
//! 5. One additive upsert per metrics table applies the deltas folded per row (in batch
//!    order: likes and unlikes are order-sensitive), rows in ascending key order; plus one
//!    clamp upsert per table when an UNLIKE could take likes below zero (see
//!    [`crate::domain::delta`]).
//!    Custom signals (`EVENT_TYPE_SIGNAL`) are columns of the same rows (`signal_1` …, see
//!    [`super::signals`]): they add to the same upserts, so a batch with signals costs no
//!    statement more. A retraction takes its original's counts off the original's rows.
//! 6. The retractions are read again, now that the all-time rows of every product of the
//!    batch are locked (a retraction locks its product's row even when it changes nothing),
//!    and stored. An original and its retraction committing at once lock the same row, so the
//!    second sees the first: an original that a retraction now names counts for nothing, a
//!    waiting retraction whose original is now stored takes it back, and the counts added
//!    for them are corrected by one more upsert per table.
//!
//! An attempt that loses a race (an id another transaction committed after step 1) is
//! reported as [`Attempt::Retry`], a refused statement as [`Attempt::Db`]; the store runs the
//! whole transaction again when the race was lost or the dialect finds the refusal
//! transient (a deadlock, a serialization failure).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, NaiveDate, Utc};
use sea_orm::{ConnectionTrait, DatabaseTransaction, DbErr, Statement, Value};

use super::actors::CapReport;
use super::deltas::Deltas;
use super::dialect::Dialect;
use super::rows::{Column, Rows};
use crate::domain::profile::ScoringProfile;
use crate::domain::retraction::Fate;
use crate::domain::vocabulary::{EventKind, SignalKind};
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

/// What an insert-or-ignore of events reports.
enum Inserted {
    /// The ids actually inserted (engines with `RETURNING`).
    Ids(HashSet<String>),
    /// How many rows were inserted (engines where `RETURNING` is not portable).
    Count(u64),
}

/// The content of a stored event, to notice a reused id with different content.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct StoredEvent {
    pub product_id: i64,
    pub event_type: i16,
    pub amount: i64,
    pub occurred_at: i64,
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

/// A stored event: its content, its custom signal (empty for the built-in types), its day
/// and the actor whose capped count it went into (empty for none).
pub(super) type Stored = (StoredEvent, String, NaiveDate, String);

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
    /// The scoring profile: the kind of each custom signal (a retracted SIGNAL event's).
    pub profile: &'a ScoringProfile,
    /// The oldest an original may be and still be retracted.
    pub retractable_since: DateTime<Utc>,
}

impl BatchWrite<'_> {
    pub(super) fn statement(&self, sql: String, values: Vec<Value>) -> Statement {
        Statement::from_sql_and_values(self.dialect.backend(), sql, values)
    }

    /// Writes the events at `candidates` (indexes into the batch, each id once) and their
    /// metrics; returns what each fresh one did (the others were stored before) and what the
    /// caps did. Does not commit.
    pub(super) async fn run(&self, candidates: &[usize]) -> Result<(HashMap<usize, Fate>, CapReport), Attempt> {
        let batch = self.batch;
        let stored = self.stored_events(candidates).await?;
        let fresh: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|i| match stored.get(batch[*i].event.event_id.as_str()) {
                None => true,
                Some((previous, ..)) => {
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
            return Ok((HashMap::new(), CapReport::default()));
        }

        let fates = self.fates(&fresh).await?;
        let recorded: Vec<usize> =
            fresh.iter().zip(&fates).filter(|(_, fate)| **fate != Fate::Duplicate).map(|(i, _)| *i).collect();
        if recorded.is_empty() {
            // Only second retractions of events already retracted: nothing to write.
            return Ok((fresh.into_iter().zip(fates).collect(), CapReport::default()));
        }
        let mut by_id = recorded.clone();
        by_id.sort_unstable_by(|a, b| batch[*a].event.event_id.cmp(&batch[*b].event.event_id));
        let inserted = match self.insert_events(&by_id).await? {
            Inserted::Ids(ids) => ids.len() as u64,
            Inserted::Count(n) => n,
        };
        if inserted != by_id.len() as u64 {
            // Ids another transaction committed after the filter query were skipped by the
            // insert; what the batch does was decided without them: start over, and the
            // filter query will report them as duplicates.
            let lost = by_id.len() as u64 - inserted;
            return Err(Attempt::Retry(format!("{lost} of {} ids raced with another writer", by_id.len())));
        }

        let mut deltas = Deltas::default();
        for (i, fate) in fresh.iter().zip(&fates) {
            let e = &batch[*i];
            match fate {
                Fate::Counted => deltas.count(*i, e, self.signal_of(&e.event)?, self.capped(&e.event)),
                Fate::Retracted => deltas.witness(e),
                Fate::Withdraws(original) => {
                    let event = original.event();
                    deltas.withdraw(*i, &event, original.date, self.signal_of(&event)?, self.capped(&event));
                }
                // The product's all-time row is locked all the same: see step 6.
                Fate::Waits => deltas.touch(e.event.product_id),
                Fate::Duplicate => {}
            }
        }
        // Before the first metrics row, so that the epoch's shared lock covers every one this
        // transaction writes; not earlier: an advance waits for the lock's holders, and a
        // writer still checking and inserting its events has no metrics row to cover yet.
        let epoch = self.change_epoch().await?;
        let mut report = self.apply(&mut deltas, epoch).await?;
        let mut fates = fates;
        let changed = self.settle_retractions(&fresh, &mut fates).await?;
        if !changed.is_empty() {
            // Fates that a transaction committed meanwhile changed: the counts they added come
            // off again, on rows this transaction holds (or, for an original stored meanwhile,
            // its own row, whose lock it takes now).
            let mut corrections = Deltas::default();
            for k in changed {
                let e = &batch[fresh[k]];
                let (event, date) = match &fates[k] {
                    Fate::Withdraws(original) => (original.event(), original.date),
                    _ => (e.event.clone(), e.date),
                };
                corrections.withdraw(fresh[k], &event, date, self.signal_of(&event)?, self.capped(&event));
            }
            report.merge(self.apply(&mut corrections, epoch).await?);
        }
        Ok((fresh.into_iter().zip(fates).collect(), report))
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

    async fn stored_events(&self, candidates: &[usize]) -> Result<HashMap<String, Stored>, Attempt> {
        self.stored_events_of(candidates.iter().map(|i| self.batch[*i].event.event_id.clone()).collect()).await
    }

    /// The stored events of `ids`: their content, signal and day.
    pub(super) async fn stored_events_of(&self, ids: Vec<String>) -> Result<HashMap<String, Stored>, Attempt> {
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
            let (signal, date, actor) = (row.try_get_by_index(5)?, row.try_get_by_index(6)?, row.try_get_by_index(7)?);
            stored.insert(id, (event, signal, date, actor));
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
                Column::Text(events().map(|e| self.stored_actor(&e.event)).collect()),
            ],
        };
        let mut values = Vec::new();
        let source = self.dialect.row_source(&rows, &mut values);
        let sql = self.dialect.insert_or_ignore(
            "events (event_id, product_id, event_type, signal_name, amount, occurred_at, metric_date, recorded_at, \
             actor_id)",
            &source,
        );
        if self.dialect.returns_inserted() {
            let rows = self.txn.query_all_raw(self.statement(format!("{sql} RETURNING event_id"), values)).await?;
            let ids = rows.iter().map(|r| r.try_get_by_index::<String>(0)).collect::<Result<HashSet<_>, _>>()?;
            return Ok(Inserted::Ids(ids));
        }
        Ok(Inserted::Count(self.txn.execute_raw(self.statement(sql, values)).await?.rows_affected()))
    }
}
