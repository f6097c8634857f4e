//! Per-shopper caps: a count signal (views, or a custom count) counted at most N times per
//! actor, product and day, so one client sending ten thousand views moves a product as far
//! as one shopper does.
//!
//! The value of a capped signal for a (product, day) is Σ over actors of
//! `min(N, that actor's non-retracted events)`, plus the events without an actor. It depends
//! only on each actor's final count, so it does not depend on arrival order. The store keeps
//! one count per (day, product, signal, actor) and changes a day's value by
//! `min(N, after) − min(N, before)` for every actor row a batch changes ([`settle`]).

/// Most events a cap lets count per actor, product and day.
pub const MAX_PER_ACTOR: u32 = 1_000_000;

/// How a profile caps one count signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cap {
    /// At most this many events of one actor count per product and day; `None`: all count.
    pub per_actor: Option<u32>,
    /// Events without an `actor_id` are refused.
    pub actor_required: bool,
}

impl Cap {
    /// What `events` of one actor count under a cap of `per_actor`.
    pub fn counted(per_actor: u32, events: i64) -> i64 {
        events.clamp(0, i64::from(per_actor))
    }
}

/// What one batch does to one actor's count: events added, and events taken back by
/// retractions, each in batch order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActorChange {
    /// Events of the actor counted in.
    pub added: usize,
    /// Events of the actor taken back.
    pub taken: usize,
}

impl ActorChange {
    /// The change to the stored count.
    pub fn net(self) -> i64 {
        self.added as i64 - self.taken as i64
    }
}

/// What a change did once the count after it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// The change to the signal's value for the (product, day): `min(N, after) − min(N, before)`.
    pub delta: i64,
    /// How many of the added events counted (the first ones, in batch order).
    pub counted_added: usize,
    /// How many of the withdrawals took a counted event back (the first ones).
    pub counted_taken: usize,
}

impl Settled {
    /// The added events the cap removed.
    pub fn capped(&self, change: ActorChange) -> usize {
        change.added - self.counted_added
    }
}

/// Settles `change` of one actor's count, which is `after` once the change is applied.
///
/// The delta is exact. Which events "counted" is a choice only the hourly ranking and the
/// capped counter see: the withdrawals take counted events back as far as the delta allows,
/// so that a shopper's new view and the retraction of an old one, in one batch, read as one
/// view in and one out.
pub fn settle(per_actor: u32, change: ActorChange, after: i64) -> Settled {
    let before = after - change.net();
    let delta = Cap::counted(per_actor, after) - Cap::counted(per_actor, before);
    // k_added − k_taken = delta, with 0 ≤ k_added ≤ added and 0 ≤ k_taken ≤ taken; delta is
    // within [−taken, added], so the largest k_taken fits.
    let counted_taken = (change.taken as i64).min(change.added as i64 - delta).max(0);
    let counted_added = (delta + counted_taken).clamp(0, change.added as i64);
    Settled { delta, counted_added: counted_added as usize, counted_taken: counted_taken as usize }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn distinct_viewers_count_once() {
        // Ten views from one actor in one batch: one counts, nine are capped.
        let s = settle(1, ActorChange { added: 10, taken: 0 }, 10);
        assert_eq!(s, Settled { delta: 1, counted_added: 1, counted_taken: 0 });
        assert_eq!(s.capped(ActorChange { added: 10, taken: 0 }), 9);
        // Another view of the same actor later: nothing.
        assert_eq!(settle(1, ActorChange { added: 1, taken: 0 }, 11).delta, 0);
    }

    #[test]
    fn a_retraction_frees_a_slot_only_when_it_takes_the_count_under_the_cap() {
        // Two views, cap 1: taking one back leaves one counted.
        assert_eq!(
            settle(1, ActorChange { added: 0, taken: 1 }, 1),
            Settled { delta: 0, counted_added: 0, counted_taken: 0 }
        );
        // Taking the last back frees the slot.
        assert_eq!(
            settle(1, ActorChange { added: 0, taken: 1 }, 0),
            Settled { delta: -1, counted_added: 0, counted_taken: 1 }
        );
        // A new view and the retraction of the old one in one batch: one in, one out.
        assert_eq!(
            settle(1, ActorChange { added: 1, taken: 1 }, 1),
            Settled { delta: 0, counted_added: 1, counted_taken: 1 }
        );
    }

    #[test]
    fn a_count_below_zero_counts_nothing() {
        // Only a profile change can leave one (a retraction of an event counted before the
        // cap existed): it counts as zero, never as a negative value.
        assert_eq!(Cap::counted(3, -2), 0);
        assert_eq!(settle(3, ActorChange { added: 0, taken: 1 }, -1).delta, 0);
    }

    /// An event of the model: (actor, or none), and whether a later retraction takes it back.
    #[derive(Debug, Clone)]
    struct ModelEvent {
        actor: Option<u8>,
        retracted: bool,
    }

    fn events() -> impl Strategy<Value = Vec<ModelEvent>> {
        prop::collection::vec(
            (prop::option::weighted(0.8, 0u8..6), any::<bool>())
                .prop_map(|(actor, r)| ModelEvent { actor, retracted: r }),
            0..60,
        )
    }

    proptest! {
        /// Any arrival order of the events and their retractions, cut into batches of any size
        /// and settled row by row, gives the value the definition computes from the events
        /// alone: Σ over actors of min(N, non-retracted) plus the unattributed events.
        #[test]
        fn settled_batches_give_the_defined_value(
            per_actor in 1u32..4,
            events in events(),
            order_seed in any::<u64>(),
            cuts in prop::collection::vec(1usize..8, 1..40),
        ) {
            let mut per: BTreeMap<u8, i64> = BTreeMap::new();
            let mut unattributed = 0i64;
            for e in events.iter().filter(|e| !e.retracted) {
                match e.actor {
                    Some(a) => *per.entry(a).or_default() += 1,
                    None => unattributed += 1,
                }
            }
            let expected: i64 = per.values().map(|n| Cap::counted(per_actor, *n)).sum::<i64>() + unattributed;

            // Steps: each event's arrival, and each retraction's after its event (a retraction
            // arriving first waits for it, as the store's does: its effect comes with the event).
            let mut steps: Vec<(usize, bool)> = Vec::new();
            for (i, e) in events.iter().enumerate() {
                steps.push((i, false));
                if e.retracted {
                    steps.push((i, true));
                }
            }
            let mut rng = order_seed;
            let mut shuffled = Vec::new();
            let mut pending: Vec<(usize, bool)> = steps;
            let mut arrived = BTreeSet::new();
            while !pending.is_empty() {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let k = (rng >> 33) as usize % pending.len();
                let (i, retract) = pending[k];
                if retract && !arrived.contains(&i) {
                    // The retraction waits; its event arrives first in this order.
                    let k = pending.iter().position(|s| *s == (i, false)).expect("pending");
                    arrived.insert(i);
                    shuffled.push(pending.remove(k));
                    continue;
                }
                if !retract {
                    arrived.insert(i);
                }
                shuffled.push(pending.remove(k));
            }

            let mut counts: BTreeMap<u8, i64> = BTreeMap::new();
            let mut value = 0i64;
            let mut at = 0;
            let mut cut = cuts.iter().cycle();
            while at < shuffled.len() {
                let end = (at + cut.next().copied().unwrap_or(1)).min(shuffled.len());
                let mut changes: BTreeMap<u8, ActorChange> = BTreeMap::new();
                for (i, retract) in &shuffled[at..end] {
                    match (events[*i].actor, retract) {
                        (Some(a), false) => changes.entry(a).or_default().added += 1,
                        (Some(a), true) => changes.entry(a).or_default().taken += 1,
                        (None, false) => value += 1,
                        (None, true) => value -= 1,
                    }
                }
                for (a, change) in changes {
                    let count = counts.entry(a).or_default();
                    *count += change.net();
                    let s = settle(per_actor, change, *count);
                    prop_assert!(s.counted_added <= change.added && s.counted_taken <= change.taken);
                    prop_assert_eq!(s.counted_added as i64 - s.counted_taken as i64, s.delta);
                    value += s.delta;
                }
                at = end;
            }
            prop_assert_eq!(value, expected);
        }
    }
}
