//! One day's ranking: the population's main scores and tie-break axes turned into encoded
//! scores.

use super::encoding::{Clamp, EncodedScore, ScoreBreakdown};
use super::normalize::AxisStats;
use super::score::DayStanding;

/// A product ranked on the day, before normalisation: what the normalisation reads of it, in
/// 40 bytes (a recompute holds a million of them; the day's order amount only counts through
/// the main score).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contender {
    /// The product.
    pub product_id: i64,
    /// Main score on the day.
    pub main: f64,
    /// The day's views (the views axis).
    pub views: i64,
    /// The day's likes (the likes axis).
    pub likes: i64,
    /// Latest `occurred_at` of the product that day, in Unix microseconds, or [`NO_EVENT`]
    /// (see [`Contender::last_event_us`]).
    last_event: i64,
}

/// [`Contender::last_event`] of a product without an event that day: no instant a shopper's
/// event can carry (292,000 years before the epoch), so an `Option` costs no 8 more bytes.
const NO_EVENT: i64 = i64::MIN;

impl Contender {
    /// A contender with `standing` on the day; `last_event_us` is `None` when the product is
    /// ranked through carry-over alone.
    pub fn new(product_id: i64, standing: DayStanding, last_event_us: Option<i64>) -> Self {
        Self {
            product_id,
            main: standing.main,
            views: standing.metrics.views,
            likes: standing.metrics.likes,
            last_event: last_event_us.unwrap_or(NO_EVENT),
        }
    }

    /// Latest `occurred_at` of the product that day, in Unix microseconds; `None` when the
    /// product is ranked through carry-over alone.
    pub fn last_event_us(&self) -> Option<i64> {
        (self.last_event != NO_EVENT).then_some(self.last_event)
    }
}

/// One entry of the finished ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedEntry {
    /// The product.
    pub product_id: i64,
    /// The four dimensions.
    pub breakdown: ScoreBreakdown,
    /// The packed score stored in the ranking.
    pub score: EncodedScore,
}

/// The statistics of one day's population that the norms were computed from: with a
/// product's raw values they reproduce its norms exactly (what ExplainRank shows).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PopulationStats {
    /// Views of the day.
    pub views: AxisStats,
    /// Likes of the day.
    pub likes: AxisStats,
    /// Seconds from the latest event of the day (or the start of the day) to the reference.
    pub recency: AxisStats,
}

impl Default for PopulationStats {
    fn default() -> Self {
        let empty = AxisStats { mean: 0.0, std: 0.0, count: 0 };
        Self { views: empty, likes: empty, recency: empty }
    }
}

/// The encoded population of one day.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DayRanking {
    /// Entries in the order of the contenders given.
    pub entries: Vec<RankedEntry>,
    /// How many main scores were clamped to 2^22 − 1.
    pub clamped: usize,
    /// The statistics the norms come from.
    pub stats: PopulationStats,
}

/// Recency's raw value: seconds from the product's latest event of the day (the start of the
/// day for a carry-only product) to the reference instant.
pub fn elapsed_seconds(last_event_us: Option<i64>, day_start_us: i64, reference_us: i64) -> f64 {
    (reference_us - last_event_us.unwrap_or(day_start_us)) as f64 / 1e6
}

/// Normalises the population's axes and encodes every contender's score.
///
/// `day_start_us` is the start of the ranking day (the recency origin of carry-only
/// products) and `reference_us` the instant recency is measured to. The reference cancels
/// out of the z-score in exact arithmetic; passing a fixed one (the end of the day) keeps the
/// floating-point result identical across rebuilds.
pub fn rank_day(contenders: &[Contender], day_start_us: i64, reference_us: i64) -> DayRanking {
    let (entries, clamped, stats) =
        rank_population(contenders, day_start_us, reference_us, |product_id, breakdown, score| RankedEntry {
            product_id,
            breakdown,
            score,
        });
    DayRanking { entries, clamped, stats }
}

/// [`rank_day`] into entries of the caller's choice: each contender becomes `entry(product,
/// breakdown, score)` (a recompute keeps 16 bytes of a product, not its breakdown, and keeps
/// the population's buffer for the next population). Returns the entries in the order of the
/// contenders, how many main scores were clamped, and the statistics.
pub fn rank_population<T>(
    contenders: &[Contender],
    day_start_us: i64,
    reference_us: i64,
    mut entry: impl FnMut(i64, ScoreBreakdown, EncodedScore) -> T,
) -> (Vec<T>, usize, PopulationStats) {
    let elapsed = |c: &Contender| elapsed_seconds(c.last_event_us(), day_start_us, reference_us);
    let views = AxisStats::of(contenders.iter().map(|c| c.views as f64));
    let likes = AxisStats::of(contenders.iter().map(|c| c.likes as f64));
    let recency = AxisStats::of(contenders.iter().map(elapsed));

    let mut clamped = 0;
    let entries = contenders
        .iter()
        .map(|c| {
            let (breakdown, clamp) = ScoreBreakdown::clamped(
                main_floor(c.main),
                views.norm(c.views as f64),
                likes.norm(c.likes as f64),
                999 - recency.norm(elapsed(c)),
            );
            if clamp == Clamp::Clamped {
                clamped += 1;
            }
            entry(c.product_id, breakdown, breakdown.encode())
        })
        .collect();
    (entries, clamped, PopulationStats { views, likes, recency })
}

/// The integer part of a main score as the encoding receives it.
pub fn main_floor(main: f64) -> i64 {
    // `as` saturates: an absurdly large main score becomes i64::MAX and is then clamped.
    main.floor() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::score::DailyMetrics;

    fn contender(product_id: i64, main: f64, views: i64, likes: i64, last: Option<i64>) -> Contender {
        Contender::new(product_id, DayStanding { main, metrics: DailyMetrics { views, likes, order_amount: 0 } }, last)
    }

    #[test]
    fn a_contender_is_40_bytes_and_keeps_its_last_event() {
        assert_eq!(std::mem::size_of::<Contender>(), 40);
        for last in [None, Some(0), Some(-1), Some(i64::MAX), Some(1_764_547_200_000_000)] {
            assert_eq!(contender(1, 1.0, 0, 0, last).last_event_us(), last);
        }
    }

    #[test]
    fn single_product_gets_500_on_every_axis() {
        let r = rank_day(&[contender(1, 5.5, 10, 3, Some(1_000))], 0, 86_400_000);
        let b = r.entries[0].breakdown;
        assert_eq!((b.main_floor, b.view_norm, b.like_norm, b.recency_norm), (5, 500, 500, 499));
    }

    #[test]
    fn ties_on_main_are_broken_by_views_then_likes_then_recency() {
        let day_end = 86_400_000;
        let r = rank_day(
            &[
                contender(1, 5.9, 10, 1, Some(1_000)),
                contender(2, 5.1, 20, 1, Some(1_000)),
                contender(3, 5.1, 10, 9, Some(1_000)),
                contender(4, 5.1, 10, 1, Some(80_000_000)),
                contender(5, 5.1, 10, 1, Some(1_000)),
            ],
            0,
            day_end,
        );
        let mut order: Vec<_> = r.entries.iter().map(|e| (e.score.0, e.product_id)).collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0));
        let ids: Vec<_> = order.iter().map(|(_, id)| *id).collect();
        assert_eq!(ids, vec![2, 3, 4, 1, 5]);
    }

    #[test]
    fn newer_events_score_higher_recency_and_carry_only_counts_from_day_start() {
        let r = rank_day(&[contender(1, 1.0, 0, 0, Some(3_600_000)), contender(2, 1.0, 0, 0, None)], 0, 86_400_000);
        assert!(r.entries[0].breakdown.recency_norm > r.entries[1].breakdown.recency_norm);
    }

    #[test]
    fn reference_time_does_not_change_the_result_for_simple_values() {
        let c = [contender(1, 1.0, 0, 0, Some(0)), contender(2, 1.0, 0, 0, Some(43_200_000))];
        let a = rank_day(&c, 0, 86_400_000);
        let b = rank_day(&c, 0, 2 * 86_400_000);
        // The scores are the same; the recency statistics are measured to another instant.
        assert_eq!(a.entries, b.entries);
    }

    #[test]
    fn clamped_mains_are_counted() {
        let r = rank_day(&[contender(1, 5e6, 0, 0, Some(0))], 0, 1);
        assert_eq!(r.clamped, 1);
        assert_eq!(r.entries[0].breakdown.main_floor, crate::domain::encoding::MAX_MAIN_FLOOR);
    }
}
