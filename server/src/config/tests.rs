//! The settings as operators write them: defaults, refusals naming the variable, switches.

use super::*;

#[test]
fn defaults_match_the_documented_ones() {
    let s = Settings::try_parse_from(["x"]).expect("defaults parse");
    assert_eq!(s.server.listen.to_string(), "127.0.0.1:50051");
    assert_eq!(s.ranking.tz, chrono_tz::UTC);
    assert_eq!(s.ranking.recompute_interval, Duration::from_secs(300));
    assert_eq!((s.ranking.accept_days, s.ranking.retention_days, s.ranking.carry_days), (7, 8, 7));
    assert_eq!(s.ranking.weights(), Weights::default());
    assert_eq!(s.observability.metrics_listen.0.map(|a| a.to_string()).as_deref(), Some("127.0.0.1:9464"));
    assert_eq!(s.server.max_concurrent_calls.get(), 2048);
    assert_eq!(s.server.shutdown_grace, Duration::from_secs(30));
    assert_eq!(s.redis.redis_mode, RedisMode::Single);
    assert_eq!(s.ranking.recompute_lease, Duration::from_secs(30));
    let cluster = Settings::try_parse_from(["x", "--redis-mode", "cluster"]).expect("parses");
    assert_eq!(cluster.redis.redis_mode, RedisMode::Cluster);
    assert!(s.validate().is_ok());
}

#[test]
fn carry_days_beyond_a_year_are_refused_naming_the_variable() {
    let s = Settings::try_parse_from(["x", "--carry-days", "400"]).expect("parses");
    let refused = s.ranking.policy().expect_err("refused");
    assert!(
        refused.contains("RANKING_CARRY_DAYS") && refused.contains("carry_days: must be 0-365, got 400"),
        "{refused}"
    );
    let s = Settings::try_parse_from(["x", "--carry-days", "0"]).expect("parses");
    assert_eq!(s.ranking.policy().expect("no carry-over is valid").profile.carry_days(), 0);
}

#[test]
fn bad_values_are_refused_by_their_parser() {
    // Each refusal names the variable (an operator sets the environment, not the flags).
    for (args, named) in [
        (&["x", "--tz", "Mars/Base"][..], "RANKING_TZ"),
        (&["x", "--recompute-interval", "soon"], "RANKING_RECOMPUTE_INTERVAL"),
        (&["x", "--weight-view=-1"], "RANKING_WEIGHT_VIEW"),
        (&["x", "--weight-like=NaN"], "RANKING_WEIGHT_LIKE"),
        (&["x", "--metrics-listen", "nowhere"], "RANKING_METRICS_LISTEN"),
        (&["x", "--max-concurrent-calls", "0"], "RANKING_MAX_CONCURRENT_CALLS"),
        (&["x", "--ingest-workers", "0"], "RANKING_INGEST_WORKERS"),
        (&["x", "--db-max-connections", "0"], "RANKING_DB_MAX_CONNECTIONS"),
        (&["x", "--request-timeout", "0"], "RANKING_REQUEST_TIMEOUT"),
        (&["x", "--tls-cert", "a.pem"], "RANKING_TLS_KEY"),
        (&["x", "--tls-client-ca", "ca.pem"], "RANKING_TLS_CERT"),
        (&["x", "--redis-mode", "sentinel"], "RANKING_REDIS_MODE"),
    ] {
        let refused = Settings::try_parse_from(args).expect_err("refused").to_string();
        assert!(refused.contains(named), "{args:?}: {refused}");
    }
}

#[test]
fn zero_and_empty_switch_things_off() {
    let s = Settings::try_parse_from(["x", "--recompute-interval", "0", "--metrics-listen="]).expect("parses");
    assert_eq!(s.ranking.recompute_interval, Duration::ZERO);
    assert_eq!(s.observability.metrics_listen, OptionalAddr(None));
}

#[test]
fn cross_field_rules_are_checked() {
    let s = Settings::try_parse_from(["x", "--retention-days", "7"]).expect("parses");
    assert!(s.validate().expect_err("retention must exceed accept").contains("RANKING_RETENTION_DAYS"));
    let s = Settings::try_parse_from(["x", "--keepalive-timeout", "2m"]).expect("parses");
    assert!(s.validate().is_err());
}

/// Every variable the Kubernetes manifests set (`deploy/kubernetes/`: ConfigMap keys,
/// container `env` names, Secret keys) is one the server reads: its settings are the list.
#[test]
fn the_kubernetes_manifests_set_only_variables_the_server_reads() {
    use clap::CommandFactory;
    let known: std::collections::HashSet<String> = Settings::command()
        .get_arguments()
        .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    let mut set = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("deploy/kubernetes") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("manifest");
        for line in text.lines() {
            // What a comment says is not set.
            let line = line.split(" #").next().unwrap_or_default();
            if line.trim_start().starts_with('#') {
                continue;
            }
            let words = line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            set.extend(
                words
                    .filter(|w| w.starts_with("RANKING_") || *w == "DATABASE_URL" || *w == "REDIS_URL")
                    .map(str::to_owned),
            );
        }
    }
    assert!(set.len() >= 10, "the manifests set the service's variables: {set:?}");
    let unknown: Vec<&String> = set.iter().filter(|v| !known.contains(*v)).collect();
    assert!(unknown.is_empty(), "set in deploy/kubernetes but not read by the server: {unknown:?}");
}

/// The profile the ConfigMap carries is a valid profile (the built-in one written out).
#[test]
fn the_configmaps_profile_is_the_built_in_profile() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes/configmap.yaml");
    let manifest = std::fs::read_to_string(path).expect("configmap");
    let (_, block) = manifest.split_once("  profile.toml: |\n").expect("a profile.toml key");
    let toml: String = block
        .lines()
        .map_while(|l| l.strip_prefix("    ").or((l.is_empty()).then_some("")))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(crate::domain::profile::text::parse(&toml), Ok(crate::domain::profile::ScoringProfile::built_in()));
}
