//! Today's trending board in a recompute and a live pass: the hours of the last seven days
//! read from SQL (all of them, or the ones changed since the previous pass), each profile's
//! hours scored once and held ([`TrendingHours`]), ranked at the instant T of the publication
//! and published like the daily board, with its segments, the controls and the feed, and
//! with a run record of T and the population's statistics (what ExplainRank reproduces the
//! board from).
//!
//! A recompute and a live pass that read the same rows at the same T publish the same
//! doubles: the hours are held in one order whoever built them, and summed oldest first.

use std::ops::Range;
use std::sync::Arc;

use chrono::NaiveDate;

use super::Computed;
use super::publish::{Publisher, RankedCopy};
use crate::app::policy::Policy;
use crate::domain::catalog::Membership;
use crate::domain::explain::RecencyClock;
use crate::domain::snapshot::Snapshot;
use crate::domain::trending::{TrendingHour, TrendingHours, rank_trending};
use crate::ports::{FeedCause, Fence, HourScans, RankingKey, Scored, StoreError};

/// The hours of the days up to `date` for each of `policies` (which share the signals),
/// from one read: every row, or with `epochs` only the rows changed in them.
pub(super) async fn read_hours(
    scans: &dyn HourScans,
    policies: &[&Policy],
    date: NaiveDate,
    epochs: Option<Range<i64>>,
) -> Result<Vec<Vec<(i64, TrendingHour)>>, StoreError> {
    let mut lists: Vec<Vec<(i64, TrendingHour)>> = vec![Vec::new(); policies.len()];
    let signals = policies.first().map(|p| p.profile.custom_names()).unwrap_or_default();
    scans
        .scan_hours(policies.first().map_or(date, |p| p.trending_first_day(date)), date, epochs, signals, &mut |row| {
            for (list, policy) in lists.iter_mut().zip(policies) {
                list.push(TrendingHours::score(&policy.profile, &row));
            }
        })
        .await?;
    Ok(lists)
}

/// Ranks `hours` at `t_us` without the `hidden` products (ascending), on a blocking thread:
/// a million products' decayed sums would otherwise hold a worker of the runtime. A live pass
/// gives the organic copy of the board's previous version as `previous`.
pub(super) fn rank_apart(
    policy: &Arc<Policy>,
    hours: Arc<TrendingHours>,
    t_us: i64,
    hidden: &Arc<[i64]>,
    previous: Option<Arc<Snapshot>>,
) -> impl Future<Output = Result<RankedCopy, StoreError>> + use<> {
    let (policy, hidden) = (Arc::clone(policy), Arc::clone(hidden));
    super::apart::off_runtime(move || RankedCopy::of(rank(&policy, &hours, t_us, &hidden), previous.as_deref()))
}

/// The trending population of `hours` at `t_us`, ranked: what [`rank_apart`] runs.
pub(super) fn rank(policy: &Policy, hours: &TrendingHours, t_us: i64, hidden: &[i64]) -> Computed {
    let profile = &policy.profile;
    let mut contenders = hours.contenders(profile, t_us, policy.trending_half_life_us());
    // Both ascending.
    super::apart::without_hidden(&mut contenders, |c| c.product_id, hidden);
    let (entries, clamped, stats) =
        rank_trending(profile, &contenders, |product_id, _, score| Scored { product_id, score });
    Computed { entries, clamped, stats, clock: RecencyClock { day_start_us: t_us, reference_us: t_us } }
}

impl Publisher {
    /// Publishes `ranked`, today's trending board at its clock's instant, with its run record
    /// and its segments fanned out by `catalog`; a live pass's (`live`) in the form replicas
    /// load, as its daily board.
    pub(super) async fn publish_trending(
        &self,
        date: NaiveDate,
        ranked: RankedCopy,
        catalog: &Membership,
        live: bool,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        let key = RankingKey::Trending(date);
        let life = self.life(date);
        let name = self.policy.trending_run_name();
        let version = self.publish_explained(key, &ranked, name, life, live, fence).await?;
        let cause = if live { FeedCause::LivePass } else { FeedCause::Recompute };
        self.publish_segments(key, &ranked.whole, catalog, life, fence, cause).await?;
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::policy::PolicySettings;
    use crate::domain::trending::{HOUR_US, HourRow};
    use crate::domain::vocabulary::DailyMetrics;

    fn row(product_id: i64, hour: i64, views: i64) -> HourRow {
        let start_us = hour * HOUR_US;
        HourRow {
            product_id,
            start_us,
            metrics: DailyMetrics::counts(views, views % 3, 0, 0),
            last_event_us: start_us + 7,
        }
    }

    /// A recompute reads the hours whole; a live pass holds what it read and applies the hours
    /// changed since: at the same instant both rank the same doubles, hidden products out.
    #[test]
    fn a_pass_and_a_recompute_at_one_instant_rank_the_same_doubles() {
        let policy = Policy::new(PolicySettings::default());
        let profile = &policy.profile;
        let early: Vec<HourRow> = (1..=40).map(|p| row(p, 1_000 + p % 5, p * 3)).collect();
        let changed: Vec<HourRow> = (1..=40).step_by(3).map(|p| row(p, 1_000 + p % 5, p * 3 + 11)).collect();
        let later: Vec<HourRow> = (30..=60).map(|p| row(p, 1_004, p)).collect();
        let mut held = TrendingHours::of(profile, early.iter().copied());
        held.apply(profile, changed.iter().copied().chain(later.iter().copied()));
        // What SQL holds after the changes (each row's last write), read in another order.
        let mut rows = std::collections::BTreeMap::new();
        for r in early.iter().chain(&changed).chain(&later) {
            rows.insert((r.product_id, r.start_us), *r);
        }
        let read = TrendingHours::of(profile, rows.into_values().rev());
        let t_us = 1_004 * HOUR_US + HOUR_US / 3;
        let hidden = [4, 17, 58];
        let bits = |c: Computed| c.entries.iter().map(|e| (e.product_id, e.score.to_bits())).collect::<Vec<_>>();
        let pass = bits(rank(&policy, &held, t_us, &hidden));
        assert_eq!(pass, bits(rank(&policy, &read, t_us, &hidden)));
        assert_eq!(pass.len(), 60 - hidden.len());
        assert!(pass.iter().all(|(p, _)| !hidden.contains(p)));
    }
}
