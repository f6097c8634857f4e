//! Positional encoding of the four ranking dimensions into one `f64` (a Redis ZSET score).
//!
//! `score = (main_floor·10^9 + view_norm·10^6 + like_norm·10^3 + recency_norm) / 10^9`.
//! The numerator is formed as an exact integer and divided once, so the only rounding is the
//! final division. Below 2^22 for the integer part the spacing of `f64` values (≤ 2^-30) is
//! finer than the 10^-9 step of the encoding, which makes the encoding injective, strictly
//! order-preserving and exactly invertible.

/// Largest main-score integer part that still decodes exactly: 2^22 − 1.
pub const MAX_MAIN_FLOOR: u32 = (1 << 22) - 1;

/// Largest value of a normalised tie-break axis.
pub const MAX_NORM: u16 = 999;

const SCALE: f64 = 1e9;

/// The four dimensions of a daily score, in order of significance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScoreBreakdown {
    /// Integer part of the main score, `0..=MAX_MAIN_FLOOR`.
    pub main_floor: u32,
    /// Normalised views, `0..=999`.
    pub view_norm: u16,
    /// Normalised likes, `0..=999`.
    pub like_norm: u16,
    /// Normalised recency (newer is higher), `0..=999`.
    pub recency_norm: u16,
}

/// A score as stored in a ranking: the packed `f64`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct EncodedScore(pub f64);

/// Whether [`ScoreBreakdown::clamped`] had to cut the main score down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clamp {
    /// The main score fitted.
    Exact,
    /// The main score was at or above 2^22 and was stored as 2^22 − 1.
    Clamped,
}

impl ScoreBreakdown {
    /// Builds a breakdown from a main score's floor, clamping it into the exact range.
    ///
    /// Norms above 999 are a programming error upstream; they are capped so that they can
    /// never spill into the next digit group.
    pub fn clamped(main_floor: i64, view_norm: u16, like_norm: u16, recency_norm: u16) -> (Self, Clamp) {
        let (main_floor, clamp) = if main_floor > i64::from(MAX_MAIN_FLOOR) {
            (MAX_MAIN_FLOOR, Clamp::Clamped)
        } else {
            // A negative floor can only come from negative weights, which configuration
            // rejects; treat it as zero rather than wrapping.
            (u32::try_from(main_floor.max(0)).unwrap_or(0), Clamp::Exact)
        };
        let breakdown = Self {
            main_floor,
            view_norm: view_norm.min(MAX_NORM),
            like_norm: like_norm.min(MAX_NORM),
            recency_norm: recency_norm.min(MAX_NORM),
        };
        (breakdown, clamp)
    }

    /// The exact integer numerator `main·10^9 + view·10^6 + like·10^3 + recency`.
    pub fn numerator(&self) -> u64 {
        u64::from(self.main_floor) * 1_000_000_000
            + u64::from(self.view_norm) * 1_000_000
            + u64::from(self.like_norm) * 1_000
            + u64::from(self.recency_norm)
    }

    /// Packs the breakdown into one `f64`.
    pub fn encode(&self) -> EncodedScore {
        // The numerator is below 2^22·10^9 < 2^53, so the conversion is exact.
        EncodedScore(self.numerator() as f64 / SCALE)
    }
}

impl EncodedScore {
    /// Recovers the breakdown, or `None` when the value is not a score this encoding produces.
    ///
    /// `round(score·10^9)` can be off by one near the top of the range because the
    /// multiplication rounds a second time; the neighbours are checked against the encoding
    /// itself so that decoding is exact for every encodable value.
    pub fn decode(self) -> Option<ScoreBreakdown> {
        let score = self.0;
        if !score.is_finite() || score < 0.0 {
            return None;
        }
        let guess = (score * SCALE).round();
        if guess >= (u64::from(MAX_MAIN_FLOOR) + 1) as f64 * SCALE + SCALE {
            return None;
        }
        let guess = guess as u64;
        [guess, guess.wrapping_sub(1), guess + 1]
            .into_iter()
            .filter(|n| *n < (u64::from(MAX_MAIN_FLOOR) + 1) * 1_000_000_000)
            .find(|n| *n as f64 / SCALE == score)
            .and_then(split_digits)
    }
}

fn split_digits(n: u64) -> Option<ScoreBreakdown> {
    let group = |shift: u64| u16::try_from((n / shift) % 1_000).ok();
    Some(ScoreBreakdown {
        main_floor: u32::try_from(n / 1_000_000_000).ok()?,
        view_norm: group(1_000_000)?,
        like_norm: group(1_000)?,
        recency_norm: group(1)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn breakdown(main_floor: u32, v: u16, l: u16, r: u16) -> ScoreBreakdown {
        ScoreBreakdown { main_floor, view_norm: v, like_norm: l, recency_norm: r }
    }

    #[test]
    fn article_vector_encodes_to_5_700500800() {
        let score = breakdown(5, 700, 500, 800).encode();
        assert_eq!(score.0, 5.700500800);
        assert_eq!(score.decode(), Some(breakdown(5, 700, 500, 800)));
    }

    #[test]
    fn extremes_round_trip() {
        for b in [
            breakdown(0, 0, 0, 0),
            breakdown(0, 0, 0, 1),
            breakdown(MAX_MAIN_FLOOR, 999, 999, 999),
            breakdown(MAX_MAIN_FLOOR, 0, 0, 0),
            breakdown(MAX_MAIN_FLOOR - 1, 999, 999, 999),
        ] {
            assert_eq!(b.encode().decode(), Some(b), "{b:?}");
        }
    }

    #[test]
    fn main_at_or_above_2_pow_22_is_clamped_without_touching_the_digits() {
        let (b, clamp) = ScoreBreakdown::clamped(1 << 22, 123, 456, 789);
        assert_eq!(clamp, Clamp::Clamped);
        assert_eq!(b, breakdown(MAX_MAIN_FLOOR, 123, 456, 789));
        assert_eq!(b.encode().decode(), Some(b));

        let (b, clamp) = ScoreBreakdown::clamped(i64::MAX, 1, 2, 3);
        assert_eq!(clamp, Clamp::Clamped);
        assert_eq!(b.encode().decode(), Some(breakdown(MAX_MAIN_FLOOR, 1, 2, 3)));

        let (b, clamp) = ScoreBreakdown::clamped(i64::from(MAX_MAIN_FLOOR), 1, 2, 3);
        assert_eq!(clamp, Clamp::Exact);
        assert_eq!(b.main_floor, MAX_MAIN_FLOOR);
    }

    #[test]
    fn garbage_does_not_decode() {
        assert_eq!(EncodedScore(f64::NAN).decode(), None);
        assert_eq!(EncodedScore(-1.0).decode(), None);
        assert_eq!(EncodedScore(f64::INFINITY).decode(), None);
        assert_eq!(EncodedScore(5e6).decode(), None);
    }

    fn any_breakdown() -> impl Strategy<Value = ScoreBreakdown> {
        (0..=MAX_MAIN_FLOOR, 0..=MAX_NORM, 0..=MAX_NORM, 0..=MAX_NORM).prop_map(|(m, v, l, r)| breakdown(m, v, l, r))
    }

    /// Integer parts near 2^22 are where the `f64` grid is coarsest; test them densely.
    fn top_of_range_breakdown() -> impl Strategy<Value = ScoreBreakdown> {
        (MAX_MAIN_FLOOR - 1024..=MAX_MAIN_FLOOR, 0..=MAX_NORM, 0..=MAX_NORM, 0..=MAX_NORM)
            .prop_map(|(m, v, l, r)| breakdown(m, v, l, r))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn decode_inverts_encode(b in any_breakdown()) {
            prop_assert_eq!(b.encode().decode(), Some(b));
        }

        #[test]
        fn decode_inverts_encode_at_the_top(b in top_of_range_breakdown()) {
            prop_assert_eq!(b.encode().decode(), Some(b));
        }

        #[test]
        fn encode_is_strictly_order_preserving(a in any_breakdown(), b in any_breakdown()) {
            // Derived Ord on the struct is the lexicographic order of the four fields.
            prop_assert_eq!(a.cmp(&b), a.encode().0.partial_cmp(&b.encode().0).expect("finite"));
        }

        #[test]
        fn neighbours_stay_ordered_at_the_top(a in top_of_range_breakdown()) {
            let next = a.numerator() + 1;
            if let Some(b) = split_digits(next).filter(|b| b.view_norm <= 999 && b.like_norm <= 999 && b.recency_norm <= 999 && b.main_floor <= MAX_MAIN_FLOOR) {
                prop_assert!(a.encode().0 < b.encode().0);
            }
        }
    }
}
