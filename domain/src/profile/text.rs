//! A scoring profile's text form: TOML read into a [`ScoringProfile`] and written back out
//! by the same serde types (the canonical text `scoring_profiles` keeps). Unknown keys are
//! refused (`deny_unknown_fields`); every other rule is the profile's own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AxisSource, BUILT_IN_SIGNALS, ProfileSpec, RECENCY, ScoringProfile, Term, Transform};
use crate::cap::Cap;
use crate::vocabulary::SignalKind;

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct File {
    carry_over: f64,
    carry_days: u32,
    #[serde(default)]
    signals: BTreeMap<String, SignalFile>,
    main: Vec<TermFile>,
    axes: Vec<AxisFile>,
}

/// A `[signals.NAME]` table: a custom signal's kind, and a count signal's cap (views take
/// only the cap).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SignalFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<KindFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    per_actor: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    actor_required: bool,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum KindFile {
    Count,
    Amount,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TermFile {
    signal: String,
    weight: f64,
    #[serde(default)]
    transform: TransformFile,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum TransformFile {
    #[default]
    Linear,
    Log1p,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct AxisFile {
    signal: String,
    digits: u8,
}

/// The profile `text` (TOML) describes, or what is wrong with it.
pub fn parse(text: &str) -> Result<ScoringProfile, String> {
    let file: File = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
    let mut signals = BTreeMap::new();
    let mut caps = BTreeMap::new();
    for (name, s) in file.signals {
        let built_in = BUILT_IN_SIGNALS.contains(&name.as_str());
        match s.kind {
            Some(_) if built_in => return Err(format!("signals.{name}.kind: {name} is a built-in signal")),
            Some(KindFile::Count) => drop(signals.insert(name.clone(), SignalKind::Count)),
            Some(KindFile::Amount) => drop(signals.insert(name.clone(), SignalKind::Amount)),
            None if built_in => {}
            None => return Err(format!("signals.{name}.kind: required for a custom signal (\"count\" or \"amount\")")),
        }
        let cap = Cap { per_actor: s.per_actor, actor_required: s.actor_required };
        if cap != Cap::default() {
            caps.insert(name, cap);
        }
    }
    let spec = ProfileSpec {
        carry_over: file.carry_over,
        carry_days: file.carry_days,
        signals,
        caps,
        main: file
            .main
            .into_iter()
            .map(|t| Term {
                signal: t.signal,
                weight: t.weight,
                transform: match t.transform {
                    TransformFile::Linear => Transform::Linear,
                    TransformFile::Log1p => Transform::Log1p,
                },
            })
            .collect(),
        axes: file
            .axes
            .into_iter()
            .map(|a| {
                let source = if a.signal == RECENCY { AxisSource::Recency } else { AxisSource::Signal(a.signal) };
                (source, a.digits)
            })
            .collect(),
    };
    ScoringProfile::new(spec).map_err(|e| e.to_string())
}

/// What `ranking-server --check-profile FILE` prints for a valid profile: its signals,
/// terms and the encoding its axes give.
pub fn describe(profile: &ScoringProfile) -> String {
    let spec = profile.spec();
    let layout = profile.layout();
    let mut out = String::new();
    let custom: Vec<String> = spec.signals.iter().map(|(n, k)| format!("{n} ({k:?})")).collect();
    out.push_str(&format!(
        "signals: views, likes, orders, order_amount{}\n",
        custom.iter().map(|c| format!(", {c}")).collect::<String>()
    ));
    out.push_str("main = ");
    let terms: Vec<String> = spec
        .main
        .iter()
        .map(|t| match t.transform {
            Transform::Linear => format!("{}·{}", t.weight, t.signal),
            Transform::Log1p => format!("{}·ln(1 + {})", t.weight, t.signal),
        })
        .collect();
    out.push_str(&terms.join(" + "));
    out.push_str(&format!(" + {}·floor(main of the day before), back {} days\n", spec.carry_over, spec.carry_days));
    for (i, ((source, digits), max)) in
        spec.axes.iter().zip((0..spec.axes.len()).map(|i| layout.max_norm(i))).enumerate()
    {
        let name = match source {
            AxisSource::Signal(s) => s.as_str(),
            AxisSource::Recency => RECENCY,
        };
        out.push_str(&format!("axis {}: {name}, {digits} digits (norms 0-{max})\n", i + 1));
    }
    for (name, cap) in &spec.caps {
        let limit = cap.per_actor.map_or("no cap".to_string(), |n| format!("at most {n} per actor, product and day"));
        let required = if cap.actor_required { ", actor_id required" } else { "" };
        out.push_str(&format!("cap: {name}, {limit}{required}\n"));
    }
    out.push_str(&format!(
        "encoding: {} digits after the point; the main score's integer part is clamped below 2^{} = {}\nfingerprint: {}\n",
        layout.total_digits(),
        layout.bound().ilog2(),
        layout.bound(),
        profile.fingerprint()
    ));
    out
}

/// The canonical TOML text of `profile`: what `scoring_profiles` keeps for ExplainRank of a
/// version computed with it, and parses back into the same profile (weights in their
/// shortest exact decimal form).
pub fn to_toml(profile: &ScoringProfile) -> String {
    let spec = profile.spec();
    let file = File {
        carry_over: spec.carry_over,
        carry_days: spec.carry_days,
        signals: {
            let mut signals: BTreeMap<String, SignalFile> = spec
                .signals
                .iter()
                .map(|(name, kind)| {
                    let kind = match kind {
                        SignalKind::Count => KindFile::Count,
                        SignalKind::Amount => KindFile::Amount,
                    };
                    (name.clone(), SignalFile { kind: Some(kind), ..SignalFile::default() })
                })
                .collect();
            for (name, cap) in &spec.caps {
                let file = signals.entry(name.clone()).or_default();
                file.per_actor = cap.per_actor;
                file.actor_required = cap.actor_required;
            }
            signals
        },
        main: spec
            .main
            .iter()
            .map(|t| TermFile {
                signal: t.signal.clone(),
                weight: t.weight,
                transform: match t.transform {
                    Transform::Linear => TransformFile::Linear,
                    Transform::Log1p => TransformFile::Log1p,
                },
            })
            .collect(),
        axes: spec
            .axes
            .iter()
            .map(|(source, digits)| {
                let signal = match source {
                    AxisSource::Signal(s) => s.clone(),
                    AxisSource::Recency => RECENCY.to_string(),
                };
                AxisFile { signal, digits: *digits }
            })
            .collect(),
    };
    // Plain numbers, strings and tables: nothing in a profile fails to serialize.
    toml::to_string(&file).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in profile written out, as docs/SCORING.md shows it.
    const BUILT_IN: &str = include_str!("../../../deploy/profiles/built-in.toml");

    #[test]
    fn the_built_in_profile_written_out_is_the_built_in_profile() {
        assert_eq!(parse(BUILT_IN).expect("valid"), ScoringProfile::built_in());
    }

    #[test]
    fn a_worked_profile_with_a_custom_signal_parses() {
        let text = format!(
            "{BUILT_IN}\n[signals.cart_adds]\nkind = \"count\"\n[[main]]\nsignal = \"cart_adds\"\nweight = 0.3\ntransform = \"log1p\"\n"
        );
        let p = parse(&text).expect("valid");
        assert_eq!(p.spec().signals.get("cart_adds"), Some(&SignalKind::Count));
        let described = describe(&p);
        assert!(described.contains("0.3·ln(1 + cart_adds)"), "{described}");
        assert!(described.contains("clamped below 2^22 = 4194304"), "{described}");
    }

    #[test]
    fn the_canonical_text_parses_back_into_the_same_profile() {
        let text = format!(
            "{BUILT_IN}\n[signals.cart_adds]\nkind = \"count\"\n[signals.refunds]\nkind = \"amount\"\n\
             [[main]]\nsignal = \"cart_adds\"\nweight = 0.30000000000000004\ntransform = \"log1p\"\n"
        );
        let built_in = to_toml(&ScoringProfile::built_in());
        for line in [
            "carry_over = 0.1",
            "[[main]]",
            "signal = \"order_amount\"",
            "weight = 0.6",
            "transform = \"log1p\"",
            "[[axes]]",
        ] {
            assert!(built_in.lines().any(|l| l == line), "{line:?} in\n{built_in}");
        }
        for profile in [ScoringProfile::built_in(), parse(&text).expect("valid")] {
            let again = parse(&to_toml(&profile)).expect("the canonical text is valid");
            assert_eq!(again, profile);
            assert_eq!(again.fingerprint(), profile.fingerprint());
        }
    }

    #[test]
    fn a_distinct_viewers_profile_caps_views_and_keeps_its_caps_through_the_canonical_text() {
        let text = format!(
            "{BUILT_IN}\n[signals.views]\nper_actor = 1\n[signals.cart_adds]\nkind = \"count\"\nper_actor = 3\nactor_required = true\n"
        );
        let p = parse(&text).expect("valid");
        assert_eq!(p.cap(super::super::SignalRef::Views), Cap { per_actor: Some(1), actor_required: false });
        let cart = p.custom_signal("cart_adds").expect("declared").0;
        assert_eq!(p.cap(super::super::SignalRef::Custom(cart)), Cap { per_actor: Some(3), actor_required: true });
        assert_ne!(p.fingerprint(), parse(BUILT_IN).expect("valid").fingerprint());
        let again = parse(&to_toml(&p)).expect("the canonical text is valid");
        assert_eq!(again, p);
        assert!(describe(&p).contains("cap: views, at most 1 per actor, product and day\n"), "{}", describe(&p));
    }

    #[test]
    fn refusals_name_the_problem() {
        let unknown_key = format!("{BUILT_IN}\nbogus = 1\n");
        assert!(parse(&unknown_key).expect_err("unknown key").contains("bogus"));
        let bad_transform = BUILT_IN.replace("transform = \"log1p\"", "transform = \"sqrt\"");
        assert!(parse(&bad_transform).expect_err("transform").contains("sqrt"));
        let unknown_signal = BUILT_IN.replace("signal = \"likes\"\nweight", "signal = \"cart_adds\"\nweight");
        assert_eq!(parse(&unknown_signal).expect_err("signal"), "main[1].signal: unknown signal \"cart_adds\"");
        let likes = format!("{BUILT_IN}\n[signals.likes]\nper_actor = 1\n");
        assert_eq!(
            parse(&likes).expect_err("likes"),
            "signals.likes: per_actor and actor_required apply to views and custom count signals"
        );
        let zero = format!("{BUILT_IN}\n[signals.views]\nper_actor = 0\n");
        assert_eq!(parse(&zero).expect_err("zero"), "signals.views.per_actor: must be 1-1000000, got 0");
        let kindless = format!("{BUILT_IN}\n[signals.cart_adds]\nper_actor = 1\n");
        assert!(parse(&kindless).expect_err("kind").starts_with("signals.cart_adds.kind: required"));
        let views_kind = format!("{BUILT_IN}\n[signals.views]\nkind = \"count\"\n");
        assert_eq!(parse(&views_kind).expect_err("views kind"), "signals.views.kind: views is a built-in signal");
        let amount = format!("{BUILT_IN}\n[signals.refunds]\nkind = \"amount\"\nper_actor = 2\n");
        assert!(parse(&amount).expect_err("amount").starts_with("signals.refunds: per_actor"));
        let wide = BUILT_IN.replace("digits = 3", "digits = 4") + "[[axes]]\nsignal = \"orders\"\ndigits = 1\n";
        assert_eq!(parse(&wide).expect_err("digits"), "the axes have 13 digits in all, more than 12");
    }
}
