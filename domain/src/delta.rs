//! The effect of a batch of events on one metrics row, folded so it can be applied with one
//! statement per table whatever the batch size.
//!
//! Views, orders and order amounts simply add up. Likes do not: an UNLIKE never takes the
//! count below zero, so a sequence of likes and unlikes is a *clamped walk*. Every such walk
//! is the function `x ↦ max(x + net, floor)` of the stored count `x ≥ 0`, and composing two
//! of them gives another of the same form. A batch therefore reduces to the pair
//! `(net, floor)` per row, and applying it in SQL as `likes + net` followed by
//! `GREATEST(likes, floor)` gives exactly what applying the events one by one would.

use super::vocabulary::{Event, EventKind};

/// A clamped walk `x ↦ max(x + net, floor)` over a non-negative counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LikeWalk {
    /// Sum of +1 (LIKE) and −1 (UNLIKE).
    pub net: i64,
    /// The value the walk yields from zero: `f(0)`, always `≥ max(net, 0)`.
    pub floor: i64,
}

impl LikeWalk {
    /// The walk followed by one more step of `step` (+1 or −1).
    pub fn then(self, step: i64) -> Self {
        let net = self.net + step;
        // f'(x) = max(max(x + net, floor) + step, 0) = max(x + net + step, floor + step, 0)
        // and, since x ≥ 0, the constant part is also bounded below by net + step.
        let floor = (self.floor + step).max(0).max(net);
        Self { net, floor }
    }

    /// Applies the walk to a stored count.
    pub fn apply(self, count: i64) -> i64 {
        (count + self.net).max(self.floor)
    }

    /// Whether the clamp can matter, i.e. `GREATEST(likes, floor)` must run after `+ net`.
    /// When `floor == net` (no UNLIKE ever reached zero) adding `net` is the whole effect.
    pub fn needs_clamp(self) -> bool {
        self.floor > self.net
    }
}

/// What a batch does to one metrics row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsDelta {
    /// Views to add.
    pub views: i64,
    /// Likes and unlikes as a clamped walk.
    pub likes: LikeWalk,
    /// Orders to add.
    pub orders: i64,
    /// Order amount to add.
    pub order_amount: i64,
    /// Latest `occurred_at` in the batch, Unix microseconds.
    pub last_event_us: i64,
}

impl MetricsDelta {
    /// Folds one more event in, in batch order.
    pub fn add(&mut self, event: &Event) {
        match event.kind {
            EventKind::View => self.views += 1,
            EventKind::Like => self.likes = self.likes.then(1),
            EventKind::Unlike => self.likes = self.likes.then(-1),
            EventKind::Order => {
                self.orders += 1;
                self.order_amount = self.order_amount.saturating_add(event.amount);
            }
            // A custom signal has tables of its own; here it only makes the day's row exist
            // and moves its latest event (the recency axis).
            EventKind::Signal(_) => {}
            // A retraction moves no row of its own: its effect is its original's, withdrawn.
            EventKind::Retract => return,
        }
        self.last_event_us = self.last_event_us.max(event.occurred_at.timestamp_micros());
    }

    /// Takes `original`'s contribution back, in batch order: a view, an order and its amount
    /// come off; a like comes off as an UNLIKE would (never below zero). The latest event is
    /// left as it is: it counts every recorded original, retracted or not, so it does not
    /// depend on the order the two arrive in.
    pub fn withdraw(&mut self, original: &Event) {
        match original.kind {
            EventKind::View => self.views -= 1,
            EventKind::Like => self.likes = self.likes.then(-1),
            EventKind::Order => {
                self.orders -= 1;
                self.order_amount = self.order_amount.saturating_sub(original.amount);
            }
            // Custom signals are withdrawn from their own columns by the caller.
            EventKind::Signal(_) => {}
            // Neither can be retracted: refused before anything is written.
            EventKind::Unlike | EventKind::Retract => {}
        }
    }

    /// Only the latest event of `original` (an event recorded after its retraction: it
    /// counts for nothing, but its time is the row's as any recorded event's).
    pub fn witness(&mut self, original: &Event) {
        self.last_event_us = self.last_event_us.max(original.occurred_at.timestamp_micros());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sequential(start: i64, steps: &[i64]) -> i64 {
        steps.iter().fold(start, |x, s| (x + s).max(0))
    }

    fn walk(steps: &[i64]) -> LikeWalk {
        steps.iter().fold(LikeWalk::default(), |w, s| w.then(*s))
    }

    #[test]
    fn unlike_on_an_empty_row_stays_at_zero() {
        let w = walk(&[-1, -1]);
        assert_eq!(w.apply(0), 0);
        assert_eq!(w.apply(1), 0);
        assert_eq!(w.apply(5), 3);
        assert!(w.needs_clamp());
    }

    #[test]
    fn like_unlike_like_from_zero_is_one() {
        assert_eq!(walk(&[-1, 1]).apply(0), 1);
        assert_eq!(walk(&[1, -1, 1]).apply(0), 1);
        assert!(!walk(&[1, 1, -1]).needs_clamp());
    }

    proptest! {
        #[test]
        fn folded_walk_equals_applying_steps_one_by_one(
            start in 0i64..50,
            steps in prop::collection::vec(prop_oneof![Just(1i64), Just(-1i64)], 0..60),
        ) {
            let w = walk(&steps);
            prop_assert_eq!(w.apply(start), sequential(start, &steps));
            // The SQL form: add net, then raise to floor (only when needed).
            let sql = start + w.net;
            let sql = if w.needs_clamp() { sql.max(w.floor) } else { sql };
            prop_assert_eq!(sql, sequential(start, &steps));
        }

        #[test]
        fn splitting_a_batch_does_not_change_the_result(
            start in 0i64..20,
            steps in prop::collection::vec(prop_oneof![Just(1i64), Just(-1i64)], 0..40),
            cut in 0usize..40,
        ) {
            let cut = cut.min(steps.len());
            let (a, b) = steps.split_at(cut);
            prop_assert_eq!(walk(b).apply(walk(a).apply(start)), walk(&steps).apply(start));
        }
    }
}
