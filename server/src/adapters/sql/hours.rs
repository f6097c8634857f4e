//! The trending board's reads of `product_hourly_metrics`: every hour of a range of days (a
//! recompute, a live pass's first), or only those stamped with a range of change epochs (a
//! live pass's next ones, through the epoch index), streamed; and one product's hours
//! (ExplainRank), a primary-key lookup per day.

use std::ops::Range;

use chrono::NaiveDate;
use futures_util::TryStreamExt;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Func, Query};
use sea_orm::{DatabaseConnection, StreamTrait};

use super::metrics_row::{self, COUNTERS};
use super::signals::column;
use crate::domain::trending::HourRow;
use crate::ports::StoreError;

/// What hourly rows to read.
pub enum Hours<'a> {
    /// Every row of the days.
    All,
    /// The rows written with an epoch of the range.
    Changed(Range<i64>),
    /// One product's rows, by primary key.
    Of(i64, &'a [NaiveDate]),
}

/// The hourly rows of `days` that `which` selects: `product_id`, the counters, the custom
/// `signals` (`None`: a signal without a column, read as 0), then `hour_start`.
pub async fn hour_rows(
    db: &DatabaseConnection,
    days: (NaiveDate, NaiveDate),
    which: Hours<'_>,
    signals: &[Option<u8>],
    visit: &mut (dyn FnMut(HourRow) + Send),
) -> Result<u64, StoreError> {
    let mut select = Query::select()
        .column(Alias::new("product_id"))
        .columns(COUNTERS.map(Alias::new))
        .from(Alias::new("product_hourly_metrics"))
        .to_owned();
    for slot in signals {
        match slot {
            Some(slot) => select.expr(Func::coalesce([Expr::col(Alias::new(column(*slot))), Expr::val(0i64)])),
            None => select.expr(Expr::val(0i64)),
        };
    }
    select.column(Alias::new("hour_start"));
    let day = Alias::new("metric_date");
    match which {
        Hours::All => select.and_where(Expr::col(day).between(days.0, days.1)),
        Hours::Changed(epochs) => select
            .and_where(Expr::col(day).between(days.0, days.1))
            .and_where(Expr::col(Alias::new("change_epoch")).gte(epochs.start))
            .and_where(Expr::col(Alias::new("change_epoch")).lt(epochs.end)),
        // A lookup of the key's prefix per day, rather than a range over every product.
        Hours::Of(product_id, dates) => select
            .and_where(Expr::col(day).is_in(dates.iter().copied()))
            .and_where(Expr::col(Alias::new("product_id")).eq(product_id)),
    };
    let statement = db.get_database_backend().build(&select);
    let rows = db.stream_raw(statement).await.map_err(StoreError::database)?;
    let mut rows = std::pin::pin!(rows);
    let mut count = 0;
    let start_column = metrics_row::after(1, signals.len());
    while let Some(row) = rows.try_next().await.map_err(StoreError::database)? {
        let (metrics, last_event_us) = metrics_row::read(&row, 1, signals.len()).map_err(StoreError::database)?;
        visit(HourRow {
            product_id: row.try_get_by_index(0).map_err(StoreError::database)?,
            start_us: row.try_get_by_index(start_column).map_err(StoreError::database)?,
            metrics,
            last_event_us,
        });
        count += 1;
        // As the recompute's scans: a buffered driver never returns Pending by itself.
        tokio::task::consume_budget().await;
    }
    Ok(count)
}
