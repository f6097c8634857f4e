//! What rankctl prints: ranked entries as a table or JSON lines, and an explanation.

use ranking_client::v1;

pub fn entry_json(p: &v1::RankedProduct) -> String {
    let breakdown = p
        .breakdown
        .as_ref()
        .map(|b| {
            format!(
                r#","breakdown":{{"main_floor":{},"view_norm":{},"like_norm":{},"recency_norm":{}}}"#,
                b.main_floor, b.view_norm, b.like_norm, b.recency_norm
            )
        })
        .unwrap_or_default();
    format!(
        r#"{{"rank":{},"product_id":{},"score":{},"tied_rank":{},"previous_rank":{},"rank_change":{},"top_percent":{}{breakdown}}}"#,
        p.rank, p.product_id, p.score, p.tied_rank, p.previous_rank, p.rank_change, p.top_percent
    )
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

pub fn table(products: &[v1::RankedProduct]) {
    println!(
        "{:>6}  {:>6}  {:>6}  {:>7}  {:>12}  {:>16}  {:>10}  {:>4}  {:>4}  {:>7}",
        "RANK", "TIED", "CHANGE", "TOP %", "PRODUCT", "SCORE", "MAIN", "VIEW", "LIKE", "RECENCY"
    );
    for p in products {
        let head = format!("{:>6}  {:>6}  {:>6}  {:>7.3}", p.rank, p.tied_rank, change(p), p.top_percent);
        match &p.breakdown {
            Some(b) => println!(
                "{head}  {:>12}  {:>16.9}  {:>10}  {:>4}  {:>4}  {:>7}",
                p.product_id, p.score, b.main_floor, b.view_norm, b.like_norm, b.recency_norm
            ),
            None => println!("{head}  {:>12}  {:>16.6}", p.product_id, p.score),
        }
    }
}

fn axis_json(a: Option<&v1::AxisExplanation>) -> String {
    let a = a.cloned().unwrap_or_default();
    format!(r#"{{"raw":{},"mean":{},"std":{},"z":{},"norm":{}}}"#, a.raw, a.mean, a.std, a.z, a.norm)
}

pub fn explain_json(r: &v1::ExplainRankResponse) -> String {
    format!(
        concat!(
            r#"{{"date":"{}","version":{},"stale":{},"product":{},"views":{},"likes":{},"orders":{},"order_amount":{},"#,
            r#""view_points":{},"like_points":{},"order_points":{},"carry_points":{},"main_score":{},"#,
            r#""views_axis":{},"likes_axis":{},"recency_axis":{},"above":{},"points_to_overtake":{}}}"#
        ),
        r.date,
        r.version,
        r.stale,
        entry_json(&r.product.clone().unwrap_or_default()),
        r.views,
        r.likes,
        r.orders,
        r.order_amount,
        r.view_points,
        r.like_points,
        r.order_points,
        r.carry_points,
        r.main_score,
        axis_json(r.views_axis.as_ref()),
        axis_json(r.likes_axis.as_ref()),
        axis_json(r.recency_axis.as_ref()),
        r.above.as_ref().map_or_else(|| "null".to_owned(), entry_json),
        r.points_to_overtake
    )
}

pub fn explain_table(r: &v1::ExplainRankResponse) {
    let p = r.product.clone().unwrap_or_default();
    println!("product {} on {} (version {}): rank {}", p.product_id, r.date, r.version, p.rank);
    table(std::slice::from_ref(&p));
    println!();
    println!("{:<12}  {:>16}  {:>16}", "PART", "COUNT", "POINTS");
    println!("{:<12}  {:>16}  {:>16.9}", "views", r.views, r.view_points);
    println!("{:<12}  {:>16}  {:>16.9}", "likes", r.likes, r.like_points);
    println!("{:<12}  {:>16}  {:>16.9}", "orders", format!("{} / {}", r.orders, r.order_amount), r.order_points);
    println!("{:<12}  {:>16}  {:>16.9}", "carry-over", "", r.carry_points);
    println!("{:<12}  {:>16}  {:>16.9}", "main score", "", r.main_score);
    println!();
    println!("{:<8}  {:>14}  {:>14}  {:>14}  {:>8}  {:>4}", "AXIS", "RAW", "MEAN", "STD", "Z", "NORM");
    for (name, a) in [("views", &r.views_axis), ("likes", &r.likes_axis), ("recency", &r.recency_axis)] {
        let a = a.clone().unwrap_or_default();
        println!("{name:<8}  {:>14.3}  {:>14.3}  {:>14.3}  {:>8.3}  {:>4}", a.raw, a.mean, a.std, a.z, a.norm);
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
