use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn day(n: u64) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 4, 1).expect("date").checked_add_days(chrono::Days::new(n)).expect("date")
}

/// Rows by (day, product): the SQL state.
type State = BTreeMap<(NaiveDate, i64), (DailyMetrics, i64)>;

const DAYS: LiveDays = LiveDays {
    date: match NaiveDate::from_ymd_opt(2026, 4, 9) {
        Some(d) => d,
        None => panic!(),
    },
    carry_start: match NaiveDate::from_ymd_opt(2026, 4, 2) {
        Some(d) => d,
        None => panic!(),
    },
    week_start: match NaiveDate::from_ymd_opt(2026, 4, 3) {
        Some(d) => d,
        None => panic!(),
    },
};

/// What a recompute reads of `state`, written independently of [`LiveDay`]: the chain
/// closed day by day, today's rows taken from it, the rest carried alone; the week grouped.
fn reference(profile: &Arc<ScoringProfile>, state: &State) -> (Vec<Contender>, Vec<Contender>) {
    let mut ledger = CarryLedger::new(Arc::clone(profile));
    let mut d = DAYS.carry_start;
    while d < DAYS.date {
        let rows: Vec<(i64, DailyMetrics)> =
            state.range((d, i64::MIN)..=(d, i64::MAX)).map(|((_, p), (m, _))| (*p, *m)).collect();
        ledger = ledger.close_day(rows);
        d = d.succ_opt().expect("day");
    }
    let mut daily = Vec::new();
    for ((_, p), (m, last)) in state.range((DAYS.date, i64::MIN)..=(DAYS.date, i64::MAX)) {
        daily.push(Contender::new(profile, *p, ledger.take(*p, *m), Some(*last)));
    }
    daily.extend(ledger.carry_only().map(|(p, s)| Contender::new(profile, p, s, None)));
    let mut week: BTreeMap<i64, (DailyMetrics, i64)> = BTreeMap::new();
    for ((d, p), (m, last)) in state.range((DAYS.week_start, i64::MIN)..=(DAYS.date, i64::MAX)) {
        assert!(*d <= DAYS.date);
        let entry = week.entry(*p).or_insert((DailyMetrics::default(), i64::MIN));
        entry.0 = sum(&entry.0, m);
        entry.1 = entry.1.max(*last);
    }
    let weekly = week
        .into_iter()
        .map(|(p, (m, last))| {
            let standing = DayStanding { main: profile.main_score(&m, CarryOver(0)), metrics: m };
            Contender::new(profile, p, standing, Some(last))
        })
        .collect();
    (daily, weekly)
}

/// A live day loaded from `state` the way the live pass's full read does.
fn loaded(profile: &Arc<ScoringProfile>, state: &State) -> LiveDay {
    let mut ledger = CarryLedger::new(Arc::clone(profile));
    let mut d = DAYS.carry_start;
    while d < DAYS.date {
        ledger = ledger.close_day(state.range((d, i64::MIN)..=(d, i64::MAX)).map(|((_, p), (m, _))| (*p, *m)));
        d = d.succ_opt().expect("day");
    }
    let mut today = DayRows::new(profile.custom_names().len());
    for ((_, p), (m, last)) in state.range((DAYS.date, i64::MIN)..=(DAYS.date, i64::MAX)) {
        today.push(*p, m, *last);
    }
    let mut before = DayRows::new(profile.custom_names().len());
    let mut week: BTreeMap<i64, (DailyMetrics, i64)> = BTreeMap::new();
    for ((_, p), (m, last)) in state.range((DAYS.week_start, i64::MIN)..(DAYS.date, i64::MIN)) {
        let entry = week.entry(*p).or_insert((DailyMetrics::default(), i64::MIN));
        entry.0 = sum(&entry.0, m);
        entry.1 = entry.1.max(*last);
    }
    for (p, (m, last)) in week {
        before.push(p, &m, last);
    }
    LiveDay::new(Arc::clone(profile), DAYS, ledger, today, before)
}

fn contenders(live: &LiveDay) -> (Vec<Contender>, Vec<Contender>) {
    let (mut daily, mut weekly) = (Vec::new(), Vec::new());
    live.daily_contenders(&mut daily);
    live.weekly_contenders(&mut weekly);
    (daily, weekly)
}

fn sorted((mut a, mut b): (Vec<Contender>, Vec<Contender>)) -> (Vec<Contender>, Vec<Contender>) {
    a.sort_by_key(|c| c.product_id);
    b.sort_by_key(|c| c.product_id);
    (a, b)
}

/// A row write: (day offset from carry_start, product, views, likes, amount, last event).
fn writes() -> impl Strategy<Value = Vec<(u64, i64, i64, i64, i64, i64)>> {
    prop::collection::vec((0u64..8, 0i64..40, 0i64..2_000, 0i64..50, 0i64..1_000_000, 0i64..86_400), 0..120)
}

fn write(state: &mut State, (d, p, views, likes, amount, last): (u64, i64, i64, i64, i64, i64)) -> (NaiveDate, i64) {
    let date = day(1 + d);
    state.insert((date, p), (DailyMetrics::counts(views, likes, views / 7, amount), last));
    (date, p)
}

proptest! {
    /// Loaded at one state, then given the changed rows (today's replaced, earlier days'
    /// products refreshed from their rows), a live day yields the contenders a full read of
    /// the new state gives, value for value.
    #[test]
    fn applied_changes_give_a_full_reads_contenders(first in writes(), then in writes()) {
        let profile = Arc::new(ScoringProfile::built_in());
        let mut state = State::new();
        for w in first {
            write(&mut state, w);
        }
        let mut live = loaded(&profile, &state);
        prop_assert_eq!(sorted(contenders(&live)), sorted(reference(&profile, &state)));

        let mut changed = Vec::new();
        for w in then {
            changed.push(write(&mut state, w));
        }
        let today: Vec<(i64, DailyMetrics, i64)> = changed
            .iter()
            .filter(|(d, _)| *d == DAYS.date)
            .map(|(d, p)| { let (m, l) = state[&(*d, *p)]; (*p, m, l) })
            .collect();
        live.apply_today(today);
        let mut earlier: Vec<i64> = changed.iter().filter(|(d, _)| *d < DAYS.date).map(|(_, p)| *p).collect();
        earlier.sort_unstable();
        earlier.dedup();
        let rows: Vec<ProductRow> = state
            .iter()
            .filter(|((d, p), _)| *d >= DAYS.first() && earlier.binary_search(p).is_ok())
            .map(|((date, product_id), (metrics, last))| ProductRow {
                date: *date, product_id: *product_id, metrics: *metrics, last_event_us: *last,
            })
            .collect();
        live.refresh(&earlier, rows);
        // In ascending product order already: what the ranking sorts them into anyway.
        let (daily, weekly) = contenders(&live);
        prop_assert!(daily.windows(2).all(|w| w[0].product_id < w[1].product_id));
        prop_assert!(weekly.windows(2).all(|w| w[0].product_id < w[1].product_id));
        prop_assert_eq!(sorted((daily, weekly)), sorted(reference(&profile, &state)));
    }
}

#[test]
fn upserted_rows_keep_their_order_and_last_value() {
    let mut rows = DayRows::new(1);
    let mut m = DailyMetrics::counts(1, 2, 3, 4);
    m.custom[0] = 9;
    rows.push(2, &m, 20);
    rows.push(5, &m, 50);
    let mut newer = m;
    newer.views = 100;
    rows.upsert(vec![(3, m, 30), (5, newer, 55), (1, m, 10), (3, newer, 31)]);
    let got: Vec<(i64, i64, i64, i64)> = rows.iter().map(|(p, m, l)| (p, m.views, m.custom[0], l)).collect();
    assert_eq!(got, vec![(1, 1, 9, 10), (2, 1, 9, 20), (3, 100, 9, 31), (5, 100, 9, 55)]);
}
