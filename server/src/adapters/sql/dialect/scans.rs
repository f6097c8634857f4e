//! The recompute's reads: one day's metrics rows, and a week's summed per product, each in
//! ascending product order with the columns of the custom signals asked for.

use sea_orm::Value;

use super::{Dialect, Read};
use crate::adapters::sql::metrics_row::COUNTERS;

impl Dialect {
    /// The day's metrics rows in ascending product order: `product_id, views, likes, orders,
    /// order_amount, last_event_at`, then the column of each custom signal of `signals`
    /// (`None`: a signal no row has, read as 0).
    pub fn scan_day(self, date: chrono::NaiveDate, signals: &[Option<u8>]) -> Read {
        let sql = format!(
            "SELECT product_id, {}{} FROM product_daily_metrics WHERE metric_date = {} ORDER BY product_id",
            COUNTERS.join(", "),
            signal_columns(self, signals, |c| format!("COALESCE({c}, 0)")),
            self.param(1)
        );
        Read { settings: &[], sql, values: vec![date.into()] }
    }

    /// Each product's counters (and custom `signals`) summed over `first ..= last` and its
    /// latest event, in ascending product order, the columns of [`Dialect::scan_day`]. The
    /// sums are capped at `i64::MAX` (PostgreSQL and MySQL sum integers into wider decimals;
    /// SQLite sums exactly and fails on overflow).
    ///
    /// On PostgreSQL the days are read as one ordered range of the primary key each, merged
    /// in product order and summed as they stream (a merge append under a group aggregate):
    /// no sort or hash table of the week, the first row out at once, one process. The
    /// planner cannot count the groups of a union and would rather hash them in parallel
    /// workers spilling to disk, about twice the time and three processes' CPU at a million
    /// products (BENCHMARKS.md), hence the settings of the read.
    pub fn scan_days(self, first: chrono::NaiveDate, last: chrono::NaiveDate, signals: &[Option<u8>]) -> Read {
        let sum = |column: &str| match self {
            Self::Postgres => format!("LEAST(SUM({column}), 9223372036854775807)::BIGINT"),
            Self::MySql => format!("CAST(LEAST(SUM({column}), 9223372036854775807) AS SIGNED)"),
            Self::Sqlite => format!("SUM({column})"),
        };
        // Counters add up over the days; the latest event is the latest of them.
        let counters = COUNTERS.map(|c| if c == "last_event_at" { format!("MAX({c})") } else { sum(c) });
        let sums = format!(
            "{}{}",
            counters.join(", "),
            // PostgreSQL's days are read with their NULLs made 0 already (below).
            signal_columns(self, signals, |c| if self == Self::Postgres {
                sum(c)
            } else {
                sum(&format!("COALESCE({c}, 0)"))
            })
        );
        match self {
            Self::Postgres => {
                let days: Vec<chrono::NaiveDate> = first.iter_days().take_while(|d| *d <= last).collect();
                let picks = signal_columns(self, signals, |c| format!("COALESCE({c}, 0) AS {c}"));
                let ranges: Vec<String> = (1..=days.len())
                    .map(|n| {
                        format!(
                            "(SELECT product_id, {}{picks} FROM product_daily_metrics WHERE metric_date = ${n} \
                             ORDER BY product_id)",
                            COUNTERS.join(", ")
                        )
                    })
                    .collect();
                Read {
                    settings: &[
                        "SET LOCAL enable_hashagg = off",
                        "SET LOCAL max_parallel_workers_per_gather = 0",
                        "SET LOCAL jit = off",
                    ],
                    sql: format!(
                        "SELECT product_id, {sums} FROM ({}) AS days GROUP BY product_id ORDER BY product_id",
                        ranges.join(" UNION ALL ")
                    ),
                    values: days.into_iter().map(Value::from).collect(),
                }
            }
            Self::MySql | Self::Sqlite => Read {
                settings: &[],
                sql: format!(
                    "SELECT product_id, {sums} FROM product_daily_metrics WHERE metric_date BETWEEN ? AND ? \
                     GROUP BY product_id ORDER BY product_id"
                ),
                values: vec![first.into(), last.into()],
            },
        }
    }
}

/// `, <expr of signal_K>` for each signal column (`, 0` for a signal without one), the
/// column name given to `expr` (the column or its sum, NULL read as 0). Only column numbers
/// are written into the statement.
fn signal_columns(dialect: Dialect, signals: &[Option<u8>], expr: impl Fn(&str) -> String) -> String {
    // A BIGINT zero, as every signal column reads (PostgreSQL's bare 0 is an INT4).
    let zero = if dialect == Dialect::Postgres { "0::BIGINT" } else { "0" };
    signals
        .iter()
        .map(|slot| match slot {
            Some(slot) => format!(", {}", expr(&super::super::signals::column(*slot))),
            None => format!(", {zero}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_day_scan_is_generated_per_engine() {
        let day = "2026-04-09".parse().expect("date");
        let Read { settings, sql: pg, values } = Dialect::Postgres.scan_day(day, &[]);
        assert!(settings.is_empty(), "a day's scan needs no transaction of its own");
        assert_eq!(
            pg,
            "SELECT product_id, views, likes, orders, order_amount, last_event_at \
             FROM product_daily_metrics WHERE metric_date = $1 ORDER BY product_id"
        );
        assert_eq!(values.len(), 1);
        let my = Dialect::MySql.scan_day(day, &[]).sql;
        assert!(my.contains("FROM product_daily_metrics WHERE metric_date = ?"), "{my}");
        // Custom signals are columns of the same rows; one never registered reads as 0.
        let with = Dialect::Sqlite.scan_day(day, &[Some(3), None]).sql;
        assert!(with.contains("last_event_at, COALESCE(signal_3, 0), 0 FROM product_daily_metrics"), "{with}");
        let week = Dialect::Postgres.scan_days(day, day, &[Some(1)]).sql;
        assert!(week.contains("COALESCE(signal_1, 0) AS signal_1 FROM") && week.contains("SUM(signal_1)"), "{week}");
        let week = Dialect::MySql.scan_days(day, day, &[Some(1)]).sql;
        assert!(week.contains("SUM(COALESCE(signal_1, 0))"), "{week}");
    }
}
