//! The words every part of the score engine shares, and nothing else: what a shopper did
//! ([`Event`]), a product's counters of a day ([`DailyMetrics`]), what a day inherits
//! ([`CarryOver`]) and what a custom signal counts ([`SignalKind`]).
//!
//! A leaf: it imports nothing of the crate, so `event`, `profile` and `score` can all use it
//! without using each other in a circle.

use chrono::{DateTime, Utc};

/// Most custom signals a profile declares (each is one more column of a day's row).
pub const MAX_CUSTOM_SIGNALS: usize = 8;

/// What a custom signal counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SignalKind {
    /// Each event counts 1 (its amount must be 0).
    Count,
    /// Each event adds its amount, 0 … 10^12.
    Amount,
}

/// What a shopper did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// Looked at the product page.
    View,
    /// Liked the product.
    Like,
    /// Took a like back.
    Unlike,
    /// Ordered the product.
    Order,
    /// A custom signal of the scoring profile (named by [`Event::signal`]), of this kind.
    Signal(SignalKind),
    /// Took an earlier event back (named by [`Event::retracts`]).
    Retract,
}

impl EventKind {
    /// Stable numeric code stored in SQL (the same numbers as the wire enum).
    pub fn code(self) -> i16 {
        match self {
            Self::View => 1,
            Self::Like => 2,
            Self::Unlike => 3,
            Self::Order => 4,
            Self::Signal(_) => 5,
            Self::Retract => 6,
        }
    }

    /// The kind of a stored [`EventKind::code`]; a SIGNAL's kind comes from its signal
    /// (`None` when that is unknown, or for a code no kind has).
    pub fn from_code(code: i16, signal: Option<SignalKind>) -> Option<Self> {
        match code {
            1 => Some(Self::View),
            2 => Some(Self::Like),
            3 => Some(Self::Unlike),
            4 => Some(Self::Order),
            5 => signal.map(Self::Signal),
            6 => Some(Self::Retract),
            _ => None,
        }
    }

    /// Upper-case name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::View => "VIEW",
            Self::Like => "LIKE",
            Self::Unlike => "UNLIKE",
            Self::Order => "ORDER",
            Self::Signal(_) => "SIGNAL",
            Self::Retract => "RETRACT",
        }
    }
}

/// A validated event: every field satisfies the rules of `RawEvent::validate` (in `event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Idempotency key, 1–128 printable ASCII characters.
    pub event_id: String,
    /// Product, ≥ 1.
    pub product_id: i64,
    /// What happened.
    pub kind: EventKind,
    /// The custom signal of a SIGNAL event, empty for the others.
    pub signal: String,
    /// The event a RETRACT takes back; empty for the others.
    pub retracts: String,
    /// The shopper or session it comes from; empty when not given.
    pub actor_id: String,
    /// Order amount for ORDER, a SIGNAL's amount for an amount signal, otherwise 0.
    pub amount: i64,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
}

/// One product's counters for one day (or summed over a week), as stored in
/// `product_daily_metrics` (the profile's custom signals in its `signal_*` columns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DailyMetrics {
    /// Views that day.
    pub views: i64,
    /// Likes that day (never below zero).
    pub likes: i64,
    /// Orders that day.
    pub orders: i64,
    /// Sum of order amounts that day, in the currency's minor unit.
    pub order_amount: i64,
    /// The profile's custom signals by slot (0 for a slot the profile does not declare).
    pub custom: [i64; MAX_CUSTOM_SIGNALS],
}

impl DailyMetrics {
    /// Built-in counters only.
    pub fn counts(views: i64, likes: i64, orders: i64, order_amount: i64) -> Self {
        Self { views, likes, orders, order_amount, custom: [0; MAX_CUSTOM_SIGNALS] }
    }
}

/// The integer part of yesterday's main score, which is what today inherits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CarryOver(pub i64);

impl CarryOver {
    /// A product with no event on a day is still ranked when it inherits at least 1.
    pub fn keeps_ranked(&self) -> bool {
        self.0 >= 1
    }
}

/// What retractions took from one product's counts of one day: the events taken back,
/// whichever arrived first (counted in none of the day's counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retracted {
    /// Views taken back.
    pub views: i64,
    /// Likes taken back.
    pub likes: i64,
    /// Orders taken back.
    pub orders: i64,
    /// Their amounts.
    pub order_amount: i64,
}

impl Retracted {
    /// `event` taken back as well.
    pub fn add(&mut self, event: &Event) {
        match event.kind {
            EventKind::View => self.views += 1,
            EventKind::Like => self.likes += 1,
            EventKind::Order => {
                self.orders += 1;
                self.order_amount = self.order_amount.saturating_add(event.amount);
            }
            EventKind::Unlike | EventKind::Signal(_) | EventKind::Retract => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_comes_back_from_its_code() {
        let kinds = [
            EventKind::View,
            EventKind::Like,
            EventKind::Unlike,
            EventKind::Order,
            EventKind::Signal(SignalKind::Count),
            EventKind::Signal(SignalKind::Amount),
            EventKind::Retract,
        ];
        for kind in kinds {
            let signal = match kind {
                EventKind::Signal(s) => Some(s),
                _ => None,
            };
            assert_eq!(EventKind::from_code(kind.code(), signal), Some(kind), "{kind:?}");
        }
        assert_eq!(EventKind::from_code(5, None), None, "a signal of unknown kind");
        assert_eq!(EventKind::from_code(0, None), None);
        assert_eq!(EventKind::from_code(7, None), None);
    }
}
