//! The positional encoding of a scoring profile: the integer part of the main
//! score and 1–4 tie-break norms of 1–4 decimal digits each, packed into one `f64`.
//!
//! With `D = Σ digits ≤ 12`, `score = (floor(main)·10^D + Σ norm_i·10^(D − d_1 − … − d_i)) / 10^D`,
//! formed as an exact integer and divided once. The integer part is clamped below
//! `B = 2^⌊52 − D·log2 10⌋`, the largest power of two with `B·10^D ≤ 2^52`: every numerator
//! is then below 2^53 (an exact `f64`), and the doubles in `[0, 2B)` are spaced at most
//! `B·2^−52 ≤ 10^−D` apart, so the encoding is injective, order-preserving and exactly
//! invertible. One digit more would need `B·10^(D+1) ≤ 2^52`, which the choice of `B` rules
//! out: the clamp is the true bound of the layout. The built-in layout (3, 3, 3) is §4's:
//! `D = 9`, `B = 2^22`.

/// Most tie-break axes.
pub const MAX_AXES: usize = 4;
/// Most digits of one axis.
pub const MAX_AXIS_DIGITS: u8 = 4;
/// Most digits in all.
pub const MAX_DIGITS: u32 = 12;

/// Why a layout cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// No axis, or more than [`MAX_AXES`].
    #[error("a profile has 1-{MAX_AXES} tie-break axes, got {0}")]
    Axes(usize),
    /// An axis of 0 or more than [`MAX_AXIS_DIGITS`] digits.
    #[error("axes[{axis}].digits must be 1-{MAX_AXIS_DIGITS}, got {digits}")]
    Digits {
        /// The axis, 0-based.
        axis: usize,
        /// Its digits.
        digits: u8,
    },
    /// More than [`MAX_DIGITS`] digits in all.
    #[error("the axes have {0} digits in all, more than {MAX_DIGITS}")]
    TooManyDigits(u32),
}

/// A score taken apart: the clamped integer part of the main score and the norm of each
/// axis, most significant first. `Copy` and allocation-free: every entry of a page has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Breakdown {
    /// `floor(main)`, below the layout's bound.
    pub main_floor: u64,
    norms: [u32; MAX_AXES],
    axes: u8,
    /// The norms are the built-in profile's views, likes and recency (the original
    /// three named norms); set by whoever knows the profile, not by the encoding.
    pub built_in_axes: bool,
}

impl Breakdown {
    /// A breakdown of `norms` (at most [`MAX_AXES`]; more are dropped).
    pub fn new(main_floor: u64, norms: &[u32]) -> Self {
        let mut all = [0; MAX_AXES];
        let axes = norms.len().min(MAX_AXES);
        all[..axes].copy_from_slice(&norms[..axes]);
        Self { main_floor, norms: all, axes: axes as u8, built_in_axes: false }
    }

    /// The norms, most significant first.
    pub fn norms(&self) -> &[u32] {
        &self.norms[..usize::from(self.axes)]
    }
}

/// Digits per axis, most significant first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    digits: Vec<u8>,
    /// `10^(D − d_1 − … − d_i)`, the place of each axis's norm.
    places: Vec<u64>,
    /// `10^D`.
    scale: u64,
    /// `B`: integer parts are clamped below it.
    bound: u64,
}

impl Layout {
    /// The layout of axes of `digits` each, most significant first.
    pub fn new(digits: &[u8]) -> Result<Self, LayoutError> {
        if digits.is_empty() || digits.len() > MAX_AXES {
            return Err(LayoutError::Axes(digits.len()));
        }
        if let Some((axis, &d)) = digits.iter().enumerate().find(|(_, d)| **d == 0 || **d > MAX_AXIS_DIGITS) {
            return Err(LayoutError::Digits { axis, digits: d });
        }
        let total: u32 = digits.iter().map(|d| u32::from(*d)).sum();
        if total > MAX_DIGITS {
            return Err(LayoutError::TooManyDigits(total));
        }
        let scale = 10u64.pow(total);
        let mut left = total;
        let places = digits
            .iter()
            .map(|d| {
                left -= u32::from(*d);
                10u64.pow(left)
            })
            .collect();
        Ok(Self { digits: digits.to_vec(), places, scale, bound: bound_of(scale) })
    }

    /// §4's layout: views, likes, recency, three digits each.
    pub fn built_in() -> Self {
        // Three axes of three digits are within every limit.
        Self::new(&[3, 3, 3]).unwrap_or_else(|_| unreachable!("the built-in layout is valid"))
    }

    /// Digits per axis.
    pub fn digits(&self) -> &[u8] {
        &self.digits
    }

    /// `D`, the digits in all.
    pub fn total_digits(&self) -> u32 {
        self.scale.ilog10()
    }

    /// `B`: the integer part of the main score is clamped to `B − 1`.
    pub fn bound(&self) -> u64 {
        self.bound
    }

    /// The largest norm of axis `i`: `10^digits − 1`.
    pub fn max_norm(&self, axis: usize) -> u32 {
        10u32.pow(u32::from(self.digits[axis])) - 1
    }

    /// The floor of a main score within the layout's range, and whether it was clamped.
    pub fn clamp(&self, main_floor: i64) -> (u64, bool) {
        // A negative floor can only come from negative weights, which profiles refuse.
        let floor = u64::try_from(main_floor.max(0)).unwrap_or(0);
        if floor >= self.bound { (self.bound - 1, true) } else { (floor, false) }
    }

    /// The exact numerator of a clamped floor and its norms (each capped at its axis's
    /// largest, so that it can never spill into the next digit group).
    pub fn numerator(&self, main_floor: u64, norms: &[u32]) -> u64 {
        let floor = main_floor.min(self.bound - 1);
        let parts = norms.iter().zip(&self.places).enumerate();
        floor * self.scale + parts.map(|(i, (n, place))| u64::from((*n).min(self.max_norm(i))) * place).sum::<u64>()
    }

    /// [`Layout::encode`] of a breakdown.
    pub fn encode_breakdown(&self, b: &Breakdown) -> f64 {
        self.encode(b.main_floor, b.norms())
    }

    /// The packed score: the numerator, below 2^53 and so exact as an `f64`, divided once.
    pub fn encode(&self, main_floor: u64, norms: &[u32]) -> f64 {
        self.numerator(main_floor, norms) as f64 / self.scale as f64
    }

    /// The floor and norms a score packs, `None` when it is not a score of this layout.
    ///
    /// `round(score·10^D)` can be off by one because the multiplication rounds a second
    /// time; the neighbours are checked against the encoding itself.
    pub fn decode(&self, score: f64) -> Option<Breakdown> {
        if !score.is_finite() || score < 0.0 {
            return None;
        }
        let limit = self.bound * self.scale;
        let guess = (score * self.scale as f64).round();
        if guess >= (limit + 1) as f64 {
            return None;
        }
        let guess = guess as u64;
        let n = [guess, guess.wrapping_sub(1), guess + 1]
            .into_iter()
            .find(|n| *n < limit && *n as f64 / self.scale as f64 == score)?;
        let mut norms = [0; MAX_AXES];
        for (i, (place, d)) in self.places.iter().zip(&self.digits).enumerate() {
            norms[i] = u32::try_from((n / place) % 10u64.pow(u32::from(*d))).unwrap_or(0);
        }
        Some(Breakdown { main_floor: n / self.scale, norms, axes: self.digits.len() as u8, built_in_axes: false })
    }
}

/// The largest power of two `B` with `B·scale ≤ 2^52`.
fn bound_of(scale: u64) -> u64 {
    let mut bound = 1u64;
    while u128::from(bound) * 2 * u128::from(scale) <= 1u128 << 52 {
        bound *= 2;
    }
    bound
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::encoding::{MAX_MAIN_FLOOR, ScoreBreakdown};

    #[test]
    fn the_built_in_layout_is_the_original_encoding() {
        let layout = Layout::built_in();
        assert_eq!((layout.total_digits(), layout.bound()), (9, 1 << 22));
        assert_eq!(layout.bound() - 1, u64::from(MAX_MAIN_FLOOR));
        assert_eq!(layout.encode(5, &[700, 500, 800]), 5.700_500_8);
        let b = ScoreBreakdown { main_floor: 4_194_303, view_norm: 999, like_norm: 1, recency_norm: 998 };
        assert_eq!(layout.encode(4_194_303, &[999, 1, 998]).to_bits(), b.encode().0.to_bits());
        assert_eq!(layout.clamp(1 << 22), ((1 << 22) - 1, true));
    }

    #[test]
    fn bounds_follow_the_digits() {
        for (digits, total, bound) in [
            (&[1][..], 1, 1u64 << 48),
            (&[3, 3, 3], 9, 1 << 22),
            (&[4, 4, 4], 12, 1 << 12),
            (&[2, 3, 4, 1], 10, 1 << 18),
        ] {
            let layout = Layout::new(digits).expect("valid");
            assert_eq!((layout.total_digits(), layout.bound()), (total, bound), "{digits:?}");
            // 52 − D·log2 10, floored.
            assert_eq!(bound.ilog2(), (52.0 - f64::from(total) * 10f64.log2()).floor() as u32);
        }
        assert_eq!(Layout::new(&[]), Err(LayoutError::Axes(0)));
        assert_eq!(Layout::new(&[1, 1, 1, 1, 1]), Err(LayoutError::Axes(5)));
        assert_eq!(Layout::new(&[3, 0]), Err(LayoutError::Digits { axis: 1, digits: 0 }));
        assert_eq!(Layout::new(&[4, 4, 4, 1]), Err(LayoutError::TooManyDigits(13)));
    }

    /// A valid layout and values within it: (layout, floor, norms).
    fn layout_and_value() -> impl Strategy<Value = (Layout, u64, Vec<u32>)> {
        proptest::collection::vec(1u8..=4, 1..=4)
            .prop_filter("at most 12 digits", |d| d.iter().map(|d| u32::from(*d)).sum::<u32>() <= MAX_DIGITS)
            .prop_flat_map(|digits| {
                let layout = Layout::new(&digits).expect("valid");
                let norms: Vec<_> = (0..digits.len()).map(|i| 0..=layout.max_norm(i)).collect();
                // Floors near the bound are where exactness is tested hardest.
                let floor = prop_oneof![0..layout.bound(), (layout.bound() - 64)..layout.bound()];
                (Just(layout), floor, norms)
            })
    }

    proptest! {
        #[test]
        fn any_layout_decodes_exactly_up_to_its_clamp((layout, floor, norms) in layout_and_value()) {
            let score = layout.encode(floor, &norms);
            prop_assert_eq!(layout.decode(score), Some(Breakdown::new(floor, &norms)));
        }

        #[test]
        fn any_layout_orders_scores_as_their_parts((layout, floor, norms) in layout_and_value(),
                                                  (f2, n2) in (0u64..64, proptest::collection::vec(0u32..10_000, 4))) {
            let other_floor = floor.saturating_sub(f2);
            let other: Vec<u32> = n2.iter().take(norms.len()).enumerate().map(|(i, n)| n % (layout.max_norm(i) + 1)).collect();
            let (a, b) = (layout.encode(floor, &norms), layout.encode(other_floor, &other));
            prop_assert_eq!(a.partial_cmp(&b), Some((floor, &norms).cmp(&(other_floor, &other))));
        }

        #[test]
        fn one_digit_more_than_the_layout_breaks_at_its_clamp(digits in proptest::collection::vec(1u8..=4, 1..=3)
            .prop_filter("a digit left", |d| d.iter().map(|d| u32::from(*d)).sum::<u32>() < MAX_DIGITS)) {
            // The same bound with one more digit: some neighbouring numerators just below
            // the bound collide, so the bound is exactly what the layout's digits allow.
            let layout = Layout::new(&digits).expect("valid");
            let scale = layout.scale as f64 * 10.0;
            let top = (layout.bound() * layout.scale * 10) - 1;
            let collides = (0..1_000u64).any(|k| (top - k - 1) as f64 / scale == (top - k) as f64 / scale);
            prop_assert!(collides, "{digits:?}: no collision below {}", layout.bound());
        }
    }
}
