//! The score written out independently of the service, what exactness tests compare the
//! served rankings with: the normalisation and the built-in profile's ranking, of rows or of
//! the events themselves.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use ranking_client::v1;

/// §4's normalisation written out independently of the service: `round(999 / (1 + e^-z))`
/// of `x` over `values` (population standard deviation; 500 when the axis is flat).
pub fn independent_norm(values: &[f64], x: f64) -> u32 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    let z = if std == 0.0 { 0.0 } else { (x - mean) / std };
    (999.0 / (1.0 + (-z).exp())).round() as u32
}

/// One product's counters as an independent reference sees them: views, likes (both as
/// counted by the ranking), order amount, and its latest event (Unix microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReferenceRow {
    pub product_id: i64,
    pub views: f64,
    pub likes: f64,
    pub order_amount: i64,
    pub last_event_us: i64,
}

/// The ranking the built-in profile gives `rows` without carry-over, computed here from
/// the section 4 formula and [`independent_norm`], recency counted back from the end of
/// today (UTC): best first, equal scores by descending product id.
pub fn built_in_reference(rows: &[ReferenceRow]) -> Vec<(i64, f64)> {
    let day_end = (Utc::now().date_naive() + chrono::Days::new(1)).and_time(chrono::NaiveTime::MIN).and_utc();
    let recency = |us: i64| (day_end.timestamp_micros() - us) as f64 / 1e6;
    let views: Vec<f64> = rows.iter().map(|r| r.views).collect();
    let likes: Vec<f64> = rows.iter().map(|r| r.likes).collect();
    let recencies: Vec<f64> = rows.iter().map(|r| recency(r.last_event_us)).collect();
    let norm = |values: &[f64], x: f64| i64::from(independent_norm(values, x));
    let mut scores: Vec<(i64, f64)> = rows
        .iter()
        .map(|r| {
            let main = r.views * 0.1 + r.likes * 0.2 + f64::ln_1p(r.order_amount as f64) * 0.6;
            let n = main.floor() as i64 * 1_000_000_000
                + norm(&views, r.views) * 1_000_000
                + norm(&likes, r.likes) * 1_000
                + (999 - norm(&recencies, recency(r.last_event_us)));
            (r.product_id, n as f64 / 1e9)
        })
        .collect();
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    scores
}

/// The daily ranking the events give by the built-in profile, computed here: views and likes
/// counted, orders' amounts summed, refunded orders out; the latest original of each product
/// (refunded or not) its recency, in whole seconds (see [`whole_second`]). Best first.
pub fn events_reference<'a>(events: impl IntoIterator<Item = &'a v1::Event>) -> Vec<(i64, f64)> {
    let events: Vec<&v1::Event> = events.into_iter().collect();
    let refunded: BTreeSet<&str> =
        events.iter().filter(|e| e.r#type == i32::from(v1::EventType::Retract)).map(|e| e.retracts.as_str()).collect();
    // views, likes, amount, latest event (Unix µs)
    let mut rows: BTreeMap<i64, (f64, f64, i64, i64)> = BTreeMap::new();
    for e in events.iter().filter(|e| e.r#type != i32::from(v1::EventType::Retract)) {
        let row = rows.entry(e.product_id).or_default();
        let us = e.occurred_at.as_ref().map_or(0, |t| t.seconds * 1_000_000);
        row.3 = row.3.max(us);
        if refunded.contains(e.event_id.as_str()) {
            continue;
        }
        match v1::EventType::try_from(e.r#type).expect("type") {
            v1::EventType::View => row.0 += 1.0,
            v1::EventType::Like => row.1 += 1.0,
            v1::EventType::Order => row.2 += e.amount,
            _ => {}
        }
    }
    let rows: Vec<ReferenceRow> = rows
        .into_iter()
        .map(|(product_id, r)| ReferenceRow {
            product_id,
            views: r.0,
            likes: r.1,
            order_amount: r.2,
            last_event_us: r.3,
        })
        .collect();
    built_in_reference(&rows)
}

/// `at` without its fraction of a second: what the reference counts recency in, so events
/// compared with it happen on whole seconds.
pub fn whole_second(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(at.timestamp(), 0).expect("a whole second")
}
