//! Day partitions on PostgreSQL of `events` (migration `m20261201_000003`), of
//! `actor_counts` (`m20261204_000008`) and of the trending board's hours,
//! `product_hourly_metrics` and `actor_hour_counts` (`m20261205_000012`): one partition per
//! `metric_date`, named `events_YYYYMMDD` / `actor_counts_YYYYMMDD` / …, plus `…_default` for
//! a day that has none; and month partitions of `rank_history` (below). The hours' partitions
//! go after [`HOURLY_DAYS`], the others with the retention.
//!
//! The store creates the partitions of the days about to receive events (at start-up and at
//! every retention run: from the oldest retained day to [`AHEAD_DAYS`] after today, UTC, which
//! covers every ranking time zone), and retention drops the partitions of days past it. A
//! day's events that landed in the default partition (its partition could not be created in
//! time) stay there, and retention deletes them row by row as on the other engines.

use chrono::{Days, NaiveDate, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement, Value};

use crate::ports::StoreError;

/// Days after today (UTC) whose partitions exist ahead of their events.
pub const AHEAD_DAYS: u64 = 3;

/// The tables partitioned by day and kept for the retention.
pub const PARTITIONED: [&str; 2] = ["events", "actor_counts"];

/// The tables partitioned by day and kept [`HOURLY_DAYS`].
pub const HOURLY: [&str; 2] = ["product_hourly_metrics", "actor_hour_counts"];

/// Every table partitioned by day.
pub const ALL_DAILY: [&str; 4] = [PARTITIONED[0], PARTITIONED[1], HOURLY[0], HOURLY[1]];

/// Days of hourly rows kept before today (UTC): the trending board's seven days, and a day
/// either side for the ranking zone's offset.
pub const HOURLY_DAYS: u64 = 9;

/// The first day of the hourly rows kept on `today` (UTC).
pub fn hours_since(today: NaiveDate) -> NaiveDate {
    today.checked_sub_days(Days::new(HOURLY_DAYS)).unwrap_or(today)
}

/// Creates the missing partitions of `$table` for `from..=to`, each in a statement of its own
/// (a replica creating the same partition at the same moment, or rows of that day already in
/// the default partition, leave that day as it is).
const ENSURE: &str = r"
DO $$
DECLARE d date;
BEGIN
    FOR d IN SELECT generate_series($1::date, $2::date, interval '1 day')::date LOOP
        IF to_regclass('$table_' || to_char(d, 'YYYYMMDD')) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE TABLE %I PARTITION OF $table FOR VALUES FROM (%L) TO (%L)',
                               '$table_' || to_char(d, 'YYYYMMDD'), d, d + 1);
            EXCEPTION WHEN duplicate_table OR unique_violation OR check_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
END $$;
";

/// The day of a partition of `table` named `{table}_YYYYMMDD`.
pub fn day_of(table: &str, partition: &str) -> Option<NaiveDate> {
    let digits = partition.strip_prefix(table)?.strip_prefix('_')?;
    if digits.len() != 8 {
        return None;
    }
    NaiveDate::parse_from_str(digits, "%Y%m%d").ok()
}

/// Creates the partitions of `from..=to` that do not exist, of every table of `tables`.
pub async fn ensure(
    db: &DatabaseConnection,
    tables: &[&str],
    from: NaiveDate,
    to: NaiveDate,
) -> Result<(), StoreError> {
    for table in tables {
        // A DO block takes no parameters: the dates and the table name are formatted in (dates
        // and a constant, not text a caller chose).
        let sql = ENSURE.replace("$1", &format!("'{from}'")).replace("$2", &format!("'{to}'")).replace("$table", table);
        db.execute_unprepared(&sql).await.map_err(StoreError::database)?;
    }
    Ok(())
}

/// Creates the partitions from `oldest` to [`AHEAD_DAYS`] after today.
pub async fn ensure_ahead(db: &DatabaseConnection, oldest: NaiveDate) -> Result<(), StoreError> {
    let today = Utc::now().date_naive();
    let to = today.checked_add_days(Days::new(AHEAD_DAYS)).unwrap_or(today);
    ensure(db, &PARTITIONED, oldest.min(today), to).await?;
    ensure(db, &HOURLY, oldest.max(hours_since(today)).min(today), to).await?;
    // The history's month partitions, over the same days and the month after them.
    ensure_months(db, oldest.min(today), to.checked_add_months(chrono::Months::new(1)).unwrap_or(to)).await
}

/// Drops the partitions of days before `day`, of every table of `tables`; returns the days
/// dropped.
pub async fn drop_before(
    db: &DatabaseConnection,
    tables: &[&str],
    day: NaiveDate,
) -> Result<Vec<NaiveDate>, StoreError> {
    let mut dropped = Vec::new();
    for table in tables {
        for name in partitions_of(db, table).await? {
            let Some(date) = day_of(table, &name).filter(|d| *d < day) else { continue };
            // The name was read from the catalog and matched the table's name + 8 digits.
            db.execute_unprepared(&format!("DROP TABLE IF EXISTS \"{name}\"")).await.map_err(StoreError::database)?;
            dropped.push(date);
        }
    }
    dropped.sort_unstable();
    dropped.dedup();
    Ok(dropped)
}

/// Month partitions on PostgreSQL of `rank_history` (migration `m20261205_000010`): one per
/// calendar month of `day`, named `rank_history_YYYYMM`, plus `rank_history_default`. A kept
/// day is one row per board, so a month is a few thousand rows: months, not days, keep the
/// partitions few over 400 days.
pub const MONTHLY: [&str; 1] = ["rank_history"];

/// Creates the missing month partitions of `$table` for the months of `$1..=$2`.
const ENSURE_MONTHS: &str = r"
DO $$
DECLARE m date;
BEGIN
    FOR m IN SELECT generate_series(date_trunc('month', $1::date), $2::date, interval '1 month')::date LOOP
        IF to_regclass('$table_' || to_char(m, 'YYYYMM')) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE TABLE %I PARTITION OF $table FOR VALUES FROM (%L) TO (%L)',
                               '$table_' || to_char(m, 'YYYYMM'), m, (m + interval '1 month')::date);
            EXCEPTION WHEN duplicate_table OR unique_violation OR check_violation THEN
                NULL;
            END;
        END IF;
    END LOOP;
END $$;
";

/// Creates the month partitions of every monthly table from `from`'s month to `to`'s.
pub async fn ensure_months(db: &DatabaseConnection, from: NaiveDate, to: NaiveDate) -> Result<(), StoreError> {
    for table in MONTHLY {
        let sql = ENSURE_MONTHS
            .replace("$1", &format!("'{from}'"))
            .replace("$2", &format!("'{to}'"))
            .replace("$table", table);
        db.execute_unprepared(&sql).await.map_err(StoreError::database)?;
    }
    Ok(())
}

/// The first day of the month of a partition of `table` named `{table}_YYYYMM`.
pub fn month_of(table: &str, partition: &str) -> Option<NaiveDate> {
    let digits = partition.strip_prefix(table)?.strip_prefix('_')?;
    if digits.len() != 6 {
        return None;
    }
    NaiveDate::parse_from_str(&format!("{digits}01"), "%Y%m%d").ok()
}

/// Drops the partitions of `table` whose whole month is before `day`.
pub async fn drop_months_before(db: &DatabaseConnection, table: &str, day: NaiveDate) -> Result<(), StoreError> {
    for name in partitions_of(db, table).await? {
        let Some(month) = month_of(table, &name) else { continue };
        let Some(next) = month.checked_add_months(chrono::Months::new(1)) else { continue };
        if next <= day {
            // The name was read from the catalog and matched the table's name + 6 digits.
            db.execute_unprepared(&format!("DROP TABLE IF EXISTS \"{name}\"")).await.map_err(StoreError::database)?;
        }
    }
    Ok(())
}

/// The names of `table`'s partitions.
async fn partitions_of(db: &DatabaseConnection, table: &str) -> Result<Vec<String>, StoreError> {
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = $1::regclass",
            vec![Value::from(table)],
        ))
        .await
        .map_err(StoreError::database)?;
    rows.iter().map(|row| row.try_get_by_index::<String>(0).map_err(StoreError::database)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_month_partitions_have_a_month() {
        assert_eq!(month_of("rank_history", "rank_history_202612"), NaiveDate::from_ymd_opt(2026, 12, 1));
        assert_eq!(month_of("rank_history", "rank_history_default"), None);
        assert_eq!(month_of("rank_history", "rank_history_20261201"), None);
        assert_eq!(month_of("rank_history", "rank_history_202613"), None);
    }

    #[test]
    fn only_day_partitions_have_a_day() {
        assert_eq!(day_of("events", "events_20261201"), NaiveDate::from_ymd_opt(2026, 12, 1));
        assert_eq!(day_of("actor_counts", "actor_counts_20261201"), NaiveDate::from_ymd_opt(2026, 12, 1));
        assert_eq!(day_of("events", "events_default"), None);
        assert_eq!(day_of("events", "events_2026120"), None);
        assert_eq!(day_of("events", "events_20261341"), None);
        assert_eq!(day_of("events", "other_20261201"), None);
        assert_eq!(day_of("events", "actor_counts_20261201"), None);
    }
}
