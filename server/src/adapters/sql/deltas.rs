//! The metrics rows a batch changes: the effect of its events folded per row ([`Deltas`]),
//! and applied with one additive upsert per table, plus one clamp upsert where an UNLIKE (or
//! a retracted like) could have crossed zero. Events of a capped signal with an actor are
//! folded per actor row instead, and reach the metrics rows as what the caps let through
//! ([`super::actors`]).

use std::collections::BTreeMap;

use chrono::NaiveDate;
use sea_orm::ConnectionTrait;

use super::actors::{ActorKey, ActorRow, CapReport, Capped};
use super::dialect::UpsertOp;
use super::rows::{Column, Rows};
use super::signals::SIGNAL_COLUMNS;
use super::write::{Attempt, BatchWrite};
use crate::domain::delta::MetricsDelta;
use crate::domain::vocabulary::{Event, Retracted};
use crate::ports::DatedEvent;

/// A metrics table as the upserts see it.
pub(super) struct MetricsTable {
    name: &'static str,
    /// Primary-key columns, the conflict target.
    key: &'static [&'static str],
    /// Whether the table tracks the latest `occurred_at` and the change epoch of its rows
    /// (what a live pass finds changed rows by).
    last_event_at: bool,
}

/// What retractions took from a daily row, beside its counters.
const RETRACTED_COLUMNS: [&str; 4] =
    ["retracted_views", "retracted_likes", "retracted_orders", "retracted_order_amount"];

const DAILY_METRICS: MetricsTable =
    MetricsTable { name: "product_daily_metrics", key: &["metric_date", "product_id"], last_event_at: true };
const PRODUCT_METRICS: MetricsTable =
    MetricsTable { name: "product_metrics", key: &["product_id"], last_event_at: false };

/// What a batch does to one metrics row: the built-in counters, and the custom signals'
/// sums by column (`signals[k]` is column `signal_{k+1}`).
#[derive(Debug, Default)]
pub(super) struct RowDelta {
    metrics: MetricsDelta,
    signals: [i64; SIGNAL_COLUMNS as usize],
    /// What retractions took from the row (daily rows only).
    retracted: Retracted,
}

impl RowDelta {
    fn add(&mut self, event: &Event, signal: Option<(u8, i64)>) {
        self.metrics.add(event);
        if let Some((column, value)) = signal {
            let sum = &mut self.signals[usize::from(column - 1)];
            *sum = sum.saturating_add(value);
        }
    }

    /// Adds a capped signal's settled change: views ([`super::signals::VIEWS_CODE`]) or
    /// custom column `code`.
    pub(super) fn add_capped(&mut self, code: i16, delta: i64) {
        match code {
            super::signals::VIEWS_CODE => self.metrics.views += delta,
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

/// A batch's effect on the daily and the all-time rows, and the custom signal columns it
/// touches (ascending).
#[derive(Debug, Default)]
pub(super) struct Deltas {
    pub(super) daily: BTreeMap<(NaiveDate, i64), RowDelta>,
    pub(super) all_time: BTreeMap<i64, RowDelta>,
    columns: Vec<u8>,
    /// The capped events with an actor, per actor row; settled into `daily` and `all_time`
    /// once the rows' counts are known.
    pub(super) actors: BTreeMap<ActorKey, ActorRow>,
}

impl Deltas {
    /// `event` (batch index `index`) counted; through its actor's row when `capped`.
    pub fn count(&mut self, index: usize, event: &DatedEvent, signal: Option<(u8, i64)>, capped: Option<Capped>) {
        self.column(signal);
        let e = &event.event;
        let Some(capped) = capped else {
            self.daily.entry((event.date, e.product_id)).or_default().add(e, signal);
            self.all_time.entry(e.product_id).or_default().add(e, signal);
            return;
        };
        // The row exists and its latest event moves whether or not the cap lets the event count.
        self.daily.entry((event.date, e.product_id)).or_default().metrics.witness(e);
        self.touch(e.product_id);
        self.actor_row(event.date, e, capped).added.push(index);
    }

    /// `event` recorded after its retraction: only its time counts, and what it would have
    /// counted is the day's retracted counts.
    pub fn witness(&mut self, event: &DatedEvent) {
        let e = &event.event;
        let row = self.daily.entry((event.date, e.product_id)).or_default();
        row.metrics.witness(e);
        row.retracted.add(e);
        self.touch(e.product_id);
    }

    /// `original`, counted on `date`, taken back by the retraction at `index`; from its
    /// actor's row when it was counted through one (`capped`).
    pub fn withdraw(
        &mut self,
        index: usize,
        original: &Event,
        date: NaiveDate,
        signal: Option<(u8, i64)>,
        capped: Option<Capped>,
    ) {
        self.column(signal);
        let row = self.daily.entry((date, original.product_id)).or_default();
        row.retracted.add(original);
        let Some(capped) = capped else {
            row.withdraw(original, signal);
            self.all_time.entry(original.product_id).or_default().withdraw(original, signal);
            return;
        };
        self.touch(original.product_id);
        self.actor_row(date, original, capped).taken.push(index);
    }

    fn actor_row(&mut self, date: NaiveDate, event: &Event, capped: Capped) -> &mut ActorRow {
        let key = ActorKey { date, product_id: event.product_id, code: capped.code, actor_id: event.actor_id.clone() };
        self.actors.entry(key).or_insert_with(|| ActorRow::new(capped.per_actor))
    }

    /// The product's all-time row written (and locked) even though nothing of it changes.
    pub fn touch(&mut self, product_id: i64) {
        self.all_time.entry(product_id).or_default();
    }

    fn column(&mut self, signal: Option<(u8, i64)>) {
        if let Some((c, _)) = signal
            && let Err(at) = self.columns.binary_search(&c)
        {
            self.columns.insert(at, c);
        }
    }
}

impl BatchWrite<'_> {
    /// Writes `deltas` to both metrics tables, the daily rows stamped with `epoch`, after
    /// settling its actor rows; returns what the caps did.
    pub(super) async fn apply(&self, deltas: &mut Deltas, epoch: i64) -> Result<CapReport, Attempt> {
        let report = self.settle_actor_rows(deltas).await?;
        let daily_keys = |rows: &[(&(NaiveDate, i64), &RowDelta)]| {
            vec![
                Column::Date(rows.iter().map(|((date, _), _)| *date).collect()),
                Column::Int(rows.iter().map(|((_, product), _)| *product).collect()),
            ]
        };
        self.apply_deltas(&DAILY_METRICS, &deltas.daily, &deltas.columns, epoch, daily_keys).await?;
        let product_keys = |rows: &[(&i64, &RowDelta)]| vec![Column::Int(rows.iter().map(|(p, _)| **p).collect())];
        self.apply_deltas(&PRODUCT_METRICS, &deltas.all_time, &deltas.columns, epoch, product_keys).await?;
        Ok(report)
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
            names.extend(RETRACTED_COLUMNS);
            add.extend(RETRACTED_COLUMNS.map(|c| (c, UpsertOp::SaturatingAdd)));
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
                columns.extend([
                    counter(&|d| d.retracted.views),
                    counter(&|d| d.retracted.likes),
                    counter(&|d| d.retracted.orders),
                    counter(&|d| d.retracted.order_amount),
                ]);
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
