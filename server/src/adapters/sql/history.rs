//! `rank_history`: the kept top of each board's ended days, one row per board (window,
//! segment, profile) and day, with the version it was kept from and how often it was
//! restated. A day is kept in one transaction that reads its row (locked where the engine
//! can) and writes it only from a newer version; a product's history is one range read of
//! its board's rows (the primary key's prefix). Retention drops PostgreSQL's month partitions
//! before the cutoff and deletes the rest row by row.

use chrono::NaiveDate;
use sea_orm::sea_query::{Alias, Cond, Condition, Expr, ExprTrait, LockType, Order, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection, TransactionTrait};

use super::dialect::Dialect;
use super::partitions;
use crate::domain::board::Board;
use crate::domain::history::KeptDay;
use crate::ports::{Kept, StoreError};

fn table() -> Alias {
    Alias::new("rank_history")
}

fn col(name: &str) -> Expr {
    Expr::col(Alias::new(name))
}

/// The window's code in `board_window`.
fn window_code(board: &Board<'_>) -> i16 {
    super::codes::window_code(board.window)
}

/// The profile's name as stored (empty: the service's).
fn profile_name<'a>(board: &Board<'a>) -> &'a str {
    board.profile.unwrap_or("")
}

/// The segment's name as stored (empty: the whole ranking).
fn segment_name<'a>(board: &'a Board<'_>) -> &'a str {
    board.segment.as_ref().map_or("", |s| s.as_str())
}

/// The rows of `board`: the primary key's prefix.
fn of_board(board: &Board<'_>) -> Condition {
    Cond::all()
        .add(col("board_window").eq(window_code(board)))
        .add(col("segment").eq(segment_name(board)))
        .add(col("profile").eq(profile_name(board)))
}

/// A day to keep.
struct Day<'a> {
    board: Board<'a>,
    date: NaiveDate,
    version: i64,
    top: &'a [u8],
    kept_at_us: i64,
}

/// Keeps `top` as `board`'s day `date` from `version` (see [`crate::ports::HistoryRows`]). Two
/// writers of a day's first row meet at the primary key: the loser reads the winner's row
/// and decides again.
pub async fn keep_day(
    db: &DatabaseConnection,
    board: Board<'_>,
    date: NaiveDate,
    version: u64,
    top: &[u8],
    kept_at_us: i64,
) -> Result<Kept, StoreError> {
    let version = i64::try_from(version).map_err(|_| StoreError::Corrupt(format!("version {version} too large")))?;
    let day = Day { board, date, version, top, kept_at_us };
    match keep_in_one_transaction(db, &day).await {
        Err(first) => keep_in_one_transaction(db, &day).await.map_err(|_| first),
        kept => kept,
    }
}

async fn keep_in_one_transaction(db: &DatabaseConnection, day: &Day<'_>) -> Result<Kept, StoreError> {
    let Day { board, date, version, top, kept_at_us } = *day;
    let txn = db.begin().await.map_err(StoreError::database)?;
    let mut select = Query::select()
        .columns([Alias::new("version"), Alias::new("top_entries"), Alias::new("restated")])
        .from(table())
        .cond_where(of_board(&board))
        .and_where(col("day").eq(date))
        .to_owned();
    if Dialect::of(db.get_database_backend()).locks_rows() {
        select.lock(LockType::Update);
    }
    let kept = txn.query_one(&select).await.map_err(StoreError::database)?;
    let outcome = match kept {
        // Nothing ranked on a day never kept (a recompute of a day before its events came):
        // nothing to keep, and its first real top is not a restatement.
        None if top.is_empty() => Kept::Unchanged,
        None => {
            let insert = Query::insert()
                .into_table(table())
                .columns(
                    ["board_window", "segment", "profile", "day", "version", "top_entries", "restated", "kept_at_us"]
                        .map(Alias::new),
                )
                .values_panic([
                    window_code(&board).into(),
                    segment_name(&board).into(),
                    profile_name(&board).into(),
                    date.into(),
                    version.into(),
                    top.to_vec().into(),
                    0i32.into(),
                    kept_at_us.into(),
                ])
                .to_owned();
            txn.execute(&insert).await.map_err(StoreError::database)?;
            Kept::First
        }
        Some(row) => {
            let kept_version: i64 = row.try_get_by_index(0).map_err(StoreError::database)?;
            let kept_top: Vec<u8> = row.try_get_by_index(1).map_err(StoreError::database)?;
            let restated: i32 = row.try_get_by_index(2).map_err(StoreError::database)?;
            if kept_version >= version {
                return Ok(Kept::Stale);
            }
            let same = kept_top == top;
            let mut update = Query::update()
                .table(table())
                .value(Alias::new("version"), version)
                .value(Alias::new("kept_at_us"), kept_at_us)
                .cond_where(of_board(&board))
                .and_where(col("day").eq(date))
                .to_owned();
            if !same {
                update.value(Alias::new("top_entries"), top.to_vec()).value(Alias::new("restated"), restated + 1);
            }
            txn.execute(&update).await.map_err(StoreError::database)?;
            if same { Kept::Unchanged } else { Kept::Restated }
        }
    };
    txn.commit().await.map_err(StoreError::database)?;
    Ok(outcome)
}

/// Every kept day of `board`, oldest first.
pub async fn kept_days(db: &DatabaseConnection, board: Board<'_>) -> Result<Vec<KeptDay>, StoreError> {
    let select = Query::select()
        .columns([Alias::new("day"), Alias::new("top_entries"), Alias::new("restated")])
        .from(table())
        .cond_where(of_board(&board))
        .order_by(Alias::new("day"), Order::Asc)
        .to_owned();
    let rows = db.query_all(&select).await.map_err(StoreError::database)?;
    rows.into_iter()
        .map(|row| {
            let restated: i32 = row.try_get_by_index(2).map_err(StoreError::database)?;
            Ok(KeptDay {
                date: row.try_get_by_index(0).map_err(StoreError::database)?,
                top: row.try_get_by_index(1).map_err(StoreError::database)?,
                restated: u32::try_from(restated).unwrap_or(0),
            })
        })
        .collect()
}

/// Deletes the days before `before` (on PostgreSQL, whole months' partitions first).
pub async fn prune(db: &DatabaseConnection, before: NaiveDate) -> Result<u64, StoreError> {
    if Dialect::of(db.get_database_backend()).partitions_events() {
        partitions::drop_months_before(db, "rank_history", before).await?;
    }
    let delete = Query::delete().from_table(table()).and_where(col("day").lt(before)).to_owned();
    Ok(db.execute(&delete).await.map_err(StoreError::database)?.rows_affected())
}
