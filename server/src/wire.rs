//! The wire types of `ranking.v1` that several edges of the service share, each converted in
//! one place: an event read into the domain's [`RawEvent`] (the gRPC service and the
//! event-bus decoders), and a window to and from the domain's [`Window`] (the gRPC service
//! and the ranking feed). Only the shape of a value is checked here (a timestamp in range, an
//! enum value the service knows); every rule is the application's.

use chrono::{DateTime, Utc};
use ranking_proto::v1 as pb;

use crate::app::invalid::Invalid;
use crate::domain::board::Window;
use crate::domain::event::{RawEvent, RawKind};
use crate::domain::vocabulary::EventKind;

/// The window of `field`; `None` for UNSPECIFIED (which each rule reads as it says).
pub fn window(field: &'static str, value: i32) -> Result<Option<Window>, Invalid> {
    match pb::Window::try_from(value) {
        Ok(pb::Window::Unspecified) => Ok(None),
        Ok(pb::Window::Daily) => Ok(Some(Window::Daily)),
        Ok(pb::Window::Hourly) => Ok(Some(Window::Hourly)),
        Ok(pb::Window::Weekly) => Ok(Some(Window::Weekly)),
        Ok(pb::Window::Trending) => Ok(Some(Window::Trending)),
        Err(_) => Err(Invalid::field(
            field,
            format!("unknown value {value}; use WINDOW_DAILY, WINDOW_HOURLY, WINDOW_WEEKLY or WINDOW_TRENDING"),
        )),
    }
}

/// A window on the wire.
pub fn wire_window(window: Window) -> pb::Window {
    match window {
        Window::Daily => pb::Window::Daily,
        Window::Hourly => pb::Window::Hourly,
        Window::Weekly => pb::Window::Weekly,
        Window::Trending => pb::Window::Trending,
    }
}

/// The wire event as a raw domain event (its rules are checked by ingest).
pub fn raw_event(e: pb::Event) -> Result<RawEvent, Invalid> {
    let kind = match pb::EventType::try_from(e.r#type) {
        Ok(pb::EventType::View) => Some(RawKind::Event(EventKind::View)),
        Ok(pb::EventType::Like) => Some(RawKind::Event(EventKind::Like)),
        Ok(pb::EventType::Unlike) => Some(RawKind::Event(EventKind::Unlike)),
        Ok(pb::EventType::Order) => Some(RawKind::Event(EventKind::Order)),
        Ok(pb::EventType::Signal) => Some(RawKind::Signal),
        Ok(pb::EventType::Retract) => Some(RawKind::Event(EventKind::Retract)),
        Ok(pb::EventType::Unspecified) | Err(_) => None,
    };
    let occurred_at = e.occurred_at.as_ref().map(|t| instant("occurred_at", t)).transpose()?;
    let (event_id, product_id, amount, signal) = (e.event_id, e.product_id, e.amount, e.signal);
    let (retracts, actor_id) = (e.retracts, e.actor_id);
    Ok(RawEvent { event_id, product_id, kind, amount, occurred_at, signal, retracts, actor_id })
}

/// The wire events of a batch, with the index of a malformed one in its error.
pub fn raw_events(events: Vec<pb::Event>) -> Result<Vec<RawEvent>, Invalid> {
    events.into_iter().enumerate().map(|(i, e)| raw_event(e).map_err(|err| err.within_element("events", i))).collect()
}

/// The instant a wire timestamp names, or why it names none, as the error of `field`.
pub fn instant(field: &'static str, t: &prost_types::Timestamp) -> Result<DateTime<Utc>, Invalid> {
    let nanos = u32::try_from(t.nanos)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .ok_or_else(|| Invalid::field(field, format!("nanos must be 0-999999999, got {}", t.nanos)))?;
    DateTime::<Utc>::from_timestamp(t.seconds, nanos)
        .ok_or_else(|| Invalid::field(field, format!("seconds {} is not a representable instant", t.seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_type_is_left_for_ingest_to_refuse() {
        let raw = raw_event(pb::Event { r#type: 42, ..Default::default() }).expect("converts");
        assert_eq!(raw.kind, None);
    }

    #[test]
    fn out_of_range_timestamps_say_what_is_wrong() {
        let at = |seconds, nanos| pb::Event {
            occurred_at: Some(prost_types::Timestamp { seconds, nanos }),
            ..Default::default()
        };
        let e = raw_event(at(1, -1)).expect_err("negative nanos");
        assert!(e.reason.contains("nanos"), "{}", e.reason);
        assert!(raw_event(at(1, 1_000_000_000)).expect_err("too many nanos").reason.contains("nanos"));
        assert!(raw_event(at(i64::MAX, 0)).expect_err("far future").reason.contains("seconds"));
        let e = raw_events(vec![at(1, 0), at(1, -1)]).expect_err("second is bad");
        assert_eq!(e.path.0[1], crate::app::invalid::PathSegment::Index(1));
        assert_eq!(raw_event(pb::Event::default()).expect("absent is for ingest to judge").occurred_at, None);
    }

    #[test]
    fn every_window_goes_to_the_wire_and_back_under_its_one_name() {
        for w in Window::ALL {
            let wire = wire_window(w);
            assert_eq!(window("window", wire as i32).expect("known"), Some(w));
            assert_eq!(wire.name(), w.name(), "the command line and the feed spell it as the server does");
        }
        assert_eq!(window("window", 0).expect("unset"), None);
        let unknown = window("windows", 9).expect_err("unknown");
        assert!(unknown.to_string().contains("windows"), "{unknown}");
    }
}
