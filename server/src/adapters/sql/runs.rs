//! The reads and writes of ExplainRank's inputs: the record of each day's last recompute
//! (`ranking_runs` for the service's profile, `profile_runs` for the variants'), the profiles versions were computed with (`scoring_profiles`) and one
//! product's daily rows with its custom signals.

use chrono::NaiveDate;
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Func, Order, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult, TransactionTrait};

use super::metrics_row::{self, COUNTERS};
use super::signals;
use crate::domain::normalize::AxisStats;
use crate::domain::ranking::PopulationStats;
use crate::domain::vocabulary::Retracted;
use crate::ports::{ProductDay, RankingRun, RecencyClock, StoreError};

const RUN_COLUMNS: [&str; 14] = [
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
    "axis_stats",
];

/// `mean std count` per axis, `;`-separated; `{:?}` of an `f64` is its shortest exact form.
fn axis_stats_text(stats: &PopulationStats) -> String {
    let axes: Vec<String> = stats.axes.iter().map(|a| format!("{:?} {:?} {}", a.mean, a.std, a.count)).collect();
    axes.join(";")
}

fn parse_axis_stats(text: &str) -> Result<PopulationStats, StoreError> {
    let corrupt = || StoreError::Corrupt(format!("ranking_runs.axis_stats {text:?}"));
    let axes = text
        .split(';')
        .map(|axis| {
            let mut parts = axis.split(' ');
            let mut next = || parts.next().ok_or_else(corrupt);
            let (mean, std, count) = (next()?, next()?, next()?);
            Ok(AxisStats {
                mean: mean.parse().map_err(|_| corrupt())?,
                std: std.parse().map_err(|_| corrupt())?,
                count: count.parse().map_err(|_| corrupt())?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(PopulationStats { axes })
}

fn columns<const N: usize>(names: [&str; N]) -> [Alias; N] {
    names.map(Alias::new)
}

/// Replaces the day's record in one transaction (delete + insert: the same two statements on
/// every engine).
pub async fn record_run(db: &DatabaseConnection, run: &RankingRun) -> Result<(), StoreError> {
    if !run.profile_name.is_empty() {
        return record_variant_run(db, run).await;
    }
    let table = Alias::new("ranking_runs");
    let select = Query::select()
        .column(Alias::new("version"))
        .from(table.clone())
        .and_where(Expr::col(Alias::new("metric_date")).eq(run.date))
        .to_owned();
    let delete = Query::delete()
        .from_table(table.clone())
        .and_where(Expr::col(Alias::new("metric_date")).eq(run.date))
        .to_owned();
    let s = &run.stats;
    // The original columns hold the first three axes (the built-in profile's views,
    // likes, recency); `axis_stats` holds every axis of any profile.
    let empty = AxisStats { mean: 0.0, std: 0.0, count: 0 };
    let axis = |i: usize| s.axes.get(i).copied().unwrap_or(empty);
    let insert = Query::insert()
        .into_table(table)
        .columns(columns(RUN_COLUMNS))
        .values_panic([
            run.date.into(),
            (run.version as i64).into(),
            (s.population() as i64).into(),
            axis(0).mean.into(),
            axis(0).std.into(),
            axis(1).mean.into(),
            axis(1).std.into(),
            axis(2).mean.into(),
            axis(2).std.into(),
            run.clock.day_start_us.into(),
            run.clock.reference_us.into(),
            run.computed_at_us.into(),
            run.profile.as_str().into(),
            axis_stats_text(s).into(),
        ])
        .to_owned();
    replace(db, (&select, run.version), &delete, &insert).await
}

/// The day's record, if any.
pub async fn ranking_run(
    db: &impl ConnectionTrait,
    date: NaiveDate,
    profile_name: &str,
) -> Result<Option<RankingRun>, StoreError> {
    if !profile_name.is_empty() {
        return variant_run(db, date, profile_name).await;
    }
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
    let text = row.try_get_by_index::<String>(13).map_err(StoreError::database)?;
    let stats = if text.is_empty() {
        PopulationStats { axes: vec![axis(3, 4)?, axis(5, 6)?, axis(7, 8)?] }
    } else {
        parse_axis_stats(&text)?
    };
    Ok(Some(RankingRun {
        date,
        version: u64::try_from(int(1)?).map_err(|_| StoreError::Corrupt("negative version".into()))?,
        stats,
        clock: RecencyClock { day_start_us: int(9)?, reference_us: int(10)? },
        computed_at_us: int(11)?,
        profile: row.try_get_by_index::<String>(12).map_err(StoreError::database)?,
        profile_name: String::new(),
    }))
}

const VARIANT_COLUMNS: [&str; 9] = [
    "profile",
    "metric_date",
    "version",
    "products",
    "recency_origin_at",
    "recency_reference_at",
    "computed_at",
    "profile_fingerprint",
    "axis_stats",
];

/// `delete` then `insert` in one transaction: a day's record replaced whole, unless it records
/// a version as new as `version` or newer (`select` reads its version): a writer that froze
/// after its publication never puts back the statistics of a version a later one replaced.
async fn replace(
    db: &DatabaseConnection,
    (select, version): (&sea_orm::sea_query::SelectStatement, u64),
    delete: &sea_orm::sea_query::DeleteStatement,
    insert: &sea_orm::sea_query::InsertStatement,
) -> Result<(), StoreError> {
    let txn = db.begin().await.map_err(StoreError::database)?;
    if let Some(row) = txn.query_one(select).await.map_err(StoreError::database)? {
        let recorded = row.try_get_by_index::<i64>(0).map_err(StoreError::database)?;
        if u64::try_from(recorded).is_ok_and(|recorded| recorded >= version) {
            return txn.commit().await.map_err(StoreError::database);
        }
    }
    txn.execute(delete).await.map_err(StoreError::database)?;
    txn.execute(insert).await.map_err(StoreError::database)?;
    txn.commit().await.map_err(StoreError::database)
}

/// Replaces a variant's record of the day, as [`record_run`] does the service profile's.
async fn record_variant_run(db: &DatabaseConnection, run: &RankingRun) -> Result<(), StoreError> {
    let table = Alias::new("profile_runs");
    let select = Query::select()
        .column(Alias::new("version"))
        .from(table.clone())
        .and_where(Expr::col(Alias::new("profile")).eq(run.profile_name.as_str()))
        .and_where(Expr::col(Alias::new("metric_date")).eq(run.date))
        .to_owned();
    let delete = Query::delete()
        .from_table(table.clone())
        .and_where(Expr::col(Alias::new("profile")).eq(run.profile_name.as_str()))
        .and_where(Expr::col(Alias::new("metric_date")).eq(run.date))
        .to_owned();
    let insert = Query::insert()
        .into_table(table)
        .columns(columns(VARIANT_COLUMNS))
        .values_panic([
            run.profile_name.as_str().into(),
            run.date.into(),
            (run.version as i64).into(),
            (run.stats.population() as i64).into(),
            run.clock.day_start_us.into(),
            run.clock.reference_us.into(),
            run.computed_at_us.into(),
            run.profile.as_str().into(),
            axis_stats_text(&run.stats).into(),
        ])
        .to_owned();
    replace(db, (&select, run.version), &delete, &insert).await
}

/// A variant's record of the day, if any.
async fn variant_run(
    db: &impl ConnectionTrait,
    date: NaiveDate,
    profile_name: &str,
) -> Result<Option<RankingRun>, StoreError> {
    let select = Query::select()
        .columns(columns(VARIANT_COLUMNS))
        .from(Alias::new("profile_runs"))
        .and_where(Expr::col(Alias::new("profile")).eq(profile_name))
        .and_where(Expr::col(Alias::new("metric_date")).eq(date))
        .to_owned();
    let Some(row) = db.query_one(&select).await.map_err(StoreError::database)? else { return Ok(None) };
    let int = |i| row.try_get_by_index::<i64>(i).map_err(StoreError::database);
    let text = |i| row.try_get_by_index::<String>(i).map_err(StoreError::database);
    Ok(Some(RankingRun {
        date,
        version: u64::try_from(int(2)?).map_err(|_| StoreError::Corrupt("negative version".into()))?,
        stats: parse_axis_stats(&text(8)?)?,
        clock: RecencyClock { day_start_us: int(4)?, reference_us: int(5)? },
        computed_at_us: int(6)?,
        profile: text(7)?,
        profile_name: profile_name.to_string(),
    }))
}

/// Stores `body`, the canonical text of the profile of `fingerprint`, once.
pub async fn record_profile(db: &DatabaseConnection, fingerprint: &str, body: &str) -> Result<(), StoreError> {
    if stored_profile(db, fingerprint).await?.is_some() {
        return Ok(());
    }
    let insert = Query::insert()
        .into_table(Alias::new("scoring_profiles"))
        .columns(columns(["fingerprint", "body"]))
        .values_panic([fingerprint.into(), body.into()])
        .to_owned();
    match db.execute(&insert).await {
        Ok(_) => Ok(()),
        // Another replica stored the same profile between the look-up and the insert.
        Err(_) if stored_profile(db, fingerprint).await?.is_some() => Ok(()),
        Err(e) => Err(StoreError::database(e)),
    }
}

/// The canonical text of the profile of `fingerprint`, when one was stored.
pub async fn stored_profile(db: &impl ConnectionTrait, fingerprint: &str) -> Result<Option<String>, StoreError> {
    let select = Query::select()
        .column(Alias::new("body"))
        .from(Alias::new("scoring_profiles"))
        .and_where(Expr::col(Alias::new("fingerprint")).eq(fingerprint))
        .to_owned();
    let row = db.query_one(&select).await.map_err(StoreError::database)?;
    row.map(|r| r.try_get_by_index::<String>(0).map_err(StoreError::database)).transpose()
}

/// One product's rows of `days`, by primary-key lookups (`metric_date IN (…)` on the key's
/// first column, the product on its second: no scan of a day), with the values of the
/// custom signals in `signals` (their columns, in slot order; `None` reads 0).
pub async fn product_days(
    db: &impl ConnectionTrait,
    product_id: i64,
    days: &[NaiveDate],
    signals: &[Option<u8>],
) -> Result<Vec<ProductDay>, StoreError> {
    if days.is_empty() {
        return Ok(Vec::new());
    }
    let mut select = Query::select()
        .column(Alias::new("metric_date"))
        .columns(COUNTERS.map(Alias::new))
        .from(Alias::new("product_daily_metrics"))
        .and_where(Expr::col(Alias::new("metric_date")).is_in(days.iter().copied()))
        .and_where(Expr::col(Alias::new("product_id")).eq(product_id))
        .order_by(Alias::new("metric_date"), Order::Asc)
        .to_owned();
    for slot in signals {
        match slot {
            Some(slot) => select.expr(Func::coalesce([Expr::col(Alias::new(signals::column(*slot))), Expr::val(0i64)])),
            None => select.expr(Expr::val(0i64)),
        };
    }
    select.columns(RETRACTED.map(Alias::new));
    let rows = db.query_all(&select).await.map_err(StoreError::database)?;
    rows.iter().map(|row| product_day(row, signals.len()).map_err(StoreError::database)).collect()
}

/// What retractions took from a day, selected after its counters and custom signals.
const RETRACTED: [&str; 4] = ["retracted_views", "retracted_likes", "retracted_orders", "retracted_order_amount"];

fn product_day(row: &QueryResult, signals: usize) -> Result<ProductDay, sea_orm::DbErr> {
    let (metrics, last_event_us) = metrics_row::read(row, 1, signals)?;
    let next = metrics_row::after(1, signals);
    let int = |i| row.try_get_by_index::<i64>(next + i);
    Ok(ProductDay {
        date: row.try_get_by_index::<NaiveDate>(0)?,
        metrics,
        last_event_us,
        retracted: Retracted { views: int(0)?, likes: int(1)?, orders: int(2)?, order_amount: int(3)? },
    })
}
