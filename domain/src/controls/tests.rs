//! What a valid control holds, which boards it acts on and when, and the bounds of a put.

use super::*;

fn control(id: &str, from: i64, until: Option<i64>, action: Action) -> Control {
    Control {
        id: id.into(),
        segment: None,
        windows: Windows::ALL,
        profile: None,
        active_from_us: from,
        active_until_us: until,
        action,
        note: String::new(),
        revision: 0,
        updated_at_us: 0,
    }
}

fn boost(id: &str, from: i64, until: Option<i64>) -> Control {
    control(id, from, until, Action::Boost { product_ids: vec![1], points: 1.0 })
}

fn pin(id: &str, from: i64, until: Option<i64>) -> Control {
    control(id, from, until, Action::Pin { product_id: 1, position: 1 })
}

fn scheduled(controls: &[Control]) -> Vec<Scheduled> {
    controls.iter().map(Control::scheduled).collect()
}

fn bound(stored: &[Control], control: &Control) -> Option<Exceeded> {
    exceeded(&scheduled(stored), &control.scheduled())
}

fn field(c: &Control) -> Option<&'static str> {
    validate(c).err().map(|r| r.field)
}

#[test]
fn validation_names_the_field() {
    assert_eq!(field(&boost("spring-sale.2027_a", 0, Some(1))), None);
    assert_eq!(field(&boost("", 0, None)), Some("control_id"));
    assert_eq!(field(&boost("Upper", 0, None)), Some("control_id"));
    assert_eq!(field(&boost(&"a".repeat(65), 0, None)), Some("control_id"));
    assert_eq!(field(&boost("a:b", 0, None)), Some("control_id"));
    assert_eq!(field(&boost("a", 5, Some(5))), Some("active_until"));
    let mut noted = boost("a", 0, None);
    noted.note = "é".repeat(256);
    assert_eq!(field(&noted), None, "characters, not bytes");
    noted.note.push('x');
    assert_eq!(field(&noted), Some("note"));
    let cases = [
        (Action::Pin { product_id: 1, position: 0 }, "pin.position"),
        (Action::Pin { product_id: 1, position: 1_001 }, "pin.position"),
        (Action::Pin { product_id: 0, position: 1 }, "pin.product_id"),
        (Action::Boost { product_ids: vec![], points: 1.0 }, "boost.product_ids"),
        (Action::Boost { product_ids: vec![1; 1_001], points: 1.0 }, "boost.product_ids"),
        (Action::Boost { product_ids: vec![-3], points: 1.0 }, "boost.product_ids"),
        (Action::Boost { product_ids: vec![1], points: 0.0 }, "boost.points"),
        (Action::Boost { product_ids: vec![1], points: f64::NAN }, "boost.points"),
        (Action::Boost { product_ids: vec![1], points: -1e6 - 1.0 }, "boost.points"),
        (Action::Exclude { product_ids: vec![] }, "exclude.product_ids"),
        (Action::Exclude { product_ids: vec![7; 10_001] }, "exclude.product_ids"),
    ];
    for (action, expected) in cases {
        assert_eq!(field(&control("a", 0, None, action.clone())), Some(expected), "{action:?}");
    }
    assert_eq!(field(&control("a", 0, None, Action::Boost { product_ids: vec![1; 1_000], points: -1e6 })), None);
    assert_eq!(field(&control("a", 0, None, Action::Exclude { product_ids: vec![7; 10_000] })), None);
}

#[test]
fn a_control_is_active_from_its_start_to_before_its_end_on_its_boards() {
    let c = boost("a", 10, Some(20));
    assert_eq!([9, 10, 19, 20].map(|t| c.active_at(t)), [false, true, true, false]);
    assert!(boost("a", 10, None).active_at(i64::MAX));
    let shoes = Segment::parse("category:shoes").expect("segment");
    let mut daily_shoes = boost("a", 0, None);
    daily_shoes.segment = Some(shoes);
    daily_shoes.windows = Windows::of([Window::Daily]).expect("versioned");
    let board = |segment, window, profile| Board { window, segment, profile };
    assert!(daily_shoes.acts_on(&board(Some(shoes), Window::Daily, None)));
    assert!(!daily_shoes.acts_on(&board(Some(shoes), Window::Weekly, None)));
    assert!(!daily_shoes.acts_on(&board(None, Window::Daily, None)), "the whole ranking is another board");
    assert!(daily_shoes.acts_on(&board(Some(shoes), Window::Daily, Some("cart-rate"))), "every profile");
    daily_shoes.profile = Some("cart-rate".into());
    assert!(daily_shoes.acts_on(&board(Some(shoes), Window::Daily, Some("cart-rate"))));
    assert!(!daily_shoes.acts_on(&board(Some(shoes), Window::Daily, Some("default"))));
}

#[test]
fn the_stored_bound_counts_a_replaced_control_once() {
    let stored: Vec<Control> =
        (0..MAX_STORED).map(|i| boost(&format!("c{i}"), i as i64 * 10, Some(i as i64 * 10 + 5))).collect();
    assert_eq!(bound(&stored, &boost("c7", 0, None)), None, "a replacement");
    let refused = bound(&stored, &boost("new", 0, Some(1))).expect("refused");
    assert!(refused.bound.contains("10000 stored"), "{}", refused.bound);
}

#[test]
fn the_active_bound_counts_controls_active_at_one_instant_of_the_schedule() {
    // 999 controls at once from 0 to 100, and 1,000 more one after another later.
    let mut stored: Vec<Control> = (0..999).map(|i| boost(&format!("now{i}"), 0, Some(100))).collect();
    stored.extend((0..1_000).map(|i| boost(&format!("later{i}"), 100 + i, Some(101 + i))));
    assert_eq!(bound(&stored, &boost("x", 0, None)), None, "1,000 at once at most");
    stored.push(boost("one-more", 50, Some(60)));
    let refused = bound(&stored, &boost("x", 0, Some(55))).expect("1,001 at 50");
    assert!(refused.bound.contains("1000 active controls per board"), "{}", refused.bound);
    assert_eq!(bound(&stored, &boost("x", 60, Some(100))), None, "one-more ended at 60");
    // Another board, or another window, is not counted.
    let mut elsewhere = boost("x", 0, None);
    elsewhere.segment = Some(Segment::parse("brand:acme").expect("segment"));
    assert_eq!(bound(&stored, &elsewhere), None);
    let mut daily: Vec<Control> = stored
        .iter()
        .cloned()
        .map(|mut c| {
            c.windows = Windows::of([Window::Daily]).expect("versioned");
            c
        })
        .collect();
    let mut weekly = boost("x", 0, None);
    weekly.windows = Windows::of([Window::Weekly]).expect("versioned");
    assert_eq!(bound(&daily, &weekly), None);
    daily.truncate(10);
    assert_eq!(bound(&daily, &boost("x", 0, None)), None);
}

#[test]
fn the_pin_bound_counts_pins_only() {
    let mut stored: Vec<Control> = (0..99).map(|i| pin(&format!("p{i}"), 0, None)).collect();
    stored.extend((0..500).map(|i| boost(&format!("b{i}"), 0, None)));
    assert_eq!(bound(&stored, &pin("x", 0, None)), None, "the 100th pin");
    assert_eq!(bound(&stored, &boost("x", 0, None)), None, "a boost beside 99 pins");
    stored.push(pin("p99", 0, Some(10)));
    let refused = bound(&stored, &pin("x", 5, None)).expect("the 101st pin");
    assert!(refused.bound.contains("100 active pins per board"), "{}", refused.bound);
    assert_eq!(bound(&stored, &pin("x", 10, None)), None, "after p99 ended");
}
