//! The trending board's arithmetic: what rises now. A product's hours of counts, each
//! scored by the profile's main score without carry-over, weigh `2^(−(T − end(h)) / half_life)`
//! at instant T, where `end(h)` is the hour's end, or T itself for the hour under way; the
//! trending score is their sum, taken oldest hour first so that every computation of the same
//! hours at the same T (a recompute, a live pass, an explanation) gives the same double.

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

    proptest! {
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
