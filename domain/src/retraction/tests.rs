use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::*;

fn at(hour: u32) -> DateTime<Utc> {
    format!("2026-04-09T{hour:02}:00:00Z").parse().expect("valid")
}

fn day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 4, 9).expect("date")
}

fn event(id: &str, product: i64, kind: EventKind, amount: i64) -> Event {
    Event {
        event_id: id.into(),
        product_id: product,
        kind,
        signal: String::new(),
        retracts: String::new(),
        actor_id: String::new(),
        amount,
        occurred_at: at(10),
    }
}

fn retraction(id: &str, product: i64, target: &str) -> Event {
    Event { retracts: target.into(), ..event(id, product, EventKind::Retract, 0) }
}

fn fates(batch: &[Event], stored: &[Original], claims: &[(&str, i64)]) -> Result<Vec<Fate>, Refusal> {
    let fresh: Vec<(usize, &Event, NaiveDate)> = batch.iter().enumerate().map(|(i, e)| (i, e, day())).collect();
    let stored = stored.iter().map(|o| (o.event_id.clone(), o.clone())).collect();
    let claims = claims.iter().map(|(id, p)| (id.to_string(), *p)).collect();
    resolve(&fresh, &stored, &claims, at(0))
}

#[test]
fn either_order_within_a_batch() {
    let order = event("o", 7, EventKind::Order, 500);
    let back = retraction("r", 7, "o");
    let withdrawn = Fate::Withdraws(Original::of(&order, day()));
    assert_eq!(fates(&[order.clone(), back.clone()], &[], &[]), Ok(vec![Fate::Counted, withdrawn]));
    assert_eq!(fates(&[back, order], &[], &[]), Ok(vec![Fate::Waits, Fate::Retracted]));
}

#[test]
fn against_what_is_stored() {
    let order = event("o", 7, EventKind::Order, 500);
    let stored = [Original::of(&order, day())];
    let back = retraction("r", 7, "o");
    assert_eq!(fates(std::slice::from_ref(&back), &stored, &[]), Ok(vec![Fate::Withdraws(stored[0].clone())]));
    // Already retracted: a second retraction is a duplicate, the original counts for nothing.
    assert_eq!(fates(&[retraction("r2", 7, "o")], &stored, &[("o", 7)]), Ok(vec![Fate::Duplicate]));
    assert_eq!(fates(std::slice::from_ref(&order), &[], &[("o", 7)]), Ok(vec![Fate::Retracted]));
    // A waiting retraction of another product does not take this event back.
    assert_eq!(fates(&[order], &[], &[("o", 8)]), Ok(vec![Fate::Counted]));
}

#[test]
fn refusals_name_the_field() {
    let unlike = Original::of(&event("u", 7, EventKind::Unlike, 0), day());
    let old = Original {
        occurred_at: at(0) - chrono::Duration::seconds(1),
        ..Original::of(&event("old", 7, EventKind::View, 0), day())
    };
    let view = Original::of(&event("v", 7, EventKind::View, 0), day());
    let stored = [unlike, old, view];
    let refused = |e: Event| fates(&[event("x", 7, EventKind::View, 0), e], &stored, &[]).expect_err("refused");
    let r = refused(retraction("r", 8, "v"));
    assert_eq!((r.index, r.field), (1, "product_id"));
    assert_eq!(refused(retraction("r", 7, "u")).field, "retracts");
    assert!(refused(retraction("r", 7, "old")).reason.contains("too long ago"));
}

/// A ledger of the tests' own: what is recorded, the claims, and the counts per product.
#[derive(Default)]
struct Ledger {
    recorded: HashMap<String, Original>,
    claims: HashMap<String, i64>,
    views: BTreeMap<i64, i64>,
    orders: BTreeMap<i64, (i64, i64)>,
}

impl Ledger {
    fn add(&mut self, o: &Original, sign: i64) {
        match o.kind {
            EventKind::View => *self.views.entry(o.product_id).or_default() += sign,
            EventKind::Order => {
                let (n, amount) = self.orders.entry(o.product_id).or_default();
                *n += sign;
                *amount += sign * o.amount;
            }
            _ => unreachable!("the workload has views and orders"),
        }
    }

    fn record(&mut self, batch: &[Event]) {
        let mut seen = std::collections::HashSet::new();
        let fresh: Vec<(usize, &Event, NaiveDate)> = batch
            .iter()
            .enumerate()
            .filter(|(_, e)| !self.recorded.contains_key(&e.event_id) && seen.insert(e.event_id.clone()))
            .map(|(i, e)| (i, e, day()))
            .collect();
        let stored = self.recorded.clone();
        let fates = resolve(&fresh, &stored, &self.claims, at(0)).expect("valid workload");
        for ((_, e, date), fate) in fresh.iter().zip(fates) {
            match &fate {
                Fate::Counted => self.add(&Original::of(e, *date), 1),
                Fate::Withdraws(o) => self.add(o, -1),
                Fate::Retracted | Fate::Waits | Fate::Duplicate => {}
            }
            if matches!(fate, Fate::Waits | Fate::Withdraws(_)) {
                self.claims.insert(e.retracts.clone(), e.product_id);
            }
            // A duplicate retraction is not recorded, as the store does not record it.
            if fate != Fate::Duplicate {
                self.recorded.insert(e.event_id.clone(), Original::of(e, *date));
            }
        }
    }
}

proptest! {
    /// Views and orders of a few products, a share of them retracted (some retractions twice,
    /// some naming ids never sent), every event redelivered at random, in two arrival orders
    /// and batchings: the counts are the same, and they are those of the events no
    /// retraction names.
    #[test]
    fn counts_are_the_events_not_retracted_in_any_order(
        kinds in prop::collection::vec((0i64..4, any::<bool>(), 1i64..1_000), 1..40),
        retracted in prop::collection::vec(any::<bool>(), 40),
        twice in prop::collection::vec(any::<bool>(), 40),
        unknown in 0usize..4,
        seed_a in any::<u64>(),
        seed_b in any::<u64>(),
        redeliver in prop::collection::vec(0usize..40, 0..10),
    ) {
        let mut events = Vec::new();
        for (i, (product, is_order, amount)) in kinds.iter().enumerate() {
            let kind = if *is_order { EventKind::Order } else { EventKind::View };
            events.push(event(&format!("e{i}"), *product, kind, if *is_order { *amount } else { 0 }));
        }
        let originals = events.clone();
        for (i, o) in originals.iter().enumerate() {
            if retracted[i] {
                events.push(retraction(&format!("r{i}"), o.product_id, &o.event_id));
                if twice[i] {
                    events.push(retraction(&format!("s{i}"), o.product_id, &o.event_id));
                }
            }
        }
        for u in 0..unknown {
            events.push(retraction(&format!("u{u}"), 1, &format!("never-{u}")));
        }
        for r in &redeliver {
            if let Some(e) = events.get(*r).cloned() {
                events.push(e);
            }
        }
        let run = |seed: u64| {
            let mut order = events.clone();
            // A seeded shuffle and batching, reproducible from the seed alone.
            let mut state = seed | 1;
            let mut next = || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state };
            for i in (1..order.len()).rev() {
                let j = (next() % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
            let mut ledger = Ledger::default();
            let mut rest = &order[..];
            while !rest.is_empty() {
                let n = 1 + (next() % 7) as usize;
                let (batch, tail) = rest.split_at(n.min(rest.len()));
                ledger.record(batch);
                rest = tail;
            }
            (ledger.views, ledger.orders)
        };
        let (views_a, orders_a) = run(seed_a);
        let (views_b, orders_b) = run(seed_b);
        let mut views = BTreeMap::new();
        let mut orders: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for (i, o) in originals.iter().enumerate() {
            views.entry(o.product_id).or_insert(0);
            orders.entry(o.product_id).or_insert((0, 0));
            if retracted[i] {
                continue;
            }
            match o.kind {
                EventKind::View => *views.entry(o.product_id).or_insert(0) += 1,
                _ => {
                    let (n, amount) = orders.entry(o.product_id).or_insert((0, 0));
                    *n += 1;
                    *amount += o.amount;
                }
            }
        }
        let drop_zero = |m: BTreeMap<i64, i64>| m.into_iter().filter(|(_, v)| *v != 0).collect::<BTreeMap<_, _>>();
        let drop_zero2 = |m: BTreeMap<i64, (i64, i64)>| m.into_iter().filter(|(_, v)| *v != (0, 0)).collect::<BTreeMap<_, _>>();
        prop_assert_eq!(drop_zero(views_a.clone()), drop_zero(views_b));
        prop_assert_eq!(drop_zero2(orders_a.clone()), drop_zero2(orders_b));
        prop_assert_eq!(drop_zero(views_a), drop_zero(views));
        prop_assert_eq!(drop_zero2(orders_a), drop_zero2(orders));
    }
}
