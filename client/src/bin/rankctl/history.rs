//! `rankctl history`: a product's served rank on each ended day of a range, its best rank,
//! its days in the top 10 and 100, its streak and the days restated after they ended.

use clap::Args;
use ranking_client::{RankingClient, v1};

use crate::output::json;

#[derive(Args)]
pub struct HistoryArgs {
    product_id: i64,
    /// A segment's board (its top 100 is kept); the whole ranking by default.
    #[arg(long, default_value = "")]
    segment: String,
    /// The weekly board instead of the daily one (`--window weekly`).
    #[arg(long, conflicts_with = "window")]
    weekly: bool,
    /// The board's window: daily (the default) or weekly (the others keep no history).
    #[arg(long, value_parser = crate::window_arg)]
    window: Option<v1::Window>,
    /// First day, YYYY-MM-DD (default: 89 days before --to).
    #[arg(long, default_value = "")]
    from: String,
    /// Last day, YYYY-MM-DD (default: the last ended day).
    #[arg(long, default_value = "")]
    to: String,
}

pub async fn run(client: &RankingClient, args: HistoryArgs, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let window = match (args.weekly, args.window) {
        (true, _) => v1::Window::Weekly,
        (false, named) => named.unwrap_or(v1::Window::Daily),
    };
    let request = v1::GetRankHistoryRequest {
        product_id: args.product_id,
        segment: args.segment,
        window: window as i32,
        from: args.from,
        to: args.to,
        profile: String::new(),
    };
    let r = client.rank_history(request).await?;
    if json {
        let days: Vec<_> = r
            .days
            .iter()
            .map(|d| json!({ "date": d.date, "rank": d.rank, "organic_rank": d.organic_rank, "main_floor": d.main_floor }))
            .collect();
        let history = json!({
            "best_rank": r.best_rank,
            "best_rank_date": r.best_rank_date,
            "days_in_top_10": r.days_in_top_10,
            "days_in_top_100": r.days_in_top_100,
            "streak_in_top_100": r.streak_in_top_100,
            "restated_days": r.restated_days,
            "days": days,
        });
        println!("{history}");
        return Ok(());
    }
    match r.best_rank {
        0 => println!("never in the kept top"),
        best => println!("best rank {best} on {}", r.best_rank_date),
    }
    println!(
        "{} days in the top 10, {} in the top 100, {} in a row up to the last; {} restated",
        r.days_in_top_10, r.days_in_top_100, r.streak_in_top_100, r.restated_days
    );
    println!("{:<12} {:>6} {:>8} {:>12}", "date", "rank", "organic", "main score");
    for d in r.days.iter().filter(|d| d.rank > 0) {
        println!("{:<12} {:>6} {:>8} {:>12}", d.date, d.rank, d.organic_rank, d.main_floor);
    }
    Ok(())
}
