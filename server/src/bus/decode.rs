//! A bus record's payload as a `ranking.v1.Event` (SPEC §10.1): protobuf binary, or JSON in
//! the proto3 JSON mapping — lowerCamel or proto field names, the enum by name or number,
//! int64 as a number or a decimal string, `occurredAt` as RFC 3339, `null` as the default.
//!
//! Only the shape is checked here, as `grpc::convert` does for the wire; the event's rules
//! are the ingest path's. Every failure is an [`Invalid`] naming the field, which becomes the
//! dead letter's `ranking-error`.

use chrono::DateTime;
use prost::Message;
use ranking_proto::v1 as pb;
use serde_json::Value;

use crate::app::invalid::{Invalid, quote};
use crate::domain::event::RawEvent;
use crate::grpc::convert::raw_event;

/// Largest record payload decoded; a larger one is invalid (an event is well under 1 KB, so
/// only a broken or hostile producer sends more).
pub const MAX_RECORD_BYTES: usize = 64 * 1024;

/// How records are encoded (`RANKING_BUS_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The proto3 JSON mapping of `ranking.v1.Event`.
    Json,
    /// `ranking.v1.Event` in protobuf binary.
    Protobuf,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "json" => Ok(Self::Json),
            "protobuf" => Ok(Self::Protobuf),
            _ => Err(format!("{s:?}: expected json or protobuf")),
        }
    }
}

/// The record's event, or why it is not one.
pub fn decode(format: Format, payload: &[u8]) -> Result<RawEvent, Invalid> {
    if payload.len() > MAX_RECORD_BYTES {
        return Err(Invalid::field("record", format!("{} bytes, at most {MAX_RECORD_BYTES}", payload.len())));
    }
    let event = match format {
        Format::Protobuf => pb::Event::decode(payload)
            .map_err(|e| Invalid::field("record", format!("not a ranking.v1.Event in protobuf binary: {e}")))?,
        Format::Json => json_event(payload)?,
    };
    raw_event(event)
}

fn json_event(payload: &[u8]) -> Result<pb::Event, Invalid> {
    let value: Value =
        serde_json::from_slice(payload).map_err(|e| Invalid::field("record", format!("not JSON: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(Invalid::field("record", "expected a JSON object (a ranking.v1.Event)"));
    };
    let mut event = pb::Event::default();
    let mut seen = [false; 6];
    for (key, value) in fields {
        let (slot, name) = match key.as_str() {
            "eventId" | "event_id" => (0, "event_id"),
            "productId" | "product_id" => (1, "product_id"),
            "type" => (2, "type"),
            "amount" => (3, "amount"),
            "occurredAt" | "occurred_at" => (4, "occurred_at"),
            "signal" => (5, "signal"),
            _ => return Err(Invalid::field("record", format!("unknown field {}", quote(&key)))),
        };
        if std::mem::replace(&mut seen[slot], true) {
            return Err(Invalid::field(name, "given twice (lowerCamel and proto name)"));
        }
        if value.is_null() {
            continue; // proto3 JSON: null is the field's default
        }
        match slot {
            0 => event.event_id = string(name, value)?,
            1 => event.product_id = int64(name, &value)?,
            2 => event.r#type = event_type(&value)?,
            3 => event.amount = int64(name, &value)?,
            4 => event.occurred_at = Some(timestamp(&value)?),
            _ => event.signal = string(name, value)?,
        }
    }
    Ok(event)
}

fn string(name: &'static str, value: Value) -> Result<String, Invalid> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(Invalid::field(name, format!("expected a string, got {}", kind(&other)))),
    }
}

/// proto3 JSON's int64: a number (integral, in range) or a string of one.
fn int64(name: &'static str, value: &Value) -> Result<i64, Invalid> {
    let parsed = match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            // 1e3 and 5.0 are integral numbers too; anything else is not an int64.
            n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18).map(|f| f as i64)
        }),
        Value::String(s) => s.parse::<i64>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        let shown = match value {
            Value::String(s) => quote(s),
            other => quote(&other.to_string()),
        };
        Invalid::field(name, format!("expected an int64 (a number or a decimal string), got {shown}"))
    })
}

/// The enum by name (`EVENT_TYPE_VIEW`) or by number.
fn event_type(value: &Value) -> Result<i32, Invalid> {
    match value {
        Value::String(s) => pb::EventType::from_str_name(s).map(|t| t as i32).ok_or_else(|| {
            Invalid::field(
                "type",
                format!("unknown value {}; use EVENT_TYPE_VIEW, _LIKE, _UNLIKE, _ORDER or _SIGNAL", quote(s)),
            )
        }),
        Value::Number(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| Invalid::field("type", format!("expected an enum number, got {n}"))),
        other => Err(Invalid::field("type", format!("expected an enum name or number, got {}", kind(other)))),
    }
}

/// RFC 3339 (any offset; the instant is what counts).
fn timestamp(value: &Value) -> Result<prost_types::Timestamp, Invalid> {
    let Value::String(s) = value else {
        return Err(Invalid::field("occurred_at", format!("expected an RFC 3339 string, got {}", kind(value))));
    };
    let at = DateTime::parse_from_rfc3339(s)
        .map_err(|e| Invalid::field("occurred_at", format!("{} is not RFC 3339: {e}", quote(s))))?;
    Ok(prost_types::Timestamp { seconds: at.timestamp(), nanos: at.timestamp_subsec_nanos() as i32 })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::domain::event::{EventKind, RawKind};

    fn json(text: &str) -> Result<RawEvent, String> {
        decode(Format::Json, text.as_bytes()).map_err(|e| e.message())
    }

    #[test]
    fn both_spellings_enum_names_and_numbers_and_int64_strings_decode_alike() {
        let camel = json(
            r#"{"eventId":"e1","productId":"42","type":"EVENT_TYPE_ORDER","amount":1200,"occurredAt":"2026-12-02T09:30:00.5+09:00"}"#,
        )
        .expect("accepted");
        let snake = json(
            r#"{"event_id":"e1","product_id":42,"type":4,"amount":"1200","occurred_at":"2026-12-02T00:30:00.5Z"}"#,
        )
        .expect("accepted");
        assert_eq!(camel, snake);
        assert_eq!(camel.event_id, "e1");
        assert_eq!(camel.product_id, 42);
        assert_eq!(camel.kind, Some(RawKind::Event(EventKind::Order)));
        assert_eq!(camel.amount, 1200);
        let at = Utc.with_ymd_and_hms(2026, 12, 2, 0, 30, 0).single().expect("one instant")
            + chrono::Duration::milliseconds(500);
        assert_eq!(camel.occurred_at, Some(at));
    }

    #[test]
    fn null_is_the_default_and_a_missing_field_is_left_to_the_rules() {
        let e = json(r#"{"eventId":"e","productId":1,"type":"EVENT_TYPE_VIEW","amount":null,"signal":null}"#)
            .expect("accepted");
        assert_eq!((e.amount, e.signal.as_str(), e.occurred_at), (0, "", None));
    }

    #[test]
    fn malformed_records_name_their_field() {
        let cases = [
            ("not json", "record: not JSON"),
            ("[1]", "record: expected a JSON object"),
            (r#"{"productId":1.5}"#, "product_id: expected an int64"),
            (r#"{"productId":"12x"}"#, "product_id: expected an int64"),
            (r#"{"type":"VIEW"}"#, "type: unknown value \"VIEW\""),
            (r#"{"occurredAt":"yesterday"}"#, "occurred_at: \"yesterday\" is not RFC 3339"),
            (r#"{"occurredAt":12}"#, "occurred_at: expected an RFC 3339 string, got a number"),
            (r#"{"eventId":7}"#, "event_id: expected a string, got a number"),
            (r#"{"eventId":"a","event_id":"b"}"#, "event_id: given twice"),
            (r#"{"productid":1}"#, "record: unknown field \"productid\""),
        ];
        for (text, expected) in cases {
            let got = json(text).expect_err("refused");
            assert!(got.starts_with(expected), "{text}: {got}");
        }
    }

    #[test]
    fn protobuf_binary_and_size_limit() {
        let event = pb::Event {
            event_id: "p1".into(),
            product_id: 7,
            r#type: pb::EventType::Like as i32,
            occurred_at: Some(prost_types::Timestamp { seconds: 1_800_000_000, nanos: 0 }),
            ..Default::default()
        };
        let raw = decode(Format::Protobuf, &event.encode_to_vec()).expect("accepted");
        assert_eq!((raw.event_id.as_str(), raw.product_id, raw.kind), ("p1", 7, Some(RawKind::Event(EventKind::Like))));
        let err = decode(Format::Protobuf, &[0xff, 0xff, 0xff]).expect_err("refused").message();
        assert!(err.starts_with("record: not a ranking.v1.Event in protobuf binary"), "{err}");
        let huge = vec![b' '; MAX_RECORD_BYTES + 1];
        assert_eq!(
            decode(Format::Json, &huge).expect_err("refused").message(),
            format!("record: {} bytes, at most 65536", MAX_RECORD_BYTES + 1)
        );
    }
}
