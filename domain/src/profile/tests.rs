//! The rules of a valid profile, the built-in profile, what a profile computes.

use proptest::prelude::*;

use super::*;
use crate::vocabulary::{CarryOver, DailyMetrics};
use crate::vocabulary::{Event, EventKind};

fn spec() -> ProfileSpec {
    ScoringProfile::built_in().spec().clone()
}

#[test]
fn the_built_in_profile_is_section_four() {
    let p = ScoringProfile::built_in();
    assert_eq!(p.layout(), &Layout::built_in());
    assert_eq!(p.spec().main.iter().map(|t| t.weight).collect::<Vec<_>>(), vec![0.1, 0.2, 0.6]);
    assert_eq!(p.fingerprint(), ScoringProfile::built_in().fingerprint(), "stable");
    let mut other = spec();
    other.main[0].weight = 0.11;
    assert_ne!(ScoringProfile::new(other).expect("valid").fingerprint(), p.fingerprint());
}

#[test]
fn every_rule_is_refused_naming_its_field() {
    let refused = |change: &dyn Fn(&mut ProfileSpec)| {
        let mut s = spec();
        change(&mut s);
        ScoringProfile::new(s).expect_err("refused").to_string()
    };
    assert_eq!(refused(&|s| s.main[1].signal = "cart_adds".into()), "main[1].signal: unknown signal \"cart_adds\"");
    assert_eq!(refused(&|s| s.main[0].weight = f64::NAN), "main[0].weight: must be a finite number >= 0, got NaN");
    assert_eq!(refused(&|s| s.carry_over = -0.5), "carry_over: must be a finite number >= 0, got -0.5");
    assert!(
        refused(&|s| {
            s.signals.insert("views".into(), SignalKind::Count);
        })
        .starts_with("signals.views:")
    );
    assert!(
        refused(&|s| {
            s.signals.insert("Cart".into(), SignalKind::Count);
        })
        .starts_with("signals.\"Cart\"")
    );
    assert!(refused(&|s| s.main.push(s.main[0].clone())).contains("already a term"));
    assert!(refused(&|s| s.axes.push((AxisSource::Recency, 1))).contains("already an axis"));
    assert_eq!(
        refused(&|s| s.axes[0].0 = AxisSource::Signal("dwell".into())),
        "axes[0].signal: unknown signal \"dwell\""
    );
    let wide = |s: &mut ProfileSpec| {
        let signal = |name: &str| AxisSource::Signal(name.into());
        s.axes = vec![(AxisSource::Recency, 4), (signal("views"), 4), (signal("likes"), 4), (signal("orders"), 1)];
    };
    assert_eq!(refused(&wide), "the axes have 13 digits in all, more than 12");
    assert_eq!(refused(&|s| s.main.clear()), "main: a profile has at least one term");
    // A declared signal is known to terms and axes.
    let mut s = spec();
    s.signals.insert("cart_adds".into(), SignalKind::Count);
    s.main.push(Term { signal: "cart_adds".into(), weight: 0.3, transform: Transform::Log1p });
    s.axes.insert(1, (AxisSource::Signal("cart_adds".into()), 2));
    let p = ScoringProfile::new(s).expect("valid");
    assert_eq!((p.layout().total_digits(), p.layout().bound()), (11, 1 << 15));
}

fn event(kind: EventKind, signal: &str, amount: i64) -> Event {
    Event {
        event_id: "e".into(),
        product_id: 1,
        kind,
        signal: signal.into(),
        retracts: String::new(),
        actor_id: String::new(),
        amount,
        occurred_at: chrono::DateTime::UNIX_EPOCH,
    }
}

#[test]
fn hourly_points_are_the_fixed_formulas_for_the_built_in_profile_and_follow_the_terms() {
    let p = ScoringProfile::built_in();
    assert_eq!(p.hourly_points(&event(EventKind::View, "", 0)), 0.1);
    assert_eq!(p.hourly_points(&event(EventKind::Like, "", 0)), 0.2);
    assert_eq!(p.hourly_points(&event(EventKind::Unlike, "", 0)), -0.2);
    assert_eq!(p.hourly_points(&event(EventKind::Order, "", 10_000)), (10_000f64).ln_1p() * 0.6);
    let mut s = spec();
    s.signals.insert("cart_adds".into(), SignalKind::Count);
    s.signals.insert("refunds".into(), SignalKind::Amount);
    s.main.push(Term { signal: "cart_adds".into(), weight: 0.5, transform: Transform::Log1p });
    s.main.push(Term { signal: "orders".into(), weight: 2.0, transform: Transform::Linear });
    let p = ScoringProfile::new(s).expect("valid");
    assert_eq!(p.hourly_points(&event(EventKind::Signal(SignalKind::Count), "cart_adds", 0)), 2f64.ln() * 0.5);
    assert_eq!(p.hourly_points(&event(EventKind::Signal(SignalKind::Amount), "refunds", 9)), 0.0, "no term");
    assert_eq!(p.hourly_points(&event(EventKind::Order, "", 0)), 2.0, "orders 2.0 + 0.6·ln(1)");
    assert_eq!(p.custom_signal("refunds"), Some((1, SignalKind::Amount)));
    assert_eq!(p.signal_name(SignalRef::Custom(0)), "cart_adds");
    assert!(p.has_built_in_axes());
}

proptest! {
    /// The built-in profile's main score is the original expression, bit for bit.
    #[test]
    fn the_built_in_main_score_is_the_fixed_formula(
        views in 0i64..1_000_000, likes in 0i64..1_000_000, amount in 0i64..1_000_000_000_000, carried in 0i64..4_194_304,
    ) {
        let p = ScoringProfile::built_in();
        let fixed_formula = views as f64 * 0.1 + likes as f64 * 0.2 + (amount as f64).ln_1p() * 0.6 + carried as f64 * 0.1;
        let metrics = DailyMetrics::counts(views, likes, 3, amount);
        prop_assert_eq!(p.main_score(&metrics, CarryOver(carried)).to_bits(), fixed_formula.to_bits());
    }
}
