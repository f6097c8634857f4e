//! A scoring profile's text form: TOML read into a [`ScoringProfile`] and written back out
//! by the same serde types (the canonical text `scoring_profiles` keeps). Unknown keys are
//! refused (`deny_unknown_fields`); every other rule is the profile's own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AxisSource, ProfileSpec, RECENCY, ScoringProfile, Term, Transform};
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

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SignalFile {
    kind: KindFile,
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
    let spec = ProfileSpec {
        carry_over: file.carry_over,
        carry_days: file.carry_days,
        signals: file
            .signals
            .into_iter()
            .map(|(name, s)| {
                let kind = match s.kind {
                    KindFile::Count => SignalKind::Count,
                    KindFile::Amount => SignalKind::Amount,
                };
                (name, kind)
            })
            .collect(),
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
        signals: spec
            .signals
            .iter()
            .map(|(name, kind)| {
                let kind = match kind {
                    SignalKind::Count => KindFile::Count,
                    SignalKind::Amount => KindFile::Amount,
                };
                (name.clone(), SignalFile { kind })
            })
            .collect(),
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
    fn refusals_name_the_problem() {
        let unknown_key = format!("{BUILT_IN}\nbogus = 1\n");
        assert!(parse(&unknown_key).expect_err("unknown key").contains("bogus"));
        let bad_transform = BUILT_IN.replace("transform = \"log1p\"", "transform = \"sqrt\"");
        assert!(parse(&bad_transform).expect_err("transform").contains("sqrt"));
        let unknown_signal = BUILT_IN.replace("signal = \"likes\"\nweight", "signal = \"cart_adds\"\nweight");
        assert_eq!(parse(&unknown_signal).expect_err("signal"), "main[1].signal: unknown signal \"cart_adds\"");
        let wide = BUILT_IN.replace("digits = 3", "digits = 4") + "[[axes]]\nsignal = \"orders\"\ndigits = 1\n";
        assert_eq!(parse(&wide).expect_err("digits"), "the axes have 13 digits in all, more than 12");
    }
}
