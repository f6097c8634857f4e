//! The values settings parse into beyond the standard ones: an address that may be off, a
//! secret, and the parsers of time zones, Redis modes, durations, weights and addresses.

use std::net::SocketAddr;
use std::time::Duration;

use chrono_tz::Tz;

use crate::adapters::redis::RedisMode;

/// An address that may be switched off with an empty value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalAddr(pub Option<SocketAddr>);

/// A secret setting: never printed by `Debug`, compared in constant time.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Whether `candidate` equals the secret, taking the same time wherever they differ
    /// (a length that differs answers at once: the length is not the secret).
    pub fn matches(&self, candidate: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        self.0.as_bytes().ct_eq(candidate).into()
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

pub(super) fn parse_tz(s: &str) -> Result<Tz, String> {
    s.parse::<Tz>().map_err(|_| format!("unknown IANA time zone {s:?}"))
}

pub(super) fn parse_redis_mode(s: &str) -> Result<RedisMode, String> {
    match s {
        "single" => Ok(RedisMode::Single),
        "cluster" => Ok(RedisMode::Cluster),
        _ => Err(format!("{s:?}: expected single or cluster")),
    }
}

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e} (examples: 30s, 5m, 1h)"))
}

pub(super) fn parse_nonzero_duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).and_then(|d| if d.is_zero() { Err("must be greater than 0".into()) } else { Ok(d) })
}

pub(super) fn parse_weight(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
        _ => Err(format!("{s:?} is not a finite number >= 0")),
    }
}

pub(super) fn parse_optional_addr(s: &str) -> Result<OptionalAddr, String> {
    if s.is_empty() {
        return Ok(OptionalAddr(None));
    }
    s.parse().map(|a| OptionalAddr(Some(a))).map_err(|_| format!("{s:?} must be host:port or empty"))
}
