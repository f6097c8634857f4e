//! The statements on `events`: the stored events of a list of ids (the batch's duplicates,
//! the originals its retractions name), and the insert-or-ignore of the fresh ones in
//! ascending id order, so that two batches sharing ids wait for each other instead of
//! deadlocking on the primary key.

use std::collections::HashMap;

use chrono::NaiveDate;

use super::plan::Caps;
use super::tx::{Attempt, Tx};
use crate::adapters::sql::rows::{Column, Rows};
use crate::ports::DatedEvent;

/// The content of a stored event, to notice a reused id with different content.
#[derive(Debug, PartialEq, Eq)]
pub struct StoredEvent {
    pub product_id: i64,
    pub event_type: i16,
    pub amount: i64,
    pub occurred_at: i64,
}

impl StoredEvent {
    pub fn of(e: &DatedEvent) -> Self {
        Self {
            product_id: e.event.product_id,
            event_type: e.event.kind.code(),
            amount: e.event.amount,
            occurred_at: e.event.occurred_at.timestamp_micros(),
        }
    }
}

/// A stored event: its content, its custom signal (empty for the built-in types), its day
/// and the actor whose capped count it went into (empty for none).
pub type Stored = (StoredEvent, String, NaiveDate, String);

/// The stored events of `ids`.
pub async fn stored(tx: Tx<'_>, ids: Vec<String>) -> Result<HashMap<String, Stored>, Attempt> {
    let (sql, values) = tx.dialect.stored_events(ids);
    let mut stored = HashMap::new();
    for row in tx.query(sql, values).await? {
        let id: String = row.try_get_by_index(0)?;
        let event = StoredEvent {
            product_id: row.try_get_by_index(1)?,
            event_type: row.try_get_by_index(2)?,
            amount: row.try_get_by_index(3)?,
            occurred_at: row.try_get_by_index(4)?,
        };
        let (signal, date, actor) = (row.try_get_by_index(5)?, row.try_get_by_index(6)?, row.try_get_by_index(7)?);
        stored.insert(id, (event, signal, date, actor));
    }
    Ok(stored)
}

/// Inserts `events` (ascending ids), skipping ids stored meanwhile; how many it inserted.
pub async fn insert(tx: Tx<'_>, events: &[&DatedEvent], caps: Caps<'_>) -> Result<u64, Attempt> {
    let each = || events.iter();
    let rows = Rows {
        len: events.len(),
        columns: vec![
            Column::Text(each().map(|e| e.event.event_id.clone()).collect()),
            Column::Int(each().map(|e| e.event.product_id).collect()),
            Column::SmallInt(each().map(|e| e.event.kind.code()).collect()),
            Column::Text(each().map(|e| e.event.signal.clone()).collect()),
            Column::Int(each().map(|e| e.event.amount).collect()),
            Column::Int(each().map(|e| e.event.occurred_at.timestamp_micros()).collect()),
            Column::Date(each().map(|e| e.date).collect()),
            Column::Int(vec![tx.now_us; events.len()]),
            Column::Text(each().map(|e| caps.stored_actor(&e.event)).collect()),
        ],
    };
    let mut values = Vec::new();
    let source = tx.source(&rows, &mut values);
    let sql = tx.dialect.insert_or_ignore(
        "events (event_id, product_id, event_type, signal_name, amount, occurred_at, metric_date, recorded_at, \
         actor_id)",
        &source,
    );
    if tx.dialect.returns_inserted() {
        // Where the engine can say which rows it inserted, count those.
        return Ok(tx.query(format!("{sql} RETURNING event_id"), values).await?.len() as u64);
    }
    Ok(tx.execute(sql, values).await?)
}
