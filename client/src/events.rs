//! Events with a fresh UUID v7 id (time-ordered, unique without coordination) and the
//! current time. Keep the event to retry it: the id is what makes a retry land once.

use crate::v1;

fn now() -> prost_types::Timestamp {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    prost_types::Timestamp {
        seconds: i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0),
    }
}

fn event(product_id: i64, kind: v1::EventType, amount: i64) -> v1::Event {
    v1::Event {
        event_id: uuid::Uuid::now_v7().to_string(),
        product_id,
        r#type: kind.into(),
        amount,
        occurred_at: Some(now()),
        ..Default::default()
    }
}

/// A product page view.
pub fn view(product_id: i64) -> v1::Event {
    event(product_id, v1::EventType::View, 0)
}

/// A like.
pub fn like(product_id: i64) -> v1::Event {
    event(product_id, v1::EventType::Like, 0)
}

/// A like taken back.
pub fn unlike(product_id: i64) -> v1::Event {
    event(product_id, v1::EventType::Unlike, 0)
}

/// An event of the scoring profile's custom signal `name` (`amount` 0 for a count signal).
pub fn signal(product_id: i64, name: &str, amount: i64) -> v1::Event {
    v1::Event { signal: name.into(), ..event(product_id, v1::EventType::Signal, amount) }
}

/// An order of `amount` in the currency's minor unit.
pub fn order(product_id: i64, amount: i64) -> v1::Event {
    event(product_id, v1::EventType::Order, amount)
}

/// Takes back the event of `product_id` with id `event_id` (a refunded or cancelled order,
/// a view found to be fraud).
pub fn retract(product_id: i64, event_id: &str) -> v1::Event {
    v1::Event { retracts: event_id.into(), ..event(product_id, v1::EventType::Retract, 0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_get_unique_time_ordered_ids_and_the_current_time() {
        let a = view(1);
        let b = order(2, 500);
        assert_ne!(a.event_id, b.event_id);
        assert!(a.event_id < b.event_id, "UUID v7 ids sort by creation time");
        assert_eq!((b.r#type, b.amount), (v1::EventType::Order as i32, 500));
        assert!(a.occurred_at.expect("time").seconds > 1_700_000_000);
    }
}
