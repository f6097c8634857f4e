//! The requests a plain value stands for, so that a caller writes `client.rank(101)` or
//! `client.record_event(event)` and every call still takes its request message.

use crate::v1;

impl From<v1::Event> for v1::RecordEventRequest {
    fn from(event: v1::Event) -> Self {
        Self { event: Some(event) }
    }
}

impl From<Vec<v1::Event>> for v1::RecordEventsRequest {
    fn from(events: Vec<v1::Event>) -> Self {
        Self { events }
    }
}

/// The product's place in today's whole daily ranking.
impl From<i64> for v1::GetRankRequest {
    fn from(product_id: i64) -> Self {
        Self { product_id, ..Default::default() }
    }
}

/// The products' places in today's whole daily ranking.
impl From<Vec<i64>> for v1::GetRanksRequest {
    fn from(product_ids: Vec<i64>) -> Self {
        Self { product_ids, ..Default::default() }
    }
}

/// The product's place in today's whole daily ranking, explained.
impl From<i64> for v1::ExplainRankRequest {
    fn from(product_id: i64) -> Self {
        Self { product_id, ..Default::default() }
    }
}

impl From<Vec<v1::CatalogEntry>> for v1::UpdateCatalogRequest {
    fn from(products: Vec<v1::CatalogEntry>) -> Self {
        Self { products }
    }
}

/// A recompute of the day `date` (`YYYY-MM-DD`; empty for today).
impl From<&str> for v1::RecomputeRequest {
    fn from(date: &str) -> Self {
        Self { date: date.to_string() }
    }
}

/// A recompute of the day `date` (`YYYY-MM-DD`; empty for today).
impl From<String> for v1::RecomputeRequest {
    fn from(date: String) -> Self {
        Self { date }
    }
}
