//! `RANKING_PROFILE`: the scoring profile's file, read and parsed by the profile's own text
//! form; a refusal names the file and the problem. `RANKING_PROFILES`: the variants beside
//! it, each checked against it (the counts in SQL are the same for all, so a variant keeps
//! its signals and caps); `RANKING_EXPERIMENT`: the split of shoppers between profiles.

use std::path::Path;

use crate::app::policy::DEFAULT_PROFILE;
use crate::domain::experiment::Experiment;
use crate::domain::profile::{ScoringProfile, text};

/// Longest profile name: what SQL keeps with a variant's rows.
const MAX_NAME: usize = 64;

/// The variants of `RANKING_PROFILES` (`name=path,…`), in the order listed, each checked
/// against `storage`, the service's profile.
pub fn variants(list: &str, storage: &ScoringProfile) -> Result<Vec<(String, ScoringProfile)>, String> {
    let mut variants: Vec<(String, ScoringProfile)> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, path) =
            item.split_once('=').ok_or_else(|| format!("RANKING_PROFILES: `{item}`: expected name=path"))?;
        let name = name.trim();
        if let Some(problem) = name_problem(name) {
            return Err(format!("RANKING_PROFILES: `{name}`: {problem}"));
        }
        if variants.iter().any(|(n, _)| n == name) {
            return Err(format!("RANKING_PROFILES: `{name}` is listed twice"));
        }
        let profile = load(Path::new(path.trim())).map_err(|e| format!("RANKING_PROFILES: {name}: {e}"))?;
        check_variant(&profile, storage).map_err(|e| format!("RANKING_PROFILES: {name}: {e}"))?;
        variants.push((name.to_string(), profile));
    }
    Ok(variants)
}

/// Why `name` cannot name a variant: 1–64 of `a-z 0-9 _ -` (it is a NATS subject token and
/// a SQL key), and not the service profile's own name.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Some(format!("a profile's name takes 1 to {MAX_NAME} characters"));
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-') {
        return Some("a profile's name takes only a-z, 0-9, _ and -".into());
    }
    if name == DEFAULT_PROFILE {
        return Some(format!("`{DEFAULT_PROFILE}` is the service's own profile (RANKING_PROFILE)"));
    }
    None
}

/// A variant declares exactly the service profile's custom signals (names, kinds, order) and
/// caps: the field that differs is named.
fn check_variant(variant: &ScoringProfile, storage: &ScoringProfile) -> Result<(), String> {
    let (mine, theirs) = (variant.spec(), storage.spec());
    if let Some(name) =
        mine.signals.keys().chain(theirs.signals.keys()).find(|n| mine.signals.get(*n) != theirs.signals.get(*n))
    {
        return Err(format!(
            "signals.{name}: a variant declares the service profile's signals as they are (the counts in SQL are shared)"
        ));
    }
    if let Some(name) = mine.caps.keys().chain(theirs.caps.keys()).find(|n| mine.caps.get(*n) != theirs.caps.get(*n)) {
        return Err(format!(
            "signals.{name}.per_actor: a variant caps signals as the service profile does (the counts in SQL are shared)"
        ));
    }
    Ok(())
}

/// The experiment of `RANKING_EXPERIMENT` (empty: none), its variants each a profile in
/// `profiles`.
pub fn experiment(text: &str, profiles: &[&str]) -> Result<Option<Experiment>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let experiment = Experiment::parse(text.trim()).map_err(|e| format!("RANKING_EXPERIMENT: {e}"))?;
    if let Some(unknown) = experiment.variants().find(|v| !profiles.contains(v)) {
        return Err(format!(
            "RANKING_EXPERIMENT: variant `{unknown}` is no profile (`{DEFAULT_PROFILE}` or a RANKING_PROFILES name)"
        ));
    }
    Ok(Some(experiment))
}

/// The profile in the file at `path`.
pub fn load(path: &Path) -> Result<ScoringProfile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> std::path::PathBuf {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("variant-{}-{n}.toml", std::process::id()));
        std::fs::write(&path, format!("carry_over = 0.1\ncarry_days = 7\n{text}")).expect("written");
        path
    }

    #[test]
    fn variants_keep_the_service_profiles_signals_and_caps_and_are_named_well() {
        let built_in = ScoringProfile::built_in();
        let same = file("[[main]]\nsignal = \"likes\"\nweight = 1.0\n[[axes]]\nsignal = \"recency\"\ndigits = 3\n");
        let listed = variants(&format!(" likes={} ", same.display()), &built_in).expect("a valid variant");
        assert_eq!(listed.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["likes"]);
        assert!(variants("", &built_in).expect("none").is_empty());
        let custom = file(
            "[signals.cart_adds]\nkind = \"count\"\n[[main]]\nsignal = \"cart_adds\"\nweight = 1.0\n[[axes]]\nsignal = \"recency\"\ndigits = 3\n",
        );
        let capped = file(
            "[signals.views]\nper_actor = 2\n[[main]]\nsignal = \"views\"\nweight = 1.0\n[[axes]]\nsignal = \"recency\"\ndigits = 3\n",
        );
        for (list, wanted) in [
            (format!("cart={}", custom.display()), "RANKING_PROFILES: cart: signals.cart_adds:"),
            (format!("capped={}", capped.display()), "RANKING_PROFILES: capped: signals.views.per_actor:"),
            (format!("default={}", same.display()), "RANKING_PROFILES: `default`:"),
            (format!("a.b={}", same.display()), "RANKING_PROFILES: `a.b`:"),
            (format!("x={0},x={0}", same.display()), "RANKING_PROFILES: `x` is listed twice"),
            ("nopath".to_string(), "RANKING_PROFILES: `nopath`: expected name=path"),
        ] {
            let error = variants(&list, &built_in).expect_err(&list);
            assert!(error.starts_with(wanted), "{error}");
        }
        for path in [same, custom, capped] {
            let _ = std::fs::remove_file(path);
        }
    }

    #[test]
    fn an_experiment_names_profiles_only() {
        assert_eq!(experiment(" ", &["default"]), Ok(None));
        let e = experiment("t:default=50,likes=50", &["default", "likes"]).expect("valid").expect("one");
        assert_eq!(e.name(), "t");
        let error = experiment("t:default=50,cart=50", &["default", "likes"]).expect_err("cart is no profile");
        assert!(error.starts_with("RANKING_EXPERIMENT: variant `cart`"), "{error}");
    }

    #[test]
    fn a_missing_file_is_named() {
        let missing = Path::new("/nonexistent/profile.toml");
        assert!(load(missing).expect_err("no file").starts_with("/nonexistent/profile.toml: "));
    }
}
