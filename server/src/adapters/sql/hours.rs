//! The trending board's reads of `product_hourly_metrics`: every hour of a range of days (a
//! recompute, a live pass's first), or only those stamped with a range of change epochs (a
//! live pass's next ones, through the epoch index), streamed; and one product's hours
//! (ExplainRank), a primary-key lookup per day: the store's [`HourScans`].

use std::ops::Range;

use async_trait::async_trait;
use chrono::NaiveDate;
use futures_util::TryStreamExt;
use sea_orm::sea_query::{Alias, Expr, ExprTrait};
use sea_orm::{DatabaseConnection, StreamTrait};

use super::SqlMetricsStore;
use super::metrics_row;
use crate::domain::trending::HourRow;
use crate::ports::{HourScans, StoreError};

/// What hourly rows to read.
enum Hours<'a> {
    /// Every row of the days.
    All,
    /// The rows written with an epoch of the range.
    Changed(Range<i64>),
    /// One product's rows, by primary key.
    Of(i64, &'a [NaiveDate]),
}

/// The hourly rows of `days` that `which` selects: `product_id`, the counters, the custom
/// `signals` (`None`: a signal without a column, read as 0), then `hour_start`.
async fn hour_rows(
    db: &DatabaseConnection,
    days: (NaiveDate, NaiveDate),
    which: Hours<'_>,
    signals: &[Option<u8>],
    visit: &mut (dyn FnMut(HourRow) + Send),
) -> Result<u64, StoreError> {
    let mut select = metrics_row::select("product_hourly_metrics", signals);
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

#[async_trait]
impl HourScans for SqlMetricsStore {
    async fn scan_hours(
        &self,
        first: NaiveDate,
        last: NaiveDate,
        epochs: Option<std::ops::Range<i64>>,
        signals: &[String],
        visit: &mut (dyn FnMut(HourRow) + Send),
    ) -> Result<u64, StoreError> {
        let columns = self.columns_of(signals).await?;
        let which = epochs.map_or(Hours::All, Hours::Changed);
        hour_rows(&self.db, (first, last), which, &columns, visit).await
    }

    async fn product_hours(
        &self,
        product_id: i64,
        first: NaiveDate,
        last: NaiveDate,
        signals: &[String],
    ) -> Result<Vec<HourRow>, StoreError> {
        let columns = self.columns_of(signals).await?;
        let dates: Vec<NaiveDate> = first.iter_days().take_while(|d| *d <= last).collect();
        let mut rows = Vec::new();
        hour_rows(&self.db, (first, last), Hours::Of(product_id, &dates), &columns, &mut |r| rows.push(r)).await?;
        Ok(rows)
    }
}
