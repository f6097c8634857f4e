//! A product's counters of a day, carry-over from the previous day and its chain back
//! through the days before.
//!
//! The main score is the scoring profile's ([`super::profile`]): for the built-in one
//! `main(p, D) = views·w_view + likes·w_like + ln_1p(order_amount)·w_order + floor(main(p, D−1))·carry`,
//! evaluated left to right in `f64` exactly as written, so every replica and every rebuild
//! produces the same bits.

use std::sync::Arc;

use super::profile::ScoringProfile;
use super::vocabulary::{CarryOver, DailyMetrics};

/// Yesterday's carried integer parts, for every product that inherits at least 1.
///
/// The ledger is folded day by day, oldest first, starting `RANKING_CARRY_DAYS` days before
/// the ranking day with nothing carried in: carry-over is derived from SQL rows alone, reaches
/// back a bounded number of days, and never holds more than one day's population.
///
/// Kept as one list in ascending product order, 16 bytes a product (a hash map of the same
/// took 36 at a million products): SQL visits a day's rows in that order, so each row's
/// carry is found by a step from the previous one, and rows in any other order by a binary
/// search.
#[derive(Debug, Clone)]
pub struct CarryLedger {
    profile: Arc<ScoringProfile>,
    /// `(product, carried)` in ascending product order; a product taken on the current day
    /// holds [`TAKEN`].
    carried: Vec<(i64, CarryOver)>,
    /// Where the next lookup in ascending order will land.
    cursor: usize,
}

/// The carry of a product already taken on the current day (a real carry is at least 1).
const TAKEN: CarryOver = CarryOver(i64::MIN);

/// A product's standing on the ranking day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DayStanding {
    /// Main score on the day.
    pub main: f64,
    /// The day's metrics (zeros when the product had no event that day).
    pub metrics: DailyMetrics,
}

impl CarryLedger {
    /// An empty ledger of `profile`'s main score: nothing carried.
    pub fn new(profile: Arc<ScoringProfile>) -> Self {
        Self { profile, carried: Vec::new(), cursor: 0 }
    }

    /// Products carried into the current day (taken ones included).
    pub fn len(&self) -> usize {
        self.carried.len()
    }

    /// Whether nothing is carried into the current day.
    pub fn is_empty(&self) -> bool {
        self.carried.is_empty()
    }

    /// Closes the current day: `rows` are every metrics row of that day (any order; ascending
    /// product order is the fast one). The result is the ledger of the next day.
    pub fn close_day(self, rows: impl IntoIterator<Item = (i64, DailyMetrics)>) -> Self {
        let mut closing = self.closing();
        for (product_id, metrics) in rows {
            closing.add(product_id, metrics);
        }
        closing.finish()
    }

    /// Closes the current day one row at a time (rows as they stream from SQL, never all in
    /// memory): [`ClosingDay::add`] each row, then [`ClosingDay::finish`].
    pub fn closing(self) -> ClosingDay {
        let next = Vec::with_capacity(self.carried.len());
        ClosingDay { ledger: self, next, ascending: true }
    }

    /// Standings of products with no row on the current day, ranked through carry-over alone
    /// (everyone left in the ledger inherits at least 1), in ascending product order. Call
    /// after taking out the products that have rows, e.g. with [`CarryLedger::take`].
    pub fn carry_only(&self) -> impl Iterator<Item = (i64, DayStanding)> + '_ {
        self.carried.iter().filter(|(_, c)| *c != TAKEN).map(|(id, c)| {
            (
                *id,
                DayStanding {
                    main: self.profile.main_score(&DailyMetrics::default(), *c),
                    metrics: DailyMetrics::default(),
                },
            )
        })
    }

    /// Every product carried into the current day with its carry, in ascending product
    /// order (taken ones left out): what [`CarryLedger::take`] and
    /// [`CarryLedger::carry_only`] give, read without taking.
    pub fn untaken(&self) -> impl Iterator<Item = (i64, CarryOver)> + '_ {
        self.carried.iter().copied().filter(|(_, c)| *c != TAKEN)
    }

    /// This ledger with the entries of `products` (ascending) replaced by `fresh`'s, a ledger
    /// of the same day computed from those products' rows alone (the chain of one product
    /// never depends on another's). Untaken ledgers only.
    pub fn replaced(&self, products: &[i64], fresh: &CarryLedger) -> CarryLedger {
        let mut gone = products.iter().peekable();
        let kept = self.carried.iter().copied().filter(|(id, _)| {
            while gone.next_if(|p| **p < *id).is_some() {}
            gone.peek() != Some(&id)
        });
        let mut carried: Vec<(i64, CarryOver)> = kept.collect();
        merge_ascending(&mut carried, fresh.carried.clone());
        CarryLedger { profile: Arc::clone(&self.profile), carried, cursor: 0 }
    }

    /// What `product_id` inherits on the current day (nothing when it is not in the ledger,
    /// or was taken).
    pub fn carried(&self, product_id: i64) -> CarryOver {
        let i = self.carried.partition_point(|(id, _)| *id < product_id);
        match self.carried.get(i) {
            Some((id, c)) if *id == product_id && *c != TAKEN => *c,
            _ => CarryOver::default(),
        }
    }

    /// Removes a product from the ledger and returns its standing with the day's metrics.
    pub fn take(&mut self, product_id: i64, metrics: DailyMetrics) -> DayStanding {
        let carried = self.take_carry(product_id);
        DayStanding { main: self.profile.main_score(&metrics, carried), metrics }
    }

    /// The product's carry, marked taken (0 when it has none or was taken already).
    fn take_carry(&mut self, product_id: i64) -> CarryOver {
        match self.find(product_id) {
            Some(i) => match std::mem::replace(&mut self.carried[i].1, TAKEN) {
                TAKEN => CarryOver::default(),
                carried => carried,
            },
            None => CarryOver::default(),
        }
    }

    /// The index of `product_id`: at the cursor when lookups come in ascending order (the
    /// order SQL visits rows in), else by a binary search on the side of the cursor it is.
    fn find(&mut self, product_id: i64) -> Option<usize> {
        let list = &self.carried;
        let c = self.cursor.min(list.len());
        let after_previous = c == 0 || list[c - 1].0 < product_id;
        let i = if !after_previous {
            list[..c].partition_point(|(id, _)| *id < product_id)
        } else if list.get(c).is_none_or(|(id, _)| *id >= product_id) {
            c
        } else {
            c + list[c..].partition_point(|(id, _)| *id < product_id)
        };
        let found = list.get(i).is_some_and(|(id, _)| *id == product_id);
        self.cursor = if found { i + 1 } else { i };
        found.then_some(i)
    }
}

/// A day being closed row by row (see [`CarryLedger::closing`]).
#[derive(Debug)]
pub struct ClosingDay {
    ledger: CarryLedger,
    /// What the next day inherits from this day's rows, in the order they came.
    next: Vec<(i64, CarryOver)>,
    /// Whether the rows came in strictly ascending product order so far.
    ascending: bool,
}

impl ClosingDay {
    /// One metrics row of the day being closed.
    pub fn add(&mut self, product_id: i64, metrics: DailyMetrics) {
        let carried = self.ledger.take_carry(product_id);
        let profile = &self.ledger.profile;
        let inherited = profile.carried_from(profile.main_score(&metrics, carried));
        if inherited.keeps_ranked() {
            self.ascending &= self.next.last().is_none_or(|(last, _)| *last < product_id);
            self.next.push((product_id, inherited));
        }
    }

    /// The ledger of the next day: what the rows left, and the decayed carry of products
    /// without a row that day.
    pub fn finish(self) -> CarryLedger {
        let Self { ledger, mut next, ascending } = self;
        // Products without a row that day only decay (in ascending order, like the ledger).
        let decayed: Vec<(i64, CarryOver)> = ledger
            .carry_only()
            .filter(|(_, s)| s.keeps_ranked_tomorrow())
            .map(|(id, s)| (id, ledger.profile.carried_from(s.main)))
            .collect();
        let profile = Arc::clone(&ledger.profile);
        drop(ledger);
        if ascending {
            merge_ascending(&mut next, decayed);
        } else {
            // Rows out of order (never from SQL): sorted, and a product given twice counts
            // once, its last row winning as it would have in a map.
            next.extend(decayed);
            next.reverse();
            next.sort_by_key(|(id, _)| *id);
            next.dedup_by_key(|(id, _)| *id);
        }
        CarryLedger { profile, carried: next, cursor: 0 }
    }
}

/// Merges `more` into `list`, both ascending by product with no product in both, in place
/// from the back (no third list).
fn merge_ascending(list: &mut Vec<(i64, CarryOver)>, more: Vec<(i64, CarryOver)>) {
    let (mut a, mut b) = (list.len(), more.len());
    list.resize(a + b, (0, CarryOver::default()));
    while b > 0 {
        let to = a + b - 1;
        if a > 0 && list[a - 1].0 > more[b - 1].0 {
            list[to] = list[a - 1];
            a -= 1;
        } else {
            list[to] = more[b - 1];
            b -= 1;
        }
    }
}

impl DayStanding {
    /// Whether the product inherits at least 1 (the clamp of the layout cannot matter here).
    fn keeps_ranked_tomorrow(&self) -> bool {
        self.main.floor() >= 1.0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::encoding::MAX_MAIN_FLOOR;

    fn profile() -> Arc<ScoringProfile> {
        Arc::new(ScoringProfile::built_in())
    }

    /// What `product_id` inherits from the day before the ledger's current day.
    fn carried(ledger: &CarryLedger, product_id: i64) -> CarryOver {
        ledger.carried(product_id)
    }

    /// Ranks `day` (index into `days`) by folding the ledger through the earlier days.
    fn standings(w: Arc<ScoringProfile>, days: &[Vec<(i64, DailyMetrics)>]) -> Vec<(i64, DayStanding)> {
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
        let w = profile();
        let day0 = vec![(1, views(100))];
        assert_eq!(
            standings(w.clone(), std::slice::from_ref(&day0)),
            vec![(1, DayStanding { main: 10.0, metrics: views(100) })]
        );
        let d1 = standings(w.clone(), &[day0.clone(), vec![]]);
        assert_eq!(d1, vec![(1, DayStanding { main: 1.0, metrics: DailyMetrics::default() })]);
        let d2 = standings(w.clone(), &[day0.clone(), vec![], vec![]]);
        assert_eq!(d2.len(), 1, "still ranked on day 2: floor(1.0) = 1");
        assert_eq!(d2[0].1.main.floor(), 0.0);
        assert!((d2[0].1.main - 0.1).abs() < 1e-12);
        assert!(standings(w.clone(), &[day0, vec![], vec![], vec![]]).is_empty(), "floor(0.1) = 0 carries nothing");
    }

    #[test]
    fn carried_points_add_to_the_days_own() {
        let w = profile();
        let s = standings(w.clone(), &[vec![(1, views(100))], vec![(1, views(20)), (2, views(5))]]);
        assert_eq!(s[0].1.main, 20.0 * 0.1 + 10.0 * 0.1);
        assert_eq!(s[1].1.main, 5.0 * 0.1);
    }

    #[test]
    fn gaps_decay_the_carry_day_by_day() {
        let w = profile();
        // 1000 (d0) → 100 (d1) → 10 (d2) → 1 (d3) → d4: 10·0.1 + 1·0.1 = 1.1
        let mut days = vec![vec![(1, views(10_000))], vec![], vec![], vec![], vec![(1, views(10))]];
        assert_eq!(standings(w.clone(), &days)[0].1.main, 10.0 * 0.1 + 1.0 * 0.1);
        days.push(vec![]);
        assert_eq!(standings(w.clone(), &days)[0].1.main, 0.1);
        days.push(vec![]);
        assert!(standings(w.clone(), &days).is_empty());
    }

    #[test]
    fn a_fresh_ledger_carries_nothing() {
        let ledger = CarryLedger::new(profile());
        assert!(ledger.carried.is_empty());
        assert_eq!(carried(&ledger, 1), CarryOver(0));
        let ledger = ledger.close_day([(1, views(1)), (2, views(35))]);
        assert_eq!((ledger.carried.len(), carried(&ledger, 1), carried(&ledger, 2)), (1, CarryOver(0), CarryOver(3)));
    }

    #[test]
    fn carry_is_clamped_to_the_encodable_range() {
        let p = profile();
        assert_eq!(p.carried_from(1e12), CarryOver(i64::from(MAX_MAIN_FLOOR)));
        assert_eq!(p.carried_from(-3.0), CarryOver(0));
        assert_eq!(p.carried_from(f64::NAN), CarryOver(0));
    }

    /// The ledger as a map, the way it was first written: the reference the list must match.
    fn model_close(
        w: &ScoringProfile,
        carried: &HashMap<i64, CarryOver>,
        rows: &[(i64, DailyMetrics)],
    ) -> HashMap<i64, CarryOver> {
        let mut left = carried.clone();
        let mut next = HashMap::new();
        for (id, m) in rows {
            let c = left.remove(id).unwrap_or_default();
            let inherited = w.carried_from(w.main_score(m, c));
            if inherited.keeps_ranked() {
                next.insert(*id, inherited);
            }
        }
        for (id, c) in left {
            let decayed = w.carried_from(w.main_score(&DailyMetrics::default(), c));
            if decayed.keeps_ranked() {
                next.insert(id, decayed);
            }
        }
        next
    }

    fn day() -> impl Strategy<Value = Vec<(i64, DailyMetrics)>> {
        prop::collection::vec((0i64..60, 0i64..400), 0..40)
            .prop_map(|rows| rows.into_iter().map(|(id, v)| (id, views(v))).collect())
    }

    proptest! {
        /// Days in ascending product order (as SQL gives them), shuffled, or with a product
        /// twice: every carry, every take and every carry-only standing equals the map's.
        #[test]
        fn the_list_ledger_carries_like_a_map(
            days in prop::collection::vec((day(), any::<bool>()), 1..5),
            today in day(),
            probes in prop::collection::vec(0i64..60, 0..20),
        ) {
            let w = profile();
            let mut ledger = CarryLedger::new(w.clone());
            let mut model: HashMap<i64, CarryOver> = HashMap::new();
            for (mut rows, ascending) in days {
                if ascending {
                    rows.sort_by_key(|(id, _)| *id);
                    rows.dedup_by_key(|(id, _)| *id);
                }
                model = model_close(&w, &model, &rows);
                ledger = ledger.close_day(rows);
                for id in 0..60 {
                    prop_assert_eq!(ledger.carried(id), model.get(&id).copied().unwrap_or_default(), "carry of {}", id);
                }
                prop_assert_eq!(ledger.len(), model.len());
            }
            // The ranking day: takes in any order, some twice; then the carry-only ones.
            let mut left = model.clone();
            for (id, m) in today.iter().chain(probes.iter().map(|id| (*id, DailyMetrics::default())).collect::<Vec<_>>().iter()) {
                let expected = w.main_score(m, left.remove(id).unwrap_or_default());
                prop_assert_eq!(ledger.take(*id, *m).main, expected, "take of {}", id);
            }
            let mut expected: Vec<(i64, f64)> =
                left.iter().map(|(id, c)| (*id, w.main_score(&DailyMetrics::default(), *c))).collect();
            expected.sort_by_key(|(id, _)| *id);
            let carry_only: Vec<(i64, f64)> = ledger.carry_only().map(|(id, s)| (id, s.main)).collect();
            prop_assert_eq!(carry_only, expected);
        }
    }
}
