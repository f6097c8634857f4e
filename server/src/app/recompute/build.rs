//! One recompute of a day from SQL rows ([`Rebuild`]): the carry-over chain of the days
//! before, the day's rows, the week's grouped rows, each population ranked without its
//! hidden products and published, with the SQL and Redis work overlapped; one read of the
//! rows ranks the service profile and every variant.

use std::sync::Arc;

use chrono::NaiveDate;

use tokio::time::Instant;

use super::publish::{Publisher, RankedCopy};
use super::{Computed, RecomputeReport};
use crate::app::policy::Policy;
use crate::app::snapshots::Snapshots;
use crate::domain::board::Window;
use crate::domain::explain::RecencyClock;
use crate::domain::ranking::{Contender, rank_population};
use crate::domain::score::{CarryLedger, ClosingDay, DayStanding};
use crate::domain::snapshot::Snapshot;
use crate::domain::trending::TrendingHours;
use crate::domain::vocabulary::CarryOver;
use crate::metrics::phases::Phases;
use crate::ports::{CatalogRows, DayScans, FeedCause, Fence, HourScans, RankingKey, Scored, StoreError};

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
/// through the publisher; the service profile's also ranks and publishes every variant's
/// boards from the same read.
pub(super) struct Rebuild {
    pub scans: Arc<dyn DayScans>,
    /// The trending board's hours (today's recompute only).
    pub hours: Arc<dyn HourScans>,
    pub catalog: Arc<dyn CatalogRows>,
    /// This replica's copies: the size of the week held, to size the week's population.
    pub snapshots: Arc<Snapshots>,
    pub policy: Arc<Policy>,
    pub publisher: Arc<Publisher>,
    /// The variants' rebuilds (their policies, publishers and copies), ranked from this one's
    /// read of the rows: set once at start-up, on the service profile's only.
    pub variants: std::sync::OnceLock<Vec<Arc<Rebuild>>>,
}

impl Rebuild {
    /// Computes and stores the ranking of `date` without taking the lock, for this profile
    /// and its variants.
    ///
    /// SQL-bound and Redis-bound work overlap: the hidden products are read while the day's
    /// rows are; the catalog's segments and the week's rows are read while the daily rankings
    /// are published (the catalog is needed only to fan rankings out, so its million rows are
    /// off the day's critical path). One population buffer per profile serves the day, then
    /// the week: the week's rows stream into the pages the day's population already occupies
    /// rather than into new ones while the day's are still resident.
    pub(super) async fn run(&self, date: NaiveDate, fence: &Fence) -> Result<RecomputeReport, StoreError> {
        let started = Instant::now();
        let lanes: Vec<&Rebuild> =
            std::iter::once(self).chain(self.variants.get().into_iter().flatten().map(|v| &**v)).collect();
        let (hidden, populations) = tokio::try_join!(self.catalog.hidden_products(), self.gather(&lanes, date))?;
        let hidden: Arc<[i64]> = hidden.into();
        // Ranked on a blocking thread: renewals, health checks and reads keep their workers.
        let mut days = Vec::with_capacity(lanes.len());
        let mut buffers = Vec::with_capacity(lanes.len());
        for (lane, population) in lanes.iter().zip(populations) {
            let (day, buffer) = rank_apart(&lane.policy, date, population, &hidden, None).await?;
            days.push(day);
            buffers.push(buffer);
        }
        let day_population = days[0].whole.len();
        let key = RankingKey::Daily(date);
        let publish_daily = async {
            let mut days = days.into_iter();
            let day = days.next().expect("the service profile's day");
            let life = self.publisher.life(date);
            let publication = async {
                let name = self.policy.stored_profile_name().to_string();
                self.publisher.publish_explained(key, &day, name, life, false, fence).await
            };
            let (version, catalog) = tokio::try_join!(publication, self.publisher.membership())?;
            let daily = started.elapsed();
            self.publisher.publish_segments(key, &day.whole, &catalog, life, fence, FeedCause::Recompute).await?;
            drop(day);
            for (lane, day) in lanes[1..].iter().zip(days) {
                let publisher = &lane.publisher;
                let life = publisher.life(date);
                let name = lane.policy.stored_profile_name().to_string();
                publisher.publish_explained(key, &day, name, life, false, fence).await?;
                publisher.publish_segments(key, &day.whole, &catalog, life, fence, FeedCause::Recompute).await?;
            }
            Ok::<_, StoreError>((version, catalog, daily, started.elapsed() - daily))
        };
        let (published, weeks) = tokio::join!(publish_daily, self.gather_weekly(&lanes, date, buffers));
        let (version, catalog, daily, in_segments) = published?;
        let mut phases = Phases::start();
        phases.add(Window::Daily.name(), daily);
        phases.add("segments", in_segments);

        let weekly = RankingKey::Weekly(date);
        for (lane, week) in lanes.iter().zip(weeks?) {
            let (RankedCopy { whole: week, clamped, .. }, population) =
                rank_apart(&lane.policy, date, week, &hidden, None).await?;
            drop(population);
            let life = lane.publisher.life(date);
            lane.publisher.publish_whole(weekly, (&week, clamped), None, life, false, fence).await?;
            phases.lap(Window::Weekly.name());
            lane.publisher.publish_segments(weekly, &week, &catalog, life, fence, FeedCause::Recompute).await?;
            phases.lap("segments");
        }
        if date == self.policy.today(self.policy.now()) {
            // What rises now, as of this instant: today's boards only.
            let t_us = self.policy.now().timestamp_micros();
            let policies: Vec<&Policy> = lanes.iter().map(|l| &*l.policy).collect();
            let hours = super::trending::read_hours(&*self.hours, &policies, date, None).await?;
            for (lane, scored) in lanes.iter().zip(hours) {
                let held = Arc::new(TrendingHours::of_scored(scored));
                let ranked = super::trending::rank_apart(&lane.policy, held, t_us, &hidden, None).await?;
                lane.publisher.publish_trending(date, ranked, &catalog, false, fence).await?;
                phases.lap(Window::Trending.name());
            }
        }
        self.publisher.metrics.recompute.phases(&phases.seconds());
        Ok(RecomputeReport { date, products: day_population as u64, version, elapsed: started.elapsed() })
    }

    /// Every contender of day `date` for each of `lanes` (their profiles share the signals),
    /// hidden or not (hidden products still carry over: their standing is computed here, and
    /// [`rank_apart`] leaves them out of the population): the carry-over chains of the days
    /// before, then the day's rows and the products that only carry over, from one read.
    pub(super) async fn gather(&self, lanes: &[&Rebuild], date: NaiveDate) -> Result<Vec<Vec<Contender>>, StoreError> {
        let signals = self.policy.profile.custom_names();
        let mut ledgers = self.carry_ledgers(lanes, date).await?;
        // Sized like the products carried in (about yesterday's population), and grown by a
        // quarter rather than doubled: a doubling at a million contenders holds 1.5 million's
        // worth of memory at once.
        let mut lists: Vec<Vec<Contender>> = ledgers.iter().map(|l| Vec::with_capacity(l.len())).collect();
        self.scans
            .scan_day(date, signals, &mut |r| {
                for ((ledger, list), lane) in ledgers.iter_mut().zip(lists.iter_mut()).zip(lanes) {
                    let standing = ledger.take(r.product_id, r.metrics);
                    let contender = Contender::new(&lane.policy.profile, r.product_id, standing, Some(r.last_event_us));
                    push_gently(list, contender);
                }
            })
            .await?;
        for ((ledger, list), lane) in ledgers.iter().zip(lists.iter_mut()).zip(lanes) {
            let profile = &lane.policy.profile;
            for (product_id, standing) in ledger.carry_only() {
                push_gently(list, Contender::new(profile, product_id, standing, None));
            }
        }
        Ok(lists)
    }

    /// The carry-over chain of each of `lanes` on `date`, from one scan of each day before
    /// (back to the longest chain of them; a shorter one starts on its own first day).
    pub(super) async fn carry_ledgers(
        &self,
        lanes: &[&Rebuild],
        date: NaiveDate,
    ) -> Result<Vec<CarryLedger>, StoreError> {
        let signals = self.policy.profile.custom_names();
        let starts: Vec<NaiveDate> = lanes.iter().map(|l| l.policy.carry_start(date)).collect();
        let mut closings: Vec<Option<ClosingDay>> = Vec::new();
        let mut ledgers: Vec<Option<CarryLedger>> =
            lanes.iter().map(|l| Some(CarryLedger::new(Arc::clone(&l.policy.profile)))).collect();
        let mut day = starts.iter().copied().min().unwrap_or(date);
        while day < date {
            closings.clear();
            for (ledger, start) in ledgers.iter_mut().zip(&starts) {
                closings.push(if day >= *start { ledger.take().map(CarryLedger::closing) } else { None });
            }
            self.scans
                .scan_day(day, signals, &mut |r| {
                    for closing in closings.iter_mut().flatten() {
                        closing.add(r.product_id, r.metrics);
                    }
                })
                .await?;
            for (ledger, closing) in ledgers.iter_mut().zip(closings.drain(..)) {
                if let Some(closing) = closing {
                    *ledger = Some(closing.finish());
                }
            }
            day = day.succ_opt().unwrap_or(date);
        }
        Ok(ledgers.into_iter().map(|l| l.expect("every ledger is back")).collect())
    }

    /// Every contender of the rolling week ending with `date` for each of `lanes`, hidden or
    /// not, from one grouped SQL query: counters summed per product over D-6 … D, no
    /// carry-over; ranked like a day, recency from the product's latest event of the week to
    /// the end of D. Gathered into `buffers`, the emptied buffers of the days' populations
    /// (about the week's size already: the week holds every product with a row that day).
    pub(super) async fn gather_weekly(
        &self,
        lanes: &[&Rebuild],
        date: NaiveDate,
        mut buffers: Vec<Vec<Contender>>,
    ) -> Result<Vec<Vec<Contender>>, StoreError> {
        for (lane, buffer) in lanes.iter().zip(buffers.iter_mut()) {
            // Sized like this replica's copy of the week as well, when it has one.
            let held = lane.snapshots.get(RankingKey::Weekly(date)).map_or(0, |h| h.ranking.len());
            buffer.reserve_exact(held);
        }
        self.scans
            .scan_days(self.policy.week_start(date), date, self.policy.profile.custom_names(), &mut |r| {
                for (lane, buffer) in lanes.iter().zip(buffers.iter_mut()) {
                    let profile = &lane.policy.profile;
                    let standing =
                        DayStanding { main: profile.main_score(&r.metrics, CarryOver(0)), metrics: r.metrics };
                    push_gently(buffer, Contender::new(profile, r.product_id, standing, Some(r.last_event_us)));
                }
            })
            .await?;
        Ok(buffers)
    }
}

/// Ranks `contenders` of `date` with the recompute's own ranking (hidden products left
/// out, the same order and sums) and builds its copy, on a blocking thread: hundreds of
/// milliseconds at a million products, which would otherwise hold a worker of the
/// runtime (and the publication waiting on it). Started at once; gives the emptied buffer
/// back. A recompute or a pass cut short at shutdown leaves the thread to finish its computation (under
/// a second at a million products) and drops the result. A live pass gives the organic copy
/// of its previous version as `previous` ([`RankedCopy::of`]).
pub(super) fn rank_apart(
    policy: &Arc<Policy>,
    date: NaiveDate,
    mut contenders: Vec<Contender>,
    hidden: &Arc<[i64]>,
    previous: Option<Arc<Snapshot>>,
) -> impl Future<Output = Result<(RankedCopy, Vec<Contender>), StoreError>> + use<> {
    let (policy, hidden) = (Arc::clone(policy), Arc::clone(hidden));
    super::apart::off_runtime(move || {
        let ranked = RankedCopy::of(rank(&policy, date, &mut contenders, &hidden), previous.as_deref())?;
        Ok((ranked, contenders))
    })
}

/// The ranking of a population: what [`rank_apart`] runs on a blocking thread.
pub(super) fn rank(policy: &Policy, date: NaiveDate, contenders: &mut Vec<Contender>, hidden: &[i64]) -> Computed {
    // A fixed order makes the floating-point sums of the normalisation, and so every
    // score, identical across rebuilds.
    contenders.sort_unstable_by_key(|c| c.product_id);
    super::apart::without_hidden(contenders, |c| c.product_id, hidden);
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
