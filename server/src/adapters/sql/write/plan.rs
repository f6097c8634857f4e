//! The plan of a batch, without a database: what its fresh events do to the metrics rows
//! (folded per row, [`Deltas`]: the day's, the hour's and the product's all-time row), which
//! of them count through a shopper's row of the day and of the hour ([`Caps`]), and how those
//! rows settle into the metrics rows once their counts after the batch are known
//! ([`Deltas::settle_caps`]). The statements that carry a plan out are its siblings'; this
//! module decides, they execute.
//!
//! The rows are kept in ascending key order (`BTreeMap`): the statements write them in that
//! order, so that two batches sharing rows wait for each other instead of deadlocking.

use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;

use crate::adapters::sql::signals::{self, SIGNAL_COLUMNS};
use crate::domain::calendar::RankingCalendar;
use crate::domain::cap::{ActorChange, settle};
use crate::domain::delta::MetricsDelta;
use crate::domain::profile::{ScoringProfile, SignalRef};
use crate::domain::retraction::Fate;
use crate::domain::vocabulary::{Event, EventKind, Retracted, SignalKind};
use crate::ports::{DatedEvent, StoreError};

/// Where a capped event counts: its signal's code in `actor_counts` (views' code for views,
/// the custom signal's column number otherwise) and the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capped {
    pub code: i16,
    pub per_actor: u32,
}

/// The key of a shopper's row, in the table's key order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActorKey {
    pub date: NaiveDate,
    pub product_id: i64,
    pub code: i16,
    pub actor_id: String,
}

/// The key of an hourly metrics row, in the table's key order: the ranking day, the product
/// and the local hour's first instant (Unix microseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HourKey {
    pub date: NaiveDate,
    pub product_id: i64,
    pub hour_start_us: i64,
}

/// The key of a shopper's row of one hour, in the table's key order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActorHourKey {
    pub hour: HourKey,
    pub code: i16,
    pub actor_id: String,
}

/// What a batch does to one shopper's row: the batch indexes of the events counted in and of
/// the retractions taking events out, in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorRow {
    per_actor: u32,
    pub added: Vec<usize>,
    pub taken: Vec<usize>,
}

impl ActorRow {
    fn new(per_actor: u32) -> Self {
        Self { per_actor, added: Vec::new(), taken: Vec::new() }
    }

    /// The change to the row's stored count.
    pub fn change(&self) -> ActorChange {
        ActorChange { added: self.added.len(), taken: self.taken.len() }
    }
}

/// What the caps did in a batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapReport {
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

/// What the profile, the signals' columns and the calendar say about an event: where its
/// custom signal is stored, whether it counts through its shopper's row, and its hour.
#[derive(Clone, Copy)]
pub struct Caps<'a> {
    /// The column of every custom signal of the batch.
    pub signal_columns: &'a HashMap<String, u8>,
    /// The scoring profile: which signals are capped, the kind of each custom signal.
    pub profile: &'a ScoringProfile,
    /// The zone that cuts time into hours.
    pub calendar: RankingCalendar,
}

impl Caps<'_> {
    /// Where `event` counts when a cap applies to it: a capped signal's event with an actor.
    pub fn capped(&self, event: &Event) -> Option<Capped> {
        if event.actor_id.is_empty() {
            return None;
        }
        let (signal, cap) = self.profile.cap_of(event)?;
        let per_actor = cap.per_actor?;
        let code = match signal {
            SignalRef::Custom(_) => i16::from(*self.signal_columns.get(&event.signal)?),
            _ => signals::VIEWS_CODE,
        };
        Some(Capped { code, per_actor })
    }

    /// The hourly row `event`, counted on `date`, belongs to.
    pub fn hour_of(&self, event: &Event, date: NaiveDate) -> HourKey {
        let hour_start_us = self.calendar.hour_start_us(event.occurred_at.timestamp_micros());
        HourKey { date, hour_start_us, product_id: event.product_id }
    }

    /// The actor an event is stored with: its own when it counts through its shopper's row,
    /// empty otherwise (a retraction of it then takes it from the counters directly).
    pub fn stored_actor(&self, event: &Event) -> String {
        self.capped(event).map(|_| event.actor_id.clone()).unwrap_or_default()
    }

    /// The column and value of a SIGNAL event (a count signal counts 1, an amount signal its
    /// amount); `None` for the built-in types.
    pub fn signal_of(&self, event: &Event) -> Result<Option<(u8, i64)>, StoreError> {
        let EventKind::Signal(kind) = event.kind else { return Ok(None) };
        let Some(column) = self.signal_columns.get(&event.signal) else {
            return Err(StoreError::Corrupt(format!("custom signal {:?} has no column", event.signal)));
        };
        Ok(Some((*column, if kind == SignalKind::Count { 1 } else { event.amount })))
    }
}

/// What a batch does to one metrics row: the built-in counters, and the custom signals'
/// sums by column (`signals[k]` is column `signal_{k+1}`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RowDelta {
    pub metrics: MetricsDelta,
    pub signals: [i64; SIGNAL_COLUMNS as usize],
    /// What retractions took from the row (daily rows only).
    pub retracted: Retracted,
}

impl RowDelta {
    fn add(&mut self, event: &Event, signal: Option<(u8, i64)>) {
        self.metrics.add(event);
        if let Some((column, value)) = signal {
            let sum = &mut self.signals[usize::from(column - 1)];
            *sum = sum.saturating_add(value);
        }
    }

    /// Adds a capped signal's settled change: views ([`signals::VIEWS_CODE`]) or custom
    /// column `code`.
    fn add_capped(&mut self, code: i16, delta: i64) {
        match code {
            signals::VIEWS_CODE => self.metrics.views += delta,
            column => {
                let sum = &mut self.signals[(column - 1) as usize];
                *sum = sum.saturating_add(delta);
            }
        }
    }

    fn withdraw(&mut self, original: &Event, signal: Option<(u8, i64)>) {
        self.metrics.withdraw(original);
        if let Some((column, value)) = signal {
            let sum = &mut self.signals[usize::from(column - 1)];
            *sum = sum.saturating_sub(value);
        }
    }
}

/// A batch's effect on the daily, hourly and all-time rows, and the custom signal columns
/// it touches (ascending).
#[derive(Debug, Default)]
pub struct Deltas {
    pub daily: BTreeMap<(NaiveDate, i64), RowDelta>,
    /// Per hour of `occurred_at` (a retraction's in its original's hour).
    pub hourly: BTreeMap<HourKey, RowDelta>,
    pub all_time: BTreeMap<i64, RowDelta>,
    pub columns: Vec<u8>,
    /// The capped events with an actor, per shopper's row; settled into `daily` and
    /// `all_time` once the rows' counts are known.
    pub actors: BTreeMap<ActorKey, ActorRow>,
    /// The same per shopper's row of the hour; settled into `hourly`.
    pub actor_hours: BTreeMap<ActorHourKey, ActorRow>,
}

impl Deltas {
    /// The deltas of the fresh events of a batch (`fresh`: batch indexes) given what each
    /// does (`fates`, in the same order).
    pub fn of_batch(batch: &[DatedEvent], fresh: &[usize], fates: &[Fate], caps: Caps) -> Result<Self, StoreError> {
        let mut deltas = Self::default();
        for (i, fate) in fresh.iter().zip(fates) {
            let e = &batch[*i];
            match fate {
                Fate::Counted => deltas.count(*i, e, caps)?,
                Fate::Retracted => deltas.witness(e, caps),
                Fate::Withdraws(original) => deltas.withdraw(*i, &original.event(), original.date, caps)?,
                // The product's all-time row is locked all the same: it is what a retraction
                // and its original committing at once meet on.
                Fate::Waits => deltas.touch(e.event.product_id),
                Fate::Duplicate => {}
            }
        }
        Ok(deltas)
    }

    /// The corrections for fates that changed after their counts were written (`changed`:
    /// places in `fresh`): what each added comes off again.
    pub fn corrections(
        batch: &[DatedEvent],
        fresh: &[usize],
        fates: &[Fate],
        changed: &[usize],
        caps: Caps,
    ) -> Result<Self, StoreError> {
        let mut deltas = Self::default();
        for k in changed {
            let e = &batch[fresh[*k]];
            let (event, date) = match &fates[*k] {
                Fate::Withdraws(original) => (original.event(), original.date),
                _ => (e.event.clone(), e.date),
            };
            deltas.withdraw(fresh[*k], &event, date, caps)?;
        }
        Ok(deltas)
    }

    /// `event` (batch index `index`) counted; through its shopper's rows when capped.
    fn count(&mut self, index: usize, event: &DatedEvent, caps: Caps) -> Result<(), StoreError> {
        let e = &event.event;
        let signal = caps.signal_of(e)?;
        self.column(signal);
        let hour = caps.hour_of(e, event.date);
        let Some(capped) = caps.capped(e) else {
            self.daily.entry((event.date, e.product_id)).or_default().add(e, signal);
            self.hourly.entry(hour).or_default().add(e, signal);
            self.all_time.entry(e.product_id).or_default().add(e, signal);
            return Ok(());
        };
        // The rows exist and their latest event moves whether or not the cap lets the event
        // count.
        self.daily.entry((event.date, e.product_id)).or_default().metrics.witness(e);
        self.hourly.entry(hour).or_default().metrics.witness(e);
        self.touch(e.product_id);
        self.actor_row(event.date, e, capped).added.push(index);
        self.actor_hour_row(hour, e, capped).added.push(index);
        Ok(())
    }

    /// `event` recorded after its retraction: only its time counts, and what it would have
    /// counted is the day's retracted counts.
    fn witness(&mut self, event: &DatedEvent, caps: Caps) {
        let e = &event.event;
        let row = self.daily.entry((event.date, e.product_id)).or_default();
        row.metrics.witness(e);
        row.retracted.add(e);
        self.hourly.entry(caps.hour_of(e, event.date)).or_default().metrics.witness(e);
        self.touch(e.product_id);
    }

    /// `original`, counted on `date` and in its hour, taken back by the retraction at
    /// `index`; from its shopper's rows when it was counted through them.
    fn withdraw(&mut self, index: usize, original: &Event, date: NaiveDate, caps: Caps) -> Result<(), StoreError> {
        let signal = caps.signal_of(original)?;
        self.column(signal);
        let hour = caps.hour_of(original, date);
        let row = self.daily.entry((date, original.product_id)).or_default();
        row.retracted.add(original);
        let Some(capped) = caps.capped(original) else {
            row.withdraw(original, signal);
            self.hourly.entry(hour).or_default().withdraw(original, signal);
            self.all_time.entry(original.product_id).or_default().withdraw(original, signal);
            return Ok(());
        };
        self.touch(original.product_id);
        self.actor_row(date, original, capped).taken.push(index);
        self.actor_hour_row(hour, original, capped).taken.push(index);
        Ok(())
    }

    fn actor_row(&mut self, date: NaiveDate, event: &Event, capped: Capped) -> &mut ActorRow {
        let key = ActorKey { date, product_id: event.product_id, code: capped.code, actor_id: event.actor_id.clone() };
        self.actors.entry(key).or_insert_with(|| ActorRow::new(capped.per_actor))
    }

    fn actor_hour_row(&mut self, hour: HourKey, event: &Event, capped: Capped) -> &mut ActorRow {
        let key = ActorHourKey { hour, code: capped.code, actor_id: event.actor_id.clone() };
        self.actor_hours.entry(key).or_insert_with(|| ActorRow::new(capped.per_actor))
    }

    /// The product's all-time row written (and locked) even though nothing of it changes.
    fn touch(&mut self, product_id: i64) {
        self.all_time.entry(product_id).or_default();
    }

    fn column(&mut self, signal: Option<(u8, i64)>) {
        if let Some((c, _)) = signal
            && let Err(at) = self.columns.binary_search(&c)
        {
            self.columns.insert(at, c);
        }
    }

    /// Settles every shopper's row of an hour against the count it holds after the batch
    /// (`after`), adding what the caps let through to the hourly rows; what the caps did is
    /// reported by the days' rows ([`Deltas::settle_caps`]).
    pub fn settle_hour_caps(&mut self, after: &HashMap<ActorHourKey, i64>) -> Result<(), StoreError> {
        for (key, row) in std::mem::take(&mut self.actor_hours) {
            let Some(count) = after.get(&key) else {
                let problem = format!(
                    "the actor row of product {} at {} was not written",
                    key.hour.product_id, key.hour.hour_start_us
                );
                return Err(StoreError::Corrupt(problem));
            };
            let settled = settle(row.per_actor, row.change(), *count);
            self.hourly.entry(key.hour).or_default().add_capped(key.code, settled.delta);
        }
        Ok(())
    }

    /// Settles every shopper's row against the count it holds after the batch (`after`),
    /// adding what the caps let through to the metrics rows; the shoppers' rows are done with.
    pub fn settle_caps(&mut self, after: &HashMap<ActorKey, i64>) -> Result<CapReport, StoreError> {
        let mut report = CapReport::default();
        for (key, row) in std::mem::take(&mut self.actors) {
            let Some(count) = after.get(&key) else {
                let problem = format!("the actor row of product {} on {} was not written", key.product_id, key.date);
                return Err(StoreError::Corrupt(problem));
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

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
