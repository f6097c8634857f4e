//! Normalisation of a tie-break axis over one day's population: z-score, then a sigmoid
//! scaled to the integers 0…999.
//!
//! Heterogeneous axes (views in the thousands, likes in the tens, recency in seconds) become
//! comparable three-digit groups of the encoded score.

/// Mean and population standard deviation of one axis over one day's population.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AxisStats {
    /// Arithmetic mean of the axis.
    pub mean: f64,
    /// Population standard deviation (divided by N, not N − 1).
    pub std: f64,
    /// Population size.
    pub count: usize,
}

impl AxisStats {
    /// Computes the statistics with two passes in the order given, so the same input in the
    /// same order always yields bit-identical results.
    pub fn of(values: impl Iterator<Item = f64> + Clone) -> Self {
        let (sum, count) = values.clone().fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        if count == 0 {
            return Self { mean: 0.0, std: 0.0, count };
        }
        let mean = sum / count as f64;
        let squares = values.fold(0.0, |acc, x| acc + (x - mean) * (x - mean));
        Self { mean, std: (squares / count as f64).sqrt(), count }
    }

    /// The z-score of `x`; 0 when the axis carries no information (N = 1 or std = 0).
    pub fn z(&self, x: f64) -> f64 {
        if self.count <= 1 || self.std == 0.0 || !self.std.is_finite() { 0.0 } else { (x - self.mean) / self.std }
    }

    /// `round(999 / (1 + e^(−z)))`, half away from zero: 0…999, 500 at the mean.
    pub fn norm(&self, x: f64) -> u16 {
        sigmoid_999(self.z(x))
    }
}

/// `round(max / (1 + e^(−z)))` with ties rounded away from zero: the norm of an axis of
/// `max + 1` steps (`10^digits − 1`). For 999 the same bits as [`sigmoid_999`].
pub fn sigmoid_steps(z: f64, max: u32) -> u32 {
    let scaled = (f64::from(max) / (1.0 + (-z).exp())).round();
    // Within 0…max as for `sigmoid_999`; the saturating cast maps NaN to 0.
    scaled as u32
}

impl AxisStats {
    /// The norm of `x` on an axis of `max + 1` steps, 0…max.
    pub fn norm_to(&self, x: f64, max: u32) -> u32 {
        sigmoid_steps(self.z(x), max)
    }
}

/// `round(999 / (1 + e^(−z)))` with ties rounded away from zero.
pub fn sigmoid_999(z: f64) -> u16 {
    let scaled = (999.0 / (1.0 + (-z).exp())).round();
    // The sigmoid lies in (0, 1), so `scaled` is within 0…999; NaN (never produced by `z`)
    // maps to 0 through the saturating cast.
    scaled as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn article_vector_norm_500_mean_200_std_150_is_880() {
        let stats = AxisStats { mean: 200.0, std: 150.0, count: 10 };
        assert_eq!(stats.norm(500.0), 880);
    }

    #[test]
    fn mean_maps_to_500_and_flat_axes_to_500() {
        let stats = AxisStats::of([1.0, 2.0, 3.0].into_iter());
        assert_eq!(stats.mean, 2.0);
        assert_eq!(stats.norm(2.0), 500);
        assert_eq!(AxisStats::of([7.0, 7.0, 7.0].into_iter()).norm(7.0), 500);
        assert_eq!(AxisStats::of([42.0].into_iter()).norm(42.0), 500);
    }

    #[test]
    fn population_std_divides_by_n() {
        let stats = AxisStats::of([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0].into_iter());
        assert_eq!(stats.mean, 5.0);
        assert_eq!(stats.std, 2.0);
    }

    #[test]
    fn extremes_saturate_within_range() {
        assert_eq!(sigmoid_999(1e9), 999);
        assert_eq!(sigmoid_999(-1e9), 0);
    }

    proptest! {
        #[test]
        fn steps_of_999_are_the_original_norm(z in -40.0f64..40.0) {
            prop_assert_eq!(sigmoid_steps(z, 999), u32::from(sigmoid_999(z)));
            prop_assert!(sigmoid_steps(z, 9) <= 9 && sigmoid_steps(z, 9_999) <= 9_999);
        }

        #[test]
        fn norm_is_monotone_and_bounded(values in prop::collection::vec(0.0f64..1e9, 1..200)) {
            let stats = AxisStats::of(values.iter().copied());
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let norms: Vec<u16> = sorted.iter().map(|x| stats.norm(*x)).collect();
            prop_assert!(norms.iter().all(|n| *n <= 999));
            prop_assert!(norms.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
