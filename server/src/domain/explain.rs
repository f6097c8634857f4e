//! Why a product has its daily score: the day's counts, each weighted contribution, the
//! carry-over, and each tie-break axis against the population statistics it was normalised
//! with.
//!
//! Every number is computed by the same functions, in the same order, as the recompute's,
//! so the explanation reproduces the served score bit for bit whenever the counts have not
//! changed since the version was computed.

use chrono::NaiveDate;

use super::encoding::{EncodedScore, ScoreBreakdown};
use super::normalize::AxisStats;
use super::ranking::{PopulationStats, elapsed_seconds, main_floor};
use super::score::{CarryLedger, DailyMetrics, Weights};

/// One product's counters on one day, as the explanation needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProductDay {
    /// The day.
    pub date: NaiveDate,
    /// Views, likes and order amount.
    pub metrics: DailyMetrics,
    /// Orders that day.
    pub orders: i64,
    /// Latest `occurred_at` that day, Unix microseconds.
    pub last_event_us: i64,
}

/// One tie-break axis of one product.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axis {
    /// The product's raw value.
    pub raw: f64,
    /// The population's mean.
    pub mean: f64,
    /// The population's standard deviation.
    pub std: f64,
    /// `(raw - mean) / std` (0 when the axis carries no information).
    pub z: f64,
    /// The norm stored in the score (for recency: `999 - norm(raw)`, newer is higher).
    pub norm: u16,
}

impl Axis {
    fn of(stats: &AxisStats, raw: f64) -> Self {
        Self { raw, mean: stats.mean, std: stats.std, z: stats.z(raw), norm: stats.norm(raw) }
    }
}

/// A product's daily score taken apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Explanation {
    /// The day's counters (zeros for a product ranked through carry-over alone).
    pub metrics: DailyMetrics,
    /// Orders that day.
    pub orders: i64,
    /// `views * w_view`.
    pub view_points: f64,
    /// `likes * w_like`.
    pub like_points: f64,
    /// `ln_1p(order_amount) * w_order`.
    pub order_points: f64,
    /// `floor(main of the day before) * carry_over`.
    pub carry_points: f64,
    /// The main score: the four contributions added left to right.
    pub main: f64,
    /// Views against the population.
    pub views: Axis,
    /// Likes against the population.
    pub likes: Axis,
    /// Recency (raw = elapsed seconds) against the population.
    pub recency: Axis,
    /// The four dimensions as the encoding receives them.
    pub breakdown: ScoreBreakdown,
    /// The encoded score these numbers give.
    pub score: EncodedScore,
}

/// Where recency is measured from and to, as in [`super::ranking::rank_day`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecencyClock {
    /// Start of the ranking day, Unix microseconds (the origin of carry-only products).
    pub day_start_us: i64,
    /// The instant elapsed time is measured to, Unix microseconds.
    pub reference_us: i64,
}

/// Explains `product_id`'s score on `date`.
///
/// `history` holds the product's rows of the days `first ..= date` (any subset, any order):
/// `first` is where the carry-over chain starts, as in the recompute. `stats` are the
/// statistics of the population the served version was normalised over, measured with
/// `clock`.
pub fn explain(
    weights: Weights,
    product_id: i64,
    (first, date): (NaiveDate, NaiveDate),
    history: &[ProductDay],
    stats: &PopulationStats,
    clock: RecencyClock,
) -> Explanation {
    let row = |day: NaiveDate| history.iter().find(|d| d.date == day);
    let mut ledger = CarryLedger::new(weights);
    let mut day = first;
    while day < date {
        ledger = ledger.close_day(row(day).map(|d| (product_id, d.metrics)));
        let Some(next) = day.succ_opt() else { break };
        day = next;
    }
    let carried = ledger.carried(product_id);
    let today = row(date);
    let metrics = today.map(|d| d.metrics).unwrap_or_default();

    let view_points = metrics.views as f64 * weights.view;
    let like_points = metrics.likes as f64 * weights.like;
    let order_points = weights.order_points(metrics.order_amount);
    let carry_points = carried.0 as f64 * weights.carry_over;
    let main = weights.main_score(&metrics, carried);

    let views = Axis::of(&stats.views, metrics.views as f64);
    let likes = Axis::of(&stats.likes, metrics.likes as f64);
    let mut recency = Axis::of(
        &stats.recency,
        elapsed_seconds(today.map(|d| d.last_event_us), clock.day_start_us, clock.reference_us),
    );
    recency.norm = 999 - recency.norm;
    let (breakdown, _) = ScoreBreakdown::clamped(main_floor(main), views.norm, likes.norm, recency.norm);
    Explanation {
        metrics,
        orders: today.map_or(0, |d| d.orders),
        view_points,
        like_points,
        order_points,
        carry_points,
        main,
        views,
        likes,
        recency,
        breakdown,
        score: breakdown.encode(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ranking::{Contender, rank_day};
    use crate::domain::score::DayStanding;
    use proptest::prelude::*;

    fn day(n: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, n).expect("a November day")
    }

    #[test]
    fn carry_only_product_is_explained_by_its_carry_alone() {
        // Day 1: 10 views and 100 likes = 21.0 → carries 2 on day 2 (no events) → 0.2.
        let history = [ProductDay {
            date: day(1),
            metrics: DailyMetrics { views: 10, likes: 100, order_amount: 0 },
            orders: 0,
            last_event_us: 5,
        }];
        let stats = PopulationStats::default();
        let e = explain(
            Weights::default(),
            7,
            (day(1), day(3)),
            &history,
            &stats,
            RecencyClock { day_start_us: 0, reference_us: 86_400_000_000 },
        );
        assert_eq!(e.metrics, DailyMetrics::default());
        assert_eq!((e.view_points, e.like_points, e.order_points), (0.0, 0.0, 0.0));
        // 21 → floor 21 * 0.1 = 2.1 on day 2 → floor 2 * 0.1 on day 3.
        assert_eq!(e.carry_points, 2.0 * 0.1);
        assert_eq!(e.recency.raw, 86_400.0);
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
            let weights = Weights::default();
            let clock = RecencyClock { day_start_us: 0, reference_us: 86_400_000_000 };
            // Day 1 gives product i `10 * carry` views, so its main is `carry` (give or take
            // the rounding of `n * 0.1`) and day 2 inherits its floor.
            let history: Vec<[ProductDay; 2]> = rows
                .iter()
                .map(|(views, likes, amount, last, carry)| {
                    [
                        ProductDay {
                            date: day(1),
                            metrics: DailyMetrics { views: carry * 10, likes: 0, order_amount: 0 },
                            orders: 0,
                            last_event_us: 0,
                        },
                        ProductDay {
                            date: day(2),
                            metrics: DailyMetrics { views: *views, likes: *likes, order_amount: *amount },
                            orders: 1,
                            last_event_us: *last,
                        },
                    ]
                })
                .collect();
            let contenders: Vec<Contender> = history
                .iter()
                .enumerate()
                .map(|(i, [before, today])| {
                    let carried = CarryLedger::new(weights).close_day([(1, before.metrics)]).carried(1);
                    Contender::new(
                        i as i64 + 1,
                        DayStanding { main: weights.main_score(&today.metrics, carried), metrics: today.metrics },
                        Some(today.last_event_us),
                    )
                })
                .collect();
            let ranking = rank_day(&contenders, clock.day_start_us, clock.reference_us);
            for ((c, entry), days) in contenders.iter().zip(&ranking.entries).zip(&history) {
                let e = explain(weights, c.product_id, (day(1), day(2)), days, &ranking.stats, clock);
                prop_assert_eq!(e.view_points + e.like_points + e.order_points + e.carry_points, e.main);
                prop_assert_eq!(e.main, c.main);
                prop_assert_eq!(e.score, entry.score);
                prop_assert_eq!(e.breakdown, entry.breakdown);
            }
        }
    }
}
