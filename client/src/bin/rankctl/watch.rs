//! `rankctl watch`: a top followed live, redrawn in place on a terminal whenever it changes
//! (one JSON line per change with --json), until Ctrl-C or the stream ends.

use std::io::IsTerminal;

use ranking_client::{RankingClient, v1};

use super::Ranking;
use super::output::{entries_json, json, table};

/// Watches the top `limit` of `ranking`.
pub async fn run(
    client: &RankingClient,
    ranking: Ranking,
    limit: u32,
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let Ranking { window: w, date, hour, segment, profile, actor_id } = ranking;
    let request = v1::WatchTopNRequest { window: w as i32, date, hour, segment, limit, profile, actor_id };
    let mut changes = client.watch_top_n(request);
    let terminal = std::io::stdout().is_terminal();
    while let Some(change) = futures_util::StreamExt::next(&mut changes).await {
        let r = change?;
        if json {
            let top = json!({ "date": r.date, "total": r.total, "version": r.version, "products": entries_json(&r.products) });
            println!("{top}");
            continue;
        }
        if terminal {
            // Clear the screen and go home: the table is redrawn in place.
            print!("\x1b[2J\x1b[H");
        }
        let hour = r.hour.map(|h| format!(" {h:02}:00")).unwrap_or_default();
        println!("{}{hour} — {} ranked (version {})", r.date, r.total, r.version);
        table(&r.products);
    }
    Ok(())
}
