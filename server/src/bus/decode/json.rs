//! The proto3 JSON mapping of `ranking.v1.Event`, read by `prost-reflect` through the
//! contract's own descriptors: lowerCamel or proto field names, enums by name or number,
//! int64 as a number or a decimal string, `occurredAt` as RFC 3339, `null` as the default,
//! unknown fields refused. The mapping follows the contract by construction: a field added to
//! `Event` is read without a change here.
//!
//! A refusal names the field by its proto name (`product_id: …`, however the record spelled
//! it), or `record` when the payload is not a JSON object of the event.

use std::sync::LazyLock;

use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use ranking_proto::v1 as pb;

use crate::app::invalid::Invalid;

/// `ranking.v1.Event`'s descriptor, from the descriptor set compiled into the proto crate.
static EVENT: LazyLock<MessageDescriptor> = LazyLock::new(|| {
    DescriptorPool::decode(ranking_proto::FILE_DESCRIPTOR_SET)
        .ok()
        .and_then(|pool| pool.get_message_by_name("ranking.v1.Event"))
        .expect("the proto crate's descriptor set holds ranking.v1.Event")
});

/// Each field's JSON name beside its proto name, which a refusal names (a field path holds
/// `'static` names: the contract's few names are kept for the life of the process).
static FIELDS: LazyLock<Vec<(String, &'static str)>> = LazyLock::new(|| {
    EVENT.fields().map(|f| (f.json_name().to_string(), &*Box::leak(f.name().to_string().into_boxed_str()))).collect()
});

/// The proto name of the field a record spells `key` (lowerCamel or proto name).
fn field_named(key: &str) -> Option<&'static str> {
    FIELDS.iter().find(|(json, name)| json == key || *name == key).map(|(_, name)| *name)
}

/// The event `payload` holds in the proto3 JSON mapping.
pub(super) fn event(payload: &[u8]) -> Result<pb::Event, Invalid> {
    let mut json = serde_json::Deserializer::from_slice(payload);
    let mut track = serde_path_to_error::Track::new();
    let read =
        DynamicMessage::deserialize(EVENT.clone(), serde_path_to_error::Deserializer::new(&mut json, &mut track))
            .and_then(|message| json.end().map(|()| message));
    let message = read.map_err(|e| match serde_json::from_slice::<serde::de::IgnoredAny>(payload) {
        // The first invalid field is the answer only when the whole payload is JSON.
        Err(syntax) if e.classify() == serde_json::error::Category::Data => {
            Invalid::field("record", format!("not JSON: {syntax}"))
        }
        _ => refusal(&e, &track.path()),
    })?;
    // The same message in the same contract: re-encoding it cannot fail.
    message.transcode_to::<pb::Event>().map_err(|e| Invalid::field("record", format!("not a ranking.v1.Event: {e}")))
}

/// What is wrong with the payload, naming the field when the error is inside one.
fn refusal(e: &serde_json::Error, path: &serde_path_to_error::Path) -> Invalid {
    use serde_json::error::Category;
    let key = path.iter().next().map(|segment| segment.to_string());
    match (e.classify(), key.as_deref().and_then(field_named)) {
        (Category::Syntax | Category::Eof | Category::Io, _) => Invalid::field("record", format!("not JSON: {e}")),
        (Category::Data, Some(field)) => Invalid::field(field, without_position(e)),
        (Category::Data, None) if e.to_string().starts_with("unrecognized field name") => {
            Invalid::field("record", without_position(e))
        }
        (Category::Data, None) => Invalid::field("record", "expected a JSON object (a ranking.v1.Event)"),
    }
}

/// serde_json's message without its "at line 1 column 12" (a record is one line), and short:
/// it may quote a value or a key of the payload.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let text = text.rfind(" at line ").map_or(text.as_str(), |at| &text[..at]);
    let mut end = text.len().min(LONGEST_REASON);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end < text.len() { format!("{}… ({} bytes)", &text[..end], text.len()) } else { text.to_string() }
}

/// Longest library message kept in a refusal.
const LONGEST_REASON: usize = 200;
