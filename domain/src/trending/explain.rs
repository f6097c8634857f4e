//! Why a product holds its place on the trending board at T: each hour of the window with
//! its main score, its weight at T and its decayed points, which add up (oldest first) to the
//! served main score; and each tie-break axis against the board's statistics. Computed by the
//! board's own functions, so the numbers reproduce the served score bit for bit whenever the
//! hours have not changed since the version was computed.

use super::{HourRow, TrendingContender, TrendingHours, hour_end, in_window, weight};
use crate::explain::{Axis, axes_of, packed};
use crate::layout::{Breakdown, MAX_AXES};
use crate::profile::ScoringProfile;
use crate::ranking::PopulationStats;

/// One hour of the window and what it adds at T.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HourPoints {
    /// The hour's start, Unix microseconds.
    pub start_us: i64,
    /// The profile's main score of the hour's counts.
    pub main: f64,
    /// `2^(−(T − end) / half_life)`: 1 for the hour under way.
    pub weight: f64,
    /// `main · weight`.
    pub points: f64,
}

/// A product's trending score taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendingExplanation {
    /// The hours in the window, oldest first.
    pub hours: Vec<HourPoints>,
    /// The trending main score: the hours' points added oldest first.
    pub main: f64,
    /// Every axis against the board's population, in the profile's order.
    pub axes: Vec<Axis>,
    /// The integer part and norms as the encoding receives them.
    pub breakdown: Breakdown,
    /// The encoded score these numbers give.
    pub score: f64,
}

/// Explains `product_id`'s trending score at `t_us` from its hourly `rows` and the board's
/// statistics.
pub fn explain_trending(
    profile: &ScoringProfile,
    product_id: i64,
    rows: &[HourRow],
    stats: &PopulationStats,
    t_us: i64,
    half_life_us: i64,
) -> TrendingExplanation {
    let held = TrendingHours::of(profile, rows.iter().copied().filter(|r| r.product_id == product_id));
    let hours = held.of_product(product_id);
    let listed: Vec<HourPoints> = hours
        .iter()
        .filter(|h| in_window(h.start_us, t_us))
        .map(|h| {
            let weight = weight(t_us, hour_end(h.start_us, t_us), half_life_us);
            HourPoints { start_us: h.start_us, main: h.main, weight, points: h.main * weight }
        })
        .collect();
    let contender = TrendingContender::at(profile, product_id, &hours, t_us, half_life_us);
    let (main, raws) = contender.map_or((0.0, [0.0; MAX_AXES]), |c| (c.main, c.axes));
    let axes = axes_of(profile, stats, |i, _| raws[i]);
    let (breakdown, score) = packed(profile, main, &axes);
    TrendingExplanation { hours: listed, main, axes, breakdown, score }
}
