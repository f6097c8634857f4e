//! What an engine's refusal means: a transaction that lost a race with another (run it
//! again) or a session limit ([`crate::adapters::sql::session`]) that ended a statement or
//! a transaction. Each engine says it with codes of its own.

use sea_orm::{DbErr, RuntimeErr};

use super::Dialect;

/// A limit every session runs under ([`crate::adapters::sql::session`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionLimit {
    /// A statement waited for a lock as long as allowed.
    LockWait,
    /// The session's transaction sat idle as long as allowed and was rolled back.
    IdleTransaction,
}

impl SessionLimit {
    /// Its metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::LockWait => "lock_wait",
            Self::IdleTransaction => "idle_transaction",
        }
    }
}

/// The database's own error inside a sea-orm error, if it is one.
fn database_error(e: &DbErr) -> Option<&(dyn sea_orm::sqlx::error::DatabaseError + 'static)> {
    let (DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e))) = e else { return None };
    match e.as_ref() {
        sea_orm::sqlx::Error::Database(db) => Some(db.as_ref()),
        _ => None,
    }
}

/// The error number of a MySQL/MariaDB error.
fn mysql_number(db: &(dyn sea_orm::sqlx::error::DatabaseError + 'static)) -> Option<u16> {
    db.try_downcast_ref::<sea_orm::sqlx::mysql::MySqlDatabaseError>().map(|e| e.number())
}

impl Dialect {
    /// Whether a refused statement lost to another transaction, so that running the whole
    /// transaction again will succeed: PostgreSQL's serialization failure, deadlock and lock
    /// timeout (SQLSTATE 40001, 40P01, 55P03); MySQL/MariaDB's deadlock and lock wait timeout
    /// (errors 1213, 1205); SQLite's busy and locked database (result codes 5, 6 and their
    /// extended 261, 517). A lock wait that ran out was most likely behind a frozen
    /// replica's transaction, which the database ends by the same limit.
    pub fn is_transient(self, e: &DbErr) -> bool {
        let Some(db) = database_error(e) else { return false };
        match self {
            Self::Postgres => matches!(db.code().as_deref(), Some("40001" | "40P01" | "55P03")),
            Self::MySql => mysql_number(db).is_some_and(|n| matches!(n, 1213 | 1205)),
            Self::Sqlite => matches!(db.code().as_deref(), Some("5" | "6" | "261" | "517")),
        }
    }

    /// Which session limit ([`crate::adapters::sql::session`]) refused a statement, if one did: a lock
    /// wait that ran out (PostgreSQL 55P03, InnoDB 1205, SQLite busy), or this session's
    /// transaction ended for idling (PostgreSQL 25P03; MariaDB's killed connection 1927,
    /// MySQL's 4031), which a replica learns when it wakes from a freeze.
    pub fn limit_hit(self, e: &DbErr) -> Option<SessionLimit> {
        let db = database_error(e)?;
        match self {
            Self::Postgres => match db.code().as_deref() {
                Some("55P03") => Some(SessionLimit::LockWait),
                Some("25P03") => Some(SessionLimit::IdleTransaction),
                _ => None,
            },
            Self::MySql => match mysql_number(db)? {
                1205 => Some(SessionLimit::LockWait),
                1927 | 4031 => Some(SessionLimit::IdleTransaction),
                _ => None,
            },
            Self::Sqlite => matches!(db.code().as_deref(), Some("5" | "261")).then_some(SessionLimit::LockWait),
        }
    }
}
