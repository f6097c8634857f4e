//! The write path's part in per-actor caps: the actor rows a batch changes
//! (`actor_counts`, one per day, product, capped signal and actor) upserted in one statement
//! in ascending key order, the counts they hold afterwards (returned by the upsert, or read
//! back under its row locks on MySQL), and each row's change settled into the capped
//! signal's value for the day ([`crate::domain::cap::settle`]).
//!
//! The rows are locked by the upsert until the commit, so two batches changing one actor's
//! count take turns, and the second settles against the first's count: the value stays
//! Σ min(N, count) whatever the interleaving.

use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;
use sea_orm::ConnectionTrait;

use super::deltas::Deltas;
use super::rows::{Column, Rows};
use super::write::{Attempt, BatchWrite};
use crate::domain::cap::{ActorChange, settle};
use crate::domain::profile::SignalRef;
use crate::domain::vocabulary::Event;
use crate::ports::StoreError;

/// Where a capped event counts: its signal's code in `actor_counts` (0 for views, the custom
/// signal's column number otherwise) and the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Capped {
    pub code: i16,
    pub per_actor: u32,
}

/// The key of an actor row, in the table's key order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct ActorKey {
    pub date: NaiveDate,
    pub product_id: i64,
    pub code: i16,
    pub actor_id: String,
}

/// What a batch does to one actor row: the batch indexes of the events counted in and of
/// the retractions taking events out, in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ActorRow {
    per_actor: u32,
    pub added: Vec<usize>,
    pub taken: Vec<usize>,
}

impl ActorRow {
    pub fn new(per_actor: u32) -> Self {
        Self { per_actor, added: Vec::new(), taken: Vec::new() }
    }

    fn change(&self) -> ActorChange {
        ActorChange { added: self.added.len(), taken: self.taken.len() }
    }
}

/// What the caps did in a batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct CapReport {
    /// Events whose signal the caps did not move: counted events over their actor's cap,
    /// and retractions that freed no slot (batch indexes).
    pub uncounted: Vec<usize>,
    /// Events the caps removed, per signal code.
    pub capped: BTreeMap<i16, u64>,
}

impl CapReport {
    pub fn merge(&mut self, other: CapReport) {
        self.uncounted.extend(other.uncounted);
        for (code, n) in other.capped {
            *self.capped.entry(code).or_default() += n;
        }
    }
}

impl Deltas {
    /// Settles every actor row against the count it holds after the batch (`after`), adding
    /// what the caps let through to the metrics rows; the actor rows are done with.
    fn settle_caps(&mut self, after: &HashMap<ActorKey, i64>) -> Result<CapReport, Attempt> {
        let mut report = CapReport::default();
        for (key, row) in std::mem::take(&mut self.actors) {
            let Some(count) = after.get(&key) else {
                let problem = format!("the actor row of product {} on {} was not written", key.product_id, key.date);
                return Err(Attempt::Fail(StoreError::Corrupt(problem)));
            };
            let change = row.change();
            let settled = settle(row.per_actor, change, *count);
            self.daily.entry((key.date, key.product_id)).or_default().add_capped(key.code, settled.delta);
            self.all_time.entry(key.product_id).or_default().add_capped(key.code, settled.delta);
            report.uncounted.extend(&row.added[settled.counted_added..]);
            report.uncounted.extend(&row.taken[settled.counted_taken..]);
            let capped = settled.capped(change) as u64;
            if capped > 0 {
                *report.capped.entry(key.code).or_default() += capped;
            }
        }
        Ok(report)
    }
}

impl BatchWrite<'_> {
    /// Where `event` counts when a cap applies to it: a capped signal's event with an actor.
    pub(super) fn capped(&self, event: &Event) -> Option<Capped> {
        if event.actor_id.is_empty() {
            return None;
        }
        let (signal, cap) = self.profile.cap_of(event)?;
        let per_actor = cap.per_actor?;
        let code = match signal {
            SignalRef::Custom(_) => i16::from(*self.signal_columns.get(&event.signal)?),
            _ => super::signals::VIEWS_CODE,
        };
        Some(Capped { code, per_actor })
    }

    /// The actor an event is stored with: its own when it counts through its actor's row,
    /// empty otherwise (a retraction of it then takes it from the counters directly).
    pub(super) fn stored_actor(&self, event: &Event) -> String {
        self.capped(event).map(|_| event.actor_id.clone()).unwrap_or_default()
    }

    /// Writes the batch's actor rows and settles them into `deltas`' metrics rows.
    pub(super) async fn settle_actor_rows(&self, deltas: &mut Deltas) -> Result<CapReport, Attempt> {
        if deltas.actors.is_empty() {
            return Ok(CapReport::default());
        }
        let after = self.upsert_actor_rows(&deltas.actors).await?;
        deltas.settle_caps(&after)
    }

    /// One upsert of every actor row (ascending key order), and the counts they hold now.
    async fn upsert_actor_rows(&self, rows: &BTreeMap<ActorKey, ActorRow>) -> Result<HashMap<ActorKey, i64>, Attempt> {
        let keys = || rows.keys();
        let key_columns = || {
            vec![
                Column::Date(keys().map(|k| k.date).collect()),
                Column::Int(keys().map(|k| k.product_id).collect()),
                Column::SmallInt(keys().map(|k| k.code).collect()),
                Column::Text(keys().map(|k| k.actor_id.clone()).collect()),
            ]
        };
        let mut columns = key_columns();
        columns.push(Column::Int(rows.values().map(|r| r.change().net()).collect()));
        let mut values = Vec::new();
        let source = self.dialect.row_source(&Rows { len: rows.len(), columns }, &mut values);
        let upsert = self.statement(self.dialect.actor_upsert(&source), values);
        let returned = if self.dialect.returns_upserted() {
            self.txn.query_all_raw(upsert).await?
        } else {
            self.txn.execute_raw(upsert).await?;
            let mut values = Vec::new();
            let source = self.dialect.row_source(&Rows { len: rows.len(), columns: key_columns() }, &mut values);
            self.txn.query_all_raw(self.statement(self.dialect.actor_counts_of(&source), values)).await?
        };
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
}
