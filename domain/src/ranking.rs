//! One day's ranking: the population's main scores and tie-break axes turned into encoded
//! scores, over the scoring profile's layout.

use super::layout::{Breakdown, Layout, MAX_AXES};
use super::normalize::AxisStats;
use super::profile::{AxisRef, ScoringProfile};
use super::score::DayStanding;

/// A product ranked on the day, before normalisation: what the normalisation reads of it, in
/// 48 bytes (a recompute holds a million of them; the signals only count through the main
/// score and the axes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contender {
    /// The product.
    pub product_id: i64,
    /// Main score on the day.
    pub main: f64,
    /// The raw value of each tie-break axis, in the profile's order: a signal's value, or
    /// for recency the latest `occurred_at` of the product that day in Unix microseconds
    /// ([`NO_EVENT`] for a product ranked through carry-over alone).
    axes: [i64; MAX_AXES],
}

/// The recency of a product without an event that day: no instant a shopper's event can
/// carry (292,000 years before the epoch), so an `Option` costs no more bytes.
const NO_EVENT: i64 = i64::MIN;

impl Contender {
    /// A contender with `standing` on the day under `profile`; `last_event_us` is `None` when
    /// the product is ranked through carry-over alone.
    pub fn new(profile: &ScoringProfile, product_id: i64, standing: DayStanding, last_event_us: Option<i64>) -> Self {
        let mut axes = [0; MAX_AXES];
        for (raw, axis) in axes.iter_mut().zip(profile.axes()) {
            *raw = match axis {
                AxisRef::Signal(signal) => signal.value(&standing.metrics),
                AxisRef::Recency => last_event_us.unwrap_or(NO_EVENT),
            };
        }
        Self { product_id, main: standing.main, axes }
    }
}

/// One entry of the finished ranking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedEntry {
    /// The product.
    pub product_id: i64,
    /// The integer part and the norms.
    pub breakdown: Breakdown,
    /// The packed score stored in the ranking.
    pub score: f64,
}

/// The statistics of one day's population that the norms were computed from, one per axis
/// in the profile's order: with a product's raw values they reproduce its norms exactly
/// (what ExplainRank shows). Recency's are of the seconds from the latest event of the day
/// (or the start of the day) to the reference.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PopulationStats {
    /// Per axis.
    pub axes: Vec<AxisStats>,
}

impl PopulationStats {
    /// The population the statistics are of.
    pub fn population(&self) -> usize {
        self.axes.first().map_or(0, |a| a.count)
    }
}

/// The encoded population of one day.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DayRanking {
    /// Entries in the order of the contenders given.
    pub entries: Vec<RankedEntry>,
    /// How many main scores were clamped below the layout's bound.
    pub clamped: usize,
    /// The statistics the norms come from.
    pub stats: PopulationStats,
}

/// Recency's raw value: seconds from the product's latest event of the day (the start of the
/// day for a carry-only product) to the reference instant.
pub fn elapsed_seconds(last_event_us: Option<i64>, day_start_us: i64, reference_us: i64) -> f64 {
    (reference_us - last_event_us.unwrap_or(day_start_us)) as f64 / 1e6
}

/// The raw value of axis `i` of `c` as the normalisation reads it.
fn raw(axis: AxisRef, value: i64, day_start_us: i64, reference_us: i64) -> f64 {
    match axis {
        AxisRef::Signal(_) => value as f64,
        AxisRef::Recency => elapsed_seconds((value != NO_EVENT).then_some(value), day_start_us, reference_us),
    }
}

/// The norm of a raw value on `axis` of `max + 1` steps: higher is better for a signal,
/// newer (fewer elapsed seconds) for recency.
pub fn axis_norm(axis: AxisRef, stats: &AxisStats, raw: f64, max: u32) -> u32 {
    match axis {
        AxisRef::Signal(_) => stats.norm_to(raw, max),
        AxisRef::Recency => max - stats.norm_to(raw, max),
    }
}

/// Normalises the population's axes and encodes every contender's score.
///
/// `day_start_us` is the start of the ranking day (the recency origin of carry-only
/// products) and `reference_us` the instant recency is measured to. The reference cancels
/// out of the z-score in exact arithmetic; passing a fixed one (the end of the day) keeps the
/// floating-point result identical across rebuilds.
pub fn rank_day(
    profile: &ScoringProfile,
    contenders: &[Contender],
    day_start_us: i64,
    reference_us: i64,
) -> DayRanking {
    let (entries, clamped, stats) =
        rank_population(profile, contenders, day_start_us, reference_us, |product_id, breakdown, score| RankedEntry {
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
    profile: &ScoringProfile,
    contenders: &[Contender],
    day_start_us: i64,
    reference_us: i64,
    mut entry: impl FnMut(i64, Breakdown, f64) -> T,
) -> (Vec<T>, usize, PopulationStats) {
    let layout = profile.layout();
    let axes = profile.axes();
    let stats: Vec<AxisStats> = axes
        .iter()
        .enumerate()
        .map(|(i, axis)| AxisStats::of(contenders.iter().map(|c| raw(*axis, c.axes[i], day_start_us, reference_us))))
        .collect();
    let max: Vec<u32> = (0..axes.len()).map(|i| layout.max_norm(i)).collect();
    // A signal's values are counts, most of them small and shared by many products: their
    // norms are computed once per value (the same function of the same input, so the same
    // bits) instead of an `exp` and a `round` per product.
    let small: Vec<Vec<u32>> = axes
        .iter()
        .enumerate()
        .map(|(i, axis)| match axis {
            AxisRef::Signal(_) => (0..SMALL_VALUES).map(|v| axis_norm(*axis, &stats[i], v as f64, max[i])).collect(),
            AxisRef::Recency => Vec::new(),
        })
        .collect();

    let mut clamped = 0;
    let mut norms = [0u32; MAX_AXES];
    let entries = contenders
        .iter()
        .map(|c| {
            for (i, axis) in axes.iter().enumerate() {
                let value = c.axes[i];
                norms[i] = match usize::try_from(value).ok().and_then(|v| small[i].get(v)) {
                    Some(norm) => *norm,
                    None => axis_norm(*axis, &stats[i], raw(*axis, value, day_start_us, reference_us), max[i]),
                };
            }
            let (breakdown, score, was_clamped) = pack(layout, c.main, &norms[..axes.len()]);
            clamped += usize::from(was_clamped);
            entry(c.product_id, breakdown, score)
        })
        .collect();
    (entries, clamped, PopulationStats { axes: stats })
}

/// A main score and its axes' norms packed as a board serves them: the main score's floor
/// clamped below the layout's bound, the breakdown, its encoded score, and whether the
/// floor was clamped.
pub fn pack(layout: &Layout, main: f64, norms: &[u32]) -> (Breakdown, f64, bool) {
    let (floor, clamped) = layout.clamp(main_floor(main));
    let breakdown = Breakdown::new(floor, norms);
    (breakdown, layout.encode_breakdown(&breakdown), clamped)
}

/// Signal values below this have their norms computed once per ranking.
const SMALL_VALUES: i64 = 4_096;

/// The integer part of a main score as the encoding receives it.
pub fn main_floor(main: f64) -> i64 {
    // `as` saturates: an absurdly large main score becomes i64::MAX and is then clamped.
    main.floor() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::DailyMetrics;

    fn contender(product_id: i64, main: f64, views: i64, likes: i64, last: Option<i64>) -> Contender {
        let metrics = DailyMetrics::counts(views, likes, 0, 0);
        Contender::new(&ScoringProfile::built_in(), product_id, DayStanding { main, metrics }, last)
    }

    fn rank_day(c: &[Contender], day_start_us: i64, reference_us: i64) -> DayRanking {
        super::rank_day(&ScoringProfile::built_in(), c, day_start_us, reference_us)
    }

    #[test]
    fn a_contender_is_48_bytes_and_keeps_its_last_event() {
        assert_eq!(std::mem::size_of::<Contender>(), 48);
        for last in [Some(0), Some(-1), Some(i64::MAX), Some(1_764_547_200_000_000)] {
            assert_eq!(contender(1, 1.0, 0, 0, last).axes[2], last.expect("an instant"));
        }
        assert_eq!(contender(1, 1.0, 0, 0, None).axes[2], NO_EVENT);
    }

    #[test]
    fn single_product_gets_500_on_every_axis() {
        let r = rank_day(&[contender(1, 5.5, 10, 3, Some(1_000))], 0, 86_400_000);
        let b = r.entries[0].breakdown;
        assert_eq!((b.main_floor, b.norms()), (5, &[500, 500, 499][..]));
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
        let mut order: Vec<_> = r.entries.iter().map(|e| (e.score, e.product_id)).collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0));
        let ids: Vec<_> = order.iter().map(|(_, id)| *id).collect();
        assert_eq!(ids, vec![2, 3, 4, 1, 5]);
    }

    #[test]
    fn newer_events_score_higher_recency_and_carry_only_counts_from_day_start() {
        let r = rank_day(&[contender(1, 1.0, 0, 0, Some(3_600_000)), contender(2, 1.0, 0, 0, None)], 0, 86_400_000);
        assert!(r.entries[0].breakdown.norms()[2] > r.entries[1].breakdown.norms()[2]);
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
        assert_eq!(r.entries[0].breakdown.main_floor, u64::from(crate::encoding::MAX_MAIN_FLOOR));
    }

    proptest::proptest! {
        /// The built-in profile ranks exactly as the original engine did: norms of 999
        /// steps from the same statistics and §4's fixed encoding, bit for bit.
        #[test]
        fn the_built_in_profile_encodes_as_the_fixed_formula(
            rows in proptest::collection::vec((0.0f64..6e6, 0i64..5_000, 0i64..300, proptest::option::of(0i64..86_400_000_000)), 1..60),
        ) {
            use crate::encoding::ScoreBreakdown;
            use crate::normalize::AxisStats;
            let contenders: Vec<Contender> =
                rows.iter().enumerate().map(|(i, (main, v, l, last))| contender(i as i64, *main, *v, *l, *last)).collect();
            let r = rank_day(&contenders, 0, 86_400_000_000);
            let elapsed = |last: &Option<i64>| elapsed_seconds(*last, 0, 86_400_000_000);
            let views = AxisStats::of(rows.iter().map(|r| r.1 as f64));
            let likes = AxisStats::of(rows.iter().map(|r| r.2 as f64));
            let recency = AxisStats::of(rows.iter().map(|r| elapsed(&r.3)));
            for (row, entry) in rows.iter().zip(&r.entries) {
                let (b, _) = ScoreBreakdown::clamped(
                    main_floor(row.0),
                    views.norm(row.1 as f64),
                    likes.norm(row.2 as f64),
                    999 - recency.norm(elapsed(&row.3)),
                );
                proptest::prop_assert_eq!(entry.score.to_bits(), b.encode().0.to_bits());
            }
        }
    }
}
