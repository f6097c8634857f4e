//! Today's population kept in memory between live passes: what a full
//! recompute would read from SQL, held so that a pass applies only the rows that changed.
//!
//! A [`LiveDay`] holds the three things today's daily and weekly contenders are functions of:
//! the carry every product inherits today (a [`CarryLedger`], never taken), today's metrics
//! rows, and the sums of the week's earlier days. From them it gives the very contenders a
//! recompute gathers from SQL — the same values, in the same order — so that ranking them
//! gives the recompute's scores bit for bit.
//!
//! A changed row of today replaces that product's row; a changed row of an earlier day
//! (a late event) changes the product's carry chain and week sums, which are recomputed from
//! that product's rows alone ([`LiveDay::refresh`]): one product's chain never depends on
//! another's.

use std::sync::Arc;

use chrono::NaiveDate;

use super::profile::ScoringProfile;

use super::ranking::Contender;
use super::score::{CarryLedger, DayStanding};
use super::vocabulary::MAX_CUSTOM_SIGNALS;
use super::vocabulary::{CarryOver, DailyMetrics};

/// Metrics rows by product, ascending, in flat columns: the built-in counters and only as
/// many custom signals as the profile declares (a million rows of the built-in profile take
/// 48 MB, not the 112 of a row each).
#[derive(Debug, Clone, Default)]
pub struct DayRows {
    custom: usize,
    ids: Vec<i64>,
    last_event_us: Vec<i64>,
    /// `4 + custom` values per product.
    values: Vec<i64>,
}

impl DayRows {
    /// No rows, for a profile of `custom` custom signals.
    pub fn new(custom: usize) -> Self {
        Self { custom: custom.min(MAX_CUSTOM_SIGNALS), ..Self::default() }
    }

    fn stride(&self) -> usize {
        4 + self.custom
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no row is held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Appends a row of a product above every product held (rows as SQL streams them).
    pub fn push(&mut self, product_id: i64, metrics: &DailyMetrics, last_event_us: i64) {
        debug_assert!(self.ids.last().is_none_or(|last| *last < product_id), "rows must ascend");
        self.ids.push(product_id);
        self.last_event_us.push(last_event_us);
        self.values.extend([metrics.views, metrics.likes, metrics.orders, metrics.order_amount]);
        self.values.extend(&metrics.custom[..self.custom]);
    }

    fn metrics(&self, i: usize) -> DailyMetrics {
        let v = &self.values[i * self.stride()..(i + 1) * self.stride()];
        let mut metrics = DailyMetrics::counts(v[0], v[1], v[2], v[3]);
        metrics.custom[..self.custom].copy_from_slice(&v[4..]);
        metrics
    }

    fn set(&mut self, i: usize, metrics: &DailyMetrics, last_event_us: i64) {
        let stride = self.stride();
        let v = &mut self.values[i * stride..(i + 1) * stride];
        v[..4].copy_from_slice(&[metrics.views, metrics.likes, metrics.orders, metrics.order_amount]);
        v[4..].copy_from_slice(&metrics.custom[..self.custom]);
        self.last_event_us[i] = last_event_us;
    }

    /// Each product's row and latest event, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (i64, DailyMetrics, i64)> + '_ {
        (0..self.len()).map(|i| (self.ids[i], self.metrics(i), self.last_event_us[i]))
    }

    /// Sets the rows of `rows` (any order; a product given twice keeps its last): held
    /// products' rows in place, new products merged in with one pass over the table.
    pub fn upsert(&mut self, mut rows: Vec<(i64, DailyMetrics, i64)>) {
        rows.reverse();
        rows.sort_by_key(|(id, _, _)| *id);
        rows.dedup_by_key(|(id, _, _)| *id);
        let mut fresh = DayRows::new(self.custom);
        for (id, metrics, last) in &rows {
            match self.ids.binary_search(id) {
                Ok(i) => self.set(i, metrics, *last),
                Err(_) => fresh.push(*id, metrics, *last),
            }
        }
        if !fresh.is_empty() {
            *self = self.merged(&fresh, &[]);
        }
    }

    /// This table without the rows of `gone` (ascending) and with `fresh`'s (a product of
    /// `fresh` is not held or is in `gone`). The held rows between two changes are copied
    /// as runs, column by column: a pass that brings a few new products copies the day's
    /// table at memory speed rather than row by row.
    fn merged(&self, fresh: &DayRows, gone: &[i64]) -> DayRows {
        let mut out = DayRows::new(self.custom);
        let capacity = self.len() + fresh.len();
        out.ids.reserve_exact(capacity);
        out.last_event_us.reserve_exact(capacity);
        out.values.reserve_exact(capacity * self.stride());
        let (mut a, mut b, mut g) = (0, 0, 0);
        loop {
            let (next_fresh, next_gone) = (fresh.ids.get(b).copied(), gone.get(g).copied());
            let boundary = match (next_fresh, next_gone) {
                (Some(f), Some(x)) => Some(f.min(x)),
                (f, x) => f.or(x),
            };
            let end = match boundary {
                Some(id) => a + self.ids[a..].partition_point(|held| *held < id),
                None => self.len(),
            };
            out.extend_from(self, a..end);
            a = end;
            match (boundary, next_gone) {
                (None, _) => return out,
                // A product leaving (and maybe coming back from `fresh` next round).
                (Some(id), Some(x)) if id == x => {
                    g += 1;
                    if self.ids.get(a) == Some(&id) {
                        a += 1;
                    }
                }
                _ => {
                    out.extend_from(fresh, b..b + 1);
                    b += 1;
                }
            }
        }
    }

    /// Appends the rows `range` of `other` (above every row held).
    fn extend_from(&mut self, other: &DayRows, range: std::ops::Range<usize>) {
        debug_assert!(range.is_empty() || self.ids.last().is_none_or(|last| *last < other.ids[range.start]));
        let stride = self.stride();
        self.ids.extend_from_slice(&other.ids[range.clone()]);
        self.last_event_us.extend_from_slice(&other.last_event_us[range.clone()]);
        self.values.extend_from_slice(&other.values[range.start * stride..range.end * stride]);
    }
}

/// Field by field, saturating: what SQL's capped `SUM` of the days gives (every counter is
/// at least 0).
fn sum(a: &DailyMetrics, b: &DailyMetrics) -> DailyMetrics {
    let mut out = DailyMetrics::counts(
        a.views.saturating_add(b.views),
        a.likes.saturating_add(b.likes),
        a.orders.saturating_add(b.orders),
        a.order_amount.saturating_add(b.order_amount),
    );
    for (k, value) in out.custom.iter_mut().enumerate() {
        *value = a.custom[k].saturating_add(b.custom[k]);
    }
    out
}

/// One product's metrics row of one day (what a live pass reads of a changed row).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProductRow {
    /// The row's day.
    pub date: NaiveDate,
    /// The product.
    pub product_id: i64,
    /// The day's counters.
    pub metrics: DailyMetrics,
    /// Latest `occurred_at` that day.
    pub last_event_us: i64,
}

/// The days a ranking day's contenders depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveDays {
    /// The ranking day.
    pub date: NaiveDate,
    /// The first day of its carry-over chain.
    pub carry_start: NaiveDate,
    /// The first day of its rolling week.
    pub week_start: NaiveDate,
}

impl LiveDays {
    /// The first day a row of which changes the ranking day's contenders.
    pub fn first(&self) -> NaiveDate {
        self.carry_start.min(self.week_start)
    }
}

/// Today's population between live passes.
#[derive(Debug, Clone)]
pub struct LiveDay {
    profile: Arc<ScoringProfile>,
    days: LiveDays,
    /// What each product inherits today (never taken: each pass takes from a copy).
    ledger: CarryLedger,
    /// Today's rows.
    today: DayRows,
    /// Each product's rows of the week's earlier days, summed, with its latest event.
    before: DayRows,
}

impl LiveDay {
    /// A day from what a full read gave: the ledger of the days before `days.date`, today's
    /// rows, and the summed rows of the week before today.
    pub fn new(
        profile: Arc<ScoringProfile>,
        days: LiveDays,
        ledger: CarryLedger,
        today: DayRows,
        before: DayRows,
    ) -> Self {
        Self { profile, days, ledger, today, before }
    }

    /// The days this population depends on.
    pub fn days(&self) -> LiveDays {
        self.days
    }

    /// Products with a row today.
    pub fn today_len(&self) -> usize {
        self.today.len()
    }

    /// Replaces today's rows of the products of `rows` (rows of `days.date` only).
    pub fn apply_today(&mut self, rows: Vec<(i64, DailyMetrics, i64)>) {
        self.today.upsert(rows);
    }

    /// Recomputes everything `products` (ascending, unique) contribute from `rows`, all their
    /// rows of `days.first() ..= days.date`: their carry chain, their week's earlier sums and
    /// their row of today.
    pub fn refresh(&mut self, products: &[i64], mut rows: Vec<ProductRow>) {
        rows.sort_by_key(|r| (r.date, r.product_id));
        let LiveDays { date, carry_start, week_start } = self.days;
        let mut fresh = CarryLedger::new(Arc::clone(&self.profile));
        let mut day = carry_start;
        let mut next = rows.iter().peekable();
        while day < date {
            while next.next_if(|r| r.date < day).is_some() {}
            let mut closing = fresh.closing();
            while let Some(r) = next.next_if(|r| r.date == day) {
                closing.add(r.product_id, r.metrics);
            }
            fresh = closing.finish();
            day = day.succ_opt().unwrap_or(date);
        }
        self.ledger = self.ledger.replaced(products, &fresh);

        let mut week: Vec<(i64, DailyMetrics, i64)> = Vec::new();
        let mut by_product: Vec<&ProductRow> = rows.iter().filter(|r| r.date >= week_start && r.date < date).collect();
        by_product.sort_by_key(|r| r.product_id);
        for r in by_product {
            match week.last_mut() {
                Some((id, metrics, last)) if *id == r.product_id => {
                    *metrics = sum(metrics, &r.metrics);
                    *last = (*last).max(r.last_event_us);
                }
                _ => week.push((r.product_id, r.metrics, r.last_event_us)),
            }
        }
        let mut summed = DayRows::new(self.before.custom);
        for (id, metrics, last) in &week {
            summed.push(*id, metrics, *last);
        }
        self.before = self.before.merged(&summed, products);
        self.apply_today(
            rows.iter().filter(|r| r.date == date).map(|r| (r.product_id, r.metrics, r.last_event_us)).collect(),
        );
    }

    /// Today's daily contenders, the values a recompute gathers (each row of today with what
    /// it inherits, and the products ranked through carry-over alone), in ascending product
    /// order: the ledger is read beside today's rows rather than taken from, so that neither
    /// it is copied nor the ranking has two runs to sort. Appended to `out`.
    pub fn daily_contenders(&self, out: &mut Vec<Contender>) {
        let profile = &self.profile;
        let carry_only = |(id, carried): (i64, CarryOver)| {
            let standing = DayStanding {
                main: profile.main_score(&DailyMetrics::default(), carried),
                metrics: DailyMetrics::default(),
            };
            Contender::new(profile, id, standing, None)
        };
        out.reserve(self.today.len() + self.ledger.len());
        let mut carried = self.ledger.untaken().peekable();
        for (id, metrics, last) in self.today.iter() {
            while let Some(before) = carried.next_if(|(c, _)| *c < id) {
                out.push(carry_only(before));
            }
            let inherited = carried.next_if(|(c, _)| *c == id).map_or(CarryOver::default(), |(_, c)| c);
            let standing = DayStanding { main: profile.main_score(&metrics, inherited), metrics };
            out.push(Contender::new(profile, id, standing, Some(last)));
        }
        out.extend(carried.map(carry_only));
    }

    /// The week's contenders, as a recompute's grouped read gives them: every product with
    /// a row in the week, its rows summed, no carry-over, its latest event. Appended to `out`.
    pub fn weekly_contenders(&self, out: &mut Vec<Contender>) {
        let profile = &self.profile;
        let contender = |id: i64, metrics: DailyMetrics, last: i64| {
            let standing = DayStanding { main: profile.main_score(&metrics, CarryOver(0)), metrics };
            Contender::new(profile, id, standing, Some(last))
        };
        out.reserve(self.today.len().max(self.before.len()));
        let mut today = self.today.iter().peekable();
        let mut before = self.before.iter().peekable();
        loop {
            let next = match (today.peek(), before.peek()) {
                (None, None) => break,
                (Some(t), Some(b)) if t.0 == b.0 => {
                    let ((id, t, tl), (_, b, bl)) =
                        (today.next().unwrap_or_default(), before.next().unwrap_or_default());
                    contender(id, sum(&b, &t), tl.max(bl))
                }
                (Some(t), Some(b)) if t.0 > b.0 => {
                    let (id, m, l) = before.next().unwrap_or_default();
                    contender(id, m, l)
                }
                (Some(_), _) => {
                    let (id, m, l) = today.next().unwrap_or_default();
                    contender(id, m, l)
                }
                (None, Some(_)) => {
                    let (id, m, l) = before.next().unwrap_or_default();
                    contender(id, m, l)
                }
            };
            out.push(next);
        }
    }
}

#[cfg(test)]
mod tests;
