//! What every statement of a batch runs in: the engine's SQL, the transaction, the batch's
//! clock; and why an attempt failed ([`Attempt`]), which decides whether the store runs the
//! whole transaction again.

use sea_orm::{ConnectionTrait, DatabaseTransaction, DbErr, QueryResult, Statement, Value};

use crate::adapters::sql::dialect::Dialect;
use crate::adapters::sql::rows::Rows;
use crate::ports::StoreError;

/// Why one attempt of a transaction failed.
pub enum Attempt {
    /// Worth running again: an insert race lost to another transaction.
    Retry(String),
    /// The database refused a statement: worth running again when the dialect says the
    /// error is transient ([`Dialect::is_transient`]: a deadlock, a serialization failure).
    Db(DbErr),
    /// Not worth retrying here.
    Fail(StoreError),
}

impl From<DbErr> for Attempt {
    fn from(e: DbErr) -> Self {
        Self::Db(e)
    }
}

impl From<StoreError> for Attempt {
    fn from(e: StoreError) -> Self {
        Self::Fail(e)
    }
}

/// The transaction one attempt of a batch runs in.
#[derive(Clone, Copy)]
pub struct Tx<'a> {
    /// The engine's SQL.
    pub dialect: Dialect,
    /// The transaction.
    pub txn: &'a DatabaseTransaction,
    /// `recorded_at` / `updated_at`, Unix microseconds.
    pub now_us: i64,
}

impl Tx<'_> {
    fn statement(&self, sql: String, values: Vec<Value>) -> Statement {
        Statement::from_sql_and_values(self.dialect.backend(), sql, values)
    }

    /// Runs a statement that returns rows.
    pub async fn query(&self, sql: String, values: Vec<Value>) -> Result<Vec<QueryResult>, DbErr> {
        self.txn.query_all_raw(self.statement(sql, values)).await
    }

    /// Runs a statement; how many rows it changed.
    pub async fn execute(&self, sql: String, values: Vec<Value>) -> Result<u64, DbErr> {
        Ok(self.txn.execute_raw(self.statement(sql, values)).await?.rows_affected())
    }

    /// The engine's source of `rows` (a `VALUES` list or its equivalent), its values pushed
    /// onto `values`.
    pub fn source(&self, rows: &Rows, values: &mut Vec<Value>) -> String {
        self.dialect.row_source(rows, values)
    }
}
