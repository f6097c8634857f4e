//! Day partitions on PostgreSQL of `events` (migration `m20261201_000003`) and of
//! `actor_counts` (`m20261204_000008`): one partition per `metric_date`, named
//! `events_YYYYMMDD` / `actor_counts_YYYYMMDD`, plus `…_default` for a day that has none.
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

/// The tables partitioned by day.
pub const PARTITIONED: [&str; 2] = ["events", "actor_counts"];

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

/// Creates the partitions of `from..=to` that do not exist, of every partitioned table.
pub async fn ensure(db: &DatabaseConnection, from: NaiveDate, to: NaiveDate) -> Result<(), StoreError> {
    for table in PARTITIONED {
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
    ensure(db, oldest.min(today), to).await
}

/// Drops the partitions of days before `day`, of every partitioned table; returns the days
/// dropped.
pub async fn drop_before(db: &DatabaseConnection, day: NaiveDate) -> Result<Vec<NaiveDate>, StoreError> {
    let mut dropped = Vec::new();
    for table in PARTITIONED {
        let rows = db
            .query_all_raw(Statement::from_sql_and_values(
                db.get_database_backend(),
                "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
                 WHERE i.inhparent = $1::regclass",
                vec![Value::from(table)],
            ))
            .await
            .map_err(StoreError::database)?;
        for row in rows {
            let name: String = row.try_get_by_index(0).map_err(StoreError::database)?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
