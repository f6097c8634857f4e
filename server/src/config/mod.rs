//! Settings from environment variables, mirrored by command-line flags.
//!
//! One section per component, each parsed once into the type its component uses
//! (`SocketAddr`, `NonZero*`, `Duration`, `Tz`), and each turned into that component's
//! options here (`DatabaseSettings::options`, `RankingSettings::policy`, …). Adding a variable
//! touches its section and the code that reads it, nothing else. Cross-field rules live in
//! [`Settings::validate`]; every other check is done by the type a value parses into.

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use chrono_tz::Tz;
use clap::{Args, Parser};

use crate::adapters::redis::{RedisMode, RedisOptions};
use crate::adapters::sql::SqlOptions;
use crate::app::policy::{Policy, PolicySettings};
use crate::domain::calendar::RankingCalendar;
use crate::domain::profile::Weights;

pub use browser::{AllowedHosts, BrowserSettings, Origins};
pub use bus::BusSettings;
pub use feed::FeedSettings;

/// Real-time product ranking service over gRPC.
///
/// Every flag can also be set through the environment variable shown next to it.
#[derive(Debug, Clone, Parser)]
#[command(name = "ranking-server", version, about, args_override_self = true)]
pub struct Settings {
    #[command(flatten, next_help_heading = "Server")]
    pub server: ServerSettings,
    #[command(flatten, next_help_heading = "Database")]
    pub database: DatabaseSettings,
    #[command(flatten, next_help_heading = "Redis")]
    pub redis: RedisSettings,
    #[command(flatten, next_help_heading = "Ranking")]
    pub ranking: RankingSettings,
    #[command(flatten, next_help_heading = "Access")]
    pub access: AccessSettings,
    #[command(flatten, next_help_heading = "Observability")]
    pub observability: ObservabilitySettings,
    #[command(flatten, next_help_heading = "Event bus")]
    pub bus: BusSettings,
    #[command(flatten, next_help_heading = "Ranking feed")]
    pub feed: FeedSettings,
    #[command(flatten, next_help_heading = "Browsers")]
    pub browser: BrowserSettings,
    /// Checks the scoring profile in FILE (TOML), prints its signals, terms and
    /// encoding, and exits: 0 when it is valid, 2 with the problems when not.
    #[arg(long, value_name = "FILE")]
    pub check_profile: Option<std::path::PathBuf>,
}

/// The gRPC server: address, limits, connection hygiene, TLS.
#[derive(Debug, Clone, Args)]
pub struct ServerSettings {
    /// gRPC listen address (port 0 picks a free port, which is logged).
    #[arg(long = "listen", env = "RANKING_LISTEN", value_name = "RANKING_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,

    /// Longest a call may run before it is cancelled (DEADLINE_EXCEEDED/CANCELLED).
    #[arg(long, env = "RANKING_REQUEST_TIMEOUT", value_name = "RANKING_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_nonzero_duration)]
    pub request_timeout: Duration,

    /// Calls served at once by this process; calls beyond it are refused at once with
    /// RESOURCE_EXHAUSTED instead of queueing.
    #[arg(
        long,
        env = "RANKING_MAX_CONCURRENT_CALLS",
        value_name = "RANKING_MAX_CONCURRENT_CALLS",
        default_value = "2048"
    )]
    pub max_concurrent_calls: NonZeroUsize,

    /// Largest request message, bytes (a full 10,000-event batch is about 1 MB).
    #[arg(
        long,
        env = "RANKING_MAX_MESSAGE_BYTES",
        value_name = "RANKING_MAX_MESSAGE_BYTES",
        default_value = "8388608"
    )]
    pub max_message_bytes: NonZeroUsize,

    /// Open connections at most. At the cap a new connection takes the place of the one idle
    /// longest (no call in progress); when every connection has a call in progress it is
    /// closed as soon as it is accepted.
    #[arg(long, env = "RANKING_MAX_CONNECTIONS", value_name = "RANKING_MAX_CONNECTIONS", default_value = "10000")]
    pub max_connections: NonZeroUsize,

    /// Streams anyone may open without a token (health Watch, reflection) open at once;
    /// beyond it they are refused with RESOURCE_EXHAUSTED. Each holds its connection, so
    /// this bounds the connections unauthenticated peers can keep.
    #[arg(long, env = "RANKING_MAX_PUBLIC_STREAMS", value_name = "RANKING_MAX_PUBLIC_STREAMS", default_value = "100")]
    pub max_public_streams: NonZeroUsize,

    /// Concurrent HTTP/2 streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS); one
    /// connection can hold at most this many of the call slots.
    #[arg(
        long,
        env = "RANKING_MAX_STREAMS_PER_CONNECTION",
        value_name = "RANKING_MAX_STREAMS_PER_CONNECTION",
        default_value = "100"
    )]
    pub max_streams_per_connection: NonZeroU32,

    /// Time a call's request message may take to arrive; a call is admitted (takes one of
    /// the concurrent-call slots) only once its message is complete.
    #[arg(long, env = "RANKING_BODY_TIMEOUT", value_name = "RANKING_BODY_TIMEOUT", default_value = "5s", value_parser = parse_nonzero_duration)]
    pub body_timeout: Duration,

    /// Time from accepting a connection to its first call (TCP, TLS and HTTP/2 handshakes
    /// included); a connection that makes none is closed.
    #[arg(long, env = "RANKING_HANDSHAKE_TIMEOUT", value_name = "RANKING_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_nonzero_duration)]
    pub handshake_timeout: Duration,

    /// A connection with no call in progress for this long is closed.
    #[arg(long, env = "RANKING_IDLE_TIMEOUT", value_name = "RANKING_IDLE_TIMEOUT", default_value = "5m", value_parser = parse_nonzero_duration)]
    pub idle_timeout: Duration,

    /// Interval of HTTP/2 keepalive pings; a peer that does not answer one within
    /// RANKING_KEEPALIVE_TIMEOUT is disconnected.
    #[arg(long, env = "RANKING_KEEPALIVE_INTERVAL", value_name = "RANKING_KEEPALIVE_INTERVAL", default_value = "60s", value_parser = parse_nonzero_duration)]
    pub keepalive_interval: Duration,

    /// Time a peer has to answer a keepalive ping.
    #[arg(long, env = "RANKING_KEEPALIVE_TIMEOUT", value_name = "RANKING_KEEPALIVE_TIMEOUT", default_value = "20s", value_parser = parse_nonzero_duration)]
    pub keepalive_timeout: Duration,

    /// After SIGTERM, time in-flight calls get to finish; then every connection is closed
    /// and the process exits.
    #[arg(long, env = "RANKING_SHUTDOWN_GRACE", value_name = "RANKING_SHUTDOWN_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// PEM certificate chain of the server; with the key it turns TLS on.
    #[arg(long, env = "RANKING_TLS_CERT", value_name = "RANKING_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key of the server certificate.
    #[arg(long, env = "RANKING_TLS_KEY", value_name = "RANKING_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// PEM CA bundle; when set, clients must present a certificate it signed.
    #[arg(long, env = "RANKING_TLS_CLIENT_CA", value_name = "RANKING_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}

/// The SQL single source of truth.
#[derive(Debug, Clone, Args)]
pub struct DatabaseSettings {
    /// SQL database: postgres://…, mysql://… or sqlite://….
    #[arg(long, env = "DATABASE_URL", value_name = "DATABASE_URL", default_value = "sqlite://ranking.db?mode=rwc")]
    pub database_url: String,

    /// SQL connection pool size.
    #[arg(long, env = "RANKING_DB_MAX_CONNECTIONS", value_name = "RANKING_DB_MAX_CONNECTIONS", default_value = "16")]
    pub db_max_connections: NonZeroU32,

    /// Time allowed to connect to, or get a connection from, the database.
    #[arg(long, env = "RANKING_DB_TIMEOUT", value_name = "RANKING_DB_TIMEOUT", default_value = "5s", value_parser = parse_nonzero_duration)]
    pub db_timeout: Duration,

    /// Longest a transaction may sit idle between statements, and a statement wait for a row
    /// lock, on every SQL session: a replica frozen inside a transaction (a VM pause, a
    /// stopped process) holds the other replicas' writes and live passes at most this long,
    /// and the database rolls its transaction back.
    #[arg(long, env = "RANKING_SQL_TX_TIMEOUT", value_name = "RANKING_SQL_TX_TIMEOUT", default_value = "5s", value_parser = parse_nonzero_duration)]
    pub sql_tx_timeout: Duration,

    /// Group-commit workers of RecordEvent: each turns the calls queued meanwhile into one
    /// transaction. Few workers make large groups, which suits hot products whose rows every
    /// transaction must lock.
    #[arg(long, env = "RANKING_INGEST_WORKERS", value_name = "RANKING_INGEST_WORKERS", default_value = "2")]
    pub ingest_workers: NonZeroUsize,
}

impl DatabaseSettings {
    /// The SQL store's options.
    pub fn options(&self) -> SqlOptions {
        let mut options = SqlOptions::new(self.database_url.clone());
        options.max_connections = self.db_max_connections.get();
        options.connect_timeout = self.db_timeout;
        options.tx_timeout = self.sql_tx_timeout;
        options
    }
}

/// The ranking store: Redis, or the embedded in-process store when no URL is set.
#[derive(Debug, Clone, Args)]
pub struct RedisSettings {
    /// Redis for rankings (redis://…); unset keeps rankings in process. In cluster mode a
    /// comma-separated list of seed node URLs.
    #[arg(long, env = "REDIS_URL", value_name = "REDIS_URL")]
    pub redis_url: Option<String>,

    /// `single` (one Redis server) or `cluster` (Redis Cluster; REDIS_URL lists seed nodes).
    #[arg(long, env = "RANKING_REDIS_MODE", value_name = "RANKING_REDIS_MODE", default_value = "single", value_parser = parse_redis_mode)]
    pub redis_mode: RedisMode,

    /// Prefix of every Redis key, so deployments (or tests) can share one Redis.
    #[arg(long, env = "RANKING_REDIS_PREFIX", value_name = "RANKING_REDIS_PREFIX", default_value = "ranking")]
    pub redis_prefix: String,
}

impl RedisSettings {
    /// The Redis store's options, when Redis is configured.
    pub fn options(&self) -> Option<RedisOptions> {
        self.redis_url.as_ref().map(|url| {
            let mut options = RedisOptions::new(url.clone());
            options.mode = self.redis_mode;
            options.prefix = self.redis_prefix.clone();
            options
        })
    }
}

/// What is ranked and how: calendar, weights, windows of days, the scheduler period.
#[derive(Debug, Clone, Args)]
pub struct RankingSettings {
    /// IANA time zone of ranking days and hours.
    #[arg(long, env = "RANKING_TZ", value_name = "RANKING_TZ", default_value = "UTC", value_parser = parse_tz)]
    pub tz: Tz,

    /// Period of the recompute scheduler (e.g. 30s, 5m); 0 disables it.
    #[arg(long, env = "RANKING_RECOMPUTE_INTERVAL", value_name = "RANKING_RECOMPUTE_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    pub recompute_interval: Duration,

    /// Longest today's exact rankings lag SQL: the holder of today's live lease
    /// republishes them from the rows changed since its previous pass, at most once per
    /// interval (e.g. 1s, 250ms); 0 leaves them to the recompute schedule.
    #[arg(long, env = "RANKING_LIVE_INTERVAL", value_name = "RANKING_LIVE_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub live_interval: Duration,

    /// How long an hour's points take to halve on the trending board (e.g. 6h, 90m); the
    /// hour under way weighs 1.
    #[arg(long, env = "RANKING_TRENDING_HALF_LIFE", value_name = "RANKING_TRENDING_HALF_LIFE", default_value = "6h", value_parser = parse_nonzero_duration)]
    pub trending_half_life: Duration,

    /// Oldest accepted event age, in days.
    #[arg(long, env = "RANKING_ACCEPT_DAYS", value_name = "RANKING_ACCEPT_DAYS", default_value_t = 7)]
    pub accept_days: u32,

    /// Days events, daily metrics and daily rankings are kept; must exceed the accept days.
    #[arg(long, env = "RANKING_RETENTION_DAYS", value_name = "RANKING_RETENTION_DAYS", default_value_t = 8)]
    pub retention_days: u32,

    /// TOML file of the scoring profile: signals, main-score terms, carry-over
    /// and tie-break axes; its weights and carry-over replace `RANKING_WEIGHT_*`,
    /// `RANKING_CARRY_OVER` and `RANKING_CARRY_DAYS`. Unset: the built-in profile with those.
    #[arg(long, env = "RANKING_PROFILE", value_name = "RANKING_PROFILE")]
    pub profile: Option<std::path::PathBuf>,

    /// More scoring profiles live beside the service's own (`default`), `name=path,…`: each
    /// ranks every board from the same rows, read by naming it in `profile`. A variant shares
    /// the service profile's signals and caps and may differ in weights, transforms, axes and
    /// carry-over.
    #[arg(long, env = "RANKING_PROFILES", value_name = "RANKING_PROFILES", default_value = "")]
    pub profiles: String,

    /// A sticky experiment, `name:variant=share,…` (percent, or basis points summing to
    /// 10000): a read naming no profile and carrying an `actor_id` is served its variant.
    #[arg(long, env = "RANKING_EXPERIMENT", value_name = "RANKING_EXPERIMENT", default_value = "")]
    pub experiment: String,

    /// How many days back carry-over follows the chain of previous days.
    #[arg(long, env = "RANKING_CARRY_DAYS", value_name = "RANKING_CARRY_DAYS", default_value_t = 7)]
    pub carry_days: u32,

    /// Weight of one view in the main score.
    #[arg(long, env = "RANKING_WEIGHT_VIEW", value_name = "RANKING_WEIGHT_VIEW", default_value = "0.1", value_parser = parse_weight)]
    pub weight_view: f64,

    /// Weight of one like in the main score.
    #[arg(long, env = "RANKING_WEIGHT_LIKE", value_name = "RANKING_WEIGHT_LIKE", default_value = "0.2", value_parser = parse_weight)]
    pub weight_like: f64,

    /// Weight of ln(1 + order amount) in the main score.
    #[arg(long, env = "RANKING_WEIGHT_ORDER", value_name = "RANKING_WEIGHT_ORDER", default_value = "0.6", value_parser = parse_weight)]
    pub weight_order: f64,

    /// Share of yesterday's integer main score carried into today.
    #[arg(long, env = "RANKING_CARRY_OVER", value_name = "RANKING_CARRY_OVER", default_value = "0.1", value_parser = parse_weight)]
    pub carry_over: f64,

    /// How long a superseded version of a ranking stays readable for page tokens; 0 keeps none.
    #[arg(long, env = "RANKING_SNAPSHOT_TTL", value_name = "RANKING_SNAPSHOT_TTL", default_value = "10m", value_parser = parse_duration)]
    pub snapshot_ttl: Duration,

    /// Entries of ranking versions each replica holds in memory; a ranking above it is read
    /// from Redis.
    #[arg(
        long,
        env = "RANKING_SNAPSHOT_MAX_ENTRIES",
        value_name = "RANKING_SNAPSHOT_MAX_ENTRIES",
        default_value_t = 5_000_000
    )]
    pub snapshot_max_entries: usize,

    /// At most one WatchTopN message per stream per this interval.
    #[arg(long, env = "RANKING_WATCH_INTERVAL", value_name = "RANKING_WATCH_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub watch_interval: Duration,

    /// Life of a day's recompute lease; the holder renews it every third of it while it
    /// works, so a replica that dies mid-recompute frees the day after at most this long.
    #[arg(long, env = "RANKING_RECOMPUTE_LEASE", value_name = "RANKING_RECOMPUTE_LEASE", default_value = "30s", value_parser = parse_duration)]
    pub recompute_lease: Duration,

    /// Most distinct catalog segments a recompute publishes rankings for; memberships of
    /// further segments are left out (counted in `ranking_segment_memberships_dropped`).
    #[arg(long, env = "RANKING_MAX_SEGMENTS", value_name = "RANKING_MAX_SEGMENTS", default_value_t = 10_000)]
    pub max_segments: usize,

    /// Entries of each whole board kept per ended day in the rank history (segments: 100).
    #[arg(long, env = "RANKING_HISTORY_TOP", value_name = "RANKING_HISTORY_TOP", default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub history_top: u32,

    /// Days of rank history kept.
    #[arg(long, env = "RANKING_HISTORY_DAYS", value_name = "RANKING_HISTORY_DAYS", default_value_t = 400, value_parser = clap::value_parser!(u32).range(1..=3_650))]
    pub history_days: u32,

    /// Life of a replica's announcement of the storage layouts it reads, renewed every third
    /// of it: a replica silent for this long (stopped, crashed or frozen) no longer holds the
    /// layout written by the others back.
    #[arg(long, env = "RANKING_REPLICA_TTL", value_name = "RANKING_REPLICA_TTL", default_value = "15s", value_parser = parse_nonzero_duration)]
    pub replica_ttl: Duration,

    /// The newest layout of the ranking store this replica writes, once every live replica
    /// reads it: 1 (every version whole) or 2 (a version may be the changes after the one
    /// before it). Default: this release's (2); 1 writes every version whole, as the releases
    /// before layout 2 did.
    #[arg(long, env = "RANKING_STORE_LAYOUT", value_name = "RANKING_STORE_LAYOUT", default_value_t = crate::ports::WRITES, value_parser = clap::value_parser!(u16).range(1..=i64::from(*crate::ports::READS.end())))]
    pub store_layout: u16,

    /// This replica's name among the running replicas (its announcement's key); default: the
    /// host name and a random suffix.
    #[arg(long, env = "RANKING_REPLICA_NAME", value_name = "RANKING_REPLICA_NAME")]
    pub replica_name: Option<String>,

    /// WatchTopN streams open at once on a replica; beyond it RESOURCE_EXHAUSTED.
    #[arg(long, env = "RANKING_MAX_WATCHERS", value_name = "RANKING_MAX_WATCHERS", default_value_t = 10_000)]
    pub max_watchers: usize,
}

impl RankingSettings {
    /// The main-score weights.
    pub fn weights(&self) -> Weights {
        Weights {
            view: self.weight_view,
            like: self.weight_like,
            order: self.weight_order,
            carry_over: self.carry_over,
        }
    }

    /// The one policy every component reads, with the profile of `RANKING_PROFILE` when it
    /// is set (a file that cannot be read or is not a valid profile is refused, naming the
    /// file and the problem).
    pub fn policy(&self) -> Result<Policy, String> {
        let profile = match &self.profile {
            Some(path) => profile::load(path).map_err(|e| format!("RANKING_PROFILE: {e}"))?,
            // The weight variables make the built-in profile, checked by its own rules.
            None => crate::domain::profile::ScoringProfile::built_in_with(self.weights(), self.carry_days)
                .map_err(|e| format!("RANKING_WEIGHT_* / RANKING_CARRY_OVER / RANKING_CARRY_DAYS: {e}"))?,
        };
        let settings = PolicySettings {
            calendar: RankingCalendar::new(self.tz),
            accept_days: self.accept_days,
            retention_days: self.retention_days,
            recompute_interval: self.recompute_interval,
            profile: std::sync::Arc::new(profile),
        };
        Ok(Policy::new(settings)
            .with_snapshot_ttl(self.snapshot_ttl)
            .with_max_segments(self.max_segments)
            .with_recompute_lease(self.recompute_lease)
            .with_live_interval(self.live_interval)
            .with_trending_half_life(self.trending_half_life)
            .with_history(self.history_top as usize, self.history_days))
    }
}

/// Bearer tokens per kind of call.
#[derive(Debug, Clone, Args)]
pub struct AccessSettings {
    /// Bearer token required by RecordEvent and RecordEvents; unset leaves writes open.
    #[arg(long, env = "RANKING_WRITE_TOKEN", value_name = "RANKING_WRITE_TOKEN", hide_env_values = true)]
    pub write_token: Option<Secret>,

    /// Bearer token required by Recompute; unset leaves it open.
    #[arg(long, env = "RANKING_ADMIN_TOKEN", value_name = "RANKING_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<Secret>,

    /// Bearer token required by GetTopN and GetRank; unset leaves reads open.
    #[arg(long, env = "RANKING_READ_TOKEN", value_name = "RANKING_READ_TOKEN", hide_env_values = true)]
    pub read_token: Option<Secret>,
}

/// Metrics endpoint.
#[derive(Debug, Clone, Args)]
pub struct ObservabilitySettings {
    /// Prometheus `/metrics` address; empty turns the endpoint off.
    #[arg(long, env = "RANKING_METRICS_LISTEN", value_name = "RANKING_METRICS_LISTEN", default_value = "127.0.0.1:9464", value_parser = parse_optional_addr)]
    pub metrics_listen: OptionalAddr,
}

impl Settings {
    /// Rejects combinations of values that would make the service wrong rather than merely
    /// slow (each single value was checked by its parser).
    pub fn validate(&self) -> Result<(), String> {
        let r = &self.ranking;
        if r.retention_days <= r.accept_days {
            return Err(format!(
                "RANKING_RETENTION_DAYS ({}) must exceed RANKING_ACCEPT_DAYS ({}), so that a redelivered event is either still in the ledger or refused as too old",
                r.retention_days, r.accept_days
            ));
        }
        if self.server.keepalive_timeout >= self.server.keepalive_interval {
            return Err("RANKING_KEEPALIVE_TIMEOUT must be shorter than RANKING_KEEPALIVE_INTERVAL".into());
        }
        Ok(())
    }
}

pub mod browser;
pub mod bus;
pub mod feed;
pub mod profile;
mod values;

pub use values::{OptionalAddr, Secret};
use values::{parse_duration, parse_nonzero_duration, parse_optional_addr, parse_redis_mode, parse_tz, parse_weight};

#[cfg(test)]
mod tests;
