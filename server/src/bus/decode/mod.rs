//! A bus record's payload as a `ranking.v1.Event`: protobuf binary, or JSON in
//! the proto3 JSON mapping — lowerCamel or proto field names, the enum by name or number,
//! int64 as a number or a decimal string, `occurredAt` as RFC 3339, `null` as the default.
//!
//! Only the shape is checked here, as `grpc::convert` does for the wire; the event's rules
//! are the ingest path's. Every failure is an [`Invalid`] naming the field, which becomes the
//! dead letter's `ranking-error`.

use prost::Message;
use ranking_proto::v1 as pb;

use crate::app::invalid::Invalid;
use crate::domain::event::RawEvent;
use crate::wire::raw_event;

mod json;

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

impl Format {
    /// Its name in `RANKING_BUS_FORMAT`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Protobuf => "protobuf",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Json, Self::Protobuf]
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("{s:?}: expected json or protobuf"))
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
        Format::Json => json::event(payload)?,
    };
    raw_event(event)
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::domain::event::RawKind;
    use crate::domain::vocabulary::EventKind;

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
        // Both spellings of one field: the later wins, as the mapping's parser reads them.
        let e = json(r#"{"eventId":"a","event_id":"b"}"#).expect("accepted");
        assert_eq!(e.event_id, "b");
        let e = json(r#"{"eventId":"e","productId":1,"type":"EVENT_TYPE_VIEW","amount":null,"signal":null}"#)
            .expect("accepted");
        assert_eq!((e.amount, e.signal.as_str(), e.occurred_at), (0, "", None));
    }

    #[test]
    fn malformed_records_name_their_field() {
        let cases = [
            ("not json", "record: not JSON"),
            ("[1]", "record: expected a JSON object"),
            ("42", "record: expected a JSON object"),
            ("", "record: not JSON"),
            (r#"{"productId":1.5}"#, "product_id: expected integer value"),
            (r#"{"productId":"12x"}"#, "product_id: invalid digit"),
            (r#"{"product_id":18446744073709551615}"#, "product_id: out of range"),
            (r#"{"type":"VIEW"}"#, "type: unrecognized enum value 'VIEW'"),
            (r#"{"type":true}"#, "type: invalid type: boolean"),
            (r#"{"occurredAt":"yesterday"}"#, "occurred_at: invalid rfc3339 timestamp"),
            (r#"{"occurredAt":12}"#, "occurred_at: invalid type: integer `12`"),
            (r#"{"eventId":7}"#, "event_id: invalid type: integer `7`, expected a string"),
            (r#"{"eventId":[1,[2]]}"#, "event_id: invalid type: sequence"),
            (r#"{"amount":{"a":[1,{"b":2}]},"eventId":"x"}"#, "amount: invalid type: map"),
            (r#"{"productid":1}"#, "record: unrecognized field name 'productid'"),
            (r#"{"unknown":{"deep":[1]},"productId":1}"#, "record: unrecognized field name 'unknown'"),
            // The first invalid field is the answer only when the whole payload is JSON.
            (r#"{"productId":1.5,"eventId":"x"#, "record: not JSON"),
            (r#"{"productId":1}x"#, "record: not JSON"),
        ];
        for (text, expected) in cases {
            let got = json(text).expect_err("refused");
            assert!(got.starts_with(expected), "{text}: {got}");
        }
        let long_key = format!(r#"{{"{}":1}}"#, "k".repeat(100_000));
        let got = json(&long_key).expect_err("refused");
        assert!(got.len() < 300, "{} bytes", got.len());
    }

    #[test]
    fn escapes_exponents_and_strings_decode() {
        let e = json(r#"{"eventId":"e\u0031\n","productId":"7","type":"EVENT_TYPE_SIGNAL","signal":"s\"q"}"#)
            .expect("accepted");
        assert_eq!((e.event_id.as_str(), e.product_id, e.signal.as_str()), ("e1\n", 7, "s\"q"));
        let e = json(r#"{"productId":1e3,"amount":"-5","type":1}"#).expect("accepted");
        assert_eq!((e.product_id, e.amount, e.kind), (1000, -5, Some(RawKind::Event(EventKind::View))));
    }

    /// Every field of `Event`, set to a value other than its default, survives the proto3 JSON
    /// mapping as the contract's descriptors write it: a field added to the contract is
    /// covered without a change here.
    #[test]
    fn every_event_field_round_trips_through_json() {
        use prost_reflect::{DescriptorPool, DynamicMessage, Kind, ReflectMessage, Value};
        let pool = DescriptorPool::decode(ranking_proto::FILE_DESCRIPTOR_SET).expect("descriptors");
        let desc = pool.get_message_by_name("ranking.v1.Event").expect("Event");
        let mut message = DynamicMessage::new(desc.clone());
        for field in desc.fields() {
            let value = match field.kind() {
                Kind::String => Value::String(format!("{}-value", field.name())),
                Kind::Int64 => Value::I64(1_000_000_000_000 + i64::from(field.number())),
                Kind::Int32 => Value::I32(7 + field.number() as i32),
                Kind::Uint64 => Value::U64(9_000_000_000),
                Kind::Bool => Value::Bool(true),
                Kind::Enum(e) => Value::EnumNumber(e.values().last().expect("values").number()),
                Kind::Message(m) if m.full_name() == "google.protobuf.Timestamp" => {
                    let at = prost_types::Timestamp { seconds: 1_800_000_000, nanos: 500_000_000 };
                    Value::Message(at.transcode_to_dynamic())
                }
                other => panic!("field {} of kind {other:?}: give it a value here", field.name()),
            };
            message.set_field(&field, value);
        }
        let text = serde_json::to_string(&message).expect("serializes");
        let expected: pb::Event = message.transcode_to().expect("an Event");
        assert_eq!(json::event(text.as_bytes()).expect("decodes"), expected, "{text}");
        for field in desc.fields() {
            assert!(text.contains(&format!("\"{}\"", field.json_name())), "{} missing from {text}", field.json_name());
        }
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
                ..Default::default()
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
