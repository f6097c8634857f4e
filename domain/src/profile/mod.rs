//! Scoring profiles: a platform's own signals, the terms of its main score and
//! its tie-break axes, checked once; the layout the axes give the encoding. The built-in
//! profile is the original fixed formula exactly. This module holds what a valid one is,
//! [`scoring`] what a profile computes, [`text`] how one is written (TOML).

use std::collections::BTreeMap;

use super::cap::{Cap, MAX_PER_ACTOR};
use super::layout::{Layout, LayoutError};
use super::vocabulary::{Event, EventKind, MAX_CUSTOM_SIGNALS, SignalKind};

mod scoring;
pub mod text;

pub use scoring::{AxisRef, ScoreTerm, SignalRef};

/// The signals every profile has.
pub const BUILT_IN_SIGNALS: [&str; 4] = ["views", "likes", "orders", "order_amount"];
/// The reserved axis name: newer is better.
pub const RECENCY: &str = "recency";

/// The original weights of the main score (`RANKING_WEIGHT_*`, `RANKING_CARRY_OVER`),
/// which make the built-in profile when no `RANKING_PROFILE` is set; the defaults are 0.1
/// per view, 0.2 per like, 0.6 per ln(1 + order amount), and 0.1 of yesterday's integer
/// part carried over.
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
    /// Per-actor caps by signal name (`views` or a custom count signal).
    pub caps: BTreeMap<String, Cap>,
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
    /// A cap on a signal that cannot have one.
    #[error("signals.{0}: per_actor and actor_required apply to views and custom count signals")]
    NotCappable(String),
    /// A cap outside `1..=MAX_PER_ACTOR`.
    #[error("signals.{signal}.per_actor: must be 1-{MAX_PER_ACTOR}, got {value}")]
    PerActor {
        /// The signal.
        signal: String,
        /// The value written.
        value: u32,
    },
    /// `carry_days` is above 365.
    #[error("carry_days: must be 0-365, got {0}")]
    CarryDays(u32),
    /// The axes do not fit the encoding.
    #[error(transparent)]
    Layout(#[from] LayoutError),
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
    /// [`ScoringProfile::has_built_in_axes`], decided once: every decoded entry asks.
    built_in_axes: bool,
    /// The cap of views, and of each custom signal by slot.
    view_cap: Cap,
    custom_caps: Vec<Cap>,
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
        for (name, cap) in &spec.caps {
            if name != "views" && spec.signals.get(name) != Some(&SignalKind::Count) {
                return Err(ProfileError::NotCappable(name.clone()));
            }
            if let Some(value) = cap.per_actor.filter(|n| !(1..=MAX_PER_ACTOR).contains(n)) {
                return Err(ProfileError::PerActor { signal: name.clone(), value });
            }
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
        let built_in_axes = axes
            == [AxisRef::Signal(SignalRef::Views), AxisRef::Signal(SignalRef::Likes), AxisRef::Recency]
            && layout.digits() == [3, 3, 3];
        let cap_of = |name: &str| spec.caps.get(name).copied().unwrap_or_default();
        let view_cap = cap_of("views");
        let custom_caps = custom.iter().map(|(n, _)| cap_of(n)).collect();
        Ok(Self { spec, layout, custom, custom_names, terms, axes, built_in_axes, view_cap, custom_caps })
    }

    /// The built-in profile with the weights, carry-over and carry days of the original
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

    /// The cap of `signal` (the default, uncapped, for every signal but views and custom
    /// count signals).
    pub fn cap(&self, signal: SignalRef) -> Cap {
        match signal {
            SignalRef::Views => self.view_cap,
            SignalRef::Custom(slot) => self.custom_caps.get(usize::from(slot)).copied().unwrap_or_default(),
            _ => Cap::default(),
        }
    }

    /// The signal `event` counts towards and its cap, for the events a cap applies to (VIEW
    /// and custom count SIGNAL events).
    pub fn cap_of(&self, event: &Event) -> Option<(SignalRef, Cap)> {
        let signal = match event.kind {
            EventKind::View => SignalRef::Views,
            EventKind::Signal(SignalKind::Count) => SignalRef::Custom(self.custom_signal(&event.signal)?.0),
            _ => return None,
        };
        Some((signal, self.cap(signal)))
    }

    /// Whether any signal is capped per actor (and so has per-actor rows in the store).
    pub fn caps_any(&self) -> bool {
        self.signals().any(|s| self.cap(s).per_actor.is_some())
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
    /// then a breakdown also fills the original three named norms.
    pub fn has_built_in_axes(&self) -> bool {
        self.built_in_axes
    }

    /// Factor on the carried integer part.
    pub fn carry_over(&self) -> f64 {
        self.spec.carry_over
    }

    /// Days the carry-over chain goes back.
    pub fn carry_days(&self) -> u32 {
        self.spec.carry_days
    }

    /// §4 written out: views 0.1, likes 0.2, log1p(order amount) 0.6, carry-over 0.1 for 7
    /// days; axes views, likes, recency of three digits each.
    pub fn built_in() -> Self {
        let term = |signal: &str, weight, transform| Term { signal: signal.into(), weight, transform };
        let spec = ProfileSpec {
            carry_over: 0.1,
            carry_days: 7,
            signals: BTreeMap::new(),
            caps: BTreeMap::new(),
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

    /// A stable fingerprint of what the profile computes (signals, terms, carry-over, axes,
    /// caps), recorded with every version so that a version is explained with its own
    /// profile: the FNV-1a hash of its canonical text, as 16 hex digits.
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
        // Written only when set, so a profile without caps keeps the fingerprint it had
        // before caps existed.
        for (name, cap) in s.caps.iter().filter(|(_, c)| **c != Cap::default()) {
            text.push_str(&format!("cap={name}:{:?}:{};", cap.per_actor, cap.actor_required));
        }
        let hash =
            text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        format!("{hash:016x}")
    }
}

#[cfg(test)]
mod tests;
