//! One recompute of a day from SQL rows ([`Rebuild`]): the carry-over chain of the days
//! before, the day's rows, the week's grouped rows, each population ranked without its
//! hidden products and published, with the SQL and Redis work overlapped.

use std::sync::Arc;

use chrono::NaiveDate;

use tokio::time::Instant;

use super::publish::{Publisher, RankedCopy};
use super::{Computed, RecomputeReport};
use crate::app::policy::Policy;
use crate::app::snapshots::Snapshots;
use crate::domain::explain::RecencyClock;
use crate::domain::ranking::{Contender, rank_population};
use crate::domain::score::{CarryLedger, DayStanding};
use crate::domain::vocabulary::CarryOver;
use crate::metrics::phases::Phases;
use crate::ports::{CatalogRows, DayScans, FeedCause, Fence, RankingKey, Scored, StoreError};

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

/// Recomputes a day from its rows: reads the day scans and the hidden products, publishes
/// through the publisher.
pub(super) struct Rebuild {
    pub scans: Arc<dyn DayScans>,
    pub catalog: Arc<dyn CatalogRows>,
    /// This replica's copies: the size of the week held, to size the week's population.
    pub snapshots: Arc<Snapshots>,
    pub policy: Arc<Policy>,
    pub publisher: Arc<Publisher>,
}

impl Rebuild {
    /// Computes and stores the ranking of `date` without taking the lock.
    ///
    /// SQL-bound and Redis-bound work overlap: the hidden products are read while the day's
    /// rows are; the catalog's segments and the week's rows are read while the daily ranking
    /// is published (the catalog is needed only to fan rankings out, so its million rows are
    /// off the day's critical path). One population buffer serves the day, then the week: the
    /// week's rows stream into the pages the day's population already occupies rather than
    /// into new ones while the day's are still resident.
    pub(super) async fn run(&self, date: NaiveDate, fence: &Fence) -> Result<RecomputeReport, StoreError> {
        let started = Instant::now();
        let (hidden, population) = tokio::try_join!(self.catalog.hidden_products(), self.gather(date))?;
        let hidden: Arc<[i64]> = hidden.into();
        // Ranked on a blocking thread: renewals, health checks and reads keep their workers.
        let (RankedCopy { whole, clamped, stats, clock }, population) =
            rank_apart(&self.policy, date, population, &hidden).await?;
        let day_population = whole.len();
        let key = RankingKey::Daily(date);
        let life = self.publisher.life(date);
        let publish_daily = async {
            let publication = async {
                let version = self.publisher.publish_whole(key, &whole, clamped, life, false, fence).await?;
                self.publisher.record(date, version, stats, clock).await?;
                Ok(version)
            };
            let (version, catalog) = tokio::try_join!(publication, self.publisher.membership())?;
            let daily = started.elapsed();
            self.publisher.publish_segments(key, &whole, &catalog, life, fence, FeedCause::Recompute).await?;
            Ok::<_, StoreError>((version, catalog, daily, started.elapsed() - daily))
        };
        let (published, week) = tokio::join!(publish_daily, self.gather_weekly(date, population));
        let (version, catalog, daily, in_segments) = published?;
        drop(whole);
        let mut phases = Phases::start();
        phases.add("daily", daily);
        phases.add("segments", in_segments);

        let (RankedCopy { whole: week, clamped, .. }, population) =
            rank_apart(&self.policy, date, week?, &hidden).await?;
        drop(population);
        let weekly = RankingKey::Weekly(date);
        self.publisher.publish_whole(weekly, &week, clamped, life, false, fence).await?;
        phases.lap("weekly");
        self.publisher.publish_segments(weekly, &week, &catalog, life, fence, FeedCause::Recompute).await?;
        phases.lap("segments");
        self.publisher.metrics.recompute.phases(&phases.seconds());
        Ok(RecomputeReport { date, products: day_population as u64, version, elapsed: started.elapsed() })
    }

    /// Every contender of day `date`, hidden or not (hidden products still carry over: their
    /// standing is computed here, and [`rank_apart`] leaves them out of the population):
    /// the carry-over chain of the days before, then the day's rows and the products that
    /// only carry over.
    pub(super) async fn gather(&self, date: NaiveDate) -> Result<Vec<Contender>, StoreError> {
        let profile = &self.policy.profile;
        let signals = profile.custom_names();
        let mut ledger = self.carry_ledger(date).await?;

        // Sized like the products carried in (about yesterday's population), and grown by a
        // quarter rather than doubled: a doubling at a million contenders holds 1.5 million's
        // worth of memory at once.
        let mut contenders: Vec<Contender> = Vec::with_capacity(ledger.len());
        self.scans
            .scan_day(date, signals, &mut |r| {
                let standing = ledger.take(r.product_id, r.metrics);
                let contender = Contender::new(profile, r.product_id, standing, Some(r.last_event_us));
                push_gently(&mut contenders, contender);
            })
            .await?;
        let carry_only =
            ledger.carry_only().map(|(product_id, standing)| Contender::new(profile, product_id, standing, None));
        for contender in carry_only {
            push_gently(&mut contenders, contender);
        }
        Ok(contenders)
    }

    /// What each product inherits on `date`: the carry-over chain of the days before, closed
    /// one day's scan at a time.
    pub(super) async fn carry_ledger(&self, date: NaiveDate) -> Result<CarryLedger, StoreError> {
        let signals = self.policy.profile.custom_names();
        let mut ledger = CarryLedger::new(Arc::clone(&self.policy.profile));
        let mut day = self.policy.carry_start(date);
        while day < date {
            let mut closing = ledger.closing();
            self.scans.scan_day(day, signals, &mut |r| closing.add(r.product_id, r.metrics)).await?;
            ledger = closing.finish();
            day = day.succ_opt().unwrap_or(date);
        }
        Ok(ledger)
    }

    /// Every contender of the rolling week ending with `date`, hidden or not, from one
    /// grouped SQL query: counters summed per product over D-6 … D, no carry-over; ranked
    /// like a day, recency from the product's latest event of the week to the end of D.
    /// Gathered into `contenders`, the emptied buffer of the day's population (about the
    /// week's size already: the week holds every product with a row that day).
    pub(super) async fn gather_weekly(
        &self,
        date: NaiveDate,
        mut contenders: Vec<Contender>,
    ) -> Result<Vec<Contender>, StoreError> {
        let profile = &self.policy.profile;
        // Sized like this replica's copy of the week as well, when it has one.
        let held = self.snapshots.get(RankingKey::Weekly(date)).map_or(0, |h| h.ranking.len());
        contenders.reserve_exact(held);
        self.scans
            .scan_days(self.policy.week_start(date), date, profile.custom_names(), &mut |r| {
                let standing = DayStanding { main: profile.main_score(&r.metrics, CarryOver(0)), metrics: r.metrics };
                let contender = Contender::new(profile, r.product_id, standing, Some(r.last_event_us));
                push_gently(&mut contenders, contender);
            })
            .await?;
        Ok(contenders)
    }
}

/// Ranks `contenders` of `date` with the recompute's own ranking (hidden products left
/// out, the same order and sums) and builds its copy, on a blocking thread: hundreds of
/// milliseconds at a million products, which would otherwise hold a worker of the
/// runtime (and the publication waiting on it). Started at once; gives the emptied buffer
/// back. A recompute or a pass cut short at shutdown leaves the thread to finish its computation (under
/// a second at a million products) and drops the result.
pub(super) fn rank_apart(
    policy: &Arc<Policy>,
    date: NaiveDate,
    mut contenders: Vec<Contender>,
    hidden: &Arc<[i64]>,
) -> impl Future<Output = Result<(RankedCopy, Vec<Contender>), StoreError>> + use<> {
    let (policy, hidden) = (Arc::clone(policy), Arc::clone(hidden));
    let task = tokio::task::spawn_blocking(move || {
        let ranked = RankedCopy::of(rank(&policy, date, &mut contenders, &hidden))?;
        Ok((ranked, contenders))
    });
    async move {
        match task.await {
            Ok(ranked) => ranked,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Err(e) => Err(StoreError::ranking(e)),
        }
    }
}

/// The ranking of a population: what [`rank_apart`] runs on a blocking thread.
pub(super) fn rank(policy: &Policy, date: NaiveDate, contenders: &mut Vec<Contender>, hidden: &[i64]) -> Computed {
    // A fixed order makes the floating-point sums of the normalisation, and so every
    // score, identical across rebuilds.
    contenders.sort_unstable_by_key(|c| c.product_id);
    // Both ascending: one walk through the hidden products.
    let mut hidden = hidden.iter().peekable();
    contenders.retain(|c| {
        while hidden.next_if(|h| **h < c.product_id).is_some() {}
        hidden.peek() != Some(&&c.product_id)
    });
    let clock = clock(policy, date);
    let (entries, clamped, stats) =
        rank_population(&policy.profile, contenders, clock.day_start_us, clock.reference_us, |product_id, _, score| {
            Scored { product_id, score }
        });
    contenders.clear();
    Computed { entries, clamped, stats, clock }
}

/// Recency of day `date` is measured from its start to its end: a fixed reference keeps the
/// floating-point result identical across rebuilds.
pub(super) fn clock(policy: &Policy, date: NaiveDate) -> RecencyClock {
    let calendar = policy.calendar;
    RecencyClock {
        day_start_us: calendar.day_start(date).timestamp_micros(),
        reference_us: calendar.day_end(date).timestamp_micros(),
    }
}
