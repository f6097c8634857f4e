//! Conversions between the wire types of `ranking.v1` and the domain.

use chrono::{DateTime, NaiveDate, Utc};
use ranking_proto::v1 as pb;
use tonic::Status;

use super::error::invalid;
use crate::domain::encoding::EncodedScore;
use crate::domain::event::{EventKind, RawEvent};
use crate::ports::Outcome;

/// The wire event as a raw domain event (validation happens in `ingest`).
pub fn raw_event(e: pb::Event) -> RawEvent {
    let kind = match pb::EventType::try_from(e.r#type) {
        Ok(pb::EventType::View) => Some(EventKind::View),
        Ok(pb::EventType::Like) => Some(EventKind::Like),
        Ok(pb::EventType::Unlike) => Some(EventKind::Unlike),
        Ok(pb::EventType::Order) => Some(EventKind::Order),
        Ok(pb::EventType::Unspecified) | Err(_) => None,
    };
    let occurred_at =
        e.occurred_at.and_then(|t| DateTime::<Utc>::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?));
    RawEvent { event_id: e.event_id, product_id: e.product_id, kind, amount: e.amount, occurred_at }
}

/// The outcome on the wire.
pub fn outcome(o: Outcome) -> pb::RecordOutcome {
    match o {
        Outcome::Accepted => pb::RecordOutcome::Accepted,
        Outcome::Duplicate => pb::RecordOutcome::Duplicate,
    }
}

/// Which ranking a read asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// Exact daily ranking.
    Daily,
    /// Approximate hourly ranking.
    Hourly,
}

/// Parses the window; UNSPECIFIED means DAILY.
pub fn window(value: i32) -> Result<WindowKind, Status> {
    match pb::Window::try_from(value) {
        Ok(pb::Window::Unspecified | pb::Window::Daily) => Ok(WindowKind::Daily),
        Ok(pb::Window::Hourly) => Ok(WindowKind::Hourly),
        Err(_) => Err(invalid("window", format!("unknown value {value}; use WINDOW_DAILY or WINDOW_HOURLY"))),
    }
}

/// Parses `YYYY-MM-DD`; empty means `today`.
pub fn date(value: &str, today: NaiveDate) -> Result<NaiveDate, Status> {
    if value.is_empty() {
        return Ok(today);
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .ok()
        .filter(|_| value.len() == 10)
        .ok_or_else(|| invalid("date", format!("{value:?} is not a date in YYYY-MM-DD form")))
}

/// Checks an hour of day.
pub fn hour(value: u32) -> Result<u32, Status> {
    if value <= 23 { Ok(value) } else { Err(invalid("hour", format!("must be 0-23, got {value}"))) }
}

/// A ranking entry on the wire; daily scores carry their decoded breakdown.
pub fn ranked(rank: u64, product_id: i64, score: f64, window: WindowKind) -> pb::RankedProduct {
    let breakdown = match window {
        WindowKind::Daily => EncodedScore(score).decode().map(|b| pb::ScoreBreakdown {
            main_floor: i64::from(b.main_floor),
            view_norm: u32::from(b.view_norm),
            like_norm: u32::from(b.like_norm),
            recency_norm: u32::from(b.recency_norm),
        }),
        WindowKind::Hourly => None,
    };
    pb::RankedProduct { rank, product_id, score, breakdown }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_must_be_strict_iso() {
        let today = NaiveDate::from_ymd_opt(2026, 4, 9).expect("valid");
        assert_eq!(date("", today).expect("empty is today"), today);
        assert_eq!(date("2026-04-01", today).expect("valid").to_string(), "2026-04-01");
        for bad in ["2026-4-1", "2026-02-30", "20260401", "yesterday", "2026-04-01T00:00"] {
            let e = date(bad, today).expect_err(bad);
            assert!(e.message().starts_with("date: "), "{}", e.message());
        }
    }

    #[test]
    fn unknown_enums_are_rejected_or_unspecified() {
        assert_eq!(window(0).expect("unspecified"), WindowKind::Daily);
        assert_eq!(window(2).expect("hourly"), WindowKind::Hourly);
        assert!(window(9).expect_err("unknown").message().starts_with("window: "));
        let raw = raw_event(pb::Event { r#type: 42, ..Default::default() });
        assert_eq!(raw.kind, None);
        assert!(hour(24).is_err() && hour(23).is_ok());
    }

    #[test]
    fn negative_nanos_do_not_make_a_time() {
        let e = pb::Event { occurred_at: Some(prost_types::Timestamp { seconds: 1, nanos: -1 }), ..Default::default() };
        assert_eq!(raw_event(e).occurred_at, None);
    }
}
