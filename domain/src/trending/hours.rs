//! The hours a trending population is held as, between a recompute's read and a live
//! pass's changes.

use super::{TrendingContender, TrendingHour, Weights, in_window};
use crate::profile::ScoringProfile;
use crate::vocabulary::DailyMetrics;

/// One hourly metrics row as SQL holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HourRow {
    pub product_id: i64,
    /// The hour's start, Unix microseconds.
    pub start_us: i64,
    /// The hour's counters.
    pub metrics: DailyMetrics,
    /// The latest `occurred_at` counted in the hour, Unix microseconds.
    pub last_event_us: i64,
}

/// The hours of a profile's trending population: every product's hours, ordered by product
/// then hour, each scored once. A recompute builds it from the window's rows; a live pass
/// keeps it and applies the rows changed since ([`TrendingHours::apply`]): either way the
/// same rows give the same list, and so the same doubles at the same T.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrendingHours {
    hours: Vec<(i64, TrendingHour)>,
}

impl TrendingHours {
    /// The hours of `rows` (any order; a row given twice keeps its last) under `profile`.
    pub fn of(profile: &ScoringProfile, rows: impl IntoIterator<Item = HourRow>) -> Self {
        let mut hours = Self::default();
        hours.apply(profile, rows);
        hours
    }

    /// The hours of rows already scored ([`TrendingHours::score`]), any order.
    pub fn of_scored(scored: Vec<(i64, TrendingHour)>) -> Self {
        let mut hours = Self::default();
        hours.apply_scored(scored);
        hours
    }

    /// Hours held.
    pub fn len(&self) -> usize {
        self.hours.len()
    }

    /// Whether no hour is held.
    pub fn is_empty(&self) -> bool {
        self.hours.is_empty()
    }

    /// `row` scored under `profile`, as [`TrendingHours::apply_scored`] takes it.
    pub fn score(profile: &ScoringProfile, row: &HourRow) -> (i64, TrendingHour) {
        (row.product_id, TrendingHour::of(profile, row.start_us, &row.metrics, row.last_event_us))
    }

    /// Replaces the hours of `rows` (rows read again after a change; new hours are added).
    pub fn apply(&mut self, profile: &ScoringProfile, rows: impl IntoIterator<Item = HourRow>) {
        self.apply_scored(rows.into_iter().map(|r| Self::score(profile, &r)).collect());
    }

    /// [`TrendingHours::apply`] of rows already scored ([`TrendingHours::score`]).
    pub fn apply_scored(&mut self, mut changed: Vec<(i64, TrendingHour)>) {
        if changed.is_empty() {
            return;
        }
        // Stable: of a row given twice, the later stays last and wins the merge below.
        changed.sort_by_key(|(p, h)| (*p, h.start_us));
        let held = std::mem::take(&mut self.hours);
        let mut merged = Vec::with_capacity(held.len() + changed.len());
        let (mut a, mut b) = (held.into_iter().peekable(), changed.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => {
                    let (kx, ky) = ((x.0, x.1.start_us), (y.0, y.1.start_us));
                    if kx < ky {
                        a.next()
                    } else {
                        if kx == ky {
                            a.next();
                        }
                        b.next()
                    }
                }
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            if let Some(item) = next {
                if merged.last().is_some_and(|l: &(i64, TrendingHour)| (l.0, l.1.start_us) == (item.0, item.1.start_us))
                {
                    merged.pop();
                }
                merged.push(item);
            }
        }
        self.hours = merged;
    }

    /// Forgets the hours out of the window at `t_us` for good (they never count again).
    pub fn forget_before(&mut self, t_us: i64) {
        self.hours.retain(|(_, h)| h.start_us > t_us || in_window(h.start_us, t_us));
    }

    /// Every product with an hour in the window at `t_us`, in product order.
    pub fn contenders(&self, profile: &ScoringProfile, t_us: i64, half_life_us: i64) -> Vec<TrendingContender> {
        let mut weights = Weights::new(t_us, half_life_us);
        self.hours
            .chunk_by(|a, b| a.0 == b.0)
            .filter_map(|run| TrendingContender::of_hours(profile, run[0].0, run.iter().map(|(_, h)| h), &mut weights))
            .collect()
    }

    /// One product's hours, oldest first.
    pub fn of_product(&self, product_id: i64) -> Vec<TrendingHour> {
        let start = self.hours.partition_point(|(p, _)| *p < product_id);
        self.hours[start..].iter().take_while(|(p, _)| *p == product_id).map(|(_, h)| *h).collect()
    }
}
