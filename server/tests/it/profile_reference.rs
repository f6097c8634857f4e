//! An independent reference of a scoring profile's scores, computed from a seeded
//! workload's events alone (not with the service's engine), and two platforms' profiles it
//! is checked against: what the profile and variant tests compare the served boards with.

use chrono::Utc;
use ranking_client::v1::{self, EventType};

use crate::helpers::event;

/// Two platforms' profiles: cart adds as a log1p term and the most significant axis, refunds
/// as an amount nobody scores; and one ranking by wishlist saves and dwell time with no
/// recency axis and no carry-over.
pub(crate) const CART_PROFILE: &str = r#"
carry_over = 0.2
carry_days = 3
[signals.cart_adds]
kind = "count"
[signals.refunds]
kind = "amount"
[[main]]
signal = "views"
weight = 0.1
[[main]]
signal = "cart_adds"
weight = 0.5
transform = "log1p"
[[main]]
signal = "order_amount"
weight = 0.6
transform = "log1p"
[[axes]]
signal = "cart_adds"
digits = 2
[[axes]]
signal = "views"
digits = 3
[[axes]]
signal = "recency"
digits = 4
"#;

pub(crate) const WISHLIST_PROFILE: &str = r#"
carry_over = 0.0
carry_days = 0
[signals.wishlist]
kind = "count"
[signals.dwell_ms]
kind = "amount"
[[main]]
signal = "wishlist"
weight = 1.5
[[main]]
signal = "dwell_ms"
weight = 0.01
transform = "log1p"
[[main]]
signal = "likes"
weight = 0.2
[[axes]]
signal = "wishlist"
digits = 4
[[axes]]
signal = "orders"
digits = 2
[[axes]]
signal = "likes"
digits = 1
"#;

/// One event of the workload: what the reference reads of it.
#[derive(Clone)]
pub(crate) struct Happened {
    pub product: i64,
    pub kind: EventType,
    pub signal: &'static str,
    pub amount: i64,
    pub at: chrono::DateTime<Utc>,
}

/// A seeded workload over yesterday and today: every built-in type and both profiles'
/// custom signals, on 40 products (some only yesterday, so they rank through carry-over).
pub(crate) fn workload(seed: u64) -> Vec<Happened> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let now = Utc::now();
    let today = now.date_naive().and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    let yesterday = today - chrono::Duration::days(1);
    let since_midnight = (now - today).num_seconds().max(1);
    let kinds: [(EventType, &str); 9] = [
        (EventType::View, ""),
        (EventType::Like, ""),
        (EventType::Unlike, ""),
        (EventType::Order, ""),
        (EventType::Signal, "cart_adds"),
        (EventType::Signal, "refunds"),
        (EventType::Signal, "wishlist"),
        (EventType::Signal, "dwell_ms"),
        (EventType::View, ""),
    ];
    let mut out = Vec::new();
    for i in 0..600 {
        let product = rng.random_range(1..=40);
        let (kind, signal) = kinds[rng.random_range(0..kinds.len())];
        let amount = match (kind, signal) {
            (EventType::Order, _) => rng.random_range(0..200_000),
            (_, "refunds") | (_, "dwell_ms") => rng.random_range(0..90_000),
            _ => 0,
        };
        // Products 31-40 have events yesterday only.
        let on_yesterday = product > 30 || i % 3 == 0;
        let at = if on_yesterday {
            yesterday + chrono::Duration::seconds(rng.random_range(0..86_400))
        } else {
            today + chrono::Duration::seconds(rng.random_range(0..since_midnight))
        };
        out.push(Happened { product, kind, signal, amount, at });
    }
    out
}

pub(crate) fn wire(events: &[Happened], only: &dyn Fn(&str) -> bool) -> Vec<v1::Event> {
    events
        .iter()
        .enumerate()
        .filter(|(_, h)| only(h.signal))
        .map(|(i, h)| v1::Event {
            signal: h.signal.into(),
            ..event(&format!("w-{i}"), h.product, h.kind, h.amount, h.at)
        })
        .collect()
}

/// The reference: the profile's scores computed from the events alone, independently of the
/// service's engine. `terms` are (signal, weight, log1p) in order, `axes` (signal or
/// "recency", digits). Returns (product, score) best first, ties by descending product (the service's order).
/// A product's signal values (by name) and its latest event, Unix microseconds.
type Row<'a> = (std::collections::BTreeMap<&'a str, i64>, i64);
/// A contender: product, main score, values, latest event (none: carry-over alone).
type Standing<'a> = (i64, f64, std::collections::BTreeMap<&'a str, i64>, Option<i64>);

pub(crate) fn reference(
    events: &[Happened],
    terms: &[(&str, f64, bool)],
    carry: (f64, u32),
    axes: &[(&str, u32)],
    weekly: bool,
) -> Vec<(i64, f64)> {
    use std::collections::BTreeMap;
    let today = Utc::now().date_naive();
    let day_start = |d: chrono::NaiveDate| d.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp_micros();
    // Per (day, product): signal values and the latest event.
    let mut days: BTreeMap<(chrono::NaiveDate, i64), Row> = BTreeMap::new();
    // In the order they were recorded: likes and unlikes apply in that order.
    for h in events {
        let row = days.entry((h.at.date_naive(), h.product)).or_default();
        let value = |name| row.0.get(name).copied().unwrap_or(0);
        match h.kind {
            EventType::View => *row.0.entry("views").or_default() += 1,
            EventType::Like => *row.0.entry("likes").or_default() += 1,
            // Likes never go below zero.
            EventType::Unlike => {
                let likes = (value("likes") - 1).max(0);
                row.0.insert("likes", likes);
            }
            EventType::Order => {
                *row.0.entry("orders").or_default() += 1;
                *row.0.entry("order_amount").or_default() += h.amount;
            }
            _ => {
                let add = if h.signal == "cart_adds" || h.signal == "wishlist" { 1 } else { h.amount };
                *row.0.entry(h.signal).or_default() += add;
            }
        }
        row.1 = row.1.max(h.at.timestamp_micros());
    }
    let terms_of = |values: &BTreeMap<&str, i64>| {
        let mut sum: Option<f64> = None;
        for (signal, weight, log1p) in terms {
            let v = values.get(signal).copied().unwrap_or(0) as f64;
            let p = if *log1p { v.ln_1p() * weight } else { v * weight };
            sum = Some(sum.map_or(p, |s| s + p));
        }
        sum.unwrap_or(0.0)
    };
    // (product, main, values, latest event) of the population.
    let mut population: Vec<Standing> = Vec::new();
    if weekly {
        let mut week: BTreeMap<i64, Row> = BTreeMap::new();
        for ((_, product), (values, last)) in &days {
            let w = week.entry(*product).or_default();
            for (k, v) in values {
                *w.0.entry(k).or_default() += v;
            }
            w.1 = w.1.max(*last);
        }
        for (product, (values, last)) in week {
            population.push((product, terms_of(&values) + 0.0 * carry.0, values, Some(last)));
        }
    } else {
        let yesterday = today.pred_opt().expect("a day before");
        let mut carried: BTreeMap<i64, i64> = BTreeMap::new();
        if carry.1 >= 1 {
            for ((day, product), (values, _)) in &days {
                if *day == yesterday {
                    let main = terms_of(values) + 0.0 * carry.0;
                    if main.floor() >= 1.0 {
                        carried.insert(*product, main.floor() as i64);
                    }
                }
            }
        }
        for ((day, product), (values, last)) in &days {
            if *day == today {
                let c = carried.remove(product).unwrap_or(0);
                population.push((*product, terms_of(values) + c as f64 * carry.0, values.clone(), Some(*last)));
            }
        }
        // The rest inherit at least 1: ranked through carry-over alone.
        for (product, c) in carried {
            population.push((product, terms_of(&BTreeMap::new()) + c as f64 * carry.0, BTreeMap::new(), None));
        }
        population.sort_by_key(|p| p.0);
    }
    let reference_us = day_start(today.succ_opt().expect("a day after"));
    let raw = |p: &Standing, axis: &str| -> f64 {
        if axis == "recency" {
            (reference_us - p.3.unwrap_or(day_start(today))) as f64 / 1e6
        } else {
            p.2.get(axis).copied().unwrap_or(0) as f64
        }
    };
    let total: u32 = axes.iter().map(|a| a.1).sum();
    let scale = 10u64.pow(total);
    let mut out: Vec<(i64, f64)> = population
        .iter()
        .map(|p| {
            let mut numerator = (p.1.floor().max(0.0) as u64) * scale;
            let mut left = total;
            for (axis, digits) in axes {
                let values: Vec<f64> = population.iter().map(|q| raw(q, axis)).collect();
                let n = values.len() as f64;
                let mean = values.iter().fold(0.0, |s, v| s + v) / n;
                let std = (values.iter().fold(0.0, |s, v| s + (v - mean) * (v - mean)) / n).sqrt();
                let z = if values.len() <= 1 || std == 0.0 { 0.0 } else { (raw(p, axis) - mean) / std };
                let max = 10u32.pow(*digits) - 1;
                let norm = (f64::from(max) / (1.0 + (-z).exp())).round() as u64;
                let norm = if *axis == "recency" { u64::from(max) - norm } else { norm };
                left -= digits;
                numerator += norm * 10u64.pow(left);
            }
            (p.0, numerator as f64 / scale as f64)
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    out
}

pub(crate) fn same(served: &[(i64, f64)], expected: &[(i64, f64)], what: &str) {
    let bits = |v: &[(i64, f64)]| v.iter().map(|(id, s)| (*id, s.to_bits())).collect::<Vec<_>>();
    assert_eq!(bits(served), bits(expected), "{what}: served {served:?}\nexpected {expected:?}");
}
