//! The one reading of a metrics row: every read of `product_daily_metrics` (the recompute's
//! scans, a live pass's changed rows, one product's days) selects [`COUNTERS`] in this order
//! at some position, the custom signals' values right after them, and decodes them here.
//!
//! By position, not by name: a name is formatted anew for every value sea-orm reads by it,
//! an allocation per column per row on a scan of a million rows.

use sea_orm::sea_query::{Alias, Expr, Func, Query, SelectStatement};
use sea_orm::{DbErr, QueryResult};

use super::signals::column;

use crate::domain::vocabulary::DailyMetrics;

/// The counters of a row, in the order they are selected and decoded.
pub const COUNTERS: [&str; 5] = ["views", "likes", "orders", "order_amount", "last_event_at"];

/// A select of `table`'s rows as [`read`] decodes them from column 1: `product_id`, the
/// counters, then each custom signal of `signals` (`None`: a signal without a column, read as
/// 0; a NULL column as 0); the caller adds its own columns and conditions after them.
pub fn select(table: &str, signals: &[Option<u8>]) -> SelectStatement {
    let mut select = Query::select()
        .column(Alias::new("product_id"))
        .columns(COUNTERS.map(Alias::new))
        .from(Alias::new(table))
        .to_owned();
    for slot in signals {
        match slot {
            Some(slot) => select.expr(Func::coalesce([Expr::col(Alias::new(column(*slot))), Expr::val(0i64)])),
            None => select.expr(Expr::val(0i64)),
        };
    }
    select
}

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
