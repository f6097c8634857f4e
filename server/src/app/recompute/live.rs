//! Live passes: today's daily ranking, its segments and the weekly ranking
//! republished within `RANKING_LIVE_INTERVAL` of a change in SQL, bit for bit what a
//! recompute of the same rows publishes.
//!
//! One replica at a time holds today's live lease (`live:{date}`) and keeps today's
//! population in memory ([`LiveDay`]). Each pass, under the day's lease like every other
//! change of the day's rankings:
//!
//! 1. advances the change epoch to `n`, which waits for every write transaction still
//!    holding an earlier epoch ([`crate::adapters::sql::changes`] says why no row is missed;
//!    writers take it just before their metrics upserts, so the wait is short);
//! 2. reads the metrics rows of the epochs `[from, n)` through their index: rows of today
//!    replace the product's row; a row of an earlier day (a late event) has the product's rows
//!    over the carry chain and the week read again by key ([`LiveDay::refresh`]);
//! 3. reads the catalog again only when one of its rows carries such an epoch;
//! 4. ranks the whole population with the recompute's own ranking and publishes like a
//!    recompute, the day first: its copy is published while the week is ranked (both ranked
//!    on blocking threads), and only in the form replicas load (the daily ranking's
//!    sorted set is the recompute's);
//! 5. applies the hourly rows of the same epochs to the held hours of the last seven days
//!    and publishes the trending board at the pass's instant ([`super::trending`]).
//!
//! The service profile's passes rank and publish every variant's boards too, from the same
//! reads ([`LivePasses::adopt`]-ed by its recompute): one population per profile is held, and
//! every changed row is applied to each.
//!
//! The first pass of a holder reads the day whole (after advancing the epoch, so that what
//! it reads is covered by the next pass); any failure drops the population, and the next pass
//! reads it whole again. The periodic recompute keeps running and stays the anchor.

use std::sync::Arc;

use chrono::{NaiveDate, Utc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::build::{Rebuild, rank_apart};
use super::publish::Publisher;
use crate::app::lease::DayLeases;
use crate::app::policy::Policy;
use crate::domain::catalog::Membership;
use crate::domain::live::{DayRows, LiveDay, LiveDays};
use crate::domain::snapshot::Snapshot;
use crate::domain::trending::TrendingHours;
use crate::metrics::Metrics;
use crate::metrics::phases::Phases;
use crate::ports::{CatalogRows, ChangeFeed, ChangedRow, DayScans, Fence, HourScans, Lease, StoreError, day_lease};

/// Runs the live passes of today on this replica while it holds today's live lease.
pub struct LivePasses {
    pub(super) changes: Arc<dyn ChangeFeed>,
    pub(super) scans: Arc<dyn DayScans>,
    pub(super) hours: Arc<dyn HourScans>,
    pub(super) catalog: Arc<dyn CatalogRows>,
    pub(super) leases: Arc<DayLeases>,
    /// The recompute's own reading of the carry-over chain.
    pub(super) rebuild: Arc<Rebuild>,
    pub(super) publisher: Arc<Publisher>,
    pub(super) policy: Arc<Policy>,
    pub(super) metrics: Arc<Metrics>,
    /// The variants' passes (their policies, publishers and carry chains), run from this
    /// one's reads: set once at start-up, on the service profile's only.
    pub(super) variants: std::sync::OnceLock<Vec<Arc<LivePasses>>>,
}

/// What the holder of today's live lease keeps between passes.
struct Held {
    /// Today's population of each profile, the service's first.
    days: Vec<LiveDay>,
    /// The trending board's hours of each profile (shared with the threads that rank).
    hours: Vec<Arc<TrendingHours>>,
    /// The first epoch not read yet.
    from: i64,
    membership: Membership,
    /// Hidden products, ascending (shared with the threads that rank).
    hidden: Arc<[i64]>,
    /// The organic copies each profile's previous pass published, the service's first: the
    /// next pass sorts only the entries whose score changed against them.
    organic: Vec<Organic>,
}

/// A profile's organic copies of today's boards, as its last pass ranked them.
#[derive(Default, Clone)]
struct Organic {
    daily: Option<Arc<Snapshot>>,
    weekly: Option<Arc<Snapshot>>,
    trending: Option<Arc<Snapshot>>,
}

/// The live lease of a day and, once read, its population.
struct Holder {
    date: NaiveDate,
    lease: Lease,
    held: Option<Held>,
}

/// What one pass did.
enum Pass {
    /// The day was read whole and published.
    Loaded,
    /// Rows changed: new versions published.
    Published,
    /// Nothing changed since the previous pass.
    Unchanged,
    /// The epoch could not be advanced (a writer held the old one past the deadline, or the
    /// database is down); the population is kept.
    Stalled(StoreError),
}

impl LivePasses {
    /// Runs live passes of today every `RANKING_LIVE_INTERVAL` (none when it is zero) until
    /// `stop` is cancelled; the live lease is given back at the end.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let interval = self.policy.live_interval;
        if interval.is_zero() {
            return;
        }
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut holder: Option<Holder> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = ticker.tick() => {}
            }
            let today = self.policy.today(self.policy.now());
            self.live_turn(today, &mut holder, &stop).await;
            if stop.is_cancelled() {
                break;
            }
            // A pass longer than the interval would take the day's lease again at once:
            // recomputes and withdrawals waiting for it (polling every `lease_poll`) get it
            // in this gap instead.
            tokio::select! {
                () = tokio::time::sleep(self.policy.lease_poll * 2) => {}
                () = stop.cancelled() => break,
            }
        }
        if let Some(holder) = holder {
            self.leases.release(&holder.lease).await;
        }
    }

    /// One tick: keep (or take) today's live lease, then run a pass under the day's lease. A
    /// pass cut short by `stop` publishes nothing more and gives the day's lease back, so the
    /// other replicas publish the day at once rather than after the lease's life.
    async fn live_turn(&self, today: NaiveDate, holder: &mut Option<Holder>, stop: &CancellationToken) {
        if let Some(old) = holder.take_if(|h| h.date != today) {
            // Midnight: yesterday is the scheduler's again.
            self.leases.release(&old.lease).await;
        }
        let kept = match holder {
            Some(h) => self.leases.renew(&h.lease).await,
            None => match self.leases.try_take(&format!("live:{today}")).await {
                Ok(Some(lease)) => {
                    *holder = Some(Holder { date: today, lease, held: None });
                    Ok(true)
                }
                Ok(None) => {
                    // Another replica holds it: counted, so that "one holder at a time" shows.
                    self.metrics.live.pass("held_elsewhere");
                    return;
                }
                Err(e) => Err(e),
            },
        };
        let Some(h) = holder.as_mut() else { return };
        match kept {
            Ok(true) => {}
            Ok(false) => {
                // Lost (this replica stalled): another may hold it now.
                *holder = None;
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew the live lease");
                return;
            }
        }
        let day_lease = match self.leases.try_take(&day_lease(today)).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                // A recompute or a withdrawal of the day is under way: the next tick.
                self.metrics.live.pass("busy");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "live pass cannot reach the lock store");
                return;
            }
        };
        let started = Instant::now();
        let fence = Fence::of(&day_lease);
        let pass = self.live_pass(today, &mut h.held, &fence);
        let held = self.leases.holding_with(&day_lease, Some(&h.lease), "live_pass", pass);
        let result = tokio::select! {
            result = held => result,
            () = stop.cancelled() => {
                // The population may be half updated: the next holder reads the day whole.
                h.held = None;
                self.leases.release(&day_lease).await;
                return;
            }
        };
        self.leases.release(&day_lease).await;
        match result {
            Ok(Pass::Unchanged) => self.metrics.live.pass("unchanged"),
            Ok(Pass::Stalled(e)) => {
                self.metrics.live.pass("failed");
                tracing::warn!(error = %e, date = %today, "live pass could not advance the change epoch");
            }
            Ok(pass) => {
                self.metrics.live.pass(if matches!(pass, Pass::Loaded) { "loaded" } else { "published" });
                self.metrics.live.pass_seconds.observe(started.elapsed().as_secs_f64());
            }
            Err(e) => {
                h.held = None;
                self.metrics.live.pass("failed");
                tracing::warn!(error = %e, date = %today, "live pass failed; the next one reads the day whole");
            }
        }
    }

    /// This profile's passes and its variants', the service's first.
    fn lanes(&self) -> Vec<&LivePasses> {
        std::iter::once(self).chain(self.variants.get().into_iter().flatten().map(|v| &**v)).collect()
    }

    /// The days `date`'s contenders depend on.
    fn live_days(&self, date: NaiveDate) -> LiveDays {
        LiveDays { date, carry_start: self.policy.carry_start(date), week_start: self.policy.week_start(date) }
    }

    /// Reads `date` whole: the carry chain, today's rows, the week before today summed, the
    /// catalog. The epoch is advanced first: every row of an earlier epoch is committed and
    /// read here; a later one is read by the next pass.
    async fn live_load(&self, date: NaiveDate) -> Result<Held, StoreError> {
        let from = self.changes.advance_epoch().await?;
        let days = self.live_days(date);
        let lanes = self.lanes();
        let signals = self.policy.profile.custom_names();
        let rebuilds: Vec<&Rebuild> = lanes.iter().map(|l| &*l.rebuild).collect();
        let ledgers = self.rebuild.carry_ledgers(&rebuilds, date).await?;
        let mut today = DayRows::new(signals.len());
        self.scans.scan_day(date, signals, &mut |r| today.push(r.product_id, &r.metrics, r.last_event_us)).await?;
        let mut before = DayRows::new(signals.len());
        if let Some(yesterday) = date.pred_opt().filter(|y| *y >= days.week_start) {
            self.scans
                .scan_days(days.week_start, yesterday, signals, &mut |r| {
                    before.push(r.product_id, &r.metrics, r.last_event_us)
                })
                .await?;
        }
        let policies: Vec<&Policy> = lanes.iter().map(|l| &*l.policy).collect();
        let hours = super::trending::read_hours(&*self.hours, &policies, date, None).await?;
        let hours = hours.into_iter().map(|scored| Arc::new(TrendingHours::of_scored(scored))).collect();
        let (membership, hidden) = tokio::try_join!(self.publisher.membership(), self.catalog.hidden_products())?;
        let days = lanes
            .iter()
            .zip(ledgers)
            .map(|(lane, ledger)| {
                let profile = Arc::clone(&lane.policy.profile);
                LiveDay::new(profile, lane.live_days(date), ledger, today.clone(), before.clone())
            })
            .collect();
        let organic = vec![Organic::default(); lanes.len()];
        Ok(Held { days, hours, from, membership, hidden: hidden.into(), organic })
    }

    /// One pass over `held` (read whole first when there is none): the changes since the
    /// previous pass applied, and published when there were any.
    async fn live_pass(&self, date: NaiveDate, held: &mut Option<Held>, fence: &Fence) -> Result<Pass, StoreError> {
        let loaded = held.is_none();
        let h = match held {
            Some(h) => h,
            None => held.insert(self.live_load(date).await?),
        };
        let mut phases = Phases::start();
        let to = match self.changes.advance_epoch().await {
            Ok(to) => to,
            // Nothing read yet: the held population is still whole, kept for the next pass.
            Err(e) if !loaded => return Ok(Pass::Stalled(e)),
            Err(e) => return Err(e),
        };
        phases.lap("epoch");
        let epochs = h.from..to;
        // Every profile's chain is read from the earliest of their first days.
        let first = h.days.iter().map(|d| d.days().first()).min().unwrap_or(date);
        let signals = self.policy.profile.custom_names();
        let mut today = Vec::new();
        let mut earlier = Vec::new();
        let mut newest_us: Option<i64> = None;
        let mut read = self
            .changes
            .scan_changes(epochs.clone(), first, date, signals, &mut |ChangedRow { row, updated_us }| {
                newest_us = newest_us.max(Some(updated_us));
                if row.date == date {
                    today.push((row.product_id, row.metrics, row.last_event_us));
                } else {
                    earlier.push(row.product_id);
                }
            })
            .await?;
        let policies: Vec<&Policy> = self.lanes().iter().map(|l| &*l.policy).collect();
        let hours = super::trending::read_hours(&*self.hours, &policies, date, Some(epochs.clone())).await?;
        read += hours.first().map_or(0, |h| h.len() as u64);
        let changed = read > 0;
        for (held, scored) in h.hours.iter_mut().zip(hours) {
            Arc::make_mut(held).apply_scored(scored);
        }
        for day in &mut h.days {
            day.apply_today(today.clone());
        }
        if !earlier.is_empty() {
            earlier.sort_unstable();
            earlier.dedup();
            let mut rows = Vec::new();
            read += self.changes.scan_products(&earlier, first, date, signals, &mut |c| rows.push(c.row)).await?;
            for day in &mut h.days {
                day.refresh(&earlier, rows.clone());
            }
        }
        self.metrics.live.rows_read.inc_by(read);
        let catalog = self.changes.catalog_changed(epochs).await?;
        if catalog {
            let (membership, hidden) = tokio::try_join!(self.publisher.membership(), self.catalog.hidden_products())?;
            (h.membership, h.hidden) = (membership, hidden.into());
        }
        h.from = to;
        if !loaded && !changed && !catalog {
            return Ok(Pass::Unchanged);
        }

        // The day first: it is published while the week is ranked on another thread. The
        // profiles at once: one's ranking (a blocking thread) overlaps another's publication.
        phases.lap("read");
        // The trending board's instant; hours out of its window are held no more.
        let t_us = self.policy.now().timestamp_micros();
        for hours in &mut h.hours {
            Arc::make_mut(hours).forget_before(t_us);
        }
        let held = &*h;
        let lanes = self.lanes();
        let lanes = lanes.iter().zip(&held.days).zip(&held.hours).zip(&held.organic);
        let passes = lanes.map(|(((lane, day), hours), before)| async move {
            let mut contenders = Vec::new();
            day.daily_contenders(&mut contenders);
            let previous = before.daily.clone();
            let (daily, mut contenders) = rank_apart(&lane.policy, date, contenders, &held.hidden, previous).await?;
            let ranked = Instant::now();
            day.weekly_contenders(&mut contenders);
            let weekly = rank_apart(&lane.policy, date, contenders, &held.hidden, before.weekly.clone());
            let mut organic = Organic { daily: Some(Arc::clone(&daily.whole)), ..Organic::default() };
            let weekly = async {
                let (ranked, _) = weekly.await?;
                organic.weekly = Some(Arc::clone(&ranked.whole));
                Ok(ranked)
            };
            let version = lane.publisher.publish_computed(date, daily, weekly, &held.membership, fence).await?;
            let published = Instant::now();
            let previous = before.trending.clone();
            let hours = Arc::clone(hours);
            let trending = super::trending::rank_apart(&lane.policy, hours, t_us, &held.hidden, previous).await?;
            organic.trending = Some(Arc::clone(&trending.whole));
            lane.publisher.publish_trending(date, trending, &held.membership, true, fence).await?;
            Ok::<_, StoreError>((version, ranked, published, organic))
        });
        let published = futures_util::future::try_join_all(passes).await?;
        // The service profile's ranking and publication, as one profile's pass measures them.
        let (version, ranked, trending, _) = published[0].clone();
        for (kept, (_, _, _, organic)) in h.organic.iter_mut().zip(published) {
            *kept = organic;
        }
        phases.split_at(&[("rank", ranked), ("publish", trending), ("trending", trending)]);
        self.metrics.live.phases(&phases.seconds());
        if let Some(newest_us) = newest_us {
            // Both instants are SQL writers' wall clock (`updated_at`), not the policy's.
            let lag_us = Utc::now().timestamp_micros().saturating_sub(newest_us).max(0);
            self.metrics.live.freshness_seconds.observe(lag_us as f64 / 1e6);
        }
        tracing::debug!(%date, version, rows_read = read, catalog, "live pass published");
        Ok(if loaded { Pass::Loaded } else { Pass::Published })
    }
}

#[cfg(test)]
mod tests;
