//! The one reading of a metrics row: every read of `product_daily_metrics` (the recompute's
//! scans, a live pass's changed rows, one product's days) selects [`COUNTERS`] in this order
//! at some position, the custom signals' values right after them, and decodes them here.
//!
//! By position, not by name: a name is formatted anew for every value sea-orm reads by it,
//! an allocation per column per row on a scan of a million rows.

use sea_orm::{DbErr, QueryResult};

use crate::domain::vocabulary::DailyMetrics;

/// The counters of a row, in the order they are selected and decoded.
pub const COUNTERS: [&str; 5] = ["views", "likes", "orders", "order_amount", "last_event_at"];

/// The counters selected from column `first` on, then `signals` custom signal values: the
/// day's metrics and its latest event (Unix microseconds).
pub fn read(row: &QueryResult, first: usize, signals: usize) -> Result<(DailyMetrics, i64), DbErr> {
    let int = |i| row.try_get_by_index::<i64>(first + i);
    let mut metrics = DailyMetrics::counts(int(0)?, int(1)?, int(2)?, int(3)?);
    for (slot, value) in metrics.custom.iter_mut().enumerate().take(signals) {
        *value = int(COUNTERS.len() + slot)?;
    }
    Ok((metrics, int(4)?))
}

/// The column after the counters and `signals` custom values read from `first`.
pub fn after(first: usize, signals: usize) -> usize {
    first + COUNTERS.len() + signals
}
