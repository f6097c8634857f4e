//! Every difference between the SQL engines, in one place: row sources of a batch
//! statement, upsert tails, insert-or-ignore, chunked deletes, placeholders, the duplicate
//! filter query, the day's and the week's reads (in [`scans`], with the planner settings
//! they run under), the transaction isolation, and what each engine's errors mean
//! ([`errors`]: a lost race to retry, a session limit hit). The store and the write path ask the dialect for text and never
//! match on the engine themselves.
//!
//! The PostgreSQL and MySQL texts do not depend on the number of rows (one array per
//! column with `UNNEST`, one JSON document with `JSON_TABLE`), so each is prepared once per
//! connection: a statement text per batch would churn the prepared-statement cache, and on
//! MySQL every eviction costs a delayed-ACK stall (about 40 ms) because the close message
//! gets no reply. SQLite gets a `VALUES` list with numbers and dates written as literals and
//! strings bound.

use sea_orm::{DbBackend, IsolationLevel, Value};

use super::rows::Rows;

mod actors;
mod errors;
mod scans;

pub use actors::{ACTOR_COUNTS, ACTOR_HOUR_COUNTS, ActorTable};
pub use errors::SessionLimit;

/// The engine behind a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    MySql,
    /// SQLite.
    Sqlite,
}

/// A read, and the settings of the transaction it runs in (none: no transaction of its own).
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    /// Statements run first, each `SET LOCAL`: they end with the read's transaction.
    pub settings: &'static [&'static str],
    /// The query.
    pub sql: String,
    /// Its bind values.
    pub values: Vec<Value>,
}

/// How an upsert combines the stored value with the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpsertOp {
    /// `old + new`.
    Add,
    /// `old + new`, saturating at `i64::MAX` instead of overflowing (a counter that could
    /// reach the limit of its column must not make a valid event fail, nor change the
    /// column's type on an engine that widens on overflow).
    SaturatingAdd,
    /// [`UpsertOp::SaturatingAdd`] onto a nullable column (NULL counts as 0): the custom
    /// signal columns, NULL in every row that never had a value, so that they cost a row
    /// nothing on a platform without custom signals.
    SaturatingAddNullable,
    /// The larger of the two.
    Max,
    /// The new value.
    Replace,
}

/// `old + new`, held at `i64::MAX` rather than overflowing. A negative `new` (a retraction's)
/// is added as it is: the first branch keeps `MAX - new` from being computed for it, where it
/// would overflow itself (`CASE` evaluates the branches in order).
fn saturating_add(old: &str, new: &str) -> String {
    let max = i64::MAX;
    format!("CASE WHEN {new} <= 0 THEN {old} + {new} WHEN {old} > {max} - {new} THEN {max} ELSE {old} + {new} END")
}

impl Dialect {
    /// The dialect of a sea-orm backend.
    pub fn of(backend: DbBackend) -> Self {
        match backend {
            DbBackend::Postgres => Self::Postgres,
            DbBackend::MySql => Self::MySql,
            _ => Self::Sqlite,
        }
    }

    /// The sea-orm backend of the dialect.
    pub fn backend(self) -> DbBackend {
        match self {
            Self::Postgres => DbBackend::Postgres,
            Self::MySql => DbBackend::MySql,
            Self::Sqlite => DbBackend::Sqlite,
        }
    }

    /// Isolation of a write transaction. InnoDB's default REPEATABLE READ takes gap locks on
    /// every upserted key range, which makes overlapping batches wait on (and deadlock with)
    /// rows they never touch; READ COMMITTED locks only the rows written, as PostgreSQL does
    /// by default.
    pub fn write_isolation(self) -> Option<IsolationLevel> {
        (self == Self::MySql).then_some(IsolationLevel::ReadCommitted)
    }

    /// Whether writers of this process take turns. SQLite has one writer at a time, and
    /// queueing them here avoids `SQLITE_BUSY` on read-to-write upgrades. On MySQL,
    /// overlapping batches of one process deadlock on each other's row locks often enough
    /// that taking turns is faster than retrying for large batches (measured on MariaDB, 4
    /// writers: 71,108 vs 40,220 events/s at 10,000-event batches, 9.0 vs 16.7 statements per
    /// batch; BENCHMARKS.md); replicas still write concurrently.
    pub fn serialises_writers(self) -> bool {
        matches!(self, Self::Sqlite | Self::MySql)
    }

    /// The first statement of every write transaction of metrics or catalog rows: the
    /// current change epoch, read under a shared lock held until the commit, so that a live
    /// pass advancing the epoch waits for every transaction stamping rows with the old one.
    /// SQLite has no row locks: its writer holds the database's write lock,
    /// which the advance needs too.
    pub fn change_epoch_lock(self) -> &'static str {
        match self {
            Self::Postgres => "SELECT epoch FROM ranking_change_epoch WHERE id = 1 FOR SHARE",
            Self::MySql => "SELECT epoch FROM ranking_change_epoch WHERE id = 1 LOCK IN SHARE MODE",
            Self::Sqlite => "SELECT epoch FROM ranking_change_epoch WHERE id = 1",
        }
    }

    /// Whether a select can lock the rows it reads to the commit (`FOR UPDATE`). SQLite has
    /// no row locks: its writer holds the database's write lock, and this process's writers
    /// take turns ([`Self::serialises_writers`]).
    pub fn locks_rows(self) -> bool {
        !matches!(self, Self::Sqlite)
    }

    /// Whether an insert can report which rows it inserted (`RETURNING`).
    pub fn returns_inserted(self) -> bool {
        self == Self::Postgres
    }

    /// The row source of an `INSERT … SELECT` / `INSERT … VALUES` for all `rows`, binding
    /// into `values`.
    pub fn row_source(self, rows: &Rows, values: &mut Vec<Value>) -> String {
        match self {
            Self::Postgres => {
                let arrays: Vec<String> = rows
                    .columns
                    .iter()
                    .map(|c| {
                        let (value, ty) = c.array();
                        values.push(value);
                        format!("${}::{ty}[]", values.len())
                    })
                    .collect();
                format!("SELECT * FROM UNNEST({})", arrays.join(", "))
            }
            Self::MySql => {
                values.push(Value::from(rows.to_json()));
                let columns: Vec<String> = rows
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("c{i} {} PATH '$[{i}]'", c.mysql_type()))
                    .collect();
                format!("SELECT * FROM JSON_TABLE(?, '$[*]' COLUMNS ({})) AS j", columns.join(", "))
            }
            Self::Sqlite => rows.to_values(values),
        }
    }

    /// `ON CONFLICT … DO UPDATE SET` / `ON DUPLICATE KEY UPDATE` with `col = expr(old, new)`.
    ///
    /// Written here rather than by sea-query's `OnConflict`: every merge but a plain
    /// replacement is an engine's own expression (`VALUES(c)` or `excluded.c`, `GREATEST` or
    /// `MAX`, the saturating sums), so it would render only the frame around them, and its
    /// insert statements cannot take the row sources above (`UNNEST` of arrays, `JSON_TABLE`).
    pub fn upsert_tail(self, table: &str, key: &str, sets: &[(&str, UpsertOp)]) -> String {
        let mysql = self == Self::MySql;
        let old = |c: &str| if mysql { c.to_string() } else { format!("{table}.{c}") };
        let new = |c: &str| if mysql { format!("VALUES({c})") } else { format!("excluded.{c}") };
        let greatest = if self == Self::Sqlite { "MAX" } else { "GREATEST" };
        let assignments: Vec<String> = sets
            .iter()
            .map(|(col, op)| {
                let (old, new) = (old(col), new(col));
                let expr = match op {
                    UpsertOp::Add => format!("{old} + {new}"),
                    UpsertOp::SaturatingAddNullable => saturating_add(&format!("COALESCE({old}, 0)"), &new),
                    UpsertOp::SaturatingAdd => saturating_add(&old, &new),
                    UpsertOp::Max => format!("{greatest}({old}, {new})"),
                    UpsertOp::Replace => new,
                };
                format!("{col} = {expr}")
            })
            .collect();
        match self {
            Self::MySql => format!(" ON DUPLICATE KEY UPDATE {}", assignments.join(", ")),
            _ => format!(" ON CONFLICT ({key}) DO UPDATE SET {}", assignments.join(", ")),
        }
    }

    /// Whether `events` is partitioned by day and `rank_history` by month (PostgreSQL;
    /// [`super::partitions`]).
    pub fn partitions_events(self) -> bool {
        matches!(self, Self::Postgres)
    }

    /// An insert that skips rows whose key exists. Its affected-row count is the rows it
    /// inserted, which the write path checks; sea-query's `do_nothing` on MySQL is an
    /// `ON DUPLICATE KEY UPDATE c = c`, whose count includes the duplicates (the driver asks
    /// for found rows), hence `INSERT IGNORE` here.
    pub fn insert_or_ignore(self, table_and_cols: &str, source: &str) -> String {
        match self {
            Self::MySql => format!("INSERT IGNORE INTO {table_and_cols} {source}"),
            Self::Sqlite => format!("INSERT OR IGNORE INTO {table_and_cols} {source}"),
            Self::Postgres => format!("INSERT INTO {table_and_cols} {source} ON CONFLICT DO NOTHING"),
        }
    }

    /// The stored content of the events whose ids are bound, as `(event_id, product_id,
    /// event_type, amount, occurred_at, signal_name, metric_date, actor_id)` rows.
    pub fn stored_events(self, ids: Vec<String>) -> (String, Vec<Value>) {
        match self {
            // One index probe per id, whatever the plan: the LATERAL subquery with its LIMIT
            // cannot be flattened into a join. As a plain join (or `= ANY($1)`), the custom
            // plans PostgreSQL makes for a prepared statement's first executions on each
            // connection hashed or merged the whole ledger: 1.09-1.44 s for 5,000 ids against
            // a ledger of 2.6 million over 9 day partitions, where the probes take 50-111 ms
            // (BENCHMARKS.md; docs/benchmarks/2026-12-03-lookup-plans.sql). The id is the primary key's first column in every partition;
            // a retried event is in one of them, so the first found is the stored one.
            Self::Postgres => (
                "SELECT e.event_id, e.product_id, e.event_type, e.amount, e.occurred_at, e.signal_name, e.metric_date, \
                 e.actor_id FROM UNNEST($1::text[]) AS ids(id) CROSS JOIN LATERAL \
                 (SELECT event_id, product_id, event_type, amount, occurred_at, signal_name, metric_date, actor_id \
                  FROM events \
                  WHERE event_id = ids.id LIMIT 1) e"
                    .to_string(),
                vec![Value::from(ids)],
            ),
            // Event ids are VARBINARY on MySQL, so ids differing in case or trailing space
            // stay distinct.
            Self::MySql => (
                "SELECT CAST(e.event_id AS CHAR(128)), e.product_id, e.event_type, e.amount, e.occurred_at, \
                 e.signal_name, e.metric_date, CAST(e.actor_id AS CHAR(128)) \
                 FROM JSON_TABLE(?, '$[*]' COLUMNS (id VARCHAR(128) CHARACTER SET ascii PATH '$')) AS j \
                 JOIN events e ON e.event_id = CAST(j.id AS BINARY)"
                    .to_string(),
                vec![Value::from(Rows::json_strings(&ids))],
            ),
            Self::Sqlite => (
                format!(
                    "SELECT event_id, product_id, event_type, amount, occurred_at, signal_name, metric_date, \
                     actor_id FROM events WHERE event_id IN ({})",
                    vec!["?"; ids.len()].join(",")
                ),
                ids.into_iter().map(Value::from).collect(),
            ),
        }
    }

    /// The retractions naming any of `ids` (`target_id`, `product_id`): one probe of the
    /// `retractions` key per id.
    pub fn retraction_claims(self, ids: Vec<String>) -> (String, Vec<Value>) {
        match self {
            // A join with the ids, not `= ANY($1)`: with rows in the table, the latter tests
            // every row against the whole array (41 ms a batch of 10,000 ids against 5,000
            // retractions, where the join takes a probe or a hash per id).
            Self::Postgres => (
                "SELECT r.target_id, r.product_id FROM UNNEST($1::text[]) AS ids(id) \
                 JOIN retractions r ON r.target_id = ids.id"
                    .to_string(),
                vec![Value::from(ids)],
            ),
            Self::MySql => (
                "SELECT CAST(r.target_id AS CHAR(128)), r.product_id \
                 FROM JSON_TABLE(?, '$[*]' COLUMNS (id VARCHAR(128) CHARACTER SET ascii PATH '$')) AS j \
                 JOIN retractions r ON r.target_id = CAST(j.id AS BINARY)"
                    .to_string(),
                vec![Value::from(Rows::json_strings(&ids))],
            ),
            Self::Sqlite => (
                format!(
                    "SELECT target_id, product_id FROM retractions WHERE target_id IN ({})",
                    vec!["?"; ids.len()].join(",")
                ),
                ids.into_iter().map(Value::from).collect(),
            ),
        }
    }

    /// The `n`th (1-based) bind parameter of a hand-written statement.
    pub fn param(self, n: usize) -> String {
        match self {
            Self::Postgres => format!("${n}"),
            Self::MySql | Self::Sqlite => "?".to_owned(),
        }
    }

    /// A delete of at most `chunk` rows of `table` matching `column < bound`, `key` being the
    /// table's primary key.
    pub fn delete_chunk(self, table: &str, key: &str, column: &str, chunk: u32) -> String {
        match self {
            Self::MySql => format!("DELETE FROM {table} WHERE {column} < ? LIMIT {chunk}"),
            Self::Postgres => format!(
                "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE {column} < $1 LIMIT {chunk})"
            ),
            Self::Sqlite => format!(
                "DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} WHERE {column} < ? LIMIT {chunk})"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::sql::rows::Column;

    fn rows() -> Rows {
        Rows {
            len: 2,
            columns: vec![
                Column::Text(vec!["a\"b".into(), "c\\d".into()]),
                Column::Int(vec![1, -2]),
                Column::Date(vec!["2026-04-09".parse().expect("date"); 2]),
            ],
        }
    }

    #[test]
    fn row_sources_have_a_constant_text_on_postgres_and_mysql() {
        let mut values = Vec::new();
        let pg = Dialect::Postgres.row_source(&rows(), &mut values);
        assert_eq!(pg, "SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::date[])");
        assert_eq!(values.len(), 3);

        let mut values = Vec::new();
        let my = Dialect::MySql.row_source(&rows(), &mut values);
        assert_eq!(
            my,
            "SELECT * FROM JSON_TABLE(?, '$[*]' COLUMNS (c0 VARCHAR(128) CHARACTER SET ascii PATH '$[0]', \
             c1 BIGINT PATH '$[1]', c2 DATE PATH '$[2]')) AS j"
        );
        assert_eq!(values, vec![Value::from(r#"[["a\"b",1,"2026-04-09"],["c\\d",-2,"2026-04-09"]]"#.to_string())]);
    }

    #[test]
    fn sqlite_binds_strings_and_writes_numbers_as_literals() {
        let mut values = Vec::new();
        let sql = Dialect::Sqlite.row_source(&rows(), &mut values);
        assert_eq!(sql, "VALUES (?,1,'2026-04-09'),(?,-2,'2026-04-09')");
        assert_eq!(values, vec![Value::from("a\"b".to_string()), Value::from("c\\d".to_string())]);
    }

    #[test]
    fn upsert_tails_per_engine() {
        let sets = [("views", UpsertOp::Add), ("last_event_at", UpsertOp::Max), ("updated_at", UpsertOp::Replace)];
        assert_eq!(
            Dialect::Postgres.upsert_tail("t", "k", &sets),
            " ON CONFLICT (k) DO UPDATE SET views = t.views + excluded.views, \
             last_event_at = GREATEST(t.last_event_at, excluded.last_event_at), updated_at = excluded.updated_at"
        );
        assert_eq!(
            Dialect::Sqlite.upsert_tail("t", "k", &sets[1..2]),
            " ON CONFLICT (k) DO UPDATE SET last_event_at = MAX(t.last_event_at, excluded.last_event_at)"
        );
        assert_eq!(
            Dialect::MySql.upsert_tail("t", "k", &sets),
            " ON DUPLICATE KEY UPDATE views = views + VALUES(views), \
             last_event_at = GREATEST(last_event_at, VALUES(last_event_at)), updated_at = VALUES(updated_at)"
        );
        let saturating = Dialect::MySql.upsert_tail("t", "k", &[("order_amount", UpsertOp::SaturatingAdd)]);
        assert_eq!(
            saturating,
            " ON DUPLICATE KEY UPDATE order_amount = CASE WHEN VALUES(order_amount) <= 0 THEN order_amount + \
             VALUES(order_amount) WHEN order_amount > 9223372036854775807 - VALUES(order_amount) THEN \
             9223372036854775807 ELSE order_amount + VALUES(order_amount) END"
        );
    }

    #[test]
    fn insert_or_ignore_and_chunked_deletes() {
        assert_eq!(Dialect::MySql.insert_or_ignore("t (a)", "S"), "INSERT IGNORE INTO t (a) S");
        assert_eq!(Dialect::Sqlite.insert_or_ignore("t (a)", "S"), "INSERT OR IGNORE INTO t (a) S");
        assert_eq!(Dialect::Postgres.insert_or_ignore("t (a)", "S"), "INSERT INTO t (a) S ON CONFLICT DO NOTHING");
        assert_eq!(Dialect::MySql.delete_chunk("t", "k", "c", 10), "DELETE FROM t WHERE c < ? LIMIT 10");
        assert_eq!(
            Dialect::Postgres.delete_chunk("t", "a, b", "c", 10),
            "DELETE FROM t WHERE (a, b) IN (SELECT a, b FROM t WHERE c < $1 LIMIT 10)"
        );
    }

    #[test]
    fn the_duplicate_filter_binds_ids_without_sql_text() {
        let ids = vec!["x'; DROP TABLE events; --".to_string(), "q\"".to_string()];
        let (sql, values) = Dialect::Sqlite.stored_events(ids.clone());
        assert!(sql.ends_with("WHERE event_id IN (?,?)"), "{sql}");
        assert_eq!(values.len(), 2);
        let (sql, values) = Dialect::MySql.stored_events(ids);
        assert!(!sql.contains("DROP"));
        assert_eq!(values, vec![Value::from(r#"["x'; DROP TABLE events; --","q\""]"#.to_string())]);
    }
}
