//! What the live bench reads off the replicas' metrics endpoints: a scrape, and quantiles of
//! the histograms observed between two scrapes.

use crate::helpers::metric_or_zero as sample;

pub(super) async fn scrape(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("metrics endpoint");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n").await.expect("write");
    let mut body = String::new();
    conn.read_to_string(&mut body).await.expect("read");
    body
}

/// The smallest bucket bound of histogram `name` holding every observation made between the
/// two scrapes: an upper bound of the slowest one (`NaN` when none was made).
pub(super) fn slowest(before: &str, after: &str, name: &str) -> f64 {
    bucket_quantile(before, after, name, 1.0)
}

/// The smallest bucket bound of histogram `name` holding at least `q` of the observations
/// made between the two scrapes (`NaN` when none was made).
pub(super) fn bucket_quantile(before: &str, after: &str, name: &str, q: f64) -> f64 {
    let count = sample(after, &format!("{name}_count")) - sample(before, &format!("{name}_count"));
    let bucket = format!("{name}_bucket{{le=\"");
    let bounds = after.lines().filter_map(|l| l.strip_prefix(bucket.as_str())?.split('"').next());
    bounds
        .filter_map(|le| {
            let series = format!("{bucket}{le}\"}}");
            let within = sample(after, &series) - sample(before, &series);
            (count > 0.0 && within >= q * count).then(|| le.parse::<f64>().unwrap_or(f64::INFINITY))
        })
        .fold(f64::NAN, f64::min)
}

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub(super) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}
