//! The plan of a batch checked without a database: folding per row, shoppers' rows, settled
//! caps, retractions and their corrections.

use std::collections::HashMap;

use chrono::{NaiveDate, TimeZone, Utc};

use super::*;
use crate::domain::profile::text;
use crate::domain::retraction::Original;

const BUILT_IN: &str = include_str!("../../../../../deploy/profiles/built-in.toml");

fn day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 12, 4).expect("a date")
}

fn event(id: &str, product_id: i64, kind: EventKind, actor: &str, second: u32) -> DatedEvent {
    let event = Event {
        event_id: id.into(),
        product_id,
        kind,
        signal: String::new(),
        retracts: String::new(),
        actor_id: actor.into(),
        amount: if kind == EventKind::Order { 1_500 } else { 0 },
        occurred_at: Utc.with_ymd_and_hms(2026, 12, 4, 10, 0, second).single().expect("a time"),
    };
    DatedEvent { event, date: day() }
}

fn signal(id: &str, product_id: i64, name: &str, kind: SignalKind, amount: i64) -> DatedEvent {
    let mut e = event(id, product_id, EventKind::Signal(kind), "", 0);
    e.event.signal = name.into();
    e.event.amount = amount;
    e
}

fn plan(batch: &[DatedEvent], fates: &[Fate], profile: &ScoringProfile, columns: &HashMap<String, u8>) -> Deltas {
    let fresh: Vec<usize> = (0..batch.len()).collect();
    Deltas::of_batch(batch, &fresh, fates, Caps { signal_columns: columns, profile, calendar: RankingCalendar::utc() })
        .expect("a plan")
}

fn counted(n: usize) -> Vec<Fate> {
    (0..n).map(|_| Fate::Counted).collect()
}

fn capped_views() -> ScoringProfile {
    text::parse(&format!("{BUILT_IN}\n[signals.views]\nper_actor = 1\n")).expect("a profile")
}

#[test]
fn uncapped_events_fold_into_one_delta_per_row_in_key_order() {
    let batch = [
        event("a", 2, EventKind::View, "", 1),
        event("b", 1, EventKind::Order, "", 2),
        event("c", 2, EventKind::View, "", 3),
        event("d", 2, EventKind::Like, "", 0),
    ];
    let deltas = plan(&batch, &counted(4), &ScoringProfile::built_in(), &HashMap::new());
    let keys: Vec<_> = deltas.daily.keys().copied().collect();
    assert_eq!(keys, vec![(day(), 1), (day(), 2)]);
    let two = &deltas.daily[&(day(), 2)].metrics;
    assert_eq!((two.views, two.likes.net, two.orders), (2, 1, 0));
    assert_eq!(two.last_event_us, batch[2].event.occurred_at.timestamp_micros());
    let one = &deltas.all_time[&1].metrics;
    assert_eq!((one.orders, one.order_amount), (1, 1_500));
    assert!(deltas.actors.is_empty() && deltas.columns.is_empty());
}

#[test]
fn a_capped_view_with_an_actor_goes_through_its_shoppers_row_and_one_without_does_not() {
    let batch = [
        event("a", 7, EventKind::View, "bot", 1),
        event("b", 7, EventKind::View, "bot", 2),
        event("c", 7, EventKind::View, "", 3),
    ];
    let deltas = plan(&batch, &counted(3), &capped_views(), &HashMap::new());
    let key = ActorKey { date: day(), product_id: 7, code: signals::VIEWS_CODE, actor_id: "bot".into() };
    assert_eq!(deltas.actors[&key].added, vec![0, 1]);
    // Only the event without an actor is counted before the caps settle; the row still moves
    // to the latest event.
    let row = &deltas.daily[&(day(), 7)].metrics;
    assert_eq!(row.views, 1);
    assert_eq!(row.last_event_us, batch[2].event.occurred_at.timestamp_micros());
    assert!(deltas.all_time.contains_key(&7));
}

#[test]
fn settling_a_shoppers_row_counts_what_the_cap_lets_through_and_reports_the_rest() {
    let batch: Vec<_> = (0..3).map(|i| event(&format!("v{i}"), 7, EventKind::View, "bot", i)).collect();
    let mut deltas = plan(&batch, &counted(3), &capped_views(), &HashMap::new());
    let key = ActorKey { date: day(), product_id: 7, code: signals::VIEWS_CODE, actor_id: "bot".into() };
    let report = deltas.settle_caps(&HashMap::from([(key, 3)])).expect("settled");
    assert_eq!(report.uncounted, vec![1, 2]);
    assert_eq!(report.capped, BTreeMap::from([(signals::VIEWS_CODE, 2)]));
    assert_eq!(deltas.daily[&(day(), 7)].metrics.views, 1);
    assert_eq!(deltas.all_time[&7].metrics.views, 1);
    assert!(deltas.actors.is_empty());

    // The same shopper already at the cap before the batch: nothing counts.
    let mut again = plan(&batch, &counted(3), &capped_views(), &HashMap::new());
    let key = ActorKey { date: day(), product_id: 7, code: signals::VIEWS_CODE, actor_id: "bot".into() };
    let report = again.settle_caps(&HashMap::from([(key, 4)])).expect("settled");
    assert_eq!(report.uncounted, vec![0, 1, 2]);
    assert_eq!(again.daily[&(day(), 7)].metrics.views, 0);
}

#[test]
fn a_shoppers_row_the_store_did_not_return_is_corrupt() {
    let batch = [event("a", 7, EventKind::View, "bot", 1)];
    let mut deltas = plan(&batch, &[Fate::Counted], &capped_views(), &HashMap::new());
    assert!(matches!(deltas.settle_caps(&HashMap::new()), Err(StoreError::Corrupt(_))));
}

#[test]
fn custom_signals_add_to_their_columns_and_the_columns_are_listed_once_ascending() {
    let columns = HashMap::from([("cart_adds".to_string(), 3), ("revenue".to_string(), 1)]);
    let batch = [
        signal("a", 1, "cart_adds", SignalKind::Count, 0),
        signal("b", 1, "revenue", SignalKind::Amount, 250),
        signal("c", 1, "cart_adds", SignalKind::Count, 0),
    ];
    let deltas = plan(&batch, &counted(3), &ScoringProfile::built_in(), &columns);
    assert_eq!(deltas.columns, vec![1, 3]);
    assert_eq!(deltas.daily[&(day(), 1)].signals[0], 250);
    assert_eq!(deltas.daily[&(day(), 1)].signals[2], 2);
    let missing = [signal("d", 1, "unknown", SignalKind::Count, 0)];
    let caps =
        Caps { signal_columns: &columns, profile: &ScoringProfile::built_in(), calendar: RankingCalendar::utc() };
    assert!(matches!(Deltas::of_batch(&missing, &[0], &[Fate::Counted], caps), Err(StoreError::Corrupt(_))));
}

#[test]
fn a_withdrawal_takes_its_original_off_its_own_day_and_a_late_original_only_moves_time() {
    let mut order = event("o", 4, EventKind::Order, "", 5);
    order.date = day().pred_opt().expect("a day");
    let original = Original::of(&order.event, order.date);
    let mut retract = event("r", 4, EventKind::Retract, "", 9);
    retract.event.retracts = "o".into();
    let late = event("l", 5, EventKind::Order, "", 7);
    let batch = [retract, late];
    let deltas =
        plan(&batch, &[Fate::Withdraws(original), Fate::Retracted], &ScoringProfile::built_in(), &HashMap::new());

    let before = &deltas.daily[&(order.date, 4)];
    assert_eq!((before.metrics.orders, before.metrics.order_amount), (-1, -1_500));
    assert_eq!((before.retracted.orders, before.retracted.order_amount), (1, 1_500));
    assert_eq!(deltas.all_time[&4].metrics.orders, -1);

    let witnessed = &deltas.daily[&(day(), 5)];
    assert_eq!(witnessed.metrics.orders, 0);
    assert_eq!(witnessed.retracted.orders, 1);
    assert_eq!(witnessed.metrics.last_event_us, batch[1].event.occurred_at.timestamp_micros());
    assert_eq!(deltas.all_time[&5], RowDelta::default());
}

#[test]
fn a_waiting_retraction_locks_its_products_row_and_a_duplicate_touches_nothing() {
    let mut waits = event("r", 8, EventKind::Retract, "", 1);
    waits.event.retracts = "later".into();
    let duplicate = event("d", 9, EventKind::View, "", 1);
    let deltas =
        plan(&[waits, duplicate], &[Fate::Waits, Fate::Duplicate], &ScoringProfile::built_in(), &HashMap::new());
    assert!(deltas.daily.is_empty());
    assert_eq!(deltas.all_time.keys().copied().collect::<Vec<_>>(), vec![8]);
}

#[test]
fn the_corrections_of_counted_events_cancel_what_they_added() {
    let columns = HashMap::from([("revenue".to_string(), 2)]);
    let batch = [
        event("a", 3, EventKind::View, "", 1),
        event("b", 3, EventKind::Order, "", 2),
        signal("c", 3, "revenue", SignalKind::Amount, 40),
        event("d", 4, EventKind::View, "", 3),
    ];
    let fates = [Fate::Counted, Fate::Counted, Fate::Counted, Fate::Counted];
    let fresh: Vec<usize> = (0..batch.len()).collect();
    let caps =
        Caps { signal_columns: &columns, profile: &ScoringProfile::built_in(), calendar: RankingCalendar::utc() };
    let added = Deltas::of_batch(&batch, &fresh, &fates, caps).expect("a plan");
    let taken = Deltas::corrections(&batch, &fresh, &fates, &[0, 1, 2, 3], caps).expect("corrections");
    for (key, row) in &added.all_time {
        let back = &taken.all_time[key];
        assert_eq!(row.metrics.views + back.metrics.views, 0);
        assert_eq!(row.metrics.orders + back.metrics.orders, 0);
        assert_eq!(row.metrics.order_amount + back.metrics.order_amount, 0);
        assert_eq!(row.signals[1] + back.signals[1], 0);
    }
    assert_eq!(taken.columns, vec![2]);
}

#[test]
fn hours_fold_like_days_and_a_retraction_comes_off_its_originals_hour() {
    let hour = |h: u32| Utc.with_ymd_and_hms(2026, 12, 4, h, 0, 0).single().expect("a time").timestamp_micros();
    let at = |mut e: DatedEvent, h: u32, minute: u32| {
        e.event.occurred_at = Utc.with_ymd_and_hms(2026, 12, 4, h, minute, 0).single().expect("a time");
        e
    };
    let key = |h: u32, product_id| HourKey { date: day(), hour_start_us: hour(h), product_id };
    let order = at(event("o", 4, EventKind::Order, "", 0), 8, 15);
    let original = Original::of(&order.event, order.date);
    let mut retract = at(event("r", 4, EventKind::Retract, "", 0), 11, 5);
    retract.event.retracts = "o".into();
    let batch = [
        at(event("a", 4, EventKind::View, "", 0), 11, 1),
        at(event("b", 4, EventKind::View, "", 0), 11, 59),
        at(event("c", 4, EventKind::View, "", 0), 12, 0),
        retract,
    ];
    let fates = [Fate::Counted, Fate::Counted, Fate::Counted, Fate::Withdraws(original)];
    let deltas = plan(&batch, &fates, &ScoringProfile::built_in(), &HashMap::new());
    assert_eq!(deltas.hourly.keys().copied().collect::<Vec<_>>(), vec![key(8, 4), key(11, 4), key(12, 4)], "ascending");
    assert_eq!(deltas.hourly[&key(11, 4)].metrics.views, 2);
    assert_eq!(deltas.hourly[&key(12, 4)].metrics.views, 1);
    let taken = &deltas.hourly[&key(8, 4)].metrics;
    assert_eq!((taken.orders, taken.order_amount), (-1, -1_500), "off the original's hour");

    // A capped view counts through the shopper's row of its hour as of its day.
    let bot: Vec<_> = (0..3).map(|i| at(event(&format!("v{i}"), 7, EventKind::View, "bot", 0), 9 + i / 2, 1)).collect();
    let mut deltas = plan(&bot, &counted(3), &capped_views(), &HashMap::new());
    let shopper = |h: u32| ActorHourKey { hour: key(h, 7), code: signals::VIEWS_CODE, actor_id: "bot".into() };
    assert_eq!(deltas.actor_hours[&shopper(9)].added, vec![0, 1]);
    assert_eq!(deltas.actor_hours[&shopper(10)].added, vec![2]);
    deltas.settle_hour_caps(&HashMap::from([(shopper(9), 2), (shopper(10), 1)])).expect("settled");
    assert_eq!(deltas.hourly[&key(9, 7)].metrics.views, 1, "one per hour under per_actor = 1");
    assert_eq!(deltas.hourly[&key(10, 7)].metrics.views, 1);
    assert!(matches!(deltas.settle_hour_caps(&HashMap::new()), Ok(())), "settled rows are done with");
}
