//! The reads and writes of ExplainRank's inputs: the record of each day's last recompute
//! (`ranking_runs`) and one product's daily rows.

use chrono::NaiveDate;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Order, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult, TransactionTrait};

use crate::domain::normalize::AxisStats;
use crate::domain::ranking::PopulationStats;
use crate::domain::score::DailyMetrics;
use crate::ports::{ProductDay, RankingRun, RecencyClock, StoreError};

const RUN_COLUMNS: [&str; 13] = [
    "metric_date",
    "version",
    "products",
    "view_mean",
    "view_std",
    "like_mean",
    "like_std",
    "recency_mean",
    "recency_std",
    "recency_origin_at",
    "recency_reference_at",
    "computed_at",
    "profile_fingerprint",
];

fn columns<const N: usize>(names: [&str; N]) -> [Alias; N] {
    names.map(Alias::new)
}

/// Replaces the day's record in one transaction (delete + insert: the same two statements on
/// every engine).
pub async fn record_run(db: &DatabaseConnection, run: &RankingRun) -> Result<(), StoreError> {
    let table = Alias::new("ranking_runs");
    let delete = Query::delete()
        .from_table(table.clone())
        .and_where(Expr::col(Alias::new("metric_date")).eq(run.date))
        .to_owned();
    let s = &run.stats;
    let insert = Query::insert()
        .into_table(table)
        .columns(columns(RUN_COLUMNS))
        .values_panic([
            run.date.into(),
            (run.version as i64).into(),
            (s.views.count as i64).into(),
            s.views.mean.into(),
            s.views.std.into(),
            s.likes.mean.into(),
            s.likes.std.into(),
            s.recency.mean.into(),
            s.recency.std.into(),
            run.clock.day_start_us.into(),
            run.clock.reference_us.into(),
            run.computed_at_us.into(),
            run.profile.as_str().into(),
        ])
        .to_owned();
    let txn = db.begin().await.map_err(StoreError::database)?;
    txn.execute(&delete).await.map_err(StoreError::database)?;
    txn.execute(&insert).await.map_err(StoreError::database)?;
    txn.commit().await.map_err(StoreError::database)
}

/// The day's record, if any.
pub async fn ranking_run(db: &impl ConnectionTrait, date: NaiveDate) -> Result<Option<RankingRun>, StoreError> {
    let select = Query::select()
        .columns(columns(RUN_COLUMNS))
        .from(Alias::new("ranking_runs"))
        .and_where(Expr::col(Alias::new("metric_date")).eq(date))
        .to_owned();
    let Some(row) = db.query_one(&select).await.map_err(StoreError::database)? else { return Ok(None) };
    let int = |i| row.try_get_by_index::<i64>(i).map_err(StoreError::database);
    let real = |i| row.try_get_by_index::<f64>(i).map_err(StoreError::database);
    let count = usize::try_from(int(2)?).map_err(|_| StoreError::Corrupt("negative population".into()))?;
    let axis =
        |mean, std| -> Result<AxisStats, StoreError> { Ok(AxisStats { mean: real(mean)?, std: real(std)?, count }) };
    Ok(Some(RankingRun {
        date,
        version: u64::try_from(int(1)?).map_err(|_| StoreError::Corrupt("negative version".into()))?,
        stats: PopulationStats { views: axis(3, 4)?, likes: axis(5, 6)?, recency: axis(7, 8)? },
        clock: RecencyClock { day_start_us: int(9)?, reference_us: int(10)? },
        computed_at_us: int(11)?,
        profile: row.try_get_by_index::<String>(12).map_err(StoreError::database)?,
    }))
}

/// One product's rows of `days`, by primary-key lookups (`metric_date IN (…)` on the key's
/// first column, the product on its second: no scan of a day).
pub async fn product_days(
    db: &impl ConnectionTrait,
    product_id: i64,
    days: &[NaiveDate],
) -> Result<Vec<ProductDay>, StoreError> {
    if days.is_empty() {
        return Ok(Vec::new());
    }
    let select = Query::select()
        .columns(columns(["metric_date", "views", "likes", "order_amount", "orders", "last_event_at"]))
        .from(Alias::new("product_daily_metrics"))
        .and_where(Expr::col(Alias::new("metric_date")).is_in(days.iter().copied()))
        .and_where(Expr::col(Alias::new("product_id")).eq(product_id))
        .order_by(Alias::new("metric_date"), Order::Asc)
        .to_owned();
    let rows = db.query_all(&select).await.map_err(StoreError::database)?;
    rows.iter().map(product_day).collect()
}

fn product_day(row: &QueryResult) -> Result<ProductDay, StoreError> {
    let int = |i| row.try_get_by_index::<i64>(i).map_err(StoreError::database);
    Ok(ProductDay {
        date: row.try_get_by_index::<NaiveDate>(0).map_err(StoreError::database)?,
        metrics: DailyMetrics { views: int(1)?, likes: int(2)?, order_amount: int(3)? },
        orders: int(4)?,
        last_event_us: int(5)?,
    })
}
