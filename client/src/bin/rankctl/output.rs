//! What rankctl prints: ranked entries as a table or JSON lines, and an explanation.

use ranking_client::v1;
pub use serde_json::{Value, json};

/// An entry as JSON (the keys scripts read), through serde: strings escaped as JSON escapes
/// them.
pub fn entry_json(p: &v1::RankedProduct) -> Value {
    let mut entry = json!({
        "rank": p.rank,
        "product_id": p.product_id,
        "score": p.score,
        "tied_rank": p.tied_rank,
        "previous_rank": p.previous_rank,
        "rank_change": p.rank_change,
        "top_percent": p.top_percent,
        "organic_rank": p.organic_rank,
        "control_ids": p.control_ids,
    });
    if let Some(b) = &p.breakdown {
        entry["breakdown"] = json!({
            "main_floor": b.main_floor,
            "view_norm": b.view_norm,
            "like_norm": b.like_norm,
            "recency_norm": b.recency_norm,
            "axis_norms": b.axis_norms,
        });
    }
    entry
}

/// Entries as a JSON array.
pub fn entries_json(products: &[v1::RankedProduct]) -> Value {
    Value::Array(products.iter().map(entry_json).collect())
}

/// "▲3", "▼2", "=", or "new" (not ranked one period before).
fn change(p: &v1::RankedProduct) -> String {
    match (p.previous_rank, p.rank_change) {
        (0, _) => "new".into(),
        (_, 0) => "=".into(),
        (_, c) if c > 0 => format!("▲{c}"),
        (_, c) => format!("▼{}", -c),
    }
}

/// Whether a breakdown is the built-in profile's (the three named norms are its axes).
fn named(b: &v1::ScoreBreakdown) -> bool {
    b.axis_norms.is_empty() || b.axis_norms == [b.view_norm, b.like_norm, b.recency_norm]
}

/// Entries as a table: the built-in profile's VIEW, LIKE and RECENCY norms, or for a
/// custom profile every axis's norm in its order (AXES).
pub fn table(products: &[v1::RankedProduct]) {
    let custom = products.iter().any(|p| p.breakdown.as_ref().is_some_and(|b| !named(b)));
    let head = format!(
        "{:>6}  {:>6}  {:>6}  {:>7}  {:>12}  {:>16}  {:>10}",
        "RANK", "TIED", "CHANGE", "TOP %", "PRODUCT", "SCORE", "MAIN"
    );
    if custom {
        println!("{head}  AXES");
    } else {
        println!("{head}  {:>4}  {:>4}  {:>7}", "VIEW", "LIKE", "RECENCY");
    }
    for p in products {
        let head = format!("{:>6}  {:>6}  {:>6}  {:>7.3}", p.rank, p.tied_rank, change(p), p.top_percent);
        // Merchandising controls acting on the entry, and where the organic ranking had it.
        let controls = match (p.control_ids.is_empty(), p.organic_rank) {
            (true, _) => String::new(),
            (false, 0) => format!("  [{}] (organic: none)", p.control_ids.join(",")),
            (false, organic) => format!("  [{}] (organic: {organic})", p.control_ids.join(",")),
        };
        match &p.breakdown {
            Some(b) if custom => {
                let norms: Vec<String> = b.axis_norms.iter().map(u32::to_string).collect();
                println!(
                    "{head}  {:>12}  {:>16.12}  {:>10}  {}{controls}",
                    p.product_id,
                    p.score,
                    b.main_floor,
                    norms.join(" ")
                );
            }
            Some(b) => println!(
                "{head}  {:>12}  {:>16.9}  {:>10}  {:>4}  {:>4}  {:>7}{controls}",
                p.product_id, p.score, b.main_floor, b.view_norm, b.like_norm, b.recency_norm
            ),
            None => println!("{head}  {:>12}  {:>16.6}{controls}", p.product_id, p.score),
        }
    }
}

fn axis_json(a: Option<&v1::AxisExplanation>) -> Value {
    let a = a.cloned().unwrap_or_default();
    json!({ "axis": a.axis, "raw": a.raw, "mean": a.mean, "std": a.std, "z": a.z, "norm": a.norm })
}

pub fn explain_json(r: &v1::ExplainRankResponse) -> Value {
    let signals: Vec<Value> = r
        .signals
        .iter()
        .map(|s| {
            let mut signal = json!({ "signal": s.signal, "value": s.value, "points": s.points });
            if s.per_actor > 0 {
                signal["per_actor"] = json!(s.per_actor);
                signal["events"] = json!(s.events);
                signal["over_cap"] = json!(s.over_cap);
            }
            signal
        })
        .collect();
    let hours: Vec<Value> = r
        .hours
        .iter()
        .map(|h| {
            json!({
                "start_us": h.start.as_ref().map_or(0, micros),
                "main_score": h.main_score,
                "weight": h.weight,
                "points": h.points,
            })
        })
        .collect();
    json!({
        "date": r.date,
        "version": r.version,
        "stale": r.stale,
        "product": entry_json(&r.product.clone().unwrap_or_default()),
        "views": r.views,
        "likes": r.likes,
        "orders": r.orders,
        "order_amount": r.order_amount,
        "view_points": r.view_points,
        "like_points": r.like_points,
        "order_points": r.order_points,
        "carry_points": r.carry_points,
        "main_score": r.main_score,
        "views_axis": axis_json(r.views_axis.as_ref()),
        "likes_axis": axis_json(r.likes_axis.as_ref()),
        "recency_axis": axis_json(r.recency_axis.as_ref()),
        "above": r.above.as_ref().map(entry_json),
        "points_to_overtake": r.points_to_overtake,
        "signals": signals,
        "axes": r.axes.iter().map(|a| axis_json(Some(a))).collect::<Vec<_>>(),
        "retracted": {
            "views": r.retracted_views,
            "likes": r.retracted_likes,
            "orders": r.retracted_orders,
            "order_amount": r.retracted_order_amount,
        },
        "trending_at_us": r.trending_at.as_ref().map(micros),
        "hours": hours,
    })
}

/// A timestamp in Unix microseconds.
fn micros(t: &prost_types::Timestamp) -> i64 {
    t.seconds * 1_000_000 + i64::from(t.nanos / 1_000)
}

pub fn explain_table(r: &v1::ExplainRankResponse) {
    let p = r.product.clone().unwrap_or_default();
    println!("product {} on {} (version {}): rank {}", p.product_id, r.date, r.version, p.rank);
    table(std::slice::from_ref(&p));
    println!();
    println!("{:<12}  {:>16}  {:>16}", "PART", "COUNT", "POINTS");
    if r.signals.is_empty() {
        // A server from before scoring profiles: the built-in parts by name.
        println!("{:<12}  {:>16}  {:>16.9}", "views", r.views, r.view_points);
        println!("{:<12}  {:>16}  {:>16.9}", "likes", r.likes, r.like_points);
        println!("{:<12}  {:>16}  {:>16.9}", "orders", format!("{} / {}", r.orders, r.order_amount), r.order_points);
    }
    for s in &r.signals {
        println!("{:<12}  {:>16}  {:>16.9}", s.signal, s.value, s.points);
    }
    if let Some(at) = &r.trending_at {
        // A trending score: its hours, each decayed to the board's instant.
        println!("trending at {} µs; {} hours", micros(at), r.hours.len());
        println!("{:<20}  {:>16}  {:>10}  {:>16}", "HOUR (µs)", "MAIN", "WEIGHT", "POINTS");
        for h in &r.hours {
            let start = h.start.as_ref().map_or(0, micros);
            println!("{:<20}  {:>16.9}  {:>10.6}  {:>16.9}", start, h.main_score, h.weight, h.points);
        }
    }
    println!("{:<12}  {:>16}  {:>16.9}", "carry-over", "", r.carry_points);
    println!("{:<12}  {:>16}  {:>16.9}", "main score", "", r.main_score);
    for s in r.signals.iter().filter(|s| s.per_actor > 0) {
        println!(
            "{}: {} events, {} counted (at most {} per shopper), {} over the cap",
            s.signal, s.events, s.value, s.per_actor, s.over_cap
        );
    }
    let retracted = [r.retracted_views, r.retracted_likes, r.retracted_orders];
    if retracted.iter().any(|n| *n > 0) {
        println!(
            "retracted: {} views, {} likes, {} orders ({}), counted in none of the parts",
            r.retracted_views, r.retracted_likes, r.retracted_orders, r.retracted_order_amount
        );
    }
    println!();
    println!("{:<12}  {:>14}  {:>14}  {:>14}  {:>8}  {:>4}", "AXIS", "RAW", "MEAN", "STD", "Z", "NORM");
    let named = [&r.views_axis, &r.likes_axis, &r.recency_axis];
    let axes: Vec<v1::AxisExplanation> = if r.axes.is_empty() {
        named
            .iter()
            .zip(["views", "likes", "recency"])
            .map(|(a, name)| v1::AxisExplanation { axis: name.into(), ..(*a).clone().unwrap_or_default() })
            .collect()
    } else {
        r.axes.clone()
    };
    for a in &axes {
        println!("{:<12}  {:>14.3}  {:>14.3}  {:>14.3}  {:>8.3}  {:>4}", a.axis, a.raw, a.mean, a.std, a.z, a.norm);
    }
    println!();
    match &r.above {
        Some(above) => println!(
            "rank {} above: product {} (main {}); {:.9} more main points to pass it",
            above.rank,
            above.product_id,
            above.breakdown.as_ref().map_or(0, |b| b.main_floor),
            r.points_to_overtake
        ),
        None => println!("ranked first"),
    }
    if r.stale {
        println!(
            "note: events arrived after version {}; these are the current counts, served at the next recompute",
            r.version
        );
    }
}

/// An instant as rankctl prints it, `2026-12-07T09:30:00Z` (UTC, whole seconds); `-` when unset.
pub fn instant(t: Option<&prost_types::Timestamp>) -> String {
    t.and_then(|t| chrono::DateTime::<chrono::Utc>::from_timestamp(t.seconds, t.nanos as u32))
        .map_or_else(|| "-".into(), |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}
