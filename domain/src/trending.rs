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
use crate::ranking::{PopulationStats, axis_norm, main_floor};
use crate::vocabulary::DailyMetrics;

/// Microseconds in an hour.
pub const HOUR_US: i64 = 3_600_000_000;

/// One hour of a product: when it starts (Unix microseconds, a multiple of [`HOUR_US`] in the
/// ranking's calendar) and its value (the main score of its counts, or one signal's count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HourValue {
    pub start_us: i64,
    pub value: f64,
}

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

/// Each hour's decayed points at `t_us`, oldest first; hours starting after `t_us` are left
/// out. `hours` must be in ascending start order.
pub fn points(hours: &[HourValue], t_us: i64, half_life_us: i64) -> impl Iterator<Item = (HourValue, f64)> + '_ {
    hours
        .iter()
        .take_while(move |h| h.start_us <= t_us)
        .map(move |h| (*h, h.value * weight(t_us, hour_end(h.start_us, t_us), half_life_us)))
}

/// The decayed sum of `hours` at `t_us`: [`points`] added oldest first.
pub fn decayed(hours: &[HourValue], t_us: i64, half_life_us: i64) -> f64 {
    points(hours, t_us, half_life_us).fold(0.0, |sum, (_, p)| sum + p)
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
        let mut main = 0.0;
        let mut sums = [0.0; MAX_AXES];
        let mut latest = None;
        for h in hours.iter().filter(|h| in_window(h.start_us, t_us)) {
            let w = weight(t_us, hour_end(h.start_us, t_us), half_life_us);
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
            let (floor, was_clamped) = layout.clamp(main_floor(c.main));
            clamped += usize::from(was_clamped);
            let breakdown = Breakdown::new(floor, &norms[..axes.len()]);
            entry(c.product_id, breakdown, layout.encode_breakdown(&breakdown))
        })
        .collect();
    (entries, clamped, PopulationStats { axes: stats })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H: i64 = HOUR_US;

    #[test]
    fn the_hour_under_way_weighs_one_and_a_half_life_halves() {
        let half_life = 6 * H;
        let t = 100 * H + H / 2;
        // Ended at 95 h: 5.5 h before T.
        let hours = [HourValue { start_us: 94 * H, value: 8.0 }];
        assert_eq!(hour_end(100 * H, t), t, "the hour under way ends at T");
        assert_eq!(hour_end(94 * H, t), 95 * H);
        assert_eq!(weight(t, t, half_life), 1.0);
        assert_eq!(weight(6 * H, 0, half_life), 0.5);
        assert_eq!(weight(12 * H, 0, half_life), 0.25);
        let now = [HourValue { start_us: 100 * H, value: 3.0 }];
        assert_eq!(decayed(&now, t, half_life), 3.0);
        let p: Vec<f64> = points(&hours, t, half_life).map(|(_, p)| p).collect();
        assert_eq!(p, [8.0 * (-5.5f64 / 6.0).exp2()]);
    }

    #[test]
    fn hours_after_t_are_left_out() {
        let hours = [HourValue { start_us: 0, value: 1.0 }, HourValue { start_us: 2 * H, value: 5.0 }];
        assert_eq!(decayed(&hours, H, 6 * H), 1.0, "the second hour starts after T");
    }

    fn built_in() -> ScoringProfile {
        ScoringProfile::built_in()
    }

    fn hour(start_us: i64, views: i64, likes: i64, amount: i64) -> TrendingHour {
        let metrics = DailyMetrics::counts(views, likes, i64::from(amount > 0), amount);
        TrendingHour::of(&built_in(), start_us, &metrics, start_us + H / 2)
    }

    /// The built-in profile's main score of one hour, written out: 0.1·views + 0.2·likes +
    /// 0.6·ln(1 + amount).
    fn model_main(views: i64, likes: i64, amount: i64) -> f64 {
        0.1 * views as f64 + 0.2 * likes as f64 + 0.6 * (amount as f64).ln_1p()
    }

    #[test]
    fn a_burst_now_rises_above_more_points_a_day_ago() {
        let t = 200 * H + H / 4;
        let half_life = 6 * H;
        // Yesterday's best seller: 500 views an hour for 8 hours, ending 24 hours ago.
        let seller: Vec<TrendingHour> = (175..183).map(|h| hour(h * H, 500, 20, 0)).collect();
        // A new product: a burst of 600 views in the hour under way.
        let rising = [hour(200 * H, 600, 0, 0)];
        let profile = built_in();
        let a = TrendingContender::at(&profile, 1, &seller, t, half_life).expect("in the window");
        let b = TrendingContender::at(&profile, 2, &rising, t, half_life).expect("in the window");
        assert!(b.main > a.main, "{} > {}", b.main, a.main);
        let (entries, clamped, stats) = rank_trending(&profile, &[a, b], |p, _, score| (p, score));
        assert_eq!(clamped, 0);
        assert_eq!(stats.population(), 2);
        assert!(entries[1].1 > entries[0].1, "the rising product's score is higher: {entries:?}");
    }

    #[test]
    fn the_window_is_seven_days_and_nothing_after_t() {
        let t = 1_000 * H;
        assert!(in_window(t, t), "the hour starting at T");
        assert!(!in_window(t + 1, t), "an hour starting after T");
        assert!(!in_window(t - WINDOW_HOURS * H - H, t), "ended exactly seven days before T");
        assert!(!in_window(t - (WINDOW_HOURS + 1) * H, t), "ended more than seven days before T");
        assert!(in_window(t - WINDOW_HOURS * H + 1, t), "ends just inside the window");
        let old = [hour(t - (WINDOW_HOURS + 2) * H, 9, 9, 9)];
        assert_eq!(TrendingContender::at(&built_in(), 1, &old, t, 6 * H), None, "only hours out of the window");
    }

    #[test]
    fn recency_is_seconds_from_the_latest_counted_event_to_t() {
        let t = 50 * H;
        let hours = [hour(40 * H, 1, 0, 0), hour(45 * H, 1, 0, 0)];
        let c = TrendingContender::at(&built_in(), 1, &hours, t, 6 * H).expect("in the window");
        let latest = 45 * H + H / 2;
        assert_eq!(c.axes[2], (t - latest) as f64 / 1e6);
    }

    proptest! {
        /// The trending population against an independent model of the built-in profile:
        /// each product's hours scored by the written-out formula, weighed by
        /// `0.5^(age / half_life)` and summed oldest first; the encoded score keeps the
        /// model's integer part, and a product whose model score is a whole point above
        /// another's ranks above it.
        #[test]
        fn the_board_follows_the_decayed_main_scores(
            products in proptest::collection::vec(
                proptest::collection::vec((0i64..WINDOW_HOURS, 0i64..50, 0i64..50, 0i64..100_000), 1..12), 1..30),
            offset in 0i64..H,
            half_life_h in 1i64..24,
        ) {
            let profile = built_in();
            let half_life = half_life_h * H;
            let t = 300 * H + offset;
            let mut contenders = Vec::new();
            let mut model = Vec::new();
            for (p, rows) in products.iter().enumerate() {
                let mut starts: Vec<i64> = rows.iter().map(|r| t - r.0 * H - offset).collect();
                starts.sort_unstable();
                starts.dedup();
                let hours: Vec<TrendingHour> = starts
                    .iter()
                    .zip(rows)
                    .map(|(start, (_, views, likes, amount))| hour(*start, *views, *likes, *amount))
                    .collect();
                let expected = starts.iter().zip(rows).fold(0.0f64, |sum, (start, (_, v, l, a))| {
                    let end = (start + H).min(t);
                    sum + model_main(*v, *l, *a) * 0.5f64.powf((t - end) as f64 / half_life as f64)
                });
                let c = TrendingContender::at(&profile, p as i64, &hours, t, half_life).expect("in the window");
                prop_assert!((c.main - expected).abs() <= expected.abs() * 1e-9 + 1e-9, "{} vs {expected}", c.main);
                contenders.push(c);
                model.push(expected);
            }
            let (entries, _, _) = rank_trending(&profile, &contenders, |p, b, score| (p, b, score));
            for ((_, breakdown, _), expected) in entries.iter().zip(&model) {
                let floor = expected.floor();
                // Within the model's rounding of a whole number.
                prop_assert!((breakdown.main_floor as f64 - floor).abs() <= 1.0);
            }
            for (a, ma) in entries.iter().zip(&model) {
                for (b, mb) in entries.iter().zip(&model) {
                    if ma.floor() > mb.floor() + 1.0 {
                        prop_assert!(a.2 > b.2, "{ma} ranks above {mb}");
                    }
                }
            }
        }

        /// Against an independent model: `0.5^(age / half_life)` per hour, summed oldest
        /// first, within a few ulps (the model's power differs from `exp2` in the last bits);
        /// and the explanation's points add up to the score bit for bit.
        #[test]
        fn the_score_is_the_sum_of_halvings_oldest_first(
            values in proptest::collection::vec(0.0f64..1e6, 1..200),
            offset in 0i64..H,
            half_life_h in 1i64..48,
        ) {
            let hours: Vec<HourValue> =
                values.iter().enumerate().map(|(i, v)| HourValue { start_us: i as i64 * H, value: *v }).collect();
            let t = (values.len() as i64 - 1) * H + offset;
            let half_life = half_life_h * H;
            let model = hours.iter().fold(0.0f64, |sum, h| {
                let end = (h.start_us + H).min(t);
                sum + h.value * 0.5f64.powf((t - end) as f64 / half_life as f64)
            });
            let score = decayed(&hours, t, half_life);
            prop_assert!((score - model).abs() <= model.abs() * 1e-12, "{score} vs {model}");
            let explained = points(&hours, t, half_life).fold(0.0, |s, (_, p)| s + p);
            prop_assert_eq!(explained.to_bits(), score.to_bits());
        }
    }
}
