//! The batch write path: one transaction of a constant number of statements per batch,
//! whatever its size.
//!
//! 1. One query finds the ids already stored (the duplicates).
//! 2. Retractions: one query finds the stored events the batch's retractions name, one the
//!    retractions already stored that name any event of the batch ([`retractions`]); the
//!    domain decides what each fresh event does ([`crate::domain::retraction`]), and the
//!    batch's plan follows from it ([`plan`]: the deltas folded per row, without a database).
//! 3. One insert-or-ignore stores the fresh events (a second retraction of an event is not
//!    stored), in ascending id order so that two batches sharing ids wait for each other
//!    instead of deadlocking on the primary key.
//! 4. The change epoch, read under a shared row lock held to the commit; the metrics rows
//!    written next are stamped with it (what a live pass finds changed rows by:
//!    [`super::changes`]). Taken after the events, the first half of the transaction, so
//!    that a live pass advancing the epoch waits only for the metrics writes in flight.
//! 5. One additive upsert per metrics table (the day's, the hour's, the product's) applies the deltas folded per row (in batch
//!    order: likes and unlikes are order-sensitive), rows in ascending key order; plus one
//!    clamp upsert per table when an UNLIKE could take likes below zero (see
//!    [`crate::domain::delta`]).
//!    Custom signals (`EVENT_TYPE_SIGNAL`) are columns of the same rows (`signal_1` …, see
//!    [`super::signals`]): they add to the same upserts, so a batch with signals costs no
//!    statement more. A retraction takes its original's counts off the original's rows.
//!    Capped events go through their shoppers' rows first ([`actors`]), which say what the
//!    caps let through.
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

//! Modules depend one way: this one runs the steps; [`events`], [`retractions`], [`actors`]
//! and [`metrics`] hold the statements; [`plan`] decides and [`tx`] carries the transaction.

mod actors;
mod events;
mod metrics;
mod plan;
mod retractions;
mod tx;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sea_orm::DatabaseTransaction;

pub use self::plan::CapReport;
use self::plan::{Caps, Deltas};
use self::retractions::Retractions;
pub use self::tx::Attempt;
use self::tx::Tx;
use super::dialect::Dialect;
use crate::domain::calendar::RankingCalendar;
use crate::domain::profile::ScoringProfile;
use crate::domain::retraction::Fate;
use crate::ports::DatedEvent;

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
    /// The zone that cuts time into the hourly rows' hours.
    pub calendar: RankingCalendar,
}

impl BatchWrite<'_> {
    /// Writes the events at `candidates` (indexes into the batch, each id once) and their
    /// metrics; returns what each fresh one did (the others were stored before) and what the
    /// caps did. Does not commit.
    pub async fn run(&self, candidates: &[usize]) -> Result<(HashMap<usize, Fate>, CapReport), Attempt> {
        let batch = self.batch;
        let tx = Tx { dialect: self.dialect, txn: self.txn, now_us: self.now_us };
        let caps = Caps { signal_columns: self.signal_columns, profile: self.profile, calendar: self.calendar };
        let retractions = Retractions { tx, batch, profile: self.profile, retractable_since: self.retractable_since };

        let ids = candidates.iter().map(|i| batch[*i].event.event_id.clone()).collect();
        let stored = events::stored(tx, ids).await?;
        let fresh: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|i| match stored.get(batch[*i].event.event_id.as_str()) {
                None => true,
                Some((previous, ..)) => {
                    if *previous != events::StoredEvent::of(&batch[*i]) {
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

        let mut fates = retractions.fates(&fresh).await?;
        let mut recorded: Vec<&DatedEvent> =
            fresh.iter().zip(&fates).filter(|(_, fate)| **fate != Fate::Duplicate).map(|(i, _)| &batch[*i]).collect();
        if recorded.is_empty() {
            // Only second retractions of events already retracted: nothing to write.
            return Ok((fresh.into_iter().zip(fates).collect(), CapReport::default()));
        }
        recorded.sort_unstable_by(|a, b| a.event.event_id.cmp(&b.event.event_id));
        let inserted = events::insert(tx, &recorded, caps).await?;
        if inserted != recorded.len() as u64 {
            // Ids another transaction committed after the filter query were skipped by the
            // insert; what the batch does was decided without them: start over, and the
            // filter query will report them as duplicates.
            let lost = recorded.len() as u64 - inserted;
            return Err(Attempt::Retry(format!("{lost} of {} ids raced with another writer", recorded.len())));
        }

        // Before the first metrics row, so that the epoch's shared lock covers every one this
        // transaction writes; not earlier: an advance waits for the lock's holders, and a
        // writer still checking and inserting its events has no metrics row to cover yet.
        let epoch = self.change_epoch(tx).await?;
        let mut report = write_deltas(tx, Deltas::of_batch(batch, &fresh, &fates, caps)?, epoch).await?;
        let changed = retractions.settle(&fresh, &mut fates).await?;
        if !changed.is_empty() {
            // Fates that a transaction committed meanwhile changed: the counts they added come
            // off again, on rows this transaction holds (or, for an original stored meanwhile,
            // its own row, whose lock it takes now).
            let corrections = Deltas::corrections(batch, &fresh, &fates, &changed, caps)?;
            report.merge(write_deltas(tx, corrections, epoch).await?);
        }
        Ok((fresh.into_iter().zip(fates).collect(), report))
    }

    /// The current change epoch, locked shared until this transaction ends.
    async fn change_epoch(&self, tx: Tx<'_>) -> Result<i64, Attempt> {
        let epoch = super::changes::read_epoch(tx.txn, tx.dialect.change_epoch_lock()).await?;
        epoch.ok_or_else(|| Attempt::Fail(super::changes::no_epoch()))
    }
}

/// Settles `deltas`' shoppers' rows, then writes its metrics rows stamped with `epoch`;
/// returns what the caps did.
async fn write_deltas(tx: Tx<'_>, mut deltas: Deltas, epoch: i64) -> Result<CapReport, Attempt> {
    let report = if deltas.actors.is_empty() {
        CapReport::default()
    } else {
        let after = actors::upsert(tx, &deltas.actors).await?;
        deltas.settle_caps(&after)?
    };
    if !deltas.actor_hours.is_empty() {
        let after = actors::upsert_hours(tx, &deltas.actor_hours).await?;
        deltas.settle_hour_caps(&after)?;
    }
    metrics::apply(tx, &deltas, epoch).await?;
    Ok(report)
}
