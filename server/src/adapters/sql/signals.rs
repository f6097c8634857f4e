//! Where custom signals live in SQL: each name has one of the columns `signal_1` …
//! `signal_8` of `product_daily_metrics` and `product_metrics`, assigned once in
//! `signal_slots` and never reused, so that a day is still one range of one table and a
//! batch still one upsert per table whatever the profile (the batch path's O(1) rule). A
//! profile's signals are registered at start-up; every later look-up is this process's
//! cache, read again from SQL for a name another replica registered.

use std::collections::HashMap;
use std::sync::RwLock;

use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::ports::StoreError;

/// Columns of custom signals per metrics table (`signal_1` …).
pub const SIGNAL_COLUMNS: u8 = 8;

/// The code of views among the capped signals (`actor_counts.signal_code`): a custom
/// signal's code is its column's slot, 1 … [`SIGNAL_COLUMNS`], so views take 0.
pub const VIEWS_CODE: i16 = 0;

/// The column of each registered signal name.
#[derive(Debug, Default)]
pub struct SignalColumns {
    known: RwLock<HashMap<String, u8>>,
}

/// The name of column `slot`.
pub fn column(slot: u8) -> String {
    format!("signal_{slot}")
}

impl SignalColumns {
    /// The columns of `names`, in their order (`None`: the name was never registered, so no
    /// row holds a value of it).
    pub async fn of(&self, db: &DatabaseConnection, names: &[String]) -> Result<Vec<Option<u8>>, StoreError> {
        if names.iter().any(|n| self.cached(n).is_none()) {
            self.reload(db).await?;
        }
        Ok(names.iter().map(|n| self.cached(n)).collect())
    }

    /// Gives every name of `names` a column, keeping the ones already assigned. Refused when
    /// the columns are all taken.
    pub async fn register(&self, db: &DatabaseConnection, names: &[String]) -> Result<(), StoreError> {
        for name in names {
            // A replica registering at the same time may win a column: read again and retry.
            for _ in 0..SIGNAL_COLUMNS + 1 {
                if self.of(db, std::slice::from_ref(name)).await?[0].is_some() {
                    break;
                }
                let taken: Vec<u8> = self.known.read().unwrap_or_else(|e| e.into_inner()).values().copied().collect();
                let Some(free) = (1..=SIGNAL_COLUMNS).find(|s| !taken.contains(s)) else {
                    let names: Vec<String> =
                        self.known.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
                    return Err(StoreError::Exceeds(format!(
                        "signal {name:?} has no column left: the {SIGNAL_COLUMNS} custom signal columns belong to {names:?} \
                         (signal_slots)"
                    )));
                };
                let insert = Query::insert()
                    .into_table(Alias::new("signal_slots"))
                    .columns([Alias::new("signal_name"), Alias::new("slot")])
                    .values_panic([name.as_str().into(), i16::from(free).into()])
                    .to_owned();
                if let Err(e) = db.execute(&insert).await {
                    tracing::debug!(error = %e, signal = %name, "signal column taken meanwhile; reading again");
                }
            }
            if self.cached(name).is_none() {
                return Err(StoreError::database(format!("could not register signal {name:?}")));
            }
        }
        Ok(())
    }

    fn cached(&self, name: &str) -> Option<u8> {
        self.known.read().unwrap_or_else(|e| e.into_inner()).get(name).copied()
    }

    async fn reload(&self, db: &DatabaseConnection) -> Result<(), StoreError> {
        let select = Query::select()
            .columns([Alias::new("signal_name"), Alias::new("slot")])
            .from(Alias::new("signal_slots"))
            .and_where(Expr::col(Alias::new("slot")).between(1, i32::from(SIGNAL_COLUMNS)))
            .to_owned();
        let rows = db.query_all(&select).await.map_err(StoreError::database)?;
        let mut known = HashMap::with_capacity(rows.len());
        for row in rows {
            let name: String = row.try_get_by_index(0).map_err(StoreError::database)?;
            let slot: i16 = row.try_get_by_index(1).map_err(StoreError::database)?;
            known.insert(
                name,
                u8::try_from(slot).map_err(|_| StoreError::Corrupt(format!("signal_slots.slot {slot}")))?,
            );
        }
        *self.known.write().unwrap_or_else(|e| e.into_inner()) = known;
        Ok(())
    }
}
