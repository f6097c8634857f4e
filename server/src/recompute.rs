//! Rebuilding one day's ranking from SQL: carry-over ledger, population, score engine,
//! atomic replace in the ranking store.
//!
//! Memory stays bounded by one day's population: earlier days are folded into the carry
//! ledger one at a time, and the ranking day is streamed into a compact contender list.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{Days, NaiveDate};

use crate::domain::calendar::RankingCalendar;
use crate::domain::ranking::{Contender, rank_day};
use crate::domain::score::{CarryLedger, DailyMetrics, Weights};
use crate::metrics::Metrics;
use crate::ports::{LeaseLock, MetricsStore, RankingStore, Scored, StoreError};

/// What a recompute did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecomputeReport {
    /// The ranking day.
    pub date: NaiveDate,
    /// Products in the new ranking.
    pub products: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Why a recompute did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RecomputeError {
    /// Another recompute of the same day held the lock for longer than we could wait.
    #[error("a recompute of {0} is already running; try again shortly")]
    Busy(NaiveDate),
    /// A store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Settings of the recompute.
#[derive(Debug, Clone, Copy)]
pub struct RecomputeRules {
    /// Ranking days.
    pub calendar: RankingCalendar,
    /// Score weights.
    pub weights: Weights,
    /// How far back carry-over reaches.
    pub carry_days: u32,
    /// Daily rankings expire this many days after their day ends.
    pub retention_days: u32,
    /// Longest a recompute may hold a day's lock; a crashed holder frees it after this.
    pub lease: Duration,
}

/// Rebuilds daily rankings.
pub struct Recompute {
    store: Arc<dyn MetricsStore>,
    rankings: Arc<dyn RankingStore>,
    leases: Arc<dyn LeaseLock>,
    rules: RecomputeRules,
    metrics: Arc<Metrics>,
}

impl Recompute {
    /// Wires the recompute to its stores.
    pub fn new(
        store: Arc<dyn MetricsStore>,
        rankings: Arc<dyn RankingStore>,
        leases: Arc<dyn LeaseLock>,
        rules: RecomputeRules,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self { store, rankings, leases, rules, metrics }
    }

    /// The ranking calendar.
    pub fn calendar(&self) -> RankingCalendar {
        self.rules.calendar
    }

    /// Recomputes `date` under the day's lock, waiting up to `wait` for another replica's
    /// recompute of the same day to finish.
    pub async fn run(&self, date: NaiveDate, wait: Duration) -> Result<RecomputeReport, RecomputeError> {
        let name = format!("recompute:{date}");
        let deadline = Instant::now() + wait;
        let lease = loop {
            if let Some(lease) = self.leases.try_acquire(&name, self.rules.lease).await? {
                break lease;
            }
            if Instant::now() >= deadline {
                return Err(RecomputeError::Busy(date));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let result = self.rebuild(date).await;
        if let Err(e) = self.leases.release(&lease).await {
            // The lease expires by itself; the next recompute only waits a little longer.
            tracing::warn!(error = %e, %date, "could not release recompute lease");
        }
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

    /// Computes and stores the ranking of `date` without taking the lock.
    async fn rebuild(&self, date: NaiveDate) -> Result<RecomputeReport, StoreError> {
        let started = Instant::now();
        let (entries, clamped) = self.compute(date).await?;
        let expire_at =
            self.rules.calendar.day_end(date) + chrono::Duration::days(i64::from(self.rules.retention_days));
        self.rankings.replace_daily(date, &entries, expire_at).await?;
        self.metrics.scores_clamped.inc_by(clamped as u64);
        Ok(RecomputeReport { date, products: entries.len() as u64, elapsed: started.elapsed() })
    }

    /// The encoded ranking of `date` from SQL alone, in ascending product order, and how
    /// many main scores were clamped.
    pub async fn compute(&self, date: NaiveDate) -> Result<(Vec<Scored>, usize), StoreError> {
        let first = date.checked_sub_days(Days::new(u64::from(self.rules.carry_days))).unwrap_or(date);
        let mut ledger = CarryLedger::new(self.rules.weights);
        let mut day = first;
        while day < date {
            let mut rows: Vec<(i64, DailyMetrics)> = Vec::new();
            self.store.scan_day(day, &mut |r| rows.push((r.product_id, r.metrics))).await?;
            ledger = ledger.close_day(rows);
            day = day.succ_opt().unwrap_or(date);
        }

        let mut contenders: Vec<Contender> = Vec::new();
        self.store
            .scan_day(date, &mut |r| {
                contenders.push(Contender {
                    product_id: r.product_id,
                    standing: ledger.take(r.product_id, r.metrics),
                    last_event_us: Some(r.last_event_us),
                });
            })
            .await?;
        contenders.extend(ledger.carry_only().map(|(product_id, standing)| Contender {
            product_id,
            standing,
            last_event_us: None,
        }));
        // A fixed order makes the floating-point sums of the normalisation, and so every
        // score, identical across rebuilds.
        contenders.sort_unstable_by_key(|c| c.product_id);

        let calendar = self.rules.calendar;
        let ranking = rank_day(
            &contenders,
            calendar.day_start(date).timestamp_micros(),
            calendar.day_end(date).timestamp_micros(),
        );
        let entries = ranking.entries.iter().map(|e| Scored { product_id: e.product_id, score: e.score.0 }).collect();
        Ok((entries, ranking.clamped))
    }
}
