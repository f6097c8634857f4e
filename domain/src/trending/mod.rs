//! The trending board: what rises now. A product's hours of counts, each scored by the
//! profile's main score without carry-over, weigh `2^(−(T − end(h)) / half_life)` at instant
//! T, where `end(h)` is the hour's end, or T itself for the hour under way; the trending score
//! is their sum, taken oldest hour first so that every computation of the same hours at the
//! same T (a recompute, a live pass, an explanation) gives the same double. The tie-break axes
//! are the profile's, over the trending population: a signal axis the same decayed sum of
//! that signal's hourly values, recency the seconds from the product's latest counted event
//! of the window to T.

use crate::layout::{Breakdown, MAX_AXES};
use crate::normalize::AxisStats;
use crate::profile::{AxisRef, ScoringProfile};
use crate::ranking::{PopulationStats, axis_norm, pack};
use crate::vocabulary::DailyMetrics;

/// Microseconds in an hour.
pub const HOUR_US: i64 = 3_600_000_000;

/// The end of the hour starting at `start_us` as seen at `t_us`: the hour's end, or `t_us`
/// for the hour under way.
pub fn hour_end(start_us: i64, t_us: i64) -> i64 {
    start_us.saturating_add(HOUR_US).min(t_us)
}

/// The weight at `t_us` of an hour that ended at `end_us`: 1 for the hour under way, ½ one
/// half-life later.
pub fn weight(t_us: i64, end_us: i64, half_life_us: i64) -> f64 {
    let age = t_us.saturating_sub(end_us).max(0) as f64;
    (-age / half_life_us.max(1) as f64).exp2()
}

/// Hours a trending board reaches back: an hour counts at T while it ended less than seven
/// days before T (SQL keeps the hours of seven days; older ones weigh 2^−28 at the default
/// half-life).
pub const WINDOW_HOURS: i64 = 7 * 24;

/// Whether the hour starting at `start_us` counts at `t_us`: started by T, ended less than
/// [`WINDOW_HOURS`] before it.
pub fn in_window(start_us: i64, t_us: i64) -> bool {
    start_us <= t_us && start_us.saturating_add(HOUR_US) > t_us.saturating_sub(WINDOW_HOURS * HOUR_US)
}

/// One hour of one product as the trending board reads it: its main score and its signal
/// axes' values, computed once from the hour's counts, and its latest counted event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrendingHour {
    /// The hour's start, Unix microseconds.
    pub start_us: i64,
    /// The profile's main score of the hour's counts, without carry-over.
    pub main: f64,
    /// Each axis's value in the profile's order: a signal's count (recency's slot is 0).
    signals: [f64; MAX_AXES],
    /// The latest `occurred_at` counted in the hour, Unix microseconds.
    pub last_event_us: i64,
}

impl TrendingHour {
    /// The hour starting at `start_us` with `metrics` under `profile`.
    pub fn of(profile: &ScoringProfile, start_us: i64, metrics: &DailyMetrics, last_event_us: i64) -> Self {
        let mut signals = [0.0; MAX_AXES];
        for (value, axis) in signals.iter_mut().zip(profile.axes()) {
            if let AxisRef::Signal(signal) = axis {
                *value = signal.value(metrics) as f64;
            }
        }
        Self { start_us, main: profile.main_without_carry(metrics), signals, last_event_us }
    }
}

/// A product on the trending board at T, before normalisation: its decayed main score and
/// the raw value of each axis (a signal's decayed sum, or recency's seconds to T).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrendingContender {
    /// The product.
    pub product_id: i64,
    /// The trending score: each hour's main score decayed, summed oldest first.
    pub main: f64,
    /// Per axis in the profile's order.
    pub axes: [f64; MAX_AXES],
}

impl TrendingContender {
    /// The product with `hours` (ascending starts) at `t_us`; `None` when none of them is in
    /// the window.
    pub fn at(
        profile: &ScoringProfile,
        product_id: i64,
        hours: &[TrendingHour],
        t_us: i64,
        half_life_us: i64,
    ) -> Option<Self> {
        Self::of_hours(profile, product_id, hours.iter(), &mut Weights::new(t_us, half_life_us))
    }

    fn of_hours<'a>(
        profile: &ScoringProfile,
        product_id: i64,
        hours: impl Iterator<Item = &'a TrendingHour>,
        weights: &mut Weights,
    ) -> Option<Self> {
        let t_us = weights.t_us;
        let mut main = 0.0;
        let mut sums = [0.0; MAX_AXES];
        let mut latest = None;
        for h in hours.filter(|h| in_window(h.start_us, t_us)) {
            let w = weights.of(h.start_us);
            main += h.main * w;
            for (sum, value) in sums.iter_mut().zip(h.signals) {
                *sum += value * w;
            }
            latest = latest.max(Some(h.last_event_us));
        }
        let latest = latest?;
        let mut axes = [0.0; MAX_AXES];
        for ((raw, axis), sum) in axes.iter_mut().zip(profile.axes()).zip(sums) {
            *raw = match axis {
                AxisRef::Signal(_) => sum,
                AxisRef::Recency => t_us.saturating_sub(latest) as f64 / 1e6,
            };
        }
        Some(Self { product_id, main, axes })
    }
}

/// The weights of the hours at one instant, each computed once: a population's hours are a
/// few hundred distinct ones (the window's), shared by every product. The same function of
/// the same hour, so the same bits as computing it each time.
pub(crate) struct Weights {
    t_us: i64,
    half_life_us: i64,
    /// By hours before T: the hour's start and its weight (another start in the same slot,
    /// from a zone whose hours shift, is computed each time).
    slots: Vec<Option<(i64, f64)>>,
}

impl Weights {
    pub(crate) fn new(t_us: i64, half_life_us: i64) -> Self {
        Self { t_us, half_life_us, slots: vec![None; WINDOW_HOURS as usize + 2] }
    }

    /// The weight at T of the hour starting at `start_us`.
    pub(crate) fn of(&mut self, start_us: i64) -> f64 {
        let slot = usize::try_from(self.t_us.saturating_sub(start_us).div_euclid(HOUR_US)).ok();
        match slot.and_then(|i| self.slots.get_mut(i)) {
            Some(Some((start, w))) if *start == start_us => *w,
            Some(slot) => {
                let w = weight(self.t_us, hour_end(start_us, self.t_us), self.half_life_us);
                *slot = Some((start_us, w));
                w
            }
            None => weight(self.t_us, hour_end(start_us, self.t_us), self.half_life_us),
        }
    }
}

/// Normalises the trending population's axes and encodes every contender's score, as a day's
/// ranking is encoded: each contender becomes `entry(product, breakdown, score)`, in the order
/// given. Returns the entries, how many main scores were clamped, and the statistics.
pub fn rank_trending<T>(
    profile: &ScoringProfile,
    contenders: &[TrendingContender],
    mut entry: impl FnMut(i64, Breakdown, f64) -> T,
) -> (Vec<T>, usize, PopulationStats) {
    let layout = profile.layout();
    let axes = profile.axes();
    let stats: Vec<AxisStats> =
        (0..axes.len()).map(|i| AxisStats::of(contenders.iter().map(move |c| c.axes[i]))).collect();
    let mut clamped = 0;
    let mut norms = [0u32; MAX_AXES];
    let entries = contenders
        .iter()
        .map(|c| {
            for (i, axis) in axes.iter().enumerate() {
                norms[i] = axis_norm(*axis, &stats[i], c.axes[i], layout.max_norm(i));
            }
            let (breakdown, score, was_clamped) = pack(layout, c.main, &norms[..axes.len()]);
            clamped += usize::from(was_clamped);
            entry(c.product_id, breakdown, score)
        })
        .collect();
    (entries, clamped, PopulationStats { axes: stats })
}

mod explain;
mod hours;

pub use explain::{HourPoints, TrendingExplanation, explain_trending};
pub use hours::{HourRow, TrendingHours};

#[cfg(test)]
mod tests;
