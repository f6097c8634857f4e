//! The live bench's tables, printed as Markdown.

use super::Figures;
use super::scrape::percentile;

/// Every case's figures: the freshness and the passes; the bytes written; the control put,
/// reads against the health check and resident memory.
pub(super) fn print(all: &[Figures]) {
    println!("\n## Live exact ranking under RecordEvents load (throwaway PostgreSQL, one Redis, 2 release replicas)\n");
    println!(
        "| products | RANKING_LIVE_INTERVAL | popularity | events/s | commit → other replica's GetRank p50 / p99 / max ms (probes) | commit → published p50 / p99 ≤ ms | passes (busy, failed) | SQL rows read / rows changed per pass | holder CPU ms per pass | pass wall ms (mean, slowest ≤) | phases ms: epoch / read / rank / publish / trending (trending ÷ rank + publish) | full Recompute: wall ms, CPU ms, rows read | GetRank / health rate while passes run |"
    );
    println!("|---:|---|---|---:|---|---|---:|---|---:|---:|---|---|---:|");
    for f in all {
        let mut sorted = f.freshness_ms.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "| {} | {} | {} | {:.0} | {:.0} / {:.0} / {:.0} ({}) | {:.0} / {:.0} | {:.0} ({:.0}, {:.0}) | {:.0} / {:.0} ({:.2}×) | {:.0} | {:.0}, {:.0} | {:.0} / {:.0} / {:.0} / {:.0} / {:.0} ({:.2}×) | {:.0}, {:.0}, {} | {:.2} |",
            f.products,
            f.interval,
            f.distribution,
            f.events_per_second,
            percentile(&sorted, 0.5),
            percentile(&sorted, 0.99),
            sorted.last().copied().unwrap_or(f64::NAN),
            sorted.len(),
            f.published_ms.0,
            f.published_ms.1,
            f.passes,
            f.busy_failed.0,
            f.busy_failed.1,
            f.rows_read_per_pass,
            f.rows_changed_per_pass,
            f.rows_read_per_pass / f.rows_changed_per_pass.max(1.0),
            f.cpu_ms_per_pass,
            f.pass_ms,
            f.slowest_pass_ms,
            f.phases_ms[0],
            f.phases_ms[1],
            f.phases_ms[2],
            f.phases_ms[3],
            f.phases_ms[4],
            f.phases_ms[4] / (f.phases_ms[2] + f.phases_ms[3]).max(1e-9),
            f.recompute_ms,
            f.recompute_cpu_ms,
            f.recompute_rows,
            f.rank_vs_health,
        );
    }
    println!(
        "\nTargets: commit → other replica p99 ≤ 1,000 ms at 1,000,000 products, ≤ 2,000 ms at 10,000,000; rows read proportional to rows changed; GetRank within 10 % of the health check; the trending board ≤ 0.3 × the daily board's rank + publish."
    );
    println!(
        "\n| products | RANKING_LIVE_INTERVAL | popularity | bytes to Redis per pass: whole / delta | by board: whole / delta | one board's packed copy | share of it |"
    );
    println!("|---:|---|---|---|---|---:|---:|");
    for f in all {
        let board = f.products as f64 * 16.0;
        let (whole, delta) = f.bytes_per_pass;
        let by_board: Vec<String> = f
            .bytes_by_board
            .iter()
            .filter(|(_, w, d)| w + d > 0.0)
            .map(|(board, w, d)| format!("{board} {w:.0} / {d:.0}"))
            .collect();
        println!(
            "| {} | {} | {} | {:.0} / {:.0} | {} | {:.0} | {:.1} % |",
            f.products,
            f.interval,
            f.distribution,
            whole,
            delta,
            by_board.join(", "),
            board,
            (whole + delta) / board * 100.0
        );
    }
    println!(
        "\n| products | RANKING_LIVE_INTERVAL | popularity | 5 pins to position 1 (the first from rank): PutControl → served, median / slowest ms | DeleteControl → served, median / slowest ms | GetRank / health | GetTopN (20) / health | RSS MB: holder / other replica | RSS bytes per product and board (3 boards): holder / other | Redis used_memory peak MB |"
    );
    println!("|---:|---|---|---|---|---:|---:|---|---|---:|");
    for f in all {
        let (rank, served, gone) = f.control;
        let per = |mb: f64| mb * 1048576.0 / (f.products as f64 * 3.0);
        println!(
            "| {} | {} | {} | ({rank}) {:.0} / {:.0} | {:.0} / {:.0} | {:.2} | {:.2} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} |",
            f.products,
            f.interval,
            f.distribution,
            served.0,
            served.1,
            gone.0,
            gone.1,
            f.rank_vs_health,
            f.top_vs_health,
            f.rss_mb.0,
            f.rss_mb.1,
            per(f.rss_mb.0),
            per(f.rss_mb.1),
            f.redis_peak_mb
        );
    }
    println!(
        "\nTargets: a control put served ≤ 250 ms at 1,000,000 products, ≤ 500 ms at 10,000,000; reads as at 1,000,000 (within 10 % of the health check); a replica's RSS ≤ 64 bytes per product and board (the holder also keeps the day's per-product state)."
    );
}
