//! Why a product has its daily score: the day's value of every signal of the profile, each
//! term's points, the carry-over, and each tie-break axis against the population statistics
//! it was normalised with.
//!
//! Every number is computed by the same functions, in the same order, as the recompute's,
//! so the explanation reproduces the served score bit for bit whenever the counts have not
//! changed since the version was computed.

use std::sync::Arc;

use chrono::NaiveDate;

use super::layout::{Breakdown, MAX_AXES};
use super::normalize::AxisStats;
use super::profile::{AxisRef, ScoringProfile, SignalRef};
use super::ranking::{PopulationStats, axis_norm, elapsed_seconds, pack};
use super::score::CarryLedger;
use super::vocabulary::{DailyMetrics, Retracted};

/// One product's counters on one day, as the explanation needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProductDay {
    /// The day.
    pub date: NaiveDate,
    /// Every signal's value that day.
    pub metrics: DailyMetrics,
    /// Latest `occurred_at` that day, Unix microseconds.
    pub last_event_us: i64,
    /// What retractions took from the day's counts.
    pub retracted: Retracted,
}

/// One tie-break axis of one product.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axis {
    /// What the axis ranks by.
    pub axis: AxisRef,
    /// The product's raw value (recency: elapsed seconds to the reference).
    pub raw: f64,
    /// The population's mean.
    pub mean: f64,
    /// The population's standard deviation.
    pub std: f64,
    /// `(raw - mean) / std` (0 when the axis carries no information).
    pub z: f64,
    /// The norm stored in the score (for recency: `max - norm(raw)`, newer is higher).
    pub norm: u32,
}

/// One term of the main score for one product.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermPoints {
    /// The term's signal.
    pub signal: SignalRef,
    /// Its value that day.
    pub value: i64,
    /// `weight · transform(value)`.
    pub points: f64,
}

/// A product's daily score taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The profile the score was computed with.
    pub profile: Arc<ScoringProfile>,
    /// The day's counters (zeros for a product ranked through carry-over alone).
    pub metrics: DailyMetrics,
    /// The main score's terms, in the profile's order.
    pub terms: Vec<TermPoints>,
    /// The profile's other signals (no term: 0 points), built-in first, then custom.
    pub unscored: Vec<TermPoints>,
    /// `floor(main of the day before) * carry_over`.
    pub carry_points: f64,
    /// The main score: the terms and the carry added left to right.
    pub main: f64,
    /// Every axis against the population, in the profile's order.
    pub axes: Vec<Axis>,
    /// The integer part and norms as the encoding receives them.
    pub breakdown: Breakdown,
    /// The encoded score these numbers give.
    pub score: f64,
}

impl Explanation {
    /// The points of the term of `signal` (0 when the profile has no such term).
    pub fn points_of(&self, signal: SignalRef) -> f64 {
        self.terms.iter().find(|t| t.signal == signal).map_or(0.0, |t| t.points)
    }

    /// The axis ranking by `axis`, when the profile has it.
    pub fn axis(&self, axis: AxisRef) -> Option<&Axis> {
        self.axes.iter().find(|a| a.axis == axis)
    }
}

/// Where recency is measured from and to, as in [`super::ranking::rank_day`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecencyClock {
    /// Start of the ranking day, Unix microseconds (the origin of carry-only products).
    pub day_start_us: i64,
    /// The instant elapsed time is measured to, Unix microseconds.
    pub reference_us: i64,
}

/// Explains `product_id`'s score on `date` under `profile`.
///
/// `history` holds the product's rows of the days `first ..= date` (any subset, any order):
/// `first` is where the carry-over chain starts, as in the recompute. `stats` are the
/// statistics of the population the served version was normalised over, measured with
/// `clock`.
pub fn explain(
    profile: Arc<ScoringProfile>,
    product_id: i64,
    (first, date): (NaiveDate, NaiveDate),
    history: &[ProductDay],
    stats: &PopulationStats,
    clock: RecencyClock,
) -> Explanation {
    let row = |day: NaiveDate| history.iter().find(|d| d.date == day);
    let mut ledger = CarryLedger::new(Arc::clone(&profile));
    let mut day = first;
    while day < date {
        ledger = ledger.close_day(row(day).map(|d| (product_id, d.metrics)));
        let Some(next) = day.succ_opt() else { break };
        day = next;
    }
    let carried = ledger.carried(product_id);
    let today = row(date);
    let metrics = today.map(|d| d.metrics).unwrap_or_default();

    let terms = profile
        .terms()
        .iter()
        .map(|t| {
            let value = t.signal.value(&metrics);
            TermPoints { signal: t.signal, value, points: t.points(value) }
        })
        .collect();
    let unscored = profile
        .signals()
        .filter(|s| profile.terms().iter().all(|t| t.signal != *s))
        .map(|signal| TermPoints { signal, value: signal.value(&metrics), points: 0.0 })
        .collect();
    let carry_points = carried.0 as f64 * profile.carry_over();
    let main = profile.main_score(&metrics, carried);

    let axes = axes_of(&profile, stats, |_, axis| match axis {
        AxisRef::Signal(signal) => signal.value(&metrics) as f64,
        AxisRef::Recency => elapsed_seconds(today.map(|d| d.last_event_us), clock.day_start_us, clock.reference_us),
    });
    let (breakdown, score) = packed(&profile, main, &axes);
    Explanation { profile, metrics, terms, unscored, carry_points, main, axes, breakdown, score }
}

/// Every axis of `profile`, the `i`th with the raw value `raw(i, axis)`, against the
/// population's `stats` (an axis without statistics against an empty population's).
pub(crate) fn axes_of(
    profile: &ScoringProfile,
    stats: &PopulationStats,
    raw: impl Fn(usize, AxisRef) -> f64,
) -> Vec<Axis> {
    let layout = profile.layout();
    let empty = AxisStats { mean: 0.0, std: 0.0, count: 0 };
    profile
        .axes()
        .iter()
        .enumerate()
        .map(|(i, axis)| {
            let s = stats.axes.get(i).copied().unwrap_or(empty);
            let raw = raw(i, *axis);
            let norm = axis_norm(*axis, &s, raw, layout.max_norm(i));
            Axis { axis: *axis, raw, mean: s.mean, std: s.std, z: s.z(raw), norm }
        })
        .collect()
}

/// `main` and the norms of `axes` packed as the board packs them: the breakdown and the
/// encoded score.
pub(crate) fn packed(profile: &ScoringProfile, main: f64, axes: &[Axis]) -> (Breakdown, f64) {
    let mut norms = [0u32; MAX_AXES];
    for (n, a) in norms.iter_mut().zip(axes) {
        *n = a.norm;
    }
    let (breakdown, score, _) = pack(profile.layout(), main, &norms[..axes.len().min(MAX_AXES)]);
    (breakdown, score)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ranking::{Contender, rank_day};
    use crate::score::DayStanding;
    use proptest::prelude::*;

    fn day(n: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, n).expect("a November day")
    }

    #[test]
    fn carry_only_product_is_explained_by_its_carry_alone() {
        // Day 1: 10 views and 100 likes = 21.0 → carries 2 on day 2 (no events) → 0.2.
        let history = [ProductDay {
            date: day(1),
            metrics: DailyMetrics::counts(10, 100, 0, 0),
            last_event_us: 5,
            retracted: Retracted::default(),
        }];
        let stats = PopulationStats::default();
        let e = explain(
            Arc::new(ScoringProfile::built_in()),
            7,
            (day(1), day(3)),
            &history,
            &stats,
            RecencyClock { day_start_us: 0, reference_us: 86_400_000_000 },
        );
        assert_eq!(e.metrics, DailyMetrics::default());
        assert_eq!(e.terms.iter().map(|t| t.points).collect::<Vec<_>>(), vec![0.0, 0.0, 0.0]);
        // 21 → floor 21 * 0.1 = 2.1 on day 2 → floor 2 * 0.1 on day 3.
        assert_eq!(e.carry_points, 2.0 * 0.1);
        assert_eq!(e.axis(AxisRef::Recency).map(|a| a.raw), Some(86_400.0));
    }

    proptest! {
        /// Explaining any member of a population reproduces the score the ranking gave it.
        #[test]
        fn explanations_reproduce_the_ranked_scores(
            rows in prop::collection::vec(
                (0i64..5_000, 0i64..300, 0i64..1_000_000, 0i64..86_400_000_000, 0i64..40),
                1..40,
            ),
        ) {
            let weights = Arc::new(ScoringProfile::built_in());
            let clock = RecencyClock { day_start_us: 0, reference_us: 86_400_000_000 };
            // Day 1 gives product i `10 * carry` views, so its main is `carry` (give or take
            // the rounding of `n * 0.1`) and day 2 inherits its floor.
            let history: Vec<[ProductDay; 2]> = rows
                .iter()
                .map(|(views, likes, amount, last, carry)| {
                    [
                        ProductDay {
                            date: day(1),
                            metrics: DailyMetrics::counts(carry * 10, 0, 0, 0),
                            last_event_us: 0, retracted: Retracted::default()
                        },
                        ProductDay {
                            date: day(2),
                            metrics: DailyMetrics::counts(*views, *likes, 1, *amount),
                            last_event_us: *last, retracted: Retracted::default()
                        },
                    ]
                })
                .collect();
            let contenders: Vec<Contender> = history
                .iter()
                .enumerate()
                .map(|(i, [before, today])| {
                    let carried = CarryLedger::new(weights.clone()).close_day([(1, before.metrics)]).carried(1);
                    Contender::new(
                        &weights,
                        i as i64 + 1,
                        DayStanding { main: weights.main_score(&today.metrics, carried), metrics: today.metrics },
                        Some(today.last_event_us),
                    )
                })
                .collect();
            let ranking = rank_day(&weights, &contenders, clock.day_start_us, clock.reference_us);
            for ((c, entry), days) in contenders.iter().zip(&ranking.entries).zip(&history) {
                let e = explain(weights.clone(), c.product_id, (day(1), day(2)), days, &ranking.stats, clock);
                let points: Vec<f64> = e.terms.iter().map(|t| t.points).collect();
                prop_assert_eq!(points[0] + points[1] + points[2] + e.carry_points, e.main);
                prop_assert_eq!(e.main, c.main);
                prop_assert_eq!(e.score, entry.score);
                prop_assert_eq!(e.breakdown, entry.breakdown);
            }
        }
    }
}
