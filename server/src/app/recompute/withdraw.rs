//! Hidden products out of a day's exact rankings at once, under the day's
//! lease, batched: the withdrawals of one day waiting for the lease are done in one rewrite.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use tokio_util::task::TaskTracker;

use super::RecomputeError;
use super::controls::{CurrentControls, served_now};
use super::publish::Publisher;
use crate::app::lease::DayLeases;
use crate::app::policy::Policy;
use crate::app::snapshots::Snapshots;
use crate::domain::calendar::RankingHour;
use crate::domain::snapshot::Snapshot;
use crate::ports::{FeedCause, Fence, RankingKey, RankingStore, Scored, StoreError};

/// Products waiting to be withdrawn from one day's rankings, and their callers.
struct Withdrawal {
    ids: HashSet<i64>,
    done: tokio::sync::watch::Sender<Option<Result<(), RecomputeError>>>,
}

/// Withdrawals of hidden products: the rankings and this replica's copies rewritten under
/// the day's lease.
pub struct Withdrawals {
    rankings: Arc<dyn RankingStore>,
    snapshots: Arc<Snapshots>,
    leases: Arc<DayLeases>,
    controls: Arc<CurrentControls>,
    policy: Arc<Policy>,
    /// Withdrawals waiting for their day's lease, by day.
    pending: Mutex<HashMap<NaiveDate, Withdrawal>>,
    /// Where withdrawal tasks run: the service's tracker, joined at shutdown.
    tasks: TaskTracker,
    /// The feed told of every version published, and the records ExplainRank reads.
    publisher: Arc<Publisher>,
}

impl Withdrawals {
    pub(super) fn new(
        rankings: Arc<dyn RankingStore>,
        snapshots: Arc<Snapshots>,
        leases: Arc<DayLeases>,
        controls: Arc<CurrentControls>,
        policy: Arc<Policy>,
        tasks: TaskTracker,
        publisher: Arc<Publisher>,
    ) -> Self {
        Self { rankings, snapshots, leases, controls, policy, pending: Mutex::default(), tasks, publisher }
    }

    /// Takes `ids` out of `date`'s exact rankings at once, under the day's lease: a new
    /// version of each current one without them (the other entries and their scores as they
    /// were; the next recompute renormalises without them), and out of the day's hourly
    /// rankings.
    ///
    /// Withdrawals of one day arriving while one waits for the lease join it: however many
    /// callers hide products one at a time, the day's rankings are rewritten once per lease
    /// turn, not once per call. The work runs as a task of its own, so a caller that goes away
    /// does not leave the others waiting.
    pub async fn withdraw(self: &Arc<Self>, date: NaiveDate, ids: &HashSet<i64>) -> Result<(), RecomputeError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut done = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            match pending.get_mut(&date) {
                Some(batch) => {
                    batch.ids.extend(ids);
                    batch.done.subscribe()
                }
                None => {
                    let (done, waiting) = tokio::sync::watch::channel(None);
                    pending.insert(date, Withdrawal { ids: ids.clone(), done });
                    self.tasks.spawn(self.clone().withdraw_batch(date));
                    waiting
                }
            }
        };
        let outcome = done.wait_for(Option::is_some).await.map(|o| o.clone()).ok().flatten();
        outcome.unwrap_or(Err(RecomputeError::Abandoned))
    }

    /// Takes the day's lease, then the day's pending withdrawals (sealed: callers arriving
    /// later start the next batch), and rewrites the rankings once for all of them.
    async fn withdraw_batch(self: Arc<Self>, date: NaiveDate) {
        let lease = self.leases.wait_for(date).await;
        let Some(batch) = self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&date) else { return };
        let result = match lease {
            Ok(Some(lease)) => {
                let fence = Fence::of(&lease);
                let work = self.withdraw_locked(date, &batch.ids, &fence);
                let result = self.leases.holding(&lease, "withdrawal", work).await;
                self.leases.release(&lease).await;
                result.map_err(RecomputeError::Store)
            }
            Ok(None) => Err(RecomputeError::Busy(date)),
            Err(e) => Err(RecomputeError::Store(e)),
        };
        batch.done.send_replace(Some(result));
    }

    async fn withdraw_locked(&self, date: NaiveDate, ids: &HashSet<i64>, fence: &Fence) -> Result<(), StoreError> {
        let life = self.publisher.life(date);
        let ids_list: Vec<i64> = ids.iter().copied().collect();
        let mut keys = Vec::new();
        for whole in [RankingKey::Daily(date), RankingKey::Weekly(date), RankingKey::Trending(date)] {
            keys.push(whole);
            for segment in self.rankings.published_segments(whole).await? {
                let Some(key) = whole.restricted(Some(segment)) else { continue };
                // One cheap look per segment; only segments holding a product are rewritten.
                if self.rankings.placements(key, None, &ids_list).await?.found.iter().any(Option::is_some) {
                    keys.push(key);
                }
            }
        }
        for key in keys {
            // The store's current version, not a copy this replica may not have refreshed.
            // The organic board is what loses them; the served one follows from it.
            // Whole, whatever its size (a board larger than this replica holds included).
            let Some(held) = self.snapshots.current_whole(key).await? else { continue };
            let base = Arc::clone(&held);
            // A board of a million entries: rebuilt on a blocking thread, as a control pass's.
            let hidden = ids.clone();
            let organic = tokio::task::spawn_blocking(move || {
                let all = held.ranking.organic_board();
                if !all.iter().any(|e| hidden.contains(&e.product_id)) {
                    return Ok(None);
                }
                let kept: Vec<Scored> = all.iter().filter(|e| !hidden.contains(&e.product_id)).copied().collect();
                Snapshot::from_ranked(kept).map(Some)
            })
            .await
            .map_err(|e| StoreError::Corrupt(format!("the organic board of {key:?}: {e}")))?
            .map_err(StoreError::ranking)?;
            let Some(organic) = organic.map(Arc::new) else { continue };
            let served = served_now(&self.controls, &self.policy, key, &organic).await?;
            let _own = self.snapshots.publishing(key);
            let version =
                self.publisher.publish_derived(key, &base, &served, (life, crate::ports::Form::Full), fence).await?;
            self.publisher.feeder.note(key, version, &served, FeedCause::Withdrawal);
            self.snapshots.install_copy(key, version, served).await;
        }
        let hours: Vec<RankingHour> = (0..24).map(|hour| RankingHour { date, hour }).collect();
        self.rankings.withdraw_hourly(&hours, &ids_list).await
    }
}
