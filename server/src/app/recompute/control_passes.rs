//! Control passes: today's boards served again when the merchandising controls change (a put,
//! a delete) or one starts or ends, from each board's current version (its organic board
//! comes from the version itself: no SQL scan), under the day's lease like every change of
//! the day's rankings.
//!
//! Every replica polls the controls' revision every `control_poll` (and at once after a put or
//! delete of its own; a tenth of a poll after finding the day's lease taken). When it moved,
//! or a start or end passed, it looks at each of today's boards: one whose current version
//! was served under other controls (other ids or revisions: the version notes them) is due.
//! It then tries the day's lease: another holder is publishing (a live pass, a recompute,
//! another replica's control pass), and its versions are served with the controls as they
//! stand; the next poll looks again. Under the lease the boards are looked at once more, from
//! the store's current versions, so replicas that saw the same change do not serve the same
//! boards twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::NaiveDate;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use futures_util::{StreamExt, TryStreamExt};

use super::controls::{ControlSet, CurrentControls};
use super::publish::Publisher;
use crate::app::lease::DayLeases;
use crate::app::policy::Policy;
use crate::app::snapshots::Snapshots;
use crate::metrics::Metrics;
use crate::metrics::controls::KindLabels;
use crate::ports::{FeedCause, Fence, RankingKey, RankingStore, StoreError, day_lease};

/// Boards served again at once by one pass.
const BOARDS_AT_ONCE: usize = 4;

/// Looks per poll while the day's lease is taken (by a live pass, mostly): a put waits for
/// the pass in flight and a tenth of a poll, not for the next poll.
const BUSY_RETRIES_PER_POLL: u32 = 10;

/// What one pass did.
enum Outcome {
    /// Every board was already served under the controls as they stand.
    Unchanged,
    /// Boards were served again.
    Published,
    /// Another change of the day held its lease.
    Busy,
}

/// The control passes of one replica.
pub struct ControlPasses {
    pub(super) controls: Arc<CurrentControls>,
    pub(super) rankings: Arc<dyn RankingStore>,
    pub(super) snapshots: Arc<Snapshots>,
    pub(super) leases: Arc<DayLeases>,
    pub(super) policy: Arc<Policy>,
    pub(super) metrics: Arc<Metrics>,
    /// Where publications are held for a test (the recompute's fault points).
    pub(super) publisher: Arc<Publisher>,
    /// Rings after a put or delete of this replica: a pass at once rather than at the poll.
    pub(super) changed: Notify,
}

impl ControlPasses {
    /// Asks for a pass now (after a change of the controls).
    pub fn nudge(&self) {
        self.changed.notify_one();
    }

    /// Polls the controls until `stop`, serving today's boards again when they change.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut ticker = tokio::time::interval(self.policy.control_poll);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The revision and instant of the last look that found every board served right.
        let mut settled: Option<(u64, i64)> = None;
        // The last pass found the day's lease taken: another look soon, not at the next poll.
        let mut busy = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = ticker.tick() => {}
                () = self.changed.notified() => {}
                () = tokio::time::sleep(self.policy.control_poll / BUSY_RETRIES_PER_POLL), if busy => {}
            }
            busy = false;
            let set = match self.controls.fresh().await {
                Ok(set) => set,
                Err(e) => {
                    tracing::warn!(error = %e, "merchandising controls not read; tried again at the next poll");
                    continue;
                }
            };
            let now = self.policy.now().timestamp_micros();
            self.count_active(&set, now);
            let due = settled.is_none_or(|(revision, at)| {
                revision != set.revision || set.next_boundary(at).is_some_and(|boundary| boundary <= now)
            });
            if !due {
                continue;
            }
            let today = self.policy.today(self.policy.now());
            let pass = tokio::select! {
                pass = self.pass(today, &set, now) => pass,
                // A pass cut short publishes nothing more; its day lease lapses.
                () = stop.cancelled() => break,
            };
            match pass {
                Ok(Outcome::Busy) => {
                    busy = true;
                    self.metrics.controls.pass("busy");
                }
                Ok(outcome) => {
                    settled = Some((set.revision, now));
                    self.metrics.controls.pass(if matches!(outcome, Outcome::Published) {
                        "published"
                    } else {
                        "unchanged"
                    });
                }
                Err(e) => {
                    self.metrics.controls.pass("failed");
                    tracing::warn!(error = %e, "control pass failed; tried again at the next poll");
                }
            }
        }
    }

    fn count_active(&self, set: &ControlSet, now: i64) {
        for kind in ["pin", "boost", "exclude"] {
            let active = set.controls.iter().filter(|c| c.action.kind() == kind && c.active_at(now)).count();
            self.metrics
                .controls
                .active
                .get_or_create(&KindLabels { kind })
                .set(i64::try_from(active).unwrap_or(i64::MAX));
        }
    }

    /// Today's boards whose current version is not served under `set` at `at`: told by the
    /// controls each version notes, without reading a board's entries.
    async fn due(&self, today: NaiveDate, set: &ControlSet, at: i64) -> Result<Vec<RankingKey>, StoreError> {
        let mut due = Vec::new();
        for whole in [RankingKey::Daily(today), RankingKey::Weekly(today), RankingKey::Trending(today)] {
            let segments = self.rankings.published_segments(whole).await?;
            let keys = std::iter::once(whole).chain(segments.into_iter().filter_map(|s| whole.restricted(Some(s))));
            for key in keys {
                // The store's current version, not a copy this replica may not have refreshed.
                let Some((_, acting)) = self.snapshots.current_acting(key).await? else { continue };
                if !set.serves_under(key, &acting, at) {
                    due.push(key);
                }
            }
        }
        Ok(due)
    }

    /// One pass: the due boards of today served again under the day's lease.
    async fn pass(&self, today: NaiveDate, set: &Arc<ControlSet>, at: i64) -> Result<Outcome, StoreError> {
        if self.due(today, set, at).await?.is_empty() {
            return Ok(Outcome::Unchanged);
        }
        let Some(lease) = self.leases.try_take(&day_lease(today)).await? else { return Ok(Outcome::Busy) };
        let fence = Fence::of(&lease);
        let work = async {
            // Looked at again under the lease: another replica may have served them meanwhile.
            let due = self.due(today, set, at).await?;
            if !due.is_empty() {
                self.publisher.faults.before_publish().await;
            }
            let life = self.publisher.life(today);
            let count = due.len();
            // The boards at once (the daily and the weekly ranking are a million entries each on
            // a big day): each served on a blocking thread, then published.
            let boards = futures_util::stream::iter(due.into_iter().map(|key| {
                let (set, layout, fence) = (set.clone(), self.policy.profile.layout().clone(), &fence);
                async move {
                    let metrics = &self.metrics.controls;
                    let mut mark = Instant::now();
                    // The time since the last lap, less what was counted apart.
                    let mut lap = |phase, apart: Duration| {
                        let spent = std::mem::replace(&mut mark, Instant::now()).elapsed();
                        metrics.phase(phase, spent.saturating_sub(apart));
                    };
                    // The whole current version, held or read for this pass whatever its size.
                    let Some(current) = self.snapshots.current_whole(key).await? else { return Ok(()) };
                    let _own = self.snapshots.publishing(key);
                    lap("read", Duration::ZERO);
                    let base = Arc::clone(&current);
                    // The organic board's entries, in ranking order, served again: no product
                    // index of the organic board is built (a sort of the board), only the
                    // served board's. On a blocking thread: a million entries take a tenth
                    // of a second.
                    let (served, organic_took) = tokio::task::spawn_blocking(move || {
                        let started = Instant::now();
                        let organic = current.ranking.organic_board();
                        let took = started.elapsed();
                        set.served_entries(key, &organic, &current.ranking, at, &layout).map(|served| (served, took))
                    })
                    .await
                    .map_err(|e| StoreError::Corrupt(format!("serving {key:?} stopped: {e}")))??;
                    metrics.phase("organic", organic_took);
                    lap("serve", organic_took);
                    let version = self
                        .publisher
                        .publish_derived(key, &base, &served, (life, crate::ports::Form::Loadable), fence)
                        .await?;
                    lap("publish", Duration::ZERO);
                    self.publisher.feeder.note(key, version, &served, FeedCause::Controls);
                    self.snapshots.install_copy(key, version, served).await;
                    lap("install", Duration::ZERO);
                    Ok::<_, StoreError>(())
                }
            }));
            boards.buffer_unordered(BOARDS_AT_ONCE).try_collect::<Vec<()>>().await?;
            Ok(count)
        };
        let served = self.leases.holding(&lease, "control_pass", work).await;
        self.leases.release(&lease).await;
        Ok(if served? > 0 { Outcome::Published } else { Outcome::Unchanged })
    }
}
