//! The limits every SQL session of the service runs under.
//!
//! Any replica may freeze at any line (a VM pause, a stopped or throttled process), also
//! inside a write transaction. What that transaction holds — the change epoch's row under a
//! shared lock, the metrics rows it upserted — would otherwise stop every other replica's
//! writes and live passes for as long as the freeze lasts. Two limits bound it, both
//! `RANKING_SQL_TX_TIMEOUT`:
//!
//! - a transaction idle between two statements for longer is ended by the database, which
//!   rolls it back and closes the session (PostgreSQL `idle_in_transaction_session_timeout`,
//!   MariaDB `idle_transaction_timeout`); the frozen replica learns it when it wakes: its
//!   next statement fails, its caller gets UNAVAILABLE and retries with the same event ids,
//!   which nothing stored has seen;
//! - a statement waits for a lock at most that long (PostgreSQL `lock_timeout`, InnoDB
//!   `innodb_lock_wait_timeout`); the refusal is a transient error and the transaction runs
//!   again, by then without the frozen holder.
//!
//! MySQL (unlike MariaDB) has no idle-transaction limit: there the lock wait is bounded and a
//! frozen holder's rows stay locked until its session ends; the start-up log says so.
//! SQLite is one process's file: a frozen process freezes its only writer, and a writer
//! waits for the database lock at most the same time (its busy timeout).

use std::time::Duration;

use sea_orm::ConnectOptions;
use sea_orm::sqlx::{self, AssertSqlSafe, Executor};

/// MySQL's and MariaDB's "unknown system variable": the server has no such limit.
const UNKNOWN_VARIABLE: u16 = 1193;

/// Whole seconds of `limit`, at least one: the unit of MariaDB's and InnoDB's limits.
fn seconds(limit: Duration) -> u64 {
    limit.as_millis().div_ceil(1_000).max(1) as u64
}

/// The PostgreSQL settings of every session, sent with the connection's start-up message
/// (no round trip).
pub fn postgres_settings(limit: Duration) -> [(&'static str, String); 2] {
    let ms = limit.as_millis().max(1);
    [("lock_timeout", format!("{ms}ms")), ("idle_in_transaction_session_timeout", format!("{ms}ms"))]
}

/// The MySQL/MariaDB statements run on every new session: the lock wait, then the idle
/// limit (refused by MySQL, which has none).
pub fn mysql_settings(limit: Duration) -> [String; 2] {
    let s = seconds(limit);
    [format!("SET SESSION innodb_lock_wait_timeout = {s}"), format!("SET SESSION idle_transaction_timeout = {s}")]
}

/// Makes every session `connect` opens run under the limits, whichever engine it reaches.
pub fn bound_transactions(connect: &mut ConnectOptions, limit: Duration) {
    connect.map_sqlx_postgres_opts(move |options| options.options(postgres_settings(limit)));
    connect.map_sqlx_sqlite_opts(move |options| options.busy_timeout(limit));
    connect.map_sqlx_mysql_pool_opts(move |pool| {
        pool.after_connect(move |conn, _| {
            Box::pin(async move {
                let [lock_wait, idle] = mysql_settings(limit);
                conn.execute(AssertSqlSafe(lock_wait)).await?;
                match conn.execute(AssertSqlSafe(idle)).await {
                    Err(sqlx::Error::Database(e))
                        if e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                            .is_some_and(|e| e.number() == UNKNOWN_VARIABLE) =>
                    {
                        warn_once_without_idle_limit();
                        Ok(())
                    }
                    other => other.map(drop),
                }
            })
        })
    });
}

/// Says once per process that the server cannot end a frozen replica's transaction.
fn warn_once_without_idle_limit() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            "this MySQL server has no idle_transaction_timeout: a replica frozen inside a transaction holds its \
             rows until its session ends (lock waits are still bounded by RANKING_SQL_TX_TIMEOUT)"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_written_in_each_engines_unit() {
        let limit = Duration::from_millis(2_500);
        assert_eq!(
            postgres_settings(limit),
            [("lock_timeout", "2500ms".to_string()), ("idle_in_transaction_session_timeout", "2500ms".to_string())]
        );
        // MariaDB and InnoDB count whole seconds: a fraction rounds up, never to 0 (which
        // would mean "no limit" for the idle one).
        assert_eq!(
            mysql_settings(limit),
            ["SET SESSION innodb_lock_wait_timeout = 3", "SET SESSION idle_transaction_timeout = 3"]
        );
        assert_eq!(seconds(Duration::from_millis(1)), 1);
        assert_eq!(seconds(Duration::from_secs(5)), 5);
    }
}
