//! The main score of a product on a day, and carry-over from the previous day.
//!
//! `main(p, D) = views·w_view + likes·w_like + ln_1p(order_amount)·w_order + floor(main(p, D−1))·carry`,
//! evaluated left to right in `f64` exactly as written, so every replica and every rebuild
//! produces the same bits.

use std::collections::HashMap;

use super::encoding::MAX_MAIN_FLOOR;

/// Weights of the main score; the defaults are 0.1 per view, 0.2 per like, 0.6 per
/// ln(1 + order amount), and 0.1 of yesterday's integer part carried over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Weight of one view.
    pub view: f64,
    /// Weight of one like (net of unlikes).
    pub like: f64,
    /// Weight of `ln_1p(order amount)`.
    pub order: f64,
    /// Share of the previous day's integer part carried into today.
    pub carry_over: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self { view: 0.1, like: 0.2, order: 0.6, carry_over: 0.1 }
    }
}

/// One product's counters for one day, as stored in `product_daily_metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DailyMetrics {
    /// Views that day.
    pub views: i64,
    /// Likes that day (never below zero).
    pub likes: i64,
    /// Sum of order amounts that day, in the currency's minor unit.
    pub order_amount: i64,
}

impl Weights {
    /// `0.6·ln_1p(amount)` with the configured weight: the ORDER contribution.
    pub fn order_points(&self, amount: i64) -> f64 {
        (amount as f64).ln_1p() * self.order
    }

    /// The main score from the day's metrics and the carried integer part of yesterday.
    pub fn main_score(&self, metrics: &DailyMetrics, carried_floor: CarryOver) -> f64 {
        metrics.views as f64 * self.view
            + metrics.likes as f64 * self.like
            + (metrics.order_amount as f64).ln_1p() * self.order
            + carried_floor.0 as f64 * self.carry_over
    }
}

/// The integer part of yesterday's main score, which is what today inherits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CarryOver(pub i64);

impl CarryOver {
    /// `floor(main)`, clamped to the range the encoding represents exactly, so that what is
    /// carried is what yesterday's breakdown showed.
    pub fn of(main: f64) -> Self {
        let floor = main.floor();
        if floor.is_nan() || floor <= 0.0 { Self(0) } else { Self((floor as i64).min(i64::from(MAX_MAIN_FLOOR))) }
    }

    /// A product with no event on a day is still ranked when it inherits at least 1.
    pub fn keeps_ranked(&self) -> bool {
        self.0 >= 1
    }
}

/// Yesterday's carried integer parts, for every product that inherits at least 1.
///
/// The ledger is folded day by day, oldest first, starting `RANKING_CARRY_DAYS` days before
/// the ranking day with nothing carried in: carry-over is derived from SQL rows alone, reaches
/// back a bounded number of days, and never holds more than one day's population.
#[derive(Debug, Clone)]
pub struct CarryLedger {
    weights: Weights,
    carried: HashMap<i64, CarryOver>,
}

/// A product's standing on the ranking day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DayStanding {
    /// Main score on the day.
    pub main: f64,
    /// The day's metrics (zeros when the product had no event that day).
    pub metrics: DailyMetrics,
}

impl CarryLedger {
    /// An empty ledger: nothing carried.
    pub fn new(weights: Weights) -> Self {
        Self { weights, carried: HashMap::new() }
    }

    /// Closes the current day: `rows` are every metrics row of that day (any order). The
    /// result is the ledger of the next day.
    pub fn close_day(mut self, rows: impl IntoIterator<Item = (i64, DailyMetrics)>) -> Self {
        let mut next = HashMap::with_capacity(self.carried.len());
        for (product_id, metrics) in rows {
            let carried = self.carried.remove(&product_id).unwrap_or_default();
            let inherited = CarryOver::of(self.weights.main_score(&metrics, carried));
            if inherited.keeps_ranked() {
                next.insert(product_id, inherited);
            }
        }
        // Products without a row that day only decay.
        next.extend(
            self.carry_only().filter(|(_, s)| s.keeps_ranked_tomorrow()).map(|(id, s)| (id, CarryOver::of(s.main))),
        );
        Self { weights: self.weights, carried: next }
    }

    /// Standings of products with no row on the current day, ranked through carry-over alone
    /// (everyone left in the ledger inherits at least 1). Call after taking out the products
    /// that have rows, e.g. with [`CarryLedger::take`].
    pub fn carry_only(&self) -> impl Iterator<Item = (i64, DayStanding)> + '_ {
        self.carried.iter().map(|(id, c)| {
            (
                *id,
                DayStanding {
                    main: self.weights.main_score(&DailyMetrics::default(), *c),
                    metrics: DailyMetrics::default(),
                },
            )
        })
    }

    /// What `product_id` inherits on the current day (nothing when it is not in the ledger).
    pub fn carried(&self, product_id: i64) -> CarryOver {
        self.carried.get(&product_id).copied().unwrap_or_default()
    }

    /// Removes a product from the ledger and returns its standing with the day's metrics.
    pub fn take(&mut self, product_id: i64, metrics: DailyMetrics) -> DayStanding {
        let carried = self.carried.remove(&product_id).unwrap_or_default();
        DayStanding { main: self.weights.main_score(&metrics, carried), metrics }
    }
}

impl DayStanding {
    fn keeps_ranked_tomorrow(&self) -> bool {
        CarryOver::of(self.main).keeps_ranked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `product_id` inherits from the day before the ledger's current day.
    fn carried(ledger: &CarryLedger, product_id: i64) -> CarryOver {
        ledger.carried.get(&product_id).copied().unwrap_or_default()
    }

    /// Ranks `day` (index into `days`) by folding the ledger through the earlier days.
    fn standings(w: Weights, days: &[Vec<(i64, DailyMetrics)>]) -> Vec<(i64, DayStanding)> {
        let (today, past) = days.split_last().expect("at least the ranking day");
        let mut ledger = past.iter().fold(CarryLedger::new(w), |l, rows| l.close_day(rows.iter().copied()));
        let mut out: Vec<_> = today.iter().map(|(id, m)| (*id, ledger.take(*id, *m))).collect();
        out.extend(ledger.carry_only());
        out.sort_by_key(|(id, _)| *id);
        out
    }

    fn views(n: i64) -> DailyMetrics {
        DailyMetrics { views: n, ..Default::default() }
    }

    #[test]
    fn carry_over_of_10_is_1_then_0_1_then_0() {
        let w = Weights::default();
        let day0 = vec![(1, views(100))];
        assert_eq!(
            standings(w, std::slice::from_ref(&day0)),
            vec![(1, DayStanding { main: 10.0, metrics: views(100) })]
        );
        let d1 = standings(w, &[day0.clone(), vec![]]);
        assert_eq!(d1, vec![(1, DayStanding { main: 1.0, metrics: DailyMetrics::default() })]);
        let d2 = standings(w, &[day0.clone(), vec![], vec![]]);
        assert_eq!(d2.len(), 1, "still ranked on day 2: floor(1.0) = 1");
        assert_eq!(d2[0].1.main.floor(), 0.0);
        assert!((d2[0].1.main - 0.1).abs() < 1e-12);
        assert!(standings(w, &[day0, vec![], vec![], vec![]]).is_empty(), "floor(0.1) = 0 carries nothing");
    }

    #[test]
    fn carried_points_add_to_the_days_own() {
        let w = Weights::default();
        let s = standings(w, &[vec![(1, views(100))], vec![(1, views(20)), (2, views(5))]]);
        assert_eq!(s[0].1.main, 20.0 * 0.1 + 10.0 * 0.1);
        assert_eq!(s[1].1.main, 5.0 * 0.1);
    }

    #[test]
    fn gaps_decay_the_carry_day_by_day() {
        let w = Weights::default();
        // 1000 (d0) → 100 (d1) → 10 (d2) → 1 (d3) → d4: 10·0.1 + 1·0.1 = 1.1
        let mut days = vec![vec![(1, views(10_000))], vec![], vec![], vec![], vec![(1, views(10))]];
        assert_eq!(standings(w, &days)[0].1.main, 10.0 * 0.1 + 1.0 * 0.1);
        days.push(vec![]);
        assert_eq!(standings(w, &days)[0].1.main, 0.1);
        days.push(vec![]);
        assert!(standings(w, &days).is_empty());
    }

    #[test]
    fn a_fresh_ledger_carries_nothing() {
        let ledger = CarryLedger::new(Weights::default());
        assert!(ledger.carried.is_empty());
        assert_eq!(carried(&ledger, 1), CarryOver(0));
        let ledger = ledger.close_day([(1, views(1)), (2, views(35))]);
        assert_eq!((ledger.carried.len(), carried(&ledger, 1), carried(&ledger, 2)), (1, CarryOver(0), CarryOver(3)));
    }

    #[test]
    fn carry_is_clamped_to_the_encodable_range() {
        assert_eq!(CarryOver::of(1e12), CarryOver(i64::from(MAX_MAIN_FLOOR)));
        assert_eq!(CarryOver::of(-3.0), CarryOver(0));
        assert_eq!(CarryOver::of(f64::NAN), CarryOver(0));
    }
}
