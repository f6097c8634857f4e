//! A bus record's payload as a `ranking.v1.Event` (SPEC §10.1): protobuf binary, or JSON in
//! the proto3 JSON mapping — lowerCamel or proto field names, the enum by name or number,
//! int64 as a number or a decimal string, `occurredAt` as RFC 3339, `null` as the default.
//!
//! Only the shape is checked here, as `grpc::convert` does for the wire; the event's rules
//! are the ingest path's. Every failure is an [`Invalid`] naming the field, which becomes the
//! dead letter's `ranking-error`.

use std::borrow::Cow;

use chrono::DateTime;
use prost::Message;
use ranking_proto::v1 as pb;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

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

/// The proto3 JSON mapping, read straight into the message: no intermediate document tree,
/// and field values borrowed from the payload until they are kept.
fn json_event(payload: &[u8]) -> Result<pb::Event, Invalid> {
    let mut de = serde_json::Deserializer::from_slice(payload);
    let parsed = de.deserialize_map(EventVisitor).and_then(|event| de.end().map(|()| event));
    match parsed {
        Ok(event) => event,
        // A well-formed document of another kind (an array, a number…) is a data error.
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            Err(Invalid::field("record", "expected a JSON object (a ranking.v1.Event)"))
        }
        Err(e) => Err(Invalid::field("record", format!("not JSON: {e}"))),
    }
}

/// An event object's fields; the first invalid one is the answer, once the rest of the
/// object is read (a syntax error later in the payload still makes it "not JSON").
struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = Result<pb::Event, Invalid>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a ranking.v1.Event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut event = pb::Event::default();
        let mut seen = [false; 6];
        while let Some(key) = map.next_key::<Key>()? {
            let field = match key {
                Key::Field(slot, name) if !std::mem::replace(&mut seen[slot], true) => {
                    let value: Scalar<'de> = map.next_value()?;
                    event_field(&mut event, slot, name, value)
                }
                Key::Field(_, name) => {
                    map.next_value::<IgnoredAny>()?;
                    Err(Invalid::field(name, "given twice (lowerCamel and proto name)"))
                }
                Key::Unknown(key) => {
                    map.next_value::<IgnoredAny>()?;
                    Err(Invalid::field("record", format!("unknown field {}", quote(&key))))
                }
            };
            if let Err(invalid) = field {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(Err(invalid));
            }
        }
        Ok(Ok(event))
    }
}

/// Sets one field of `event` from its JSON value (`null`: the default, proto3 JSON).
fn event_field(event: &mut pb::Event, slot: usize, name: &'static str, value: Scalar<'_>) -> Result<(), Invalid> {
    if matches!(value, Scalar::Null) {
        return Ok(());
    }
    match slot {
        0 => event.event_id = string(name, value)?,
        1 => event.product_id = int64(name, &value)?,
        2 => event.r#type = event_type(&value)?,
        3 => event.amount = int64(name, &value)?,
        4 => event.occurred_at = Some(timestamp(&value)?),
        _ => event.signal = string(name, value)?,
    }
    Ok(())
}

/// A field name: one of the event's (either spelling) or an unknown one.
enum Key {
    Field(usize, &'static str),
    Unknown(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "eventId" | "event_id" => Key::Field(0, "event_id"),
                    "productId" | "product_id" => Key::Field(1, "product_id"),
                    "type" => Key::Field(2, "type"),
                    "amount" => Key::Field(3, "amount"),
                    "occurredAt" | "occurred_at" => Key::Field(4, "occurred_at"),
                    "signal" => Key::Field(5, "signal"),
                    _ => Key::Unknown(key.to_owned()),
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// A field's JSON value: the scalars the mapping gives an event's fields, or the kind of
/// anything else (for the error).
enum Scalar<'a> {
    Null,
    Str(Cow<'a, str>),
    Int(i64),
    /// An integer beyond i64 (never an int64 nor an enum number).
    Unsigned(u64),
    Float(f64),
    Other(&'static str),
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Other("a boolean"))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(Scalar::Int(n))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(n).map_or(Scalar::Unsigned(n), Scalar::Int))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
        Ok(Scalar::Float(n))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(s.to_owned())))
    }
    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(s)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("an object"))
    }
}

impl Scalar<'_> {
    /// A number as JSON writes it.
    fn number(&self) -> Option<String> {
        match *self {
            Scalar::Int(n) => Some(n.to_string()),
            Scalar::Unsigned(n) => Some(n.to_string()),
            Scalar::Float(f) => serde_json::Number::from_f64(f).map(|n| n.to_string()),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Str(_) => "a string",
            Scalar::Int(_) | Scalar::Unsigned(_) | Scalar::Float(_) => "a number",
            Scalar::Other(kind) => kind,
        }
    }
}

fn string(name: &'static str, value: Scalar<'_>) -> Result<String, Invalid> {
    match value {
        Scalar::Str(s) => Ok(s.into_owned()),
        other => Err(Invalid::field(name, format!("expected a string, got {}", other.kind()))),
    }
}

/// proto3 JSON's int64: a number (integral, in range) or a string of one.
fn int64(name: &'static str, value: &Scalar<'_>) -> Result<i64, Invalid> {
    let parsed = match value {
        Scalar::Int(n) => Some(*n),
        // 1e3 and 5.0 are integral numbers too; anything else is not an int64.
        Scalar::Float(f) => Some(*f).filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18).map(|f| f as i64),
        Scalar::Str(s) => s.parse::<i64>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        let shown = match value {
            Scalar::Str(s) => quote(s),
            other => other.number().map_or_else(|| other.kind().to_owned(), |n| quote(&n)),
        };
        Invalid::field(name, format!("expected an int64 (a number or a decimal string), got {shown}"))
    })
}

/// The enum by name (`EVENT_TYPE_VIEW`) or by number.
fn event_type(value: &Scalar<'_>) -> Result<i32, Invalid> {
    match value {
        Scalar::Str(s) => pb::EventType::from_str_name(s).map(|t| t as i32).ok_or_else(|| {
            Invalid::field(
                "type",
                format!("unknown value {}; use EVENT_TYPE_VIEW, _LIKE, _UNLIKE, _ORDER or _SIGNAL", quote(s)),
            )
        }),
        Scalar::Int(n) => {
            i32::try_from(*n).map_err(|_| Invalid::field("type", format!("expected an enum number, got {n}")))
        }
        Scalar::Unsigned(_) | Scalar::Float(_) => {
            Err(Invalid::field("type", format!("expected an enum number, got {}", value.number().unwrap_or_default())))
        }
        other => Err(Invalid::field("type", format!("expected an enum name or number, got {}", other.kind()))),
    }
}

/// RFC 3339 (any offset; the instant is what counts).
fn timestamp(value: &Scalar<'_>) -> Result<prost_types::Timestamp, Invalid> {
    let Scalar::Str(s) = value else {
        return Err(Invalid::field("occurred_at", format!("expected an RFC 3339 string, got {}", value.kind())));
    };
    let at = DateTime::parse_from_rfc3339(s)
        .map_err(|e| Invalid::field("occurred_at", format!("{} is not RFC 3339: {e}", quote(s))))?;
    Ok(prost_types::Timestamp { seconds: at.timestamp(), nanos: at.timestamp_subsec_nanos() as i32 })
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
    fn escapes_nested_values_and_later_syntax_errors() {
        let e = json(r#"{"eventId":"e\u0031\n","productId":"7","type":"EVENT_TYPE_SIGNAL","signal":"s\"q"}"#)
            .expect("accepted");
        assert_eq!((e.event_id.as_str(), e.product_id, e.signal.as_str()), ("e1\n", 7, "s\"q"));
        let cases = [
            (
                r#"{"amount":{"a":[1,{"b":2}]},"eventId":"x"}"#,
                "amount: expected an int64 (a number or a decimal string), got an object",
            ),
            (r#"{"eventId":[1,[2]]}"#, "event_id: expected a string, got an array"),
            (r#"{"type":true}"#, "type: expected an enum name or number, got a boolean"),
            (r#"{"type":4.5}"#, "type: expected an enum number, got 4.5"),
            (
                r#"{"productId":18446744073709551615}"#,
                "product_id: expected an int64 (a number or a decimal string), got \"18446744073709551615\"",
            ),
            (r#"{"unknown":{"deep":[1]},"productId":1}"#, "record: unknown field \"unknown\""),
            // The first invalid field is the answer only when the whole payload is JSON.
            (r#"{"productId":1.5,"eventId":"x"#, "record: not JSON"),
            (r#"{"productId":1}x"#, "record: not JSON"),
            ("", "record: not JSON"),
            ("42", "record: expected a JSON object"),
        ];
        for (text, expected) in cases {
            let got = json(text).expect_err("refused");
            assert!(got.starts_with(expected), "{text}: {got}");
        }
        let e = json(r#"{"productId":1e3,"amount":"-5","type":1}"#).expect("accepted");
        assert_eq!((e.product_id, e.amount, e.kind), (1000, -5, Some(RawKind::Event(EventKind::View))));
    }

    /// A JSON text of `event` in the proto3 JSON mapping, each field spelled and typed as
    /// `choices` picks (a bit per choice).
    fn proto3_json(event: &pb::Event, choices: u32) -> String {
        let pick = |bit: u32| choices & (1 << bit) != 0;
        let int64 = |n: i64, bit: u32| if pick(bit) { format!("\"{n}\"") } else { n.to_string() };
        let mut fields = vec![
            format!(r#""{}":{}"#, if pick(0) { "eventId" } else { "event_id" }, serde_json::json!(event.event_id)),
            format!(r#""{}":{}"#, if pick(1) { "productId" } else { "product_id" }, int64(event.product_id, 2)),
            format!(r#""amount":{}"#, int64(event.amount, 3)),
            format!(r#""signal":{}"#, serde_json::json!(event.signal)),
        ];
        let kind = pb::EventType::try_from(event.r#type).map(|t| t.as_str_name());
        fields.push(match kind {
            Ok(name) if pick(4) => format!(r#""type":"{name}""#),
            _ => format!(r#""type":{}"#, event.r#type),
        });
        if let Some(at) = &event.occurred_at {
            let instant = chrono::DateTime::from_timestamp(at.seconds, at.nanos as u32).expect("in range");
            let text = if pick(5) {
                instant.with_timezone(&chrono::FixedOffset::east_opt(9 * 3600).expect("offset")).to_rfc3339()
            } else {
                instant.to_rfc3339()
            };
            fields.push(format!(r#""{}":"{text}""#, if pick(6) { "occurredAt" } else { "occurred_at" }));
        }
        if pick(7) {
            fields.reverse();
        }
        format!("{{{}}}", fields.join(","))
    }

    proptest::proptest! {
        /// JSON in any spelling the mapping allows decodes to the event its protobuf binary
        /// decodes to (or to the same refusal).
        #[test]
        fn json_and_protobuf_decode_alike(
            event_id in "[ -~\u{e9}\u{1F600}]{0,12}",
            product_id in proptest::num::i64::ANY,
            kind in 0i32..7,
            amount in proptest::num::i64::ANY,
            signal in "[a-z_\"\\\\]{0,6}",
            at in proptest::option::of((0i64..4_102_444_800, 0i32..1_000_000_000)),
            choices in proptest::num::u32::ANY,
        ) {
            let event = pb::Event {
                event_id,
                product_id,
                r#type: kind,
                amount,
                signal,
                occurred_at: at.map(|(seconds, nanos)| prost_types::Timestamp { seconds, nanos }),
            };
            let text = proto3_json(&event, choices);
            let from_json = decode(Format::Json, text.as_bytes()).map_err(|e| e.message());
            let from_binary = decode(Format::Protobuf, &event.encode_to_vec()).map_err(|e| e.message());
            proptest::prop_assert_eq!(from_json, from_binary, "{}", text);
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
