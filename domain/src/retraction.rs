//! Retractions: what each event of a batch does once the events it may meet are known — the
//! originals already stored, and the retractions already stored (their claims).
//!
//! A retraction takes its original's contribution back exactly once, whichever arrives
//! first: before its original it is kept waiting, and the original, when it comes, counts for
//! nothing (only its time counts, as every recorded event's does); after it, the original's
//! counts come off the day the original counted towards. A second retraction of the same
//! event is a duplicate. Either order gives the same rows.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};

use super::vocabulary::{Event, EventKind};

/// A recorded event as far as taking it back needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Original {
    /// Its event id.
    pub event_id: String,
    /// Its product.
    pub product_id: i64,
    /// What it was.
    pub kind: EventKind,
    /// Its custom signal, for a SIGNAL event.
    pub signal: String,
    /// Its amount.
    pub amount: i64,
    /// The actor whose capped count it went into; empty when it counted without one (no
    /// actor, or no cap on its signal when it was recorded).
    pub actor_id: String,
    /// When it happened.
    pub occurred_at: DateTime<Utc>,
    /// The ranking day it counted towards.
    pub date: NaiveDate,
}

impl Original {
    /// `event`, recorded for `date`.
    pub fn of(event: &Event, date: NaiveDate) -> Self {
        Self {
            event_id: event.event_id.clone(),
            product_id: event.product_id,
            kind: event.kind,
            signal: event.signal.clone(),
            amount: event.amount,
            actor_id: event.actor_id.clone(),
            occurred_at: event.occurred_at,
            date,
        }
    }

    /// The event it was, for the rules that fold events into rows.
    pub fn event(&self) -> Event {
        Event {
            event_id: self.event_id.clone(),
            product_id: self.product_id,
            kind: self.kind,
            signal: self.signal.clone(),
            retracts: String::new(),
            actor_id: self.actor_id.clone(),
            amount: self.amount,
            occurred_at: self.occurred_at,
        }
    }
}

/// What one fresh event of a batch does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// An event counted as usual.
    Counted,
    /// An event recorded after its retraction: it counts for nothing but its time.
    Retracted,
    /// A retraction taking this original back now.
    Withdraws(Original),
    /// A retraction whose original has not been recorded yet: kept, waiting for it.
    Waits,
    /// A second retraction of an event already retracted: not recorded.
    Duplicate,
}

/// A retraction the recorded events refuse, for the field it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The event's place in the batch.
    pub index: usize,
    /// `product_id` or `retracts`.
    pub field: &'static str,
    /// Why.
    pub reason: String,
}

/// Why `retraction` cannot take `original` back, if it cannot: the field at fault and the
/// reason. The one rule, for the batch's own decision and for a writer that finds the
/// original committed by another transaction meanwhile: it must be of the retraction's
/// product, a VIEW, LIKE, ORDER or SIGNAL, and no older than `retractable_since`.
pub fn refusal(
    original: &Original,
    retraction: &Event,
    retractable_since: DateTime<Utc>,
) -> Option<(&'static str, String)> {
    let target = retraction.retracts.as_str();
    if original.product_id != retraction.product_id {
        let reason =
            format!("is {}, but {target:?} is an event of product {}", retraction.product_id, original.product_id);
        return Some(("product_id", reason));
    }
    if matches!(original.kind, EventKind::Unlike | EventKind::Retract) {
        return Some(("retracts", format!("{target:?} is {}, which cannot be retracted", original.kind.name())));
    }
    if original.occurred_at < retractable_since {
        return Some((
            "retracts",
            format!("{target:?} happened at {}, too long ago to be retracted", original.occurred_at),
        ));
    }
    None
}

/// The fate of each of `fresh` (batch index, event, its day), in batch order. `stored` holds
/// the recorded events the batch's retractions name, `claims` the product of every stored
/// retraction by the id it names (for the batch's retractions and its other events alike).
/// An original older than `retractable_since` cannot be taken back.
pub fn resolve(
    fresh: &[(usize, &Event, NaiveDate)],
    stored: &HashMap<String, Original>,
    claims: &HashMap<String, i64>,
    retractable_since: DateTime<Utc>,
) -> Result<Vec<Fate>, Refusal> {
    // Claims and originals as the batch goes: its own retractions claim, its own events can
    // be taken back by a later retraction of the batch.
    let mut claimed: HashMap<&str, i64> = claims.iter().map(|(id, p)| (id.as_str(), *p)).collect();
    let mut originals: HashMap<&str, Original> = HashMap::new();
    let mut fates = Vec::with_capacity(fresh.len());
    for (index, event, date) in fresh {
        let refuse = |field, reason: String| Refusal { index: *index, field, reason };
        if event.kind != EventKind::Retract {
            let fate = match claimed.get(event.event_id.as_str()) {
                // A retraction of another product's event with this id is not this event's.
                Some(product) if *product == event.product_id => Fate::Retracted,
                _ => Fate::Counted,
            };
            originals.insert(&event.event_id, Original::of(event, *date));
            fates.push(fate);
            continue;
        }
        let target = event.retracts.as_str();
        if claimed.contains_key(target) {
            fates.push(Fate::Duplicate);
            continue;
        }
        let original = originals.get(target).cloned().or_else(|| stored.get(target).cloned());
        let Some(original) = original else {
            claimed.insert(target, event.product_id);
            fates.push(Fate::Waits);
            continue;
        };
        if let Some((field, reason)) = refusal(&original, event, retractable_since) {
            return Err(refuse(field, reason));
        }
        claimed.insert(target, event.product_id);
        fates.push(Fate::Withdraws(original));
    }
    Ok(fates)
}

#[cfg(test)]
mod tests;
