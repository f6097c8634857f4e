//! `rankctl compare`: two boards compared (CompareRankings): rank-biased overlap and its lower
//! bound, weighted tau, the overlap of the top 10 and 100, and the products that moved most.
//! Each board is `window[/date][/segment]`, e.g. `daily`, `daily/2026-12-04`,
//! `weekly//category:shoes`.

use clap::Args;
use ranking_client::{RankingClient, v1};

use crate::output::json;

#[derive(Args)]
pub struct CompareArgs {
    /// The first board: window[/date][/segment] (window: daily, weekly, hourly, trending).
    a: String,
    /// The second board, the same way.
    b: String,
    /// Entries of each top compared, 1-1,000.
    #[arg(long, default_value_t = 100)]
    depth: u32,
    /// RBO's persistence p, in (0, 1).
    #[arg(long, default_value_t = 0.9)]
    persistence: f64,
}

fn board(text: &str, depth: u32) -> Result<v1::GetTopNRequest, String> {
    let mut parts = text.splitn(3, '/');
    let window = match parts.next().unwrap_or_default() {
        "" => v1::Window::Daily,
        name => crate::window_arg(name)?,
    };
    Ok(v1::GetTopNRequest {
        window: window as i32,
        date: parts.next().unwrap_or_default().to_string(),
        segment: parts.next().unwrap_or_default().to_string(),
        limit: depth,
        ..Default::default()
    })
}

pub async fn run(client: &RankingClient, args: CompareArgs, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    let request = v1::CompareRankingsRequest {
        a: Some(board(&args.a, args.depth)?),
        b: Some(board(&args.b, args.depth)?),
        persistence: args.persistence,
    };
    let r = client.compare_rankings(request).await?;
    if json {
        let shifts: Vec<_> = r
            .largest_shifts
            .iter()
            .map(|s| json!({ "product_id": s.product_id, "rank_a": s.rank_a, "rank_b": s.rank_b }))
            .collect();
        let compared = json!({
            "rbo_ext": r.rbo_ext,
            "rbo_min": r.rbo_min,
            "weighted_tau": r.weighted_tau,
            "overlap_at_10": r.overlap_at_10,
            "overlap_at_100": r.overlap_at_100,
            "version_a": r.version_a,
            "version_b": r.version_b,
            "largest_shifts": shifts,
        });
        println!("{compared}");
        return Ok(());
    }
    println!("rank-biased overlap {:.4} (at least {:.4}), weighted tau {:.4}", r.rbo_ext, r.rbo_min, r.weighted_tau);
    println!("overlap of the top 10 {:.2}, of the top 100 {:.2}", r.overlap_at_10, r.overlap_at_100);
    println!("{:>20}  {:>6}  {:>6}", "product", "rank a", "rank b");
    for s in &r.largest_shifts {
        let rank = |r: u64| if r == 0 { "-".to_string() } else { r.to_string() };
        println!("{:>20}  {:>6}  {:>6}", s.product_id, rank(s.rank_a), rank(s.rank_b));
    }
    Ok(())
}
