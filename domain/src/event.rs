//! Shopper events and the rules an event must satisfy before anything is written.

use std::fmt;

use chrono::{DateTime, Duration, Utc};

use super::profile::ScoringProfile;
use super::vocabulary::{Event, EventKind, SignalKind};

/// Longest accepted event id.
pub const MAX_EVENT_ID_LEN: usize = 128;
/// Largest accepted order amount, in the currency's minor unit.
pub const MAX_ORDER_AMOUNT: i64 = 1_000_000_000_000;
/// How far ahead of the server clock an event may claim to have happened.
pub const MAX_CLOCK_SKEW: Duration = Duration::minutes(5);

/// The type an event was sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawKind {
    /// One of the four built-in events.
    Event(EventKind),
    /// A profile's custom signal (`EVENT_TYPE_SIGNAL`), named by the event's `signal`.
    Signal,
}

/// The most of a rejected signal name a message repeats.
const QUOTED_SIGNAL: usize = 64;

/// An event as received, before validation. `kind` is `None` for UNSPECIFIED or an unknown
/// wire value.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEvent {
    /// Caller-chosen idempotency key.
    pub event_id: String,
    /// Product the event is about.
    pub product_id: i64,
    /// What happened, when known.
    pub kind: Option<RawKind>,
    /// The custom signal of a SIGNAL event; empty for the others.
    pub signal: String,
    /// The event a RETRACT takes back; empty for the others.
    pub retracts: String,
    /// The shopper or session, when given.
    pub actor_id: String,
    /// Order amount (ORDER) or 0.
    pub amount: i64,
    /// When it happened; `None` when the caller left it out.
    pub occurred_at: Option<DateTime<Utc>>,
}

/// Which field of an event broke which rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Field name as on the wire (`event_id`, `product_id`, `type`, `amount`, `occurred_at`).
    pub field: &'static str,
    /// What is wrong, phrased so a caller can fix it.
    pub reason: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// The window of acceptable `occurred_at` values around the server clock.
#[derive(Debug, Clone, Copy)]
pub struct AcceptWindow {
    /// The server's current time.
    pub now: DateTime<Utc>,
    /// Oldest accepted age, in days.
    pub accept_days: u32,
}

impl AcceptWindow {
    /// The oldest `occurred_at` accepted: also the oldest original a retraction may take
    /// back, so that a redelivered event is either still in the ledger or refused as too old.
    pub fn oldest(&self) -> DateTime<Utc> {
        self.now - Duration::days(i64::from(self.accept_days))
    }
}

impl RawEvent {
    /// Checks every rule of an event (id 1–128 printable ASCII, product ≥ 1, a known type,
    /// an amount only on ORDER and within 0…10^12, a time at most 5 minutes ahead and at most
    /// the accept days old); the first broken rule is reported. A SIGNAL event names a custom
    /// signal of `profile` (the built-in profile has none, so every name is unknown): a count
    /// signal takes amount 0, an amount signal 0…10^12.
    pub fn validate(self, window: AcceptWindow, profile: &ScoringProfile) -> Result<Event, FieldError> {
        let err = |field, reason: String| Err(FieldError { field, reason });
        if self.event_id.is_empty() || self.event_id.len() > MAX_EVENT_ID_LEN {
            return err("event_id", format!("must be 1-{MAX_EVENT_ID_LEN} characters, got {}", self.event_id.len()));
        }
        if !self.event_id.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
            return err("event_id", "must be printable ASCII".into());
        }
        if self.product_id < 1 {
            return err("product_id", format!("must be >= 1, got {}", self.product_id));
        }
        let kind = match self.kind {
            None => return err("type", "must be VIEW, LIKE, UNLIKE, ORDER, SIGNAL or RETRACT".into()),
            Some(RawKind::Signal) if self.signal.is_empty() => {
                return err("signal", "is required for SIGNAL".into());
            }
            Some(RawKind::Signal) => match profile.custom_signal(&self.signal) {
                Some((_, kind)) => EventKind::Signal(kind),
                None => {
                    let name: String = self.signal.chars().take(QUOTED_SIGNAL).collect();
                    let more = if name.len() < self.signal.len() { "…" } else { "" };
                    return err("signal", format!("unknown {name:?}{more}"));
                }
            },
            Some(RawKind::Event(kind)) if !self.signal.is_empty() => {
                return err("signal", format!("must be empty for {}", kind.name()));
            }
            Some(RawKind::Event(kind)) => kind,
        };
        match kind {
            EventKind::Order if !(0..=MAX_ORDER_AMOUNT).contains(&self.amount) => {
                return err("amount", format!("must be 0..={MAX_ORDER_AMOUNT} for ORDER, got {}", self.amount));
            }
            EventKind::Order => {}
            EventKind::Signal(SignalKind::Amount) if !(0..=MAX_ORDER_AMOUNT).contains(&self.amount) => {
                let signal = &self.signal;
                return err(
                    "amount",
                    format!("must be 0..={MAX_ORDER_AMOUNT} for signal {signal:?}, got {}", self.amount),
                );
            }
            EventKind::Signal(SignalKind::Amount) => {}
            EventKind::Signal(SignalKind::Count) if self.amount != 0 => {
                return err("amount", format!("must be 0 for count signal {:?}", self.signal));
            }
            other if self.amount != 0 => {
                return err("amount", format!("must be 0 for {}", other.name()));
            }
            _ => {}
        }
        match kind {
            EventKind::Retract if self.retracts.is_empty() => {
                return err("retracts", "is required for RETRACT: the event_id of the event taken back".into());
            }
            EventKind::Retract if !is_id(&self.retracts) => {
                return err("retracts", format!("must be 1-{MAX_EVENT_ID_LEN} printable ASCII characters"));
            }
            EventKind::Retract if self.retracts == self.event_id => {
                return err("retracts", "must name another event than the retraction itself".into());
            }
            EventKind::Retract => {}
            other if !self.retracts.is_empty() => {
                return err("retracts", format!("must be empty for {}", other.name()));
            }
            _ => {}
        }
        if !self.actor_id.is_empty() && !is_id(&self.actor_id) {
            return err("actor_id", format!("must be empty or 1-{MAX_EVENT_ID_LEN} printable ASCII characters"));
        }
        let Some(occurred_at) = self.occurred_at else {
            return err("occurred_at", "is required".into());
        };
        if occurred_at > window.now + MAX_CLOCK_SKEW {
            return err("occurred_at", format!("{occurred_at} is more than 5 minutes in the future"));
        }
        if occurred_at < window.oldest() {
            return err("occurred_at", format!("{occurred_at} is older than {} days", window.accept_days));
        }
        let event = Event {
            event_id: self.event_id,
            product_id: self.product_id,
            kind,
            signal: self.signal,
            retracts: self.retracts,
            actor_id: self.actor_id,
            amount: self.amount,
            occurred_at,
        };
        if let Some((signal, cap)) = profile.cap_of(&event)
            && cap.actor_required
            && event.actor_id.is_empty()
        {
            return err("actor_id", format!("is required for {} by the scoring profile", profile.signal_name(signal)));
        }
        Ok(event)
    }
}

/// Whether `id` is 1–128 printable ASCII characters, as event ids are.
fn is_id(id: &str) -> bool {
    (1..=MAX_EVENT_ID_LEN).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window() -> AcceptWindow {
        AcceptWindow { now: "2026-04-09T12:00:00Z".parse().expect("valid"), accept_days: 7 }
    }

    fn built_in() -> ScoringProfile {
        ScoringProfile::built_in()
    }

    /// The built-in profile with a count and an amount signal declared.
    fn with_signals() -> ScoringProfile {
        let mut spec = ScoringProfile::built_in().spec().clone();
        spec.signals.insert("cart_adds".into(), SignalKind::Count);
        spec.signals.insert("refunds".into(), SignalKind::Amount);
        ScoringProfile::new(spec).expect("valid")
    }

    fn raw() -> RawEvent {
        RawEvent {
            event_id: "e-1".into(),
            product_id: 7,
            kind: Some(RawKind::Event(EventKind::View)),
            amount: 0,
            occurred_at: Some("2026-04-09T11:00:00Z".parse().expect("valid")),
            signal: String::new(),
            retracts: String::new(),
            actor_id: String::new(),
        }
    }

    #[test]
    fn a_retraction_names_another_event_and_carries_nothing_else() {
        let retract = |retracts: &str| RawEvent {
            event_id: "r-1".into(),
            kind: Some(RawKind::Event(EventKind::Retract)),
            retracts: retracts.into(),
            ..raw()
        };
        let e = retract("o-1").validate(window(), &built_in()).expect("valid");
        assert_eq!((e.kind, e.retracts.as_str()), (EventKind::Retract, "o-1"));
        let refused = |r: RawEvent| r.validate(window(), &built_in()).expect_err("refused").to_string();
        assert!(refused(retract("")).starts_with("retracts: is required"));
        assert!(refused(retract("r-1")).starts_with("retracts: must name another event"));
        assert!(refused(retract(&"x".repeat(129))).starts_with("retracts: must be 1-128"));
        assert!(refused(retract("tab\t")).starts_with("retracts: must be 1-128"));
        assert_eq!(refused(RawEvent { amount: 5, ..retract("o-1") }), "amount: must be 0 for RETRACT");
        assert_eq!(refused(RawEvent { retracts: "o-1".into(), ..raw() }), "retracts: must be empty for VIEW");
    }

    #[test]
    fn a_profile_may_require_an_actor_for_a_capped_signal() {
        let mut spec = with_signals().spec().clone();
        spec.caps.insert("views".into(), crate::cap::Cap { per_actor: Some(1), actor_required: true });
        let profile = ScoringProfile::new(spec).expect("valid");
        let refused = raw().validate(window(), &profile).expect_err("no actor");
        assert_eq!(refused.field, "actor_id");
        assert_eq!(refused.reason, "is required for views by the scoring profile");
        let with_actor = RawEvent { actor_id: "shopper-1".into(), ..raw() };
        assert_eq!(with_actor.validate(window(), &profile).expect("valid").actor_id, "shopper-1");
        // Other signals take events without an actor.
        let cart = RawEvent { kind: Some(RawKind::Signal), signal: "cart_adds".into(), ..raw() };
        assert!(cart.validate(window(), &profile).is_ok());
    }

    #[test]
    fn an_actor_is_optional_and_shaped_like_an_id() {
        let with = |actor: &str| RawEvent { actor_id: actor.into(), ..raw() };
        assert_eq!(with("").validate(window(), &built_in()).expect("valid").actor_id, "");
        assert_eq!(with("shopper-9").validate(window(), &built_in()).expect("valid").actor_id, "shopper-9");
        for bad in ["x".repeat(129), "café".to_string()] {
            assert_eq!(field_of(with(&bad)), "actor_id");
        }
    }

    fn field_of(r: RawEvent) -> &'static str {
        r.validate(window(), &built_in()).expect_err("must be rejected").field
    }

    #[test]
    fn a_well_formed_event_passes() {
        let e = raw().validate(window(), &built_in()).expect("valid");
        assert_eq!((e.product_id, e.kind), (7, EventKind::View));
        let order = RawEvent { kind: Some(RawKind::Event(EventKind::Order)), amount: MAX_ORDER_AMOUNT, ..raw() };
        assert!(order.validate(window(), &built_in()).is_ok());
        let id = RawEvent { event_id: "x".repeat(128), ..raw() };
        assert!(id.validate(window(), &built_in()).is_ok());
    }

    #[test]
    fn each_rule_names_its_field() {
        assert_eq!(field_of(RawEvent { event_id: String::new(), ..raw() }), "event_id");
        assert_eq!(field_of(RawEvent { event_id: "x".repeat(129), ..raw() }), "event_id");
        assert_eq!(field_of(RawEvent { event_id: "tab\there".into(), ..raw() }), "event_id");
        assert_eq!(field_of(RawEvent { event_id: "café".into(), ..raw() }), "event_id");
        assert_eq!(field_of(RawEvent { product_id: 0, ..raw() }), "product_id");
        assert_eq!(field_of(RawEvent { product_id: -5, ..raw() }), "product_id");
        assert_eq!(field_of(RawEvent { kind: None, ..raw() }), "type");
        assert_eq!(field_of(RawEvent { amount: 1, ..raw() }), "amount");
        for kind in [EventKind::Like, EventKind::Unlike] {
            assert_eq!(field_of(RawEvent { kind: Some(RawKind::Event(kind)), amount: 3, ..raw() }), "amount");
        }
        let order = |amount| RawEvent { kind: Some(RawKind::Event(EventKind::Order)), amount, ..raw() };
        assert_eq!(field_of(order(-1)), "amount");
        assert_eq!(field_of(order(MAX_ORDER_AMOUNT + 1)), "amount");
        assert_eq!(field_of(RawEvent { occurred_at: None, ..raw() }), "occurred_at");
        let at = |s: &str| RawEvent { occurred_at: Some(s.parse().expect("valid")), ..raw() };
        assert_eq!(field_of(at("2026-04-09T12:05:01Z")), "occurred_at");
        assert!(at("2026-04-09T12:05:00Z").validate(window(), &built_in()).is_ok());
        assert_eq!(field_of(at("2026-04-02T11:59:59Z")), "occurred_at");
        assert!(at("2026-04-02T12:00:00Z").validate(window(), &built_in()).is_ok());
    }

    #[test]
    fn signals_are_checked_against_the_profile() {
        let signal = |name: &str| RawEvent { kind: Some(RawKind::Signal), signal: name.into(), ..raw() };
        let refused = |r: RawEvent| r.validate(window(), &built_in()).expect_err("rejected").to_string();
        assert_eq!(refused(signal("cart_adds")), "signal: unknown \"cart_adds\"");
        assert_eq!(refused(signal("")), "signal: is required for SIGNAL");
        assert_eq!(refused(signal(&"x".repeat(10_000))), format!("signal: unknown {:?}…", "x".repeat(64)));
        assert_eq!(refused(RawEvent { signal: "cart_adds".into(), ..raw() }), "signal: must be empty for VIEW");

        let declared = with_signals();
        let checked = |r: RawEvent| r.validate(window(), &declared);
        let cart = checked(signal("cart_adds")).expect("a declared count signal");
        assert_eq!(
            (cart.kind, cart.signal.as_str(), cart.kind.code()),
            (EventKind::Signal(SignalKind::Count), "cart_adds", 5)
        );
        let refund = |amount| RawEvent { amount, ..signal("refunds") };
        assert_eq!(checked(refund(MAX_ORDER_AMOUNT)).expect("in range").kind, EventKind::Signal(SignalKind::Amount));
        let reason = |r: RawEvent| checked(r).expect_err("rejected").to_string();
        assert_eq!(
            reason(RawEvent { amount: 1, ..signal("cart_adds") }),
            "amount: must be 0 for count signal \"cart_adds\""
        );
        assert!(reason(refund(-1)).starts_with("amount: must be 0..=1000000000000 for signal \"refunds\""));
        assert!(reason(refund(MAX_ORDER_AMOUNT + 1)).starts_with("amount:"));
        assert_eq!(reason(signal("wishlist")), "signal: unknown \"wishlist\"");
    }

    #[test]
    fn messages_say_what_to_fix() {
        let e = RawEvent { amount: 3, ..raw() }.validate(window(), &built_in()).expect_err("rejected");
        assert_eq!(e.to_string(), "amount: must be 0 for VIEW");
    }

    #[test]
    fn stored_codes_are_the_wire_numbers() {
        let codes = [
            EventKind::View,
            EventKind::Like,
            EventKind::Unlike,
            EventKind::Order,
            EventKind::Signal(SignalKind::Count),
        ]
        .map(EventKind::code);
        assert_eq!(codes, [1, 2, 3, 4, 5]);
    }
}
