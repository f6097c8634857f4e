//! The per-actor counts of capped signals (`actor_counts`): the batch's upsert, reading the
//! counts it left where the upsert cannot return them, and a day's totals for ExplainRank.

use sea_orm::Value;

use super::{Dialect, UpsertOp};

/// The key and count columns of `actor_counts`, in key order.
const COLUMNS: &str = "metric_date, product_id, signal_code, actor_id, events";

impl Dialect {
    /// Whether the upsert of actor rows returns the counts it left (`RETURNING`); MySQL
    /// reads them with [`Dialect::actor_counts_of`] instead.
    pub fn returns_upserted(self) -> bool {
        self != Self::MySql
    }

    /// An upsert adding each row of `source` (date, product, code, actor, events) to the
    /// stored count, returning the rows as it left them where the engine can.
    pub fn actor_upsert(self, source: &str) -> String {
        let key = "metric_date, product_id, signal_code, actor_id";
        let tail = self.upsert_tail("actor_counts", key, &[("events", UpsertOp::Add)]);
        let head = format!("INSERT INTO actor_counts ({COLUMNS}) {source}{tail}");
        if self.returns_upserted() { format!("{head} RETURNING {COLUMNS}") } else { head }
    }

    /// The stored rows of the keys in `source` (a `JSON_TABLE` of columns `c0`…`c3`: date,
    /// product, code, actor), as [`Dialect::actor_upsert`] returns them. Read under the
    /// upsert's own row locks, in READ COMMITTED: what this transaction left.
    pub fn actor_counts_of(self, source: &str) -> String {
        format!(
            "SELECT a.metric_date, a.product_id, a.signal_code, CAST(a.actor_id AS CHAR(128)), a.events \
             FROM ({source}) AS k JOIN actor_counts a ON a.metric_date = k.c0 AND a.product_id = k.c1 \
             AND a.signal_code = k.c2 AND a.actor_id = CAST(k.c3 AS BINARY)"
        )
    }

    /// For one product and day: per signal code of `caps` (code, cap), the events over the
    /// cap, `Σ max(0, events − cap)` over the actors: `(signal_code, over)` rows.
    pub fn actor_totals(self, date: chrono::NaiveDate, product_id: i64, caps: &[(i16, u32)]) -> (String, Vec<Value>) {
        // Codes and caps are numbers of the profile, written in.
        let cap: String = caps.iter().map(|(code, n)| format!(" WHEN {code} THEN {n}")).collect();
        let codes: Vec<String> = caps.iter().map(|(code, _)| code.to_string()).collect();
        let over = format!(
            "CASE WHEN events > (CASE signal_code{cap} END) THEN events - (CASE signal_code{cap} END) ELSE 0 END"
        );
        let sum = match self {
            Self::Postgres => format!("SUM({over})::BIGINT"),
            Self::MySql => format!("CAST(SUM({over}) AS SIGNED)"),
            Self::Sqlite => format!("SUM({over})"),
        };
        let sql = format!(
            "SELECT signal_code, {sum} FROM actor_counts WHERE metric_date = {} AND product_id = {} \
             AND signal_code IN ({}) GROUP BY signal_code",
            self.param(1),
            self.param(2),
            codes.join(", ")
        );
        (sql, vec![date.into(), product_id.into()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upsert_returns_its_rows_except_on_mysql() {
        let pg = Dialect::Postgres.actor_upsert("SELECT * FROM UNNEST($1)");
        assert!(pg.ends_with(
            "ON CONFLICT (metric_date, product_id, signal_code, actor_id) DO UPDATE SET events = actor_counts.events + excluded.events \
             RETURNING metric_date, product_id, signal_code, actor_id, events"
        ), "{pg}");
        let my = Dialect::MySql.actor_upsert("SELECT * FROM JSON_TABLE(?) AS j");
        assert!(my.ends_with("ON DUPLICATE KEY UPDATE events = events + VALUES(events)"), "{my}");
        let (sql, values) = Dialect::Postgres.actor_totals(chrono::NaiveDate::MIN, 7, &[(0, 1), (3, 2)]);
        assert!(sql.contains("CASE signal_code WHEN 0 THEN 1 WHEN 3 THEN 2 END"), "{sql}");
        assert!(sql.contains("signal_code IN (0, 3)"), "{sql}");
        assert_eq!(values.len(), 2);
    }
}
