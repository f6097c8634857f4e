//! Scoring profiles (SPEC §10.3): a platform's own signals, the terms of its main score and
//! its tie-break axes, checked once; the layout the axes give the encoding. The built-in
//! profile is §4 exactly. How a profile is written (TOML) is the configuration's business;
//! this module only holds what a valid one is.

use std::collections::BTreeMap;

use super::layout::{Layout, LayoutError};

/// The signals every profile has.
pub const BUILT_IN_SIGNALS: [&str; 4] = ["views", "likes", "orders", "order_amount"];
/// The reserved axis name: newer is better.
pub const RECENCY: &str = "recency";

/// What a custom signal counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// The axes do not fit the encoding.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// A checked profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoringProfile {
    spec: ProfileSpec,
    layout: Layout,
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
        let digits: Vec<u8> = spec.axes.iter().map(|(_, d)| *d).collect();
        let layout = Layout::new(&digits)?;
        Ok(Self { spec, layout })
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
}
