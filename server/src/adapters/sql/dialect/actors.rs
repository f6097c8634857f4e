//! The per-actor counts of capped signals (`actor_counts` per day, `actor_hour_counts` per
//! hour): the batch's upsert, reading the counts it left where the upsert cannot return them,
//! and a day's totals for ExplainRank.

use sea_orm::Value;

use super::{Dialect, UpsertOp};

/// A table of shoppers' rows: its name and key columns in key order, the actor's last; its
/// count column is `events`.
#[derive(Debug, Clone, Copy)]
pub struct ActorTable {
    pub name: &'static str,
    pub key: &'static [&'static str],
}

/// One row per day, product, capped signal and shopper.
pub const ACTOR_COUNTS: ActorTable =
    ActorTable { name: "actor_counts", key: &["metric_date", "product_id", "signal_code", "actor_id"] };

/// One row per day, hour, product, capped signal and shopper.
pub const ACTOR_HOUR_COUNTS: ActorTable = ActorTable {
    name: "actor_hour_counts",
    key: &["metric_date", "product_id", "hour_start", "signal_code", "actor_id"],
};

impl Dialect {
    /// Whether the upsert of actor rows returns the counts it left (`RETURNING`); MySQL
    /// reads them with [`Dialect::actor_counts_of`] instead.
    pub fn returns_upserted(self) -> bool {
        self != Self::MySql
    }

    /// An upsert adding each row of `source` (the key columns, then events) to the stored
    /// count of `table`, returning the rows as it left them where the engine can.
    pub fn actor_upsert(self, table: ActorTable, source: &str) -> String {
        let key = table.key.join(", ");
        let tail = self.upsert_tail(table.name, &key, &[("events", UpsertOp::Add)]);
        let head = format!("INSERT INTO {} ({key}, events) {source}{tail}", table.name);
        if self.returns_upserted() { format!("{head} RETURNING {key}, events") } else { head }
    }

    /// The stored rows of `table` of the keys in `source` (a `JSON_TABLE` of columns `c0`…,
    /// the key in order), as [`Dialect::actor_upsert`] returns them. Read under the upsert's
    /// own row locks, in READ COMMITTED: what this transaction left.
    pub fn actor_counts_of(self, table: ActorTable, source: &str) -> String {
        let last = table.key.len() - 1;
        let selected: Vec<String> = table
            .key
            .iter()
            .enumerate()
            .map(|(i, c)| if i == last { format!("CAST(a.{c} AS CHAR(128))") } else { format!("a.{c}") })
            .collect();
        let joined: Vec<String> = table
            .key
            .iter()
            .enumerate()
            .map(|(i, c)| if i == last { format!("a.{c} = CAST(k.c{i} AS BINARY)") } else { format!("a.{c} = k.c{i}") })
            .collect();
        format!(
            "SELECT {}, a.events FROM ({source}) AS k JOIN {} a ON {}",
            selected.join(", "),
            table.name,
            joined.join(" AND ")
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
        let pg = Dialect::Postgres.actor_upsert(ACTOR_COUNTS, "SELECT * FROM UNNEST($1)");
        assert!(pg.ends_with(
            "ON CONFLICT (metric_date, product_id, signal_code, actor_id) DO UPDATE SET events = actor_counts.events + excluded.events \
             RETURNING metric_date, product_id, signal_code, actor_id, events"
        ), "{pg}");
        let my = Dialect::MySql.actor_upsert(ACTOR_COUNTS, "SELECT * FROM JSON_TABLE(?) AS j");
        assert!(my.ends_with("ON DUPLICATE KEY UPDATE events = events + VALUES(events)"), "{my}");
        let (sql, values) = Dialect::Postgres.actor_totals(chrono::NaiveDate::MIN, 7, &[(0, 1), (3, 2)]);
        assert!(sql.contains("CASE signal_code WHEN 0 THEN 1 WHEN 3 THEN 2 END"), "{sql}");
        assert!(sql.contains("signal_code IN (0, 3)"), "{sql}");
        assert_eq!(values.len(), 2);
        let read = Dialect::MySql.actor_counts_of(ACTOR_HOUR_COUNTS, "SELECT 1");
        assert!(read.contains("a.product_id = k.c1 AND a.hour_start = k.c2"), "{read}");
        assert!(read.contains("a.actor_id = CAST(k.c4 AS BINARY)"), "{read}");
    }
}
