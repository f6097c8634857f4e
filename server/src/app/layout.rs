//! Which storage layout of the ranking store this replica's publishers write: the newest that
//! every live replica reads, agreed through the replicas' announcements in SQL.
//!
//! Replicas of two releases share one SQL database and one Redis during a rolling upgrade or
//! a rollback. Each announces the layouts it reads, and the layout it writes, when it starts
//! and every third of `RANKING_REPLICA_TTL` after; an announcement not refreshed for that
//! long is a replica gone (crashed, or frozen past it: it announces again when it wakes, and
//! the others go back to a layout it reads). So a newer layout is written only once no live
//! replica is left that cannot read it, and a rollback brings the older one back within one
//! round. A replica that shares no layout with the live ones refuses to start, naming both;
//! one that stops removes its announcement, so the others move on at their next round.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::policy::Clock;
use crate::metrics::layout::ReplicaLabels;
use crate::ports::{Announced, InForce, Layout, ReplicaRows, StoreError};

/// The newest layout every one of `live` reads, or the two announcements that share none.
pub fn agreed(live: &[Announced]) -> Result<Layout, Box<Disagreement>> {
    let newest_oldest = live.iter().max_by_key(|a| *a.reads.start());
    let oldest_newest = live.iter().min_by_key(|a| *a.reads.end());
    match (newest_oldest, oldest_newest) {
        (Some(lo), Some(hi)) if lo.reads.start() > hi.reads.end() => {
            Err(Box::new(Disagreement { reads_newer: lo.clone(), reads_older: hi.clone() }))
        }
        (_, Some(hi)) => Ok(*hi.reads.end()),
        (_, None) => Ok(*crate::ports::READS.end()),
    }
}

/// Two live replicas that read no layout in common.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no storage layout is read by every live replica: {} (release {}) reads layouts {}..={}, \
     {} (release {}) reads {}..={}; upgrade one release at a time",
    reads_newer.replica, reads_newer.release, reads_newer.reads.start(), reads_newer.reads.end(),
    reads_older.replica, reads_older.release, reads_older.reads.start(), reads_older.reads.end()
)]
pub struct Disagreement {
    /// The replica whose oldest readable layout is the newest.
    pub reads_newer: Announced,
    /// The replica whose newest readable layout is the oldest.
    pub reads_older: Announced,
}

/// Why a replica does not join.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The live replicas and this one read no layout in common (after waiting one life of an
    /// announcement for a replica that just stopped to drop out).
    #[error(transparent)]
    Disagreement(#[from] Box<Disagreement>),
    /// SQL did not answer.
    #[error("failed to announce this replica's storage layouts: {0}")]
    Store(#[from] StoreError),
}

/// What this replica knows of the layouts: the one in force and the live announcements.
#[derive(Debug, Clone)]
pub struct LayoutStatus {
    /// The layout this replica's publishers write.
    pub in_force: Layout,
    /// This replica's name.
    pub replica: String,
    /// Every live replica's announcement, as last read (this one's included).
    pub replicas: Vec<Announced>,
}

/// This replica's side of the agreement.
pub struct LayoutGate {
    rows: Arc<dyn ReplicaRows>,
    /// This replica's announcement (its `seen_at_ms` set at each round).
    own: Announced,
    ttl: Duration,
    clock: Clock,
    /// The newest layout this replica writes, whatever the others read.
    writes_at_most: Layout,
    in_force: InForce,
    replicas: std::sync::Mutex<Vec<Announced>>,
    metrics: Arc<crate::metrics::Metrics>,
}

impl LayoutGate {
    /// Announces this replica and agrees on the layout with the live ones. When they share no
    /// layout, waits one life of an announcement (a replica of a release two apart that just
    /// stopped drops out in it) before refusing.
    pub async fn join(
        rows: Arc<dyn ReplicaRows>,
        (own, writes_at_most): (Announced, Layout),
        ttl: Duration,
        clock: Clock,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Result<Arc<Self>, JoinError> {
        let start = (*own.reads.end()).min(writes_at_most);
        let gate = Arc::new(Self {
            rows,
            own,
            ttl,
            clock,
            writes_at_most,
            in_force: InForce::new(start),
            replicas: std::sync::Mutex::new(Vec::new()),
            metrics,
        });
        let now = gate.now_ms();
        // Rows of replicas that died without a word, long gone: not worth keeping.
        gate.rows.forget(None, now - 10 * gate.ttl_ms()).await?;
        let deadline = tokio::time::Instant::now() + ttl + gate.period();
        loop {
            match gate.round().await? {
                Ok(_) => return Ok(gate),
                Err(disagreement) if tokio::time::Instant::now() >= deadline => {
                    // Not announced as live: the others must not move for a replica that
                    // does not start.
                    gate.rows.forget(Some(&gate.own.replica), i64::MIN).await?;
                    return Err(JoinError::Disagreement(gate.naming_own(disagreement)));
                }
                Err(disagreement) => {
                    tracing::warn!(%disagreement, "waiting for the live replicas to share a storage layout with this one");
                    tokio::time::sleep(gate.period()).await;
                }
            }
        }
    }

    /// The layout to write now.
    pub fn writes(&self) -> Layout {
        self.in_force.get()
    }

    /// The layout in force, as the ranking stores read it when they publish.
    pub fn in_force(&self) -> InForce {
        self.in_force.clone()
    }

    /// The layout in force and the live announcements, as last read.
    pub fn status(&self) -> LayoutStatus {
        let replicas = self.replicas.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        LayoutStatus { in_force: self.writes(), replica: self.own.replica.clone(), replicas }
    }

    /// Announces again every third of an announcement's life until `stop`, then removes this
    /// replica's announcement (a failed round is logged and tried again at the next).
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(self.period()) => {}
            }
            match self.round().await {
                Ok(Ok(_)) => {}
                Ok(Err(disagreement)) => {
                    tracing::error!(%disagreement, layout = self.writes(), "live replicas share no storage layout; writing the one in force until they do");
                }
                Err(e) => tracing::warn!(error = %e, "failed to announce this replica's storage layouts"),
            }
        }
        // Bounded: the shutdown must not wait on a database that does not answer.
        let forget = self.rows.forget(Some(&self.own.replica), i64::MIN);
        match tokio::time::timeout(self.period(), forget).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "failed to withdraw this replica's announcement"),
            Err(_) => tracing::warn!("withdrawing this replica's announcement timed out; it lapses by itself"),
        }
    }

    /// One round: announce, read the live announcements, agree. A disagreement keeps the
    /// layout in force as it was.
    async fn round(&self) -> Result<Result<Layout, Box<Disagreement>>, StoreError> {
        let now = self.now_ms();
        let own = Announced { seen_at_ms: now, ..self.own.clone() };
        self.rows.announce(&own).await?;
        let mut live = self.rows.announced_since(now - self.ttl_ms()).await?;
        if !live.iter().any(|a| a.replica == own.replica) {
            // Its own row is as new as it gets; a clock read back slower cannot drop it.
            live.push(own);
        }
        let agreed = agreed(&live);
        if let Ok(layout) = agreed {
            let was = self.in_force.set(layout.min(self.writes_at_most));
            if was != layout {
                tracing::info!(from = was, to = layout, "storage layout in force changed");
            }
        }
        self.observe(&live);
        *self.replicas.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = live;
        Ok(agreed)
    }

    /// `d` told with this replica as one side when it is one (another that reads what this
    /// one reads may have been named in its place).
    fn naming_own(&self, mut d: Box<Disagreement>) -> Box<Disagreement> {
        let own = Announced { seen_at_ms: 0, ..self.own.clone() };
        if own.reads.end() < d.reads_newer.reads.start() {
            d.reads_older = own;
        } else if own.reads.start() > d.reads_older.reads.end() {
            d.reads_newer = own;
        }
        d
    }

    fn observe(&self, live: &[Announced]) {
        let metrics = &self.metrics.layout;
        metrics.in_force.set(i64::from(self.writes()));
        metrics.replica_reads.clear();
        for a in live {
            let labels = ReplicaLabels { replica: a.replica.clone(), release: a.release.clone() };
            metrics.replica_reads.get_or_create(&labels).set(i64::from(*a.reads.end()));
        }
    }

    fn period(&self) -> Duration {
        self.ttl / 3
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX / 4)
    }

    fn now_ms(&self) -> i64 {
        self.clock.now().timestamp_millis()
    }
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
