//! Scoring profiles (SPEC §10.3): a platform's own signals, the terms of its main score and
//! its tie-break axes, checked once; the layout the axes give the encoding. The built-in
//! profile is §4 exactly. How a profile is written (TOML) is the configuration's business;
//! this module only holds what a valid one is.

use std::collections::BTreeMap;

use super::event::{Event, EventKind};
use super::layout::{Layout, LayoutError};
use super::score::{CarryOver, DailyMetrics, Weights};

/// The signals every profile has.
pub const BUILT_IN_SIGNALS: [&str; 4] = ["views", "likes", "orders", "order_amount"];
/// The reserved axis name: newer is better.
pub const RECENCY: &str = "recency";

/// Most custom signals a profile declares (each is one more column of a day's row).
pub const MAX_CUSTOM_SIGNALS: usize = 8;

/// What a custom signal counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SignalKind {
    /// Each event counts 1 (its amount must be 0).
    Count,
    /// Each event adds its amount, 0 … 10^12.
    Amount,
}

/// How a term's signal value enters the main score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Transform {
    /// The value itself.
    #[default]
    Linear,
    /// `ln(1 + value)`.
    Log1p,
}

/// One term of the main score: `weight · transform(value of signal)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// A built-in or declared signal.
    pub signal: String,
    /// A finite weight ≥ 0.
    pub weight: f64,
    /// Linear or log1p.
    pub transform: Transform,
}

/// What a tie-break axis ranks by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AxisSource {
    /// A signal's value; higher is better.
    Signal(String),
    /// The latest event of the day; newer is better.
    Recency,
}

/// A profile as written, before it is checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSpec {
    /// Factor on `floor(main of D−1)`.
    pub carry_over: f64,
    /// How many days back the carry-over chain goes.
    pub carry_days: u32,
    /// Custom signals by name.
    pub signals: BTreeMap<String, SignalKind>,
    /// The main score's terms, summed in this order.
    pub main: Vec<Term>,
    /// Tie-break axes, most significant first, with their digits.
    pub axes: Vec<(AxisSource, u8)>,
}

/// Why a profile is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// A custom signal takes a built-in's or the reserved axis's name.
    #[error("signals.{0}: the name of a built-in signal or of the recency axis")]
    Reserved(String),
    /// A custom signal's name is not `[a-z][a-z0-9_]{0,63}`.
    #[error("signals.{0:?}: a signal name is a-z, 0-9 and _, starting with a letter, at most 64 characters")]
    BadName(String),
    /// A term or axis names a signal the profile does not have.
    #[error("{field}: unknown signal {signal:?}")]
    UnknownSignal {
        /// Where (`main[2].signal`, `axes[1].signal`).
        field: String,
        /// The name.
        signal: String,
    },
    /// A weight or the carry-over factor is not a finite number ≥ 0.
    #[error("{field}: must be a finite number >= 0, got {value}")]
    BadWeight {
        /// Where (`main[0].weight`, `carry_over`).
        field: String,
        /// The value written.
        value: String,
    },
    /// A signal is a term twice, or an axis twice.
    #[error("{field}: {signal:?} is already {what}")]
    Repeated {
        /// Where.
        field: String,
        /// The signal.
        signal: String,
        /// `a term` or `an axis`.
        what: &'static str,
    },
    /// The main score has no term.
    #[error("main: a profile has at least one term")]
    NoTerm,
    /// More custom signals than [`MAX_CUSTOM_SIGNALS`].
    #[error("signals: at most {MAX_CUSTOM_SIGNALS} custom signals, got {0}")]
    TooManySignals(usize),
    /// `carry_days` is above 365.
    #[error("carry_days: must be 0-365, got {0}")]
    CarryDays(u32),
    /// The axes do not fit the encoding.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// Where a signal's value is in a day's row: a built-in counter or a custom signal's slot
/// (its place among the profile's custom signals, in name order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalRef {
    /// Views.
    Views,
    /// Likes net of unlikes.
    Likes,
    /// Orders.
    Orders,
    /// Sum of order amounts.
    OrderAmount,
    /// A custom signal's slot.
    Custom(u8),
}

impl SignalRef {
    /// The signal's value in `metrics`.
    pub fn value(self, metrics: &DailyMetrics) -> i64 {
        match self {
            Self::Views => metrics.views,
            Self::Likes => metrics.likes,
            Self::Orders => metrics.orders,
            Self::OrderAmount => metrics.order_amount,
            Self::Custom(slot) => metrics.custom[usize::from(slot)],
        }
    }
}

/// A term resolved to its signal's place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreTerm {
    /// The signal.
    pub signal: SignalRef,
    /// Its weight.
    pub weight: f64,
    /// Its transform.
    pub transform: Transform,
}

impl ScoreTerm {
    /// `transform(value) · weight`, in this order (the first wave's `ln_1p(amount) · w`).
    pub fn points(&self, value: i64) -> f64 {
        match self.transform {
            Transform::Linear => value as f64 * self.weight,
            Transform::Log1p => (value as f64).ln_1p() * self.weight,
        }
    }
}

/// A tie-break axis resolved: what it reads of a product.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AxisRef {
    /// A signal's value, higher is better.
    Signal(SignalRef),
    /// The latest event, newer is better.
    Recency,
}

/// A checked profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoringProfile {
    spec: ProfileSpec,
    layout: Layout,
    /// The custom signals in slot order (name order).
    custom: Vec<(String, SignalKind)>,
    /// Their names alone, what the store reads.
    custom_names: Vec<String>,
    terms: Vec<ScoreTerm>,
    axes: Vec<AxisRef>,
}

impl ScoringProfile {
    /// Checks `spec`: names, weights, terms, axes and their layout.
    pub fn new(spec: ProfileSpec) -> Result<Self, ProfileError> {
        for name in spec.signals.keys() {
            if BUILT_IN_SIGNALS.contains(&name.as_str()) || name == RECENCY {
                return Err(ProfileError::Reserved(name.clone()));
            }
            let mut chars = name.chars();
            let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
            if !first_ok || name.len() > 64 || !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(ProfileError::BadName(name.clone()));
            }
        }
        let known = |s: &str| BUILT_IN_SIGNALS.contains(&s) || spec.signals.contains_key(s);
        let weight_ok = |w: f64| w.is_finite() && w >= 0.0;
        if !weight_ok(spec.carry_over) {
            return Err(ProfileError::BadWeight { field: "carry_over".into(), value: spec.carry_over.to_string() });
        }
        if spec.main.is_empty() {
            return Err(ProfileError::NoTerm);
        }
        for (i, term) in spec.main.iter().enumerate() {
            if !known(&term.signal) {
                return Err(ProfileError::UnknownSignal {
                    field: format!("main[{i}].signal"),
                    signal: term.signal.clone(),
                });
            }
            if !weight_ok(term.weight) {
                return Err(ProfileError::BadWeight {
                    field: format!("main[{i}].weight"),
                    value: term.weight.to_string(),
                });
            }
            if spec.main[..i].iter().any(|t| t.signal == term.signal) {
                let field = format!("main[{i}].signal");
                return Err(ProfileError::Repeated { field, signal: term.signal.clone(), what: "a term" });
            }
        }
        for (i, (source, _)) in spec.axes.iter().enumerate() {
            if let AxisSource::Signal(s) = source
                && !known(s)
            {
                return Err(ProfileError::UnknownSignal { field: format!("axes[{i}].signal"), signal: s.clone() });
            }
            if spec.axes[..i].iter().any(|(other, _)| other == source) {
                let signal = match source {
                    AxisSource::Signal(s) => s.clone(),
                    AxisSource::Recency => RECENCY.into(),
                };
                return Err(ProfileError::Repeated { field: format!("axes[{i}].signal"), signal, what: "an axis" });
            }
        }
        if spec.signals.len() > MAX_CUSTOM_SIGNALS {
            return Err(ProfileError::TooManySignals(spec.signals.len()));
        }
        if spec.carry_days > 365 {
            return Err(ProfileError::CarryDays(spec.carry_days));
        }
        let digits: Vec<u8> = spec.axes.iter().map(|(_, d)| *d).collect();
        let layout = Layout::new(&digits)?;
        let custom: Vec<(String, SignalKind)> = spec.signals.iter().map(|(n, k)| (n.clone(), *k)).collect();
        let resolve = |name: &str| match name {
            "views" => SignalRef::Views,
            "likes" => SignalRef::Likes,
            "orders" => SignalRef::Orders,
            "order_amount" => SignalRef::OrderAmount,
            // Checked above: every other name is a declared signal.
            other => SignalRef::Custom(custom.iter().position(|(n, _)| n == other).unwrap_or(0) as u8),
        };
        let terms = spec
            .main
            .iter()
            .map(|t| ScoreTerm { signal: resolve(&t.signal), weight: t.weight, transform: t.transform })
            .collect();
        let axes = spec
            .axes
            .iter()
            .map(|(source, _)| match source {
                AxisSource::Signal(name) => AxisRef::Signal(resolve(name)),
                AxisSource::Recency => AxisRef::Recency,
            })
            .collect();
        let custom_names = custom.iter().map(|(n, _)| n.clone()).collect();
        Ok(Self { spec, layout, custom, custom_names, terms, axes })
    }

    /// The built-in profile with the weights, carry-over and carry days of the first wave's
    /// variables (`RANKING_WEIGHT_*`, `RANKING_CARRY_OVER`, `RANKING_CARRY_DAYS`).
    pub fn built_in_with(weights: Weights, carry_days: u32) -> Result<Self, ProfileError> {
        let mut spec = Self::built_in().spec;
        spec.carry_over = weights.carry_over;
        spec.carry_days = carry_days;
        for (term, weight) in spec.main.iter_mut().zip([weights.view, weights.like, weights.order]) {
            term.weight = weight;
        }
        Self::new(spec)
    }

    /// The custom signals, in slot order.
    pub fn custom_signals(&self) -> &[(String, SignalKind)] {
        &self.custom
    }

    /// The names of the custom signals, in slot order (the columns a day's row is read with).
    pub fn custom_names(&self) -> &[String] {
        &self.custom_names
    }

    /// The slot and kind of custom signal `name`.
    pub fn custom_signal(&self, name: &str) -> Option<(u8, SignalKind)> {
        self.custom.iter().position(|(n, _)| n == name).map(|i| (i as u8, self.custom[i].1))
    }

    /// Every signal of the profile: the built-in ones, then the custom ones in slot order.
    pub fn signals(&self) -> impl Iterator<Item = SignalRef> + '_ {
        [SignalRef::Views, SignalRef::Likes, SignalRef::Orders, SignalRef::OrderAmount]
            .into_iter()
            .chain((0..self.custom.len()).map(|slot| SignalRef::Custom(slot as u8)))
    }

    /// The main score's terms, in the order written.
    pub fn terms(&self) -> &[ScoreTerm] {
        &self.terms
    }

    /// The tie-break axes, most significant first.
    pub fn axes(&self) -> &[AxisRef] {
        &self.axes
    }

    /// The name of a signal.
    pub fn signal_name(&self, signal: SignalRef) -> &str {
        match signal {
            SignalRef::Views => "views",
            SignalRef::Likes => "likes",
            SignalRef::Orders => "orders",
            SignalRef::OrderAmount => "order_amount",
            SignalRef::Custom(slot) => self.custom.get(usize::from(slot)).map_or("", |(n, _)| n.as_str()),
        }
    }

    /// The name of axis `i` (a signal's or `recency`).
    pub fn axis_name(&self, i: usize) -> &str {
        match self.axes.get(i) {
            Some(AxisRef::Signal(s)) => self.signal_name(*s),
            Some(AxisRef::Recency) => RECENCY,
            None => "",
        }
    }

    /// Whether the axes are the built-in ones (views, likes, recency of three digits each):
    /// then a breakdown also fills the first wave's three named norms.
    pub fn has_built_in_axes(&self) -> bool {
        self.axes == [AxisRef::Signal(SignalRef::Views), AxisRef::Signal(SignalRef::Likes), AxisRef::Recency]
            && self.layout.digits() == [3, 3, 3]
    }

    /// Factor on the carried integer part.
    pub fn carry_over(&self) -> f64 {
        self.spec.carry_over
    }

    /// Days the carry-over chain goes back.
    pub fn carry_days(&self) -> u32 {
        self.spec.carry_days
    }

    /// `main = Σ points of the terms, in order + carried · carry_over`, added left to right
    /// (for the built-in profile exactly the first wave's expression).
    pub fn main_score(&self, metrics: &DailyMetrics, carried: CarryOver) -> f64 {
        self.main_without_carry(metrics) + carried.0 as f64 * self.spec.carry_over
    }

    /// The terms alone (the weekly window's main score).
    pub fn main_without_carry(&self, metrics: &DailyMetrics) -> f64 {
        let mut points = self.terms.iter().map(|t| t.points(t.signal.value(metrics)));
        // Starting from the first term rather than 0.0 keeps the first wave's bits.
        let first = points.next().unwrap_or(0.0);
        points.fold(first, |sum, p| sum + p)
    }

    /// What one fresh event adds to the hourly approximation: the points of every term its
    /// signal feeds, the event's value alone transformed (a LIKE's +0.2, an UNLIKE's −0.2,
    /// an ORDER's `0.6·ln_1p(amount)` for the built-in profile).
    pub fn hourly_points(&self, event: &Event) -> f64 {
        let (fed, n) = match event.kind {
            EventKind::View => ([(SignalRef::Views, 1), (SignalRef::Views, 0)], 1),
            EventKind::Like | EventKind::Unlike => ([(SignalRef::Likes, 1), (SignalRef::Likes, 0)], 1),
            EventKind::Order => ([(SignalRef::Orders, 1), (SignalRef::OrderAmount, event.amount)], 2),
            EventKind::Signal(kind) => {
                let Some((slot, _)) = self.custom_signal(&event.signal) else { return 0.0 };
                let value = if kind == SignalKind::Count { 1 } else { event.amount };
                ([(SignalRef::Custom(slot), value), (SignalRef::Custom(slot), 0)], 1)
            }
        };
        let mut total: Option<f64> = None;
        for term in &self.terms {
            for (signal, value) in &fed[..n] {
                if term.signal == *signal {
                    let p = term.points(*value);
                    total = Some(total.map_or(p, |t| t + p));
                }
            }
        }
        let total = total.unwrap_or(0.0);
        if event.kind == EventKind::Unlike { -total } else { total }
    }

    /// §4 written out: views 0.1, likes 0.2, log1p(order amount) 0.6, carry-over 0.1 for 7
    /// days; axes views, likes, recency of three digits each.
    pub fn built_in() -> Self {
        let term = |signal: &str, weight, transform| Term { signal: signal.into(), weight, transform };
        let spec = ProfileSpec {
            carry_over: 0.1,
            carry_days: 7,
            signals: BTreeMap::new(),
            main: vec![
                term("views", 0.1, Transform::Linear),
                term("likes", 0.2, Transform::Linear),
                term("order_amount", 0.6, Transform::Log1p),
            ],
            axes: vec![
                (AxisSource::Signal("views".into()), 3),
                (AxisSource::Signal("likes".into()), 3),
                (AxisSource::Recency, 3),
            ],
        };
        Self::new(spec).unwrap_or_else(|e| unreachable!("the built-in profile is valid: {e}"))
    }

    /// The profile as written.
    pub fn spec(&self) -> &ProfileSpec {
        &self.spec
    }

    /// The encoding its axes give.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// A stable fingerprint of what the profile computes (signals, terms, carry-over, axes),
    /// recorded with every version so that a version is explained with its own profile: the
    /// FNV-1a hash of its canonical text, as 16 hex digits.
    pub fn fingerprint(&self) -> String {
        let s = &self.spec;
        let mut text = format!("carry_over={:?};carry_days={};", s.carry_over.to_bits(), s.carry_days);
        for (name, kind) in &s.signals {
            text.push_str(&format!("signal={name}:{kind:?};"));
        }
        for t in &s.main {
            text.push_str(&format!("term={}:{:?}:{:?};", t.signal, t.weight.to_bits(), t.transform));
        }
        for (source, digits) in &s.axes {
            text.push_str(&format!("axis={source:?}:{digits};"));
        }
        let hash =
            text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        format!("{hash:016x}")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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
            amount,
            occurred_at: chrono::DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn hourly_points_are_the_first_waves_for_the_built_in_profile_and_follow_the_terms() {
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
        /// The built-in profile's main score is the first wave's expression, bit for bit.
        #[test]
        fn the_built_in_main_score_is_the_first_waves(
            views in 0i64..1_000_000, likes in 0i64..1_000_000, amount in 0i64..1_000_000_000_000, carried in 0i64..4_194_304,
        ) {
            let p = ScoringProfile::built_in();
            let first_wave = views as f64 * 0.1 + likes as f64 * 0.2 + (amount as f64).ln_1p() * 0.6 + carried as f64 * 0.1;
            let metrics = DailyMetrics::counts(views, likes, 3, amount);
            prop_assert_eq!(p.main_score(&metrics, CarryOver(carried)).to_bits(), first_wave.to_bits());
        }
    }
}
