//! The proto3 JSON mapping of `ranking.v1.Event`, read by a serde visitor straight into the
//! message: lowerCamel or proto field names, the enum by name or number, int64 as a number
//! or a decimal string, `occurredAt` as RFC 3339, `null` as the default. No document tree is
//! built, and field values stay borrowed from the payload until they are kept.

use std::borrow::Cow;

use chrono::DateTime;
use ranking_proto::v1 as pb;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::app::invalid::{Invalid, quote};

/// The proto3 JSON mapping, read straight into the message: no intermediate document tree,
/// and field values borrowed from the payload until they are kept.
pub(super) fn event(payload: &[u8]) -> Result<pb::Event, Invalid> {
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
