//! This replica's copy of the stored merchandising controls, and the served board of a
//! ranking under them.
//!
//! Every publication asks for the controls as stored now ([`CurrentControls::fresh`]: one read
//! of their revision, and of the controls only when it moved), so a version is served with
//! the controls of its publication wherever it was computed.

use std::sync::{Arc, RwLock};

use chrono::NaiveDate;

use crate::app::policy::Policy;
use crate::domain::controls::{Board, Control, boosted, serve_copy};
use crate::domain::layout::Layout;
use crate::domain::snapshot::{Scored, Snapshot};
use crate::ports::{ControlRows, RankingKey, StoreError};

/// The instant whose active controls a publication of `date`'s rankings serves: now, or for
/// a past day its last instant (a day that has closed keeps the controls it closed with).
pub fn served_at(policy: &Policy, date: NaiveDate) -> i64 {
    let now = policy.now().timestamp_micros();
    now.min(policy.calendar.day_end(date).timestamp_micros() - 1)
}

/// The stored controls at one revision.
#[derive(Debug)]
pub struct ControlSet {
    /// The revision of the last change they include (0: none ever).
    pub revision: u64,
    /// Every stored control, by id.
    pub controls: Vec<Control>,
    /// The profile whose boards they serve (a control naming another profile acts on none
    /// of them).
    pub profile: Arc<str>,
}

/// The board of a versioned ranking of `profile`, as controls select it; `None` for an
/// hourly one (no controls act on it).
pub fn board_of(key: RankingKey, profile: &str) -> Option<Board<'_>> {
    let window = key.window();
    window.is_versioned().then_some(Board { window, segment: key.segment(), profile: Some(profile) })
}

impl ControlSet {
    /// The controls acting on the ranking of `key` at `at_us`.
    pub fn acting(&self, key: RankingKey, at_us: i64) -> Vec<&Control> {
        let Some(board) = board_of(key, &self.profile) else { return Vec::new() };
        self.controls.iter().filter(|c| c.active_at(at_us) && c.acts_on(&board)).collect()
    }

    /// The first instant after `at_us` at which a control starts or ends: when the served
    /// boards change without any put or delete.
    pub fn next_boundary(&self, at_us: i64) -> Option<i64> {
        self.controls.iter().flat_map(Control::boundaries).filter(|b| *b > at_us).min()
    }

    /// `organic` served under the controls acting on `key` at `at_us`: `organic` itself when
    /// none does.
    pub fn served(
        &self,
        key: RankingKey,
        organic: &Arc<Snapshot>,
        at_us: i64,
        layout: &Layout,
    ) -> Result<Arc<Snapshot>, StoreError> {
        if self.acting(key, at_us).is_empty() {
            return Ok(organic.clone());
        }
        self.served_entries(key, &organic.page(0, organic.len() as u64), organic, at_us, layout)
    }

    /// An organic board's entries (in ranking order) served under the controls acting on
    /// `key` at `at_us`: a board needs no product index of its organic entries to be served.
    /// Its product index is mapped from `before`'s, a board of the same organic entries (the
    /// organic board itself, or its version served under other controls), rather than sorted.
    pub fn served_entries(
        &self,
        key: RankingKey,
        organic: &[Scored],
        before: &Snapshot,
        at_us: i64,
        layout: &Layout,
    ) -> Result<Arc<Snapshot>, StoreError> {
        let acting = self.acting(key, at_us);
        let stamps = acting.iter().map(|c| c.stamp()).collect();
        let served = serve_copy(organic, acting, |score, points| boosted(layout, score, points));
        served
            .snapshot_after(before, stamps)
            .map(Arc::new)
            .map_err(|e| StoreError::Corrupt(format!("served {key:?}: {e}")))
    }

    /// Whether `held`, a copy of a ranking of `key`, is served under the controls acting on
    /// it at `at_us`, as they stand now (the same controls at the same revisions).
    pub fn serves(&self, key: RankingKey, held: &Snapshot, at_us: i64) -> bool {
        self.serves_under(key, held.acting(), at_us)
    }

    /// Whether a version served under `acting` (ids and revisions, sorted, as a served board
    /// notes them) is served under the controls acting on `key` at `at_us` as they stand now.
    pub fn serves_under(&self, key: RankingKey, acting: &[(String, u64)], at_us: i64) -> bool {
        let mut wanted: Vec<(String, u64)> = self.acting(key, at_us).iter().map(|c| c.stamp()).collect();
        wanted.sort();
        wanted == acting
    }
}

/// The controls as this replica last read them.
pub struct CurrentControls {
    store: Arc<dyn ControlRows>,
    profile: Arc<str>,
    set: RwLock<Arc<ControlSet>>,
    /// One reload at a time: callers arriving meanwhile wait for it and read its result.
    reload: tokio::sync::Mutex<()>,
}

impl CurrentControls {
    /// A copy of the controls of `store` serving the boards of `profile`, read at the first
    /// [`CurrentControls::fresh`].
    pub fn new(store: Arc<dyn ControlRows>, profile: Arc<str>) -> Self {
        let none = ControlSet { revision: 0, controls: Vec::new(), profile: profile.clone() };
        Self { store, profile, set: RwLock::new(Arc::new(none)), reload: tokio::sync::Mutex::new(()) }
    }

    /// The controls as last read (none before the first read).
    pub fn last(&self) -> Arc<ControlSet> {
        self.set.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The controls as stored now: the revision read, the controls reloaded when it moved.
    pub async fn fresh(&self) -> Result<Arc<ControlSet>, StoreError> {
        let revision = self.store.control_revision().await?;
        if self.last().revision == revision {
            return Ok(self.last());
        }
        let _turn = self.reload.lock().await;
        let last = self.last();
        if last.revision >= revision {
            return Ok(last);
        }
        let (revision, controls) = self.store.controls().await?;
        let set = Arc::new(ControlSet { revision, controls, profile: self.profile.clone() });
        let mut held = self.set.write().unwrap_or_else(|e| e.into_inner());
        // Never back: a slower reload of an older revision leaves the newer one.
        if held.revision <= set.revision {
            *held = set.clone();
        }
        Ok(held.clone())
    }
}

/// `organic`, a ranking of `key`, as the stored controls serve it at its publication now.
pub async fn served_now(
    controls: &CurrentControls,
    policy: &Policy,
    key: RankingKey,
    organic: &Arc<Snapshot>,
) -> Result<Arc<Snapshot>, StoreError> {
    let set = controls.fresh().await?;
    served_apart(set, key, organic.clone(), served_at(policy, key.date()), policy.profile.layout().clone()).await
}

/// [`ControlSet::served`] on a blocking thread when controls act on the board (a million
/// entries take a tenth of a second to serve): renewals, health checks and reads keep their
/// workers.
pub async fn served_apart(
    set: Arc<ControlSet>,
    key: RankingKey,
    organic: Arc<Snapshot>,
    at_us: i64,
    layout: Layout,
) -> Result<Arc<Snapshot>, StoreError> {
    if set.acting(key, at_us).is_empty() {
        return Ok(organic);
    }
    tokio::task::spawn_blocking(move || set.served(key, &organic, at_us, &layout))
        .await
        .map_err(|e| StoreError::Corrupt(format!("serving {key:?} stopped: {e}")))?
}
