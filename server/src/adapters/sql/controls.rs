//! `merchandising_controls` and `control_revision`: PutControl and DeleteControl, each one
//! transaction that first raises the revision (so changes of controls take turns on its row
//! and every change has a revision of its own), then checks and writes; and the replicas'
//! reads of the whole set.

use sea_orm::sea_query::{Alias, Expr, ExprTrait, OnConflict, Order, Query, SelectStatement};
use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbErr, QueryResult, TransactionTrait};
use serde::{Deserialize, Serialize};

use crate::domain::catalog::Segment;
use crate::domain::controls::{Action, Control, Scheduled, exceeded};
use crate::ports::{DeleteOutcome, PutOutcome, StoreError};

fn table() -> Alias {
    Alias::new("merchandising_controls")
}

/// The columns of a control, in the order [`control_of`] reads them; the first seven are
/// what the bounds read ([`scheduled_of`]).
const COLUMNS: [&str; 11] = [
    "control_id",
    "segment",
    "windows",
    "profile",
    "active_from_us",
    "active_until_us",
    "kind",
    "action",
    "note",
    "revision",
    "updated_at_us",
];

/// The action as stored: JSON keyed by its kind, as the API spells it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredAction {
    Pin { product_id: i64, position: u32 },
    Boost { product_ids: Vec<i64>, points: f64 },
    Exclude { product_ids: Vec<i64> },
}

fn kind_code(action: &Action) -> i16 {
    match action {
        Action::Pin { .. } => 1,
        Action::Boost { .. } => 2,
        Action::Exclude { .. } => 3,
    }
}

fn stored_action(action: &Action) -> StoredAction {
    match action.clone() {
        Action::Pin { product_id, position } => StoredAction::Pin { product_id, position },
        Action::Boost { product_ids, points } => StoredAction::Boost { product_ids, points },
        Action::Exclude { product_ids } => StoredAction::Exclude { product_ids },
    }
}

fn action_of(stored: StoredAction) -> Action {
    match stored {
        StoredAction::Pin { product_id, position } => Action::Pin { product_id, position },
        StoredAction::Boost { product_ids, points } => Action::Boost { product_ids, points },
        StoredAction::Exclude { product_ids } => Action::Exclude { product_ids },
    }
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("merchandising_controls: {what}"))
}

/// Raises the revision (locking its row to the commit) and returns the new one.
async fn next_revision(txn: &DatabaseTransaction) -> Result<u64, StoreError> {
    let bump = Query::update()
        .table(Alias::new("control_revision"))
        .value(Alias::new("revision"), Expr::col(Alias::new("revision")).add(1))
        .and_where(Expr::col(Alias::new("id")).eq(1))
        .to_owned();
    txn.execute(&bump).await.map_err(StoreError::database)?;
    revision(txn).await?.ok_or_else(|| corrupt("control_revision has no row"))
}

async fn revision(conn: &impl ConnectionTrait) -> Result<Option<u64>, StoreError> {
    let select = Query::select()
        .column(Alias::new("revision"))
        .from(Alias::new("control_revision"))
        .and_where(Expr::col(Alias::new("id")).eq(1))
        .to_owned();
    let row = conn.query_one(&select).await.map_err(StoreError::database)?;
    row.map(|r| r.try_get_by_index::<i64>(0).map(|v| v as u64).map_err(StoreError::database)).transpose()
}

fn select(columns: &[&str]) -> SelectStatement {
    Query::select()
        .columns(columns.iter().map(|c| Alias::new(*c)))
        .from(table())
        .order_by(Alias::new("control_id"), Order::Asc)
        .to_owned()
}

/// The board, schedule and kind of a row of [`select`] over `COLUMNS[..7]`.
fn scheduled_of(row: &QueryResult) -> Result<Scheduled, DbErr> {
    let segment: String = row.try_get_by_index(1)?;
    let profile: String = row.try_get_by_index(3)?;
    let windows: i16 = row.try_get_by_index(2)?;
    Ok(Scheduled {
        id: row.try_get_by_index(0)?,
        segment: if segment.is_empty() {
            None
        } else {
            Some(Segment::parse(&segment).map_err(|e| DbErr::Custom(format!("segment {segment:?}: {e}")))?)
        },
        windows: super::codes::windows_of_code(windows),
        profile: (!profile.is_empty()).then_some(profile),
        active_from_us: row.try_get_by_index(4)?,
        active_until_us: row.try_get_by_index(5)?,
        pin: row.try_get_by_index::<i16>(6)? == 1,
    })
}

fn control_of(row: &QueryResult) -> Result<Control, StoreError> {
    let read = |e: DbErr| corrupt(e);
    let scheduled = scheduled_of(row).map_err(read)?;
    let action: String = row.try_get_by_index(7).map_err(read)?;
    let action: StoredAction =
        serde_json::from_str(&action).map_err(|e| corrupt(format!("{}: action: {e}", scheduled.id)))?;
    Ok(Control {
        id: scheduled.id,
        segment: scheduled.segment,
        windows: scheduled.windows,
        profile: scheduled.profile,
        active_from_us: scheduled.active_from_us,
        active_until_us: scheduled.active_until_us,
        action: action_of(action),
        note: row.try_get_by_index(8).map_err(read)?,
        revision: row.try_get_by_index::<i64>(9).map_err(read)? as u64,
        updated_at_us: row.try_get_by_index(10).map_err(read)?,
    })
}

/// The stored revision of control `id`, read inside the change's transaction.
async fn stored_revision(txn: &DatabaseTransaction, id: &str) -> Result<Option<u64>, StoreError> {
    let select = Query::select()
        .column(Alias::new("revision"))
        .from(table())
        .and_where(Expr::col(Alias::new("control_id")).eq(id))
        .to_owned();
    let row = txn.query_one(&select).await.map_err(StoreError::database)?;
    row.map(|r| r.try_get_by_index::<i64>(0).map(|v| v as u64).map_err(StoreError::database)).transpose()
}

/// Whether `expected` (0: any) allows a change of a control stored at `stored`.
fn expected(expected: u64, stored: Option<u64>) -> bool {
    expected == 0 || stored == Some(expected)
}

/// PutControl's transaction.
pub async fn put(
    db: &DatabaseConnection,
    control: Control,
    expected_revision: u64,
    updated_at_us: i64,
) -> Result<PutOutcome, StoreError> {
    let txn = db.begin().await.map_err(StoreError::database)?;
    let revision = next_revision(&txn).await?;
    let stored = stored_revision(&txn, &control.id).await?;
    if !expected(expected_revision, stored) {
        txn.rollback().await.map_err(StoreError::database)?;
        return Ok(PutOutcome::Conflict { stored });
    }
    let rows = txn.query_all(&select(&COLUMNS[..7])).await.map_err(StoreError::database)?;
    let schedules: Vec<Scheduled> = rows.iter().map(scheduled_of).collect::<Result<_, _>>().map_err(corrupt)?;
    if let Some(bound) = exceeded(&schedules, &control.scheduled()) {
        txn.rollback().await.map_err(StoreError::database)?;
        return Ok(PutOutcome::Exceeded(bound));
    }
    let control = Control { revision, updated_at_us, ..control };
    let action = serde_json::to_string(&stored_action(&control.action)).map_err(corrupt)?;
    let insert = Query::insert()
        .into_table(table())
        .columns(COLUMNS.map(Alias::new))
        .values_panic([
            control.id.clone().into(),
            control.segment.map(|s| s.as_str().to_string()).unwrap_or_default().into(),
            super::codes::windows_code(control.windows).into(),
            control.profile.clone().unwrap_or_default().into(),
            control.active_from_us.into(),
            control.active_until_us.into(),
            kind_code(&control.action).into(),
            action.into(),
            control.note.clone().into(),
            (revision as i64).into(),
            updated_at_us.into(),
        ])
        .on_conflict(
            OnConflict::column(Alias::new("control_id"))
                .update_columns(COLUMNS[1..].iter().map(|c| Alias::new(*c)))
                .to_owned(),
        )
        .to_owned();
    txn.execute(&insert).await.map_err(StoreError::database)?;
    txn.commit().await.map_err(StoreError::database)?;
    Ok(PutOutcome::Stored(control))
}

/// DeleteControl's transaction.
pub async fn delete(db: &DatabaseConnection, id: &str, expected_revision: u64) -> Result<DeleteOutcome, StoreError> {
    let txn = db.begin().await.map_err(StoreError::database)?;
    next_revision(&txn).await?;
    let stored = stored_revision(&txn, id).await?;
    if !expected(expected_revision, stored) {
        txn.rollback().await.map_err(StoreError::database)?;
        return Ok(DeleteOutcome::Conflict { stored });
    }
    if stored.is_none() {
        // Nothing changed: the revision stays where it was.
        txn.rollback().await.map_err(StoreError::database)?;
        return Ok(DeleteOutcome::Deleted(false));
    }
    let delete = Query::delete().from_table(table()).and_where(Expr::col(Alias::new("control_id")).eq(id)).to_owned();
    txn.execute(&delete).await.map_err(StoreError::database)?;
    txn.commit().await.map_err(StoreError::database)?;
    Ok(DeleteOutcome::Deleted(true))
}

/// Every control by id, and the revision they were read at (one transaction, so the two
/// agree).
pub async fn all(db: &DatabaseConnection) -> Result<(u64, Vec<Control>), StoreError> {
    let txn = db.begin().await.map_err(StoreError::database)?;
    let at = revision(&txn).await?.ok_or_else(|| corrupt("control_revision has no row"))?;
    let rows = txn.query_all(&select(&COLUMNS)).await.map_err(StoreError::database)?;
    txn.commit().await.map_err(StoreError::database)?;
    Ok((at, rows.iter().map(control_of).collect::<Result<_, _>>()?))
}

/// The revision of the last change.
pub async fn current_revision(db: &DatabaseConnection) -> Result<u64, StoreError> {
    revision(db).await?.ok_or_else(|| corrupt("control_revision has no row"))
}
