//! Settings from environment variables (SPEC §8), mirrored by command-line flags.

use std::net::SocketAddr;
use std::time::Duration;

use chrono_tz::Tz;
use clap::Parser;

use crate::domain::score::Weights;

/// Real-time product ranking service over gRPC.
///
/// Every flag can also be set through the environment variable shown next to it.
#[derive(Debug, Clone, Parser)]
#[command(name = "ranking-server", version, about, args_override_self = true)]
pub struct Settings {
    /// gRPC listen address (port 0 picks a free port, which is logged).
    #[arg(long, env = "RANKING_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,

    /// SQL database: postgres://…, mysql://… or sqlite://….
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://ranking.db?mode=rwc")]
    pub database_url: String,

    /// Redis for rankings (redis://…); unset keeps rankings in process.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,

    /// Prefix of every Redis key, so deployments (or tests) can share one Redis.
    #[arg(long, env = "RANKING_REDIS_PREFIX", default_value = "ranking")]
    pub redis_prefix: String,

    /// IANA time zone of ranking days and hours.
    #[arg(long, env = "RANKING_TZ", default_value = "UTC", value_parser = parse_tz)]
    pub tz: Tz,

    /// Period of the recompute scheduler (e.g. 30s, 5m); 0 disables it.
    #[arg(long, env = "RANKING_RECOMPUTE_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    pub recompute_interval: Duration,

    /// Oldest accepted event age, in days.
    #[arg(long, env = "RANKING_ACCEPT_DAYS", default_value_t = 7)]
    pub accept_days: u32,

    /// Days events, daily metrics and daily rankings are kept; must exceed the accept days.
    #[arg(long, env = "RANKING_RETENTION_DAYS", default_value_t = 8)]
    pub retention_days: u32,

    /// How many days back carry-over follows the chain of previous days.
    #[arg(long, env = "RANKING_CARRY_DAYS", default_value_t = 7)]
    pub carry_days: u32,

    /// Weight of one view in the main score.
    #[arg(long, env = "RANKING_WEIGHT_VIEW", default_value_t = 0.1)]
    pub weight_view: f64,

    /// Weight of one like in the main score.
    #[arg(long, env = "RANKING_WEIGHT_LIKE", default_value_t = 0.2)]
    pub weight_like: f64,

    /// Weight of ln(1 + order amount) in the main score.
    #[arg(long, env = "RANKING_WEIGHT_ORDER", default_value_t = 0.6)]
    pub weight_order: f64,

    /// Share of yesterday's integer main score carried into today.
    #[arg(long, env = "RANKING_CARRY_OVER", default_value_t = 0.1)]
    pub carry_over: f64,

    /// Group-commit workers of RecordEvent: each turns the calls queued meanwhile into one
    /// transaction. Few workers make large groups, which suits hot products whose rows every
    /// transaction must lock.
    #[arg(long, env = "RANKING_INGEST_WORKERS", default_value_t = 2)]
    pub ingest_workers: usize,

    /// Prometheus `/metrics` address; empty turns the endpoint off.
    #[arg(long, env = "RANKING_METRICS_LISTEN", default_value = "127.0.0.1:9464")]
    pub metrics_listen: String,

    /// Longest a call may run before it is cancelled (DEADLINE_EXCEEDED/CANCELLED).
    #[arg(long, env = "RANKING_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Calls served at once by this process; calls beyond it are refused at once with
    /// RESOURCE_EXHAUSTED instead of queueing.
    #[arg(long, env = "RANKING_MAX_CONCURRENT_CALLS", default_value_t = 2048)]
    pub max_concurrent_calls: usize,

    /// Largest request message, bytes (a full 10,000-event batch is about 1 MB).
    #[arg(long, env = "RANKING_MAX_MESSAGE_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_message_bytes: usize,

    /// Bearer token required by RecordEvent and RecordEvents; unset leaves writes open.
    #[arg(long, env = "RANKING_WRITE_TOKEN", hide_env_values = true)]
    pub write_token: Option<Secret>,

    /// Bearer token required by Recompute; unset leaves it open.
    #[arg(long, env = "RANKING_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<Secret>,

    /// Bearer token required by GetTopN and GetRank; unset leaves reads open.
    #[arg(long, env = "RANKING_READ_TOKEN", hide_env_values = true)]
    pub read_token: Option<Secret>,

    /// PEM certificate chain of the server; with the key it turns TLS on.
    #[arg(long, env = "RANKING_TLS_CERT")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// PEM private key of the server certificate.
    #[arg(long, env = "RANKING_TLS_KEY")]
    pub tls_key: Option<std::path::PathBuf>,

    /// PEM CA bundle; when set, clients must present a certificate it signed.
    #[arg(long, env = "RANKING_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<std::path::PathBuf>,

    /// SQL connection pool size.
    #[arg(long, env = "RANKING_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,

    /// Time allowed to connect to, or get a connection from, the database.
    #[arg(long, env = "RANKING_DB_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub db_timeout: Duration,
}

/// A secret setting: never printed by `Debug`, compared in constant time.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Whether `candidate` equals the secret, taking the same time wherever they differ.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let expected = self.0.as_bytes();
        expected.len() == candidate.len() && expected.iter().zip(candidate).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::str::FromStr for Secret {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() { Err("a token must not be empty".into()) } else { Ok(Self(s.to_string())) }
    }
}

fn parse_tz(s: &str) -> Result<Tz, String> {
    s.parse::<Tz>().map_err(|_| format!("unknown IANA time zone {s:?}"))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e} (examples: 30s, 5m, 1h)"))
}

impl Settings {
    /// The main-score weights.
    pub fn weights(&self) -> Weights {
        Weights {
            view: self.weight_view,
            like: self.weight_like,
            order: self.weight_order,
            carry_over: self.carry_over,
        }
    }

    /// Rejects combinations that would make the service wrong rather than merely slow.
    pub fn validate(&self) -> Result<(), String> {
        for (name, w) in [
            ("RANKING_WEIGHT_VIEW", self.weight_view),
            ("RANKING_WEIGHT_LIKE", self.weight_like),
            ("RANKING_WEIGHT_ORDER", self.weight_order),
            ("RANKING_CARRY_OVER", self.carry_over),
        ] {
            if !w.is_finite() || w < 0.0 {
                return Err(format!("{name} must be a finite number >= 0, got {w}"));
            }
        }
        if self.retention_days <= self.accept_days {
            return Err(format!(
                "RANKING_RETENTION_DAYS ({}) must exceed RANKING_ACCEPT_DAYS ({}), so that a redelivered event is either still in the ledger or refused as too old",
                self.retention_days, self.accept_days
            ));
        }
        if !self.metrics_listen.is_empty() && self.metrics_listen.parse::<SocketAddr>().is_err() {
            return Err(format!("RANKING_METRICS_LISTEN must be host:port or empty, got {:?}", self.metrics_listen));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err("RANKING_TLS_CERT and RANKING_TLS_KEY go together".into());
        }
        if self.tls_client_ca.is_some() && self.tls_cert.is_none() {
            return Err("RANKING_TLS_CLIENT_CA needs RANKING_TLS_CERT and RANKING_TLS_KEY".into());
        }
        if self.max_concurrent_calls == 0 {
            return Err("RANKING_MAX_CONCURRENT_CALLS must be at least 1".into());
        }
        if self.ingest_workers == 0 {
            return Err("RANKING_INGEST_WORKERS must be at least 1".into());
        }
        if self.db_max_connections == 0 {
            return Err("RANKING_DB_MAX_CONNECTIONS must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_spec() {
        let s = Settings::try_parse_from(["x"]).expect("defaults parse");
        assert_eq!(s.listen.to_string(), "127.0.0.1:50051");
        assert_eq!(s.tz, chrono_tz::UTC);
        assert_eq!(s.recompute_interval, Duration::from_secs(300));
        assert_eq!((s.accept_days, s.retention_days, s.carry_days), (7, 8, 7));
        assert_eq!(s.weights(), Weights::default());
        assert!(s.validate().is_ok());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(Settings::try_parse_from(["x", "--tz", "Mars/Base"]).is_err());
        assert!(Settings::try_parse_from(["x", "--recompute-interval", "soon"]).is_err());
        let s = Settings::try_parse_from(["x", "--recompute-interval", "0"]).expect("0 disables");
        assert_eq!(s.recompute_interval, Duration::ZERO);
        let s = Settings::try_parse_from(["x", "--retention-days", "7"]).expect("parses");
        assert!(s.validate().expect_err("retention must exceed accept").contains("RANKING_RETENTION_DAYS"));
        let s = Settings::try_parse_from(["x", "--weight-view=-1"]).expect("parses");
        assert!(s.validate().is_err());
    }
}
