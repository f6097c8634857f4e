//! The trending board checked against written-out models.

use super::*;
use proptest::prelude::*;

const H: i64 = HOUR_US;

fn built_in() -> ScoringProfile {
    ScoringProfile::built_in()
}

fn hour(start_us: i64, views: i64, likes: i64, amount: i64) -> TrendingHour {
    let metrics = DailyMetrics::counts(views, likes, i64::from(amount > 0), amount);
    TrendingHour::of(&built_in(), start_us, &metrics, start_us + H / 2)
}

/// A product's trending main score at `t` with a half-life of `half_life`.
fn main_at(hours: &[TrendingHour], t: i64, half_life: i64) -> f64 {
    TrendingContender::at(&built_in(), 1, hours, t, half_life).expect("in the window").main
}

#[test]
fn the_hour_under_way_weighs_one_and_a_half_life_halves() {
    let half_life = 6 * H;
    let t = 100 * H + H / 2;
    assert_eq!(hour_end(100 * H, t), t, "the hour under way ends at T");
    assert_eq!(hour_end(94 * H, t), 95 * H);
    assert_eq!(weight(t, t, half_life), 1.0);
    assert_eq!(weight(6 * H, 0, half_life), 0.5);
    assert_eq!(weight(12 * H, 0, half_life), 0.25);
    let now = hour(100 * H, 30, 0, 0);
    assert_eq!(main_at(&[now], t, half_life), now.main);
    // Ended at 95 h: 5.5 h before T.
    let past = hour(94 * H, 80, 0, 0);
    assert_eq!(main_at(&[past], t, half_life), past.main * (-5.5f64 / 6.0).exp2());
}

#[test]
fn hours_after_t_are_left_out() {
    let hours = [hour(0, 10, 0, 0), hour(2 * H, 50, 0, 0)];
    assert_eq!(main_at(&hours, H, 6 * H), hours[0].main, "the second hour starts after T");
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

fn row(product_id: i64, start_us: i64, views: i64) -> HourRow {
    HourRow { product_id, start_us, metrics: DailyMetrics::counts(views, 0, 0, 0), last_event_us: start_us + 1 }
}

#[test]
fn hours_applied_after_a_load_equal_the_hours_loaded_at_once() {
    let profile = built_in();
    let first = [row(2, 10 * H, 3), row(1, 11 * H, 4), row(1, 10 * H, 1)];
    let later = [row(1, 11 * H, 9), row(3, 12 * H, 2), row(2, 12 * H, 5)];
    let mut kept = TrendingHours::of(&profile, first);
    kept.apply(&profile, later);
    let whole = TrendingHours::of(
        &profile,
        [row(1, 10 * H, 1), row(1, 11 * H, 9), row(2, 10 * H, 3), row(2, 12 * H, 5), row(3, 12 * H, 2)],
    );
    assert_eq!(kept, whole);
    assert_eq!(kept.of_product(1).iter().map(|h| h.start_us).collect::<Vec<_>>(), vec![10 * H, 11 * H]);
    let (a, b) = (kept.contenders(&profile, 12 * H + 5, 6 * H), whole.contenders(&profile, 12 * H + 5, 6 * H));
    assert_eq!(
        a.iter().map(|c| c.main.to_bits()).collect::<Vec<_>>(),
        b.iter().map(|c| c.main.to_bits()).collect::<Vec<_>>()
    );
    assert_eq!(a.iter().map(|c| c.product_id).collect::<Vec<_>>(), vec![1, 2, 3]);
    kept.forget_before(11 * H + WINDOW_HOURS * H);
    assert_eq!(kept.len(), 3, "the hours starting at 10 h left the window");
}

proptest! {
    /// Rows applied in any split and order hold what they hold loaded at once, the last
    /// of a row given twice winning.
    #[test]
    fn any_split_of_the_rows_holds_the_same(
        rows in proptest::collection::vec((0i64..6, 0i64..6, 0i64..100), 0..40),
        split in 0usize..40,
    ) {
        let profile = built_in();
        let rows: Vec<HourRow> = rows.iter().map(|(p, h, v)| row(*p, *h * H, *v)).collect();
        let split = split.min(rows.len());
        let mut kept = TrendingHours::of(&profile, rows[..split].iter().copied());
        kept.apply(&profile, rows[split..].iter().copied());
        let mut last: std::collections::BTreeMap<(i64, i64), HourRow> = std::collections::BTreeMap::new();
        for r in &rows {
            last.insert((r.product_id, r.start_us), *r);
        }
        prop_assert_eq!(kept, TrendingHours::of(&profile, last.into_values()));
    }

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
        views in proptest::collection::vec(0i64..10_000_000, 1..WINDOW_HOURS as usize),
        offset in 0i64..H,
        half_life_h in 1i64..48,
    ) {
        let rows: Vec<HourRow> = views.iter().enumerate().map(|(i, v)| row(1, i as i64 * H, *v)).collect();
        let hours = TrendingHours::of(&built_in(), rows.iter().copied()).of_product(1);
        let t = (views.len() as i64 - 1) * H + offset;
        let half_life = half_life_h * H;
        let model = hours.iter().fold(0.0f64, |sum, h| {
            let end = (h.start_us + H).min(t);
            sum + h.main * 0.5f64.powf((t - end) as f64 / half_life as f64)
        });
        let score = main_at(&hours, t, half_life);
        prop_assert!((score - model).abs() <= model.abs() * 1e-12, "{score} vs {model}");
        let explained = explain_trending(&built_in(), 1, &rows, &PopulationStats::default(), t, half_life);
        let summed = explained.hours.iter().fold(0.0, |s, h| s + h.points);
        prop_assert_eq!(summed.to_bits(), score.to_bits());
    }
}

proptest! {
    /// The explanation of any product of a board reproduces its served score bit for bit, and
    /// its hours' points add up (oldest first) to its main score.
    #[test]
    fn an_explanation_reproduces_the_served_score(
        rows in proptest::collection::vec((0i64..8, 0i64..200, 0i64..400), 1..60),
        offset in 0i64..H,
        half_life_h in 1i64..24,
    ) {
        let profile = built_in();
        let t = 300 * H + offset;
        let rows: Vec<HourRow> = rows.iter().map(|(p, h, v)| row(*p, t - offset - *h * H, *v)).collect();
        let held = TrendingHours::of(&profile, rows.iter().copied());
        let contenders = held.contenders(&profile, t, half_life_h * H);
        let (entries, _, stats) = rank_trending(&profile, &contenders, |p, _, score| (p, score));
        for (product, score) in entries {
            let e = explain_trending(&profile, product, &rows, &stats, t, half_life_h * H);
            prop_assert_eq!(e.score.to_bits(), score.to_bits(), "product {}", product);
            let summed = e.hours.iter().fold(0.0, |s, h| s + h.points);
            prop_assert_eq!(summed.to_bits(), e.main.to_bits());
        }
    }
}
