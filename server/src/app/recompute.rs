//! Rebuilding one day's ranking from SQL: carry-over ledger, population, score engine,
//! publication of a new version in the ranking store (and in this replica's snapshots).
//!
//! Memory stays bounded by one day's population: earlier days are folded into the carry
//! ledger one at a time, and the ranking day is streamed into a compact contender list.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use futures_util::{StreamExt, TryStreamExt};
use tokio::time::Instant;

use super::invalid::Invalid;
use super::policy::{PRUNE_CHUNK, Policy};
use super::snapshots::Snapshots;
use crate::domain::calendar::RankingHour;
use crate::domain::catalog::{Membership, Segment};
use crate::domain::explain::RecencyClock;
use crate::domain::ranking::{Contender, PopulationStats, rank_population};
use crate::domain::score::{CarryLedger, CarryOver, DayStanding};
use crate::domain::snapshot::Snapshot;
use crate::metrics::Metrics;
use crate::ports::{
    Lease, LeaseLock, MetricsStore, RankingKey, RankingRun, RankingStore, Scored, StoreError, VersionLife,
};

/// What a recompute did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecomputeReport {
    /// The ranking day.
    pub date: NaiveDate,
    /// Products in the new ranking.
    pub products: u64,
    /// The version published.
    pub version: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Products waiting to be withdrawn from one day's rankings, and their callers.
struct Withdrawal {
    ids: HashSet<i64>,
    done: tokio::sync::watch::Sender<Option<Result<(), String>>>,
}

/// Appends to a population list growing by a quarter when full instead of doubling: the
/// largest lists of a recompute are its populations, and a doubling briefly holds the old and
/// the new buffer (three times the population) at the recompute's peak.
fn push_gently<T>(list: &mut Vec<T>, item: T) {
    if list.len() == list.capacity() {
        let more = if list.len() < 1 << 16 { list.len().max(1024) } else { list.len() / 4 };
        list.reserve_exact(more);
    }
    list.push(item);
}

/// The copy of a recompute's ranking (`entries` in any order), built once: it is what gets
/// published, this replica's copy, and the index its segments are found in.
fn ranked_copy(entries: Vec<Scored>) -> Result<Arc<Snapshot>, StoreError> {
    Snapshot::from_unordered(entries).map(Arc::new).map_err(StoreError::ranking)
}

/// Segment rankings being published at once by one recompute.
const SEGMENT_PUBLICATIONS: usize = 32;

/// A day's ranking computed from SQL, before publication.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    /// The encoded entries, in ascending product order.
    pub entries: Vec<Scored>,
    /// How many main scores were clamped.
    pub clamped: usize,
    /// The statistics the norms come from.
    pub stats: PopulationStats,
    /// Where recency was measured from and to.
    pub clock: RecencyClock,
}

/// Why a recompute did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RecomputeError {
    /// The requested day cannot be recomputed.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// Another recompute of the same day held the lock for longer than we could wait.
    #[error("a recompute of {0} is already running; try again shortly")]
    Busy(NaiveDate),
    /// A store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Rebuilds daily rankings.
pub struct Recompute {
    store: Arc<dyn MetricsStore>,
    rankings: Arc<dyn RankingStore>,
    leases: Arc<dyn LeaseLock>,
    snapshots: Arc<Snapshots>,
    policy: Arc<Policy>,
    metrics: Arc<Metrics>,
    /// Withdrawals waiting for their day's lease, by day.
    withdrawals: std::sync::Mutex<std::collections::HashMap<NaiveDate, Withdrawal>>,
}

impl Recompute {
    /// Wires the recompute to its stores; published versions are installed in `snapshots`.
    pub fn new(
        store: Arc<dyn MetricsStore>,
        rankings: Arc<dyn RankingStore>,
        leases: Arc<dyn LeaseLock>,
        snapshots: Arc<Snapshots>,
        policy: Arc<Policy>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self { store, rankings, leases, snapshots, policy, metrics, withdrawals: Default::default() }
    }

    /// The policy the recompute follows.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// A recompute a caller asked for: `date` (`None` = today) must be within retention and
    /// not in the future.
    pub async fn requested(&self, date: Option<NaiveDate>) -> Result<RecomputeReport, RecomputeError> {
        let today = self.policy.today(Utc::now());
        let date = date.unwrap_or(today);
        self.policy.check_recomputable(date, today).map_err(|reason| Invalid::field("date", reason))?;
        self.run(date).await
    }

    /// Recomputes `date` under the day's lock, waiting up to the policy's recompute wait for
    /// another replica's recompute of the same day to finish.
    pub async fn run(&self, date: NaiveDate) -> Result<RecomputeReport, RecomputeError> {
        let lease = self.lease(date).await?;
        let result = self.holding(&lease, self.rebuild(date)).await;
        self.release(&lease, date).await;
        match &result {
            Ok(r) => {
                self.metrics.recompute_succeeded(r.elapsed.as_secs_f64(), r.products);
                tracing::info!(%date, products = r.products, elapsed_ms = r.elapsed.as_millis() as u64, "recomputed");
            }
            Err(e) => {
                self.metrics.recompute_failures.inc();
                tracing::warn!(%date, error = %e, "recompute failed");
            }
        }
        result.map_err(RecomputeError::Store)
    }

    /// The day's lease: every change of the day's rankings holds it, so a recompute and a
    /// withdrawal never interleave, on one replica or several.
    async fn lease(&self, date: NaiveDate) -> Result<Lease, RecomputeError> {
        let name = format!("recompute:{date}");
        let deadline = Instant::now() + self.policy.recompute_wait;
        loop {
            if let Some(lease) = self.leases.try_acquire(&name, self.policy.recompute_lease).await? {
                return Ok(lease);
            }
            if Instant::now() >= deadline {
                return Err(RecomputeError::Busy(date));
            }
            tokio::time::sleep(self.policy.lease_poll).await;
        }
    }

    /// Runs `work` while renewing `lease` every third of its life. Should the lease be lost
    /// (this replica stalled longer than the lease, and another may now hold the day), the
    /// work is abandoned rather than published over the other holder's.
    async fn holding<T>(
        &self,
        lease: &Lease,
        work: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let ttl = self.policy.recompute_lease;
        let renewals = async {
            let mut every = tokio::time::interval_at(tokio::time::Instant::now() + ttl / 3, ttl / 3);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                match self.leases.renew(lease, ttl).await {
                    Ok(true) => {}
                    Ok(false) => return StoreError::ranking(format!("lost the lease {} while holding it", lease.name)),
                    // The store is unreachable: the work fails on its own next call, or the
                    // next renewal gets through before the lease runs out.
                    Err(e) => tracing::warn!(error = %e, lease = %lease.name, "could not renew lease"),
                }
            }
        };
        tokio::select! {
            result = work => result,
            lost = renewals => Err(lost),
        }
    }

    async fn release(&self, lease: &Lease, date: NaiveDate) {
        if let Err(e) = self.leases.release(lease).await {
            // The lease expires by itself; the next recompute only waits a little longer.
            tracing::warn!(error = %e, %date, "could not release recompute lease");
        }
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
            let mut pending = self.withdrawals.lock().unwrap_or_else(|e| e.into_inner());
            match pending.get_mut(&date) {
                Some(batch) => {
                    batch.ids.extend(ids);
                    batch.done.subscribe()
                }
                None => {
                    let (done, waiting) = tokio::sync::watch::channel(None);
                    pending.insert(date, Withdrawal { ids: ids.clone(), done });
                    tokio::spawn(self.clone().withdraw_batch(date));
                    waiting
                }
            }
        };
        let outcome = done.wait_for(Option::is_some).await.map(|o| o.clone()).ok().flatten();
        match outcome {
            Some(Ok(())) => Ok(()),
            Some(Err(why)) => Err(RecomputeError::Store(StoreError::ranking(why))),
            None => Err(RecomputeError::Store(StoreError::ranking("the withdrawal was abandoned"))),
        }
    }

    /// Takes the day's lease, then the day's pending withdrawals (sealed: callers arriving
    /// later start the next batch), and rewrites the rankings once for all of them.
    async fn withdraw_batch(self: Arc<Self>, date: NaiveDate) {
        let lease = self.lease(date).await;
        let Some(batch) = self.withdrawals.lock().unwrap_or_else(|e| e.into_inner()).remove(&date) else { return };
        let result = match lease {
            Ok(lease) => {
                let result = self.holding(&lease, self.withdraw_locked(date, &batch.ids)).await;
                self.release(&lease, date).await;
                result.map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        batch.done.send_replace(Some(result));
    }

    async fn withdraw_locked(&self, date: NaiveDate, ids: &HashSet<i64>) -> Result<(), StoreError> {
        let life = VersionLife { expire_at: self.policy.daily_expiry(date), superseded_for: self.policy.snapshot_ttl };
        let ids_list: Vec<i64> = ids.iter().copied().collect();
        let mut keys = Vec::new();
        for whole in [RankingKey::Daily(date), RankingKey::Weekly(date)] {
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
            let Some(held) = self.snapshots.current(key).await? else { continue };
            let all = held.ranking.page(0, held.ranking.len() as u64);
            if !all.iter().any(|e| ids.contains(&e.product_id)) {
                continue;
            }
            let kept: Vec<Scored> = all.iter().filter(|e| !ids.contains(&e.product_id)).copied().collect();
            let version = self.rankings.publish(key, &kept, life).await?;
            self.snapshots.install(key, version, kept).await;
        }
        let hours: Vec<RankingHour> = (0..24).map(|hour| RankingHour { date, hour }).collect();
        self.rankings.withdraw_hourly(&hours, &ids_list).await
    }

    /// The catalog's segment memberships now.
    async fn membership(&self) -> Result<Membership, StoreError> {
        let mut membership = Membership::with_limit(self.policy.max_segments);
        self.store.scan_catalog(&mut |e| membership.add(&e)).await?;
        self.metrics.segment_memberships_dropped.set(i64::try_from(membership.dropped()).unwrap_or(i64::MAX));
        if membership.dropped() > 0 {
            tracing::warn!(
                limit = self.policy.max_segments,
                dropped = membership.dropped(),
                "the catalog names more segments than RANKING_MAX_SEGMENTS; the rest get no ranking"
            );
        }
        Ok(membership)
    }

    /// Publishes one ranking per segment of `whole_key`: its members' entries of `whole`
    /// (that ranking's copy), in ranking order, with the whole ranking's scores. A segment
    /// published before that has no member now gets an empty version, so it reads as empty
    /// rather than as its old members.
    async fn publish_segments(
        &self,
        whole_key: RankingKey,
        whole: &Arc<Snapshot>,
        catalog: &Membership,
        life: VersionLife,
    ) -> Result<(), StoreError> {
        let previous = self.rankings.published_segments(whole_key).await?;
        let mut lists: Vec<(Segment, Vec<u32>)> =
            catalog.segments().iter().copied().zip(catalog.positions_in(whole)).collect();
        lists.retain(|(segment, list)| !list.is_empty() || previous.contains(segment));
        let current: HashSet<Segment> = lists.iter().map(|(s, _)| *s).collect();
        lists.extend(previous.iter().filter(|s| !current.contains(s)).map(|s| (*s, Vec::new())));
        let published: Vec<Segment> = lists.iter().filter(|(_, l)| !l.is_empty()).map(|(s, _)| *s).collect();
        // Every segment of this publication, the emptied ones included, so that this replica's
        // copies of them are replaced too.
        self.snapshots.know_segments(whole_key, &lists.iter().map(|(s, _)| *s).collect::<Vec<_>>());
        // A few publications in flight at once, each its own script on its own keys; a
        // segment's entries exist only while it is written (the lists are positions).
        let mut publications = futures_util::stream::iter(lists.into_iter().filter_map(|(segment, positions)| {
            let key = whole_key.restricted(Some(segment))?;
            Some(async move {
                let entries = whole.entries_at(&positions);
                self.rankings.publish(key, &entries, life).await.map(|v| (key, v, positions))
            })
        }))
        .buffer_unordered(SEGMENT_PUBLICATIONS);
        let mut copies = Vec::new();
        while let Some((key, version, positions)) = publications.try_next().await? {
            match Snapshot::at_positions(whole, positions) {
                Ok(copy) => copies.push((key, version, Arc::new(copy))),
                Err(e) => tracing::error!(?key, version, error = %e, "segment ranking cannot be held"),
            }
        }
        // Installed together: one swap of this replica's copies rather than one per segment.
        self.snapshots.install_copies(copies).await;
        self.rankings.record_segments(whole_key, &published, life.expire_at).await
    }

    /// Whether the daily or weekly ranking of `date` is missing from the ranking store.
    pub async fn missing(&self, date: NaiveDate) -> Result<bool, StoreError> {
        let versions = self.rankings.versions(&[RankingKey::Daily(date), RankingKey::Weekly(date)]).await?;
        Ok(versions.len() < 2 || versions.iter().any(Option::is_none))
    }

    /// Claims a named piece of periodic work (a day's scheduler tick, retention) for one
    /// replica: `true` for the replica that got it. The claim lasts `ttl`.
    pub async fn claim(&self, work: &str, ttl: Duration) -> Result<bool, StoreError> {
        Ok(self.leases.try_acquire(work, ttl).await?.is_some())
    }

    /// Deletes events, daily metrics and their ledger entries that retention no longer
    /// keeps at `now`. Returns the rows deleted.
    pub async fn prune(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        let oldest_day = self.policy.oldest_retained_day(self.policy.today(now));
        self.store.prune(self.policy.events_pruned_before(now), oldest_day, PRUNE_CHUNK).await
    }

    /// Computes and stores the ranking of `date` without taking the lock.
    ///
    /// SQL-bound and Redis-bound work overlap: the hidden products are read while the day's
    /// rows are; the catalog's segments and the week's rows are read while the daily ranking
    /// is published (the catalog is needed only to fan rankings out, so its million rows are
    /// off the day's critical path). One population buffer serves the day, then the week: the
    /// week's rows stream into the pages the day's population already occupies rather than
    /// into new ones while the day's are still resident.
    async fn rebuild(&self, date: NaiveDate) -> Result<RecomputeReport, StoreError> {
        let started = Instant::now();
        let (hidden, mut population) = tokio::try_join!(self.store.hidden_products(), self.gather(date))?;
        let Computed { entries, clamped, stats, clock } = self.rank(date, &mut population, &hidden);
        let whole = ranked_copy(entries)?;
        let day_population = whole.len();
        let key = RankingKey::Daily(date);
        let life = VersionLife { expire_at: self.policy.daily_expiry(date), superseded_for: self.policy.snapshot_ttl };
        let publish_daily = async {
            let publication = async {
                let version = self.rankings.publish(key, &whole.page(0, u64::MAX), life).await?;
                self.metrics.scores_clamped.inc_by(clamped as u64);
                // Served by this replica before the call returns; the others load it on the
                // announcement or their next poll.
                self.snapshots.install_copy(key, version, whole.clone()).await;
                // What ExplainRank reproduces norms from. Written after the publication, so a
                // reader may briefly see the new version with the previous record; it checks
                // the version.
                let run = RankingRun { date, version, stats, clock, computed_at_us: Utc::now().timestamp_micros() };
                self.store.record_run(&run).await?;
                Ok(version)
            };
            let (version, catalog) = tokio::try_join!(publication, self.membership())?;
            let daily = started.elapsed();
            self.publish_segments(key, &whole, &catalog, life).await?;
            Ok::<_, StoreError>((version, catalog, daily, started.elapsed() - daily))
        };
        let (published, week) = tokio::join!(publish_daily, self.gather_weekly(date, population));
        let (version, catalog, daily, mut in_segments) = published?;
        drop(whole);
        let weekly_started = Instant::now();

        let mut population = week?;
        let Computed { entries: week, clamped, .. } = self.rank(date, &mut population, &hidden);
        drop(population);
        let week = ranked_copy(week)?;
        let weekly = RankingKey::Weekly(date);
        let weekly_version = self.rankings.publish(weekly, &week.page(0, u64::MAX), life).await?;
        self.metrics.scores_clamped.inc_by(clamped as u64);
        self.snapshots.install_copy(weekly, weekly_version, week.clone()).await;
        let weekly_elapsed = weekly_started.elapsed();
        let segments_started = Instant::now();
        self.publish_segments(weekly, &week, &catalog, life).await?;
        in_segments += segments_started.elapsed();
        self.metrics.recompute_phases(&[
            ("daily", daily.as_secs_f64()),
            ("weekly", weekly_elapsed.as_secs_f64()),
            ("segments", in_segments.as_secs_f64()),
        ]);
        Ok(RecomputeReport { date, products: day_population as u64, version, elapsed: started.elapsed() })
    }

    /// Every contender of day `date`, hidden or not (hidden products still carry over: their
    /// standing is computed here, and [`Recompute::rank`] leaves them out of the population):
    /// the carry-over chain of the days before, then the day's rows and the products that
    /// only carry over.
    async fn gather(&self, date: NaiveDate) -> Result<Vec<Contender>, StoreError> {
        let first = self.policy.carry_start(date);
        let mut ledger = CarryLedger::new(self.policy.weights);
        let mut day = first;
        while day < date {
            let mut closing = ledger.closing();
            self.store.scan_day(day, &mut |r| closing.add(r.product_id, r.metrics)).await?;
            ledger = closing.finish();
            day = day.succ_opt().unwrap_or(date);
        }

        // Sized like the products carried in (about yesterday's population), and grown by a
        // quarter rather than doubled: a doubling at a million contenders holds 1.5 million's
        // worth of memory at once.
        let mut contenders: Vec<Contender> = Vec::with_capacity(ledger.len());
        self.store
            .scan_day(date, &mut |r| {
                let contender =
                    Contender::new(r.product_id, ledger.take(r.product_id, r.metrics), Some(r.last_event_us));
                push_gently(&mut contenders, contender);
            })
            .await?;
        let carry_only = ledger.carry_only().map(|(product_id, standing)| Contender::new(product_id, standing, None));
        for contender in carry_only {
            push_gently(&mut contenders, contender);
        }
        Ok(contenders)
    }

    /// Ranks `contenders` of `date` (a day's or a week's) without the `hidden` products
    /// (ascending): they are left out before the normalisation. `contenders` is left empty,
    /// its buffer kept for the next population.
    fn rank(&self, date: NaiveDate, contenders: &mut Vec<Contender>, hidden: &[i64]) -> Computed {
        // A fixed order makes the floating-point sums of the normalisation, and so every
        // score, identical across rebuilds.
        contenders.sort_unstable_by_key(|c| c.product_id);
        // Both ascending: one walk through the hidden products.
        let mut hidden = hidden.iter().peekable();
        contenders.retain(|c| {
            while hidden.next_if(|h| **h < c.product_id).is_some() {}
            hidden.peek() != Some(&&c.product_id)
        });
        let clock = self.clock(date);
        let (entries, clamped, stats) =
            rank_population(contenders, clock.day_start_us, clock.reference_us, |product_id, _, score| Scored {
                product_id,
                score: score.0,
            });
        contenders.clear();
        Computed { entries, clamped, stats, clock }
    }

    /// Every contender of the rolling week ending with `date`, hidden or not, from one
    /// grouped SQL query: counters summed per product over D-6 … D, no carry-over; ranked
    /// like a day, recency from the product's latest event of the week to the end of D.
    /// Gathered into `contenders`, the emptied buffer of the day's population (about the
    /// week's size already: the week holds every product with a row that day).
    async fn gather_weekly(
        &self,
        date: NaiveDate,
        mut contenders: Vec<Contender>,
    ) -> Result<Vec<Contender>, StoreError> {
        let weights = self.policy.weights;
        // Sized like this replica's copy of the week as well, when it has one.
        let held = self.snapshots.get(RankingKey::Weekly(date)).map_or(0, |h| h.ranking.len());
        contenders.reserve_exact(held);
        self.store
            .scan_days(self.policy.week_start(date), date, &mut |r| {
                let standing = DayStanding { main: weights.main_score(&r.metrics, CarryOver(0)), metrics: r.metrics };
                let contender = Contender::new(r.product_id, standing, Some(r.last_event_us));
                push_gently(&mut contenders, contender);
            })
            .await?;
        Ok(contenders)
    }

    /// Recency of day `date` is measured from its start to its end: a fixed reference keeps
    /// the floating-point result identical across rebuilds.
    pub fn clock(&self, date: NaiveDate) -> RecencyClock {
        let calendar = self.policy.calendar;
        RecencyClock {
            day_start_us: calendar.day_start(date).timestamp_micros(),
            reference_us: calendar.day_end(date).timestamp_micros(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::MemoryRankingStore;
    use crate::app::policy::Clock;
    use crate::app::test_support::Wired;

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_renewed_while_its_work_runs_and_work_stops_when_it_is_lost() {
        let store = Arc::new(MemoryRankingStore::new());
        let Wired { recompute, policy, .. } = Wired::new(&store, Clock::tokio_from(Utc::now()));
        let ttl = policy.recompute_lease;
        let lease = store.try_acquire("recompute:x", ttl).await.expect("store").expect("free");
        // Work lasting four lease lives: nobody else gets the lease meanwhile.
        let held = recompute
            .holding(&lease, async {
                tokio::time::sleep(ttl * 4).await;
                Ok(store.try_acquire("recompute:x", ttl).await?.is_none())
            })
            .await;
        assert!(held.expect("work finished"), "renewed while the work ran");

        // The lease goes (released here; expired after a stall in life) and another holder
        // takes it: the work is abandoned at the next renewal instead of finishing.
        let finished = std::sync::atomic::AtomicBool::new(false);
        let lost = recompute
            .holding(&lease, async {
                store.release(&lease).await?;
                assert!(store.try_acquire("recompute:x", ttl).await?.is_some(), "another holder");
                tokio::time::sleep(ttl * 4).await;
                finished.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            })
            .await;
        assert!(lost.expect_err("abandoned").to_string().contains("lost the lease"));
        assert!(!finished.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[tokio::test]
    async fn concurrent_withdrawals_of_a_day_share_rewrites() {
        let store = Arc::new(MemoryRankingStore::new());
        let Wired { snapshots, recompute, .. } = Wired::new(&store, Clock::System);
        let today = Utc::now().date_naive();
        let key = RankingKey::Daily(today);
        let entries: Vec<Scored> = (1..=50).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
        let life = VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: Duration::ZERO };
        let version = store.publish(key, &entries, life).await.expect("published");
        snapshots.install(key, version, entries).await;
        let installs = snapshots.installed();
        let before = *installs.borrow();

        let calls: Vec<_> = (1..=20i64)
            .map(|id| {
                let recompute = recompute.clone();
                tokio::spawn(async move { recompute.withdraw(today, &HashSet::from([id])).await })
            })
            .collect();
        for call in calls {
            call.await.expect("joined").expect("withdrawn");
        }
        let held = snapshots.current(key).await.expect("read").expect("ranking");
        let left: Vec<i64> = held.ranking.page(0, 100).iter().map(|e| e.product_id).collect();
        assert_eq!(left, (21..=50).rev().collect::<Vec<_>>());
        let rewrites = *installs.borrow() - before;
        assert!((1..20).contains(&rewrites), "{rewrites} rewrites for 20 calls");
    }
}
