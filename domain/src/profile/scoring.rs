//! What a scoring profile computes: where each signal's value is in a day's row, the points
//! of its terms, the main score and an event's hourly points.

use super::{ScoringProfile, Transform};
use crate::vocabulary::{CarryOver, DailyMetrics, Event, EventKind, SignalKind};

/// Where a signal's value is in a day's row: a built-in counter or a custom signal's slot
/// (its place among the profile's custom signals, in name order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalRef {
    /// Views.
    Views,
    /// Likes net of unlikes.
    Likes,
    /// Orders.
    Orders,
    /// Sum of order amounts.
    OrderAmount,
    /// A custom signal's slot.
    Custom(u8),
}

impl SignalRef {
    /// The signal's value in `metrics`.
    pub fn value(self, metrics: &DailyMetrics) -> i64 {
        match self {
            Self::Views => metrics.views,
            Self::Likes => metrics.likes,
            Self::Orders => metrics.orders,
            Self::OrderAmount => metrics.order_amount,
            Self::Custom(slot) => metrics.custom[usize::from(slot)],
        }
    }
}

/// A term resolved to its signal's place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreTerm {
    /// The signal.
    pub signal: SignalRef,
    /// Its weight.
    pub weight: f64,
    /// Its transform.
    pub transform: Transform,
}

impl ScoreTerm {
    /// `transform(value) · weight`, in this order (the original `ln_1p(amount) · w`).
    pub fn points(&self, value: i64) -> f64 {
        match self.transform {
            Transform::Linear => value as f64 * self.weight,
            Transform::Log1p => (value as f64).ln_1p() * self.weight,
        }
    }
}

/// A tie-break axis resolved: what it reads of a product.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AxisRef {
    /// A signal's value, higher is better.
    Signal(SignalRef),
    /// The latest event, newer is better.
    Recency,
}

impl ScoringProfile {
    /// What a day with main score `main` hands to the next: `floor(main)`, clamped to the
    /// range the encoding represents exactly, so that what is carried is what the day's
    /// breakdown showed.
    pub fn carried_from(&self, main: f64) -> CarryOver {
        let floor = main.floor();
        let largest = i64::try_from(self.layout().bound() - 1).unwrap_or(i64::MAX);
        if floor.is_nan() || floor <= 0.0 { CarryOver(0) } else { CarryOver((floor as i64).min(largest)) }
    }

    /// `main = Σ points of the terms, in order + carried · carry_over`, added left to right
    /// (for the built-in profile exactly the original expression).
    pub fn main_score(&self, metrics: &DailyMetrics, carried: CarryOver) -> f64 {
        self.main_without_carry(metrics) + carried.0 as f64 * self.spec.carry_over
    }

    /// The terms alone (the weekly window's main score).
    pub fn main_without_carry(&self, metrics: &DailyMetrics) -> f64 {
        let mut points = self.terms.iter().map(|t| t.points(t.signal.value(metrics)));
        // Starting from the first term rather than 0.0 keeps the original bits.
        let first = points.next().unwrap_or(0.0);
        points.fold(first, |sum, p| sum + p)
    }

    /// What one fresh event adds to the hourly approximation: the points of every term its
    /// signal feeds, the event's value alone transformed (a LIKE's +0.2, an UNLIKE's −0.2,
    /// an ORDER's `0.6·ln_1p(amount)` for the built-in profile). A retraction adds nothing of
    /// its own: what it takes away is the negative of its original's points.
    pub fn hourly_points(&self, event: &Event) -> f64 {
        let (fed, n) = match event.kind {
            EventKind::View => ([(SignalRef::Views, 1), (SignalRef::Views, 0)], 1),
            EventKind::Like | EventKind::Unlike => ([(SignalRef::Likes, 1), (SignalRef::Likes, 0)], 1),
            EventKind::Order => ([(SignalRef::Orders, 1), (SignalRef::OrderAmount, event.amount)], 2),
            EventKind::Signal(kind) => {
                let Some((slot, _)) = self.custom_signal(&event.signal) else { return 0.0 };
                let value = if kind == SignalKind::Count { 1 } else { event.amount };
                ([(SignalRef::Custom(slot), value), (SignalRef::Custom(slot), 0)], 1)
            }
            // Its effect is the original's, taken back: the negative of the original's points.
            EventKind::Retract => return 0.0,
        };
        let mut total: Option<f64> = None;
        for term in &self.terms {
            for (signal, value) in &fed[..n] {
                if term.signal == *signal {
                    let p = term.points(*value);
                    total = Some(total.map_or(p, |t| t + p));
                }
            }
        }
        let total = total.unwrap_or(0.0);
        if event.kind == EventKind::Unlike { -total } else { total }
    }
}
