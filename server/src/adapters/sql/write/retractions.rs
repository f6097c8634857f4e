//! The write path's part in retractions (steps 2 and 6 of [`super`]): the stored events a
//! batch's retractions name, the stored retractions that name the batch's events
//! (`retractions`, one row per event taken back, found by its key), the fates brought up to
//! date once the rows are locked, and the batch's own retractions stored. What each event
//! does is the domain's decision ([`retraction::resolve`], [`retraction::refusal`]); this
//! module reads and writes what it needs.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::events;
use super::tx::{Attempt, Tx};
use crate::adapters::sql::rows::{Column, Rows};
use crate::domain::profile::ScoringProfile;
use crate::domain::retraction::{self, Fate, Original};
use crate::domain::vocabulary::EventKind;
use crate::ports::{DatedEvent, StoreError};

/// The retractions of one attempt of a batch.
pub struct Retractions<'a> {
    pub tx: Tx<'a>,
    pub batch: &'a [DatedEvent],
    /// The kind of each custom signal (a retracted SIGNAL event's).
    pub profile: &'a ScoringProfile,
    /// The oldest an original may be and still be retracted.
    pub retractable_since: DateTime<Utc>,
}

impl Retractions<'_> {
    /// What each of `fresh` (batch indexes, in batch order) does.
    pub async fn fates(&self, fresh: &[usize]) -> Result<Vec<Fate>, Attempt> {
        let batch = self.batch;
        let mut targets: Vec<String> = fresh
            .iter()
            .map(|i| &batch[*i].event)
            .filter(|e| e.kind == EventKind::Retract)
            .map(|e| e.retracts.clone())
            .collect();
        targets.sort_unstable();
        targets.dedup();
        let originals = if targets.is_empty() { HashMap::new() } else { self.originals(&targets).await? };
        let mut asked: Vec<String> = fresh
            .iter()
            .map(|i| &batch[*i].event)
            .filter(|e| e.kind != EventKind::Retract)
            .map(|e| e.event_id.clone())
            .chain(targets)
            .collect();
        asked.sort_unstable();
        asked.dedup();
        let claims = self.claims(asked).await?;
        let items: Vec<_> = fresh.iter().map(|i| (*i, &batch[*i].event, batch[*i].date)).collect();
        retraction::resolve(&items, &originals, &claims, self.retractable_since)
            .map_err(|r| Attempt::Fail(StoreError::Refused { index: r.index, field: r.field, reason: r.reason }))
    }

    /// With every product's all-time row of the batch locked: what was decided without a
    /// retraction or an original may have changed meanwhile (another transaction committed
    /// one before this one took the locks). The fates are brought up to date — a counted
    /// event that a retraction now names is Retracted, a waiting retraction whose original
    /// is now stored Withdraws it — and the batch's retractions are stored. Returns the
    /// places of the fates that changed, whose rows the caller corrects.
    pub async fn settle(&self, fresh: &[usize], fates: &mut [Fate]) -> Result<Vec<usize>, Attempt> {
        let batch = self.batch;
        let mut changed = Vec::new();
        let own: HashSet<&str> = fresh.iter().map(|i| batch[*i].event.event_id.as_str()).collect();
        let counted: HashMap<String, usize> = fresh
            .iter()
            .enumerate()
            .filter(|(k, i)| fates[*k] == Fate::Counted && batch[**i].event.kind != EventKind::Retract)
            .map(|(k, i)| (batch[*i].event.event_id.clone(), k))
            .collect();
        if !counted.is_empty() {
            for (id, product) in self.claims(counted.keys().cloned().collect()).await? {
                let k = counted[&id];
                if batch[fresh[k]].event.product_id == product {
                    fates[k] = Fate::Retracted;
                    changed.push(k);
                }
            }
        }
        let waiting: HashMap<String, usize> = fresh
            .iter()
            .enumerate()
            .filter(|(k, _)| fates[*k] == Fate::Waits)
            .map(|(k, i)| (batch[*i].event.retracts.clone(), k))
            .filter(|(target, _)| !own.contains(target.as_str()))
            .collect();
        if !waiting.is_empty() {
            for (target, original) in self.originals(&waiting.keys().cloned().collect::<Vec<_>>()).await? {
                let k = waiting[&target];
                let event = &batch[fresh[k]].event;
                if retraction::refusal(&original, event, self.retractable_since).is_some() {
                    // A refusal now: the run again says which.
                    return Err(Attempt::Retry("an original the batch retracts committed meanwhile".into()));
                }
                fates[k] = Fate::Withdraws(original);
                changed.push(k);
            }
        }
        let claiming: Vec<usize> = fresh
            .iter()
            .zip(fates.iter())
            .filter(|(_, fate)| matches!(fate, Fate::Waits | Fate::Withdraws(_)))
            .map(|(i, _)| *i)
            .collect();
        if claiming.is_empty() {
            return Ok(changed);
        }
        let mut by_target = claiming;
        by_target.sort_unstable_by(|a, b| batch[*a].event.retracts.cmp(&batch[*b].event.retracts));
        let claims = || by_target.iter().map(|i| &batch[*i]);
        let rows = Rows {
            len: by_target.len(),
            columns: vec![
                Column::Text(claims().map(|e| e.event.retracts.clone()).collect()),
                Column::Text(claims().map(|e| e.event.event_id.clone()).collect()),
                Column::Int(claims().map(|e| e.event.product_id).collect()),
                Column::Date(claims().map(|e| e.date).collect()),
                Column::Int(vec![self.tx.now_us; by_target.len()]),
            ],
        };
        let mut values = Vec::new();
        let source = self.tx.source(&rows, &mut values);
        let sql = self
            .tx
            .dialect
            .insert_or_ignore("retractions (target_id, event_id, product_id, metric_date, recorded_at)", &source);
        let inserted = self.tx.execute(sql, values).await?;
        if inserted != by_target.len() as u64 {
            return Err(Attempt::Retry("another retraction of the same event committed meanwhile".into()));
        }
        Ok(changed)
    }

    /// The stored events of `ids`, as retractions need them.
    async fn originals(&self, ids: &[String]) -> Result<HashMap<String, Original>, Attempt> {
        let mut originals = HashMap::new();
        for (id, (stored, signal, date, actor_id)) in events::stored(self.tx, ids.to_vec()).await? {
            let signal_kind = self.profile.custom_signal(&signal).map(|(_, kind)| kind);
            let Some(kind) = EventKind::from_code(stored.event_type, signal_kind) else {
                // A signal the profile no longer has: its column is not the profile's to take
                // from, and the event is no original a retraction can take back.
                continue;
            };
            let occurred_at = chrono::DateTime::from_timestamp_micros(stored.occurred_at).unwrap_or_default();
            let original = Original {
                event_id: id.clone(),
                product_id: stored.product_id,
                kind,
                signal,
                amount: stored.amount,
                actor_id,
                occurred_at,
                date,
            };
            originals.insert(id, original);
        }
        Ok(originals)
    }

    /// The product of every stored retraction naming one of `ids`.
    async fn claims(&self, ids: Vec<String>) -> Result<HashMap<String, i64>, Attempt> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let (sql, values) = self.tx.dialect.retraction_claims(ids);
        let mut claims = HashMap::new();
        for row in self.tx.query(sql, values).await? {
            claims.insert(row.try_get_by_index::<String>(0)?, row.try_get_by_index::<i64>(1)?);
        }
        Ok(claims)
    }
}
