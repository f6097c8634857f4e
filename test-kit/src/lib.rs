//! Test harness: every test gets its own server on port 0, its own database and its own
//! ranking store, and talks to it through the public client crate.
//!
//! The SQL backend comes from `RANKING_TEST_DATABASE` (`sqlite`, the default, or an admin
//! URL such as `postgres://postgres@127.0.0.1/test` or `mysql://root@127.0.0.1/test`), under
//! which each test creates and drops a database of its own.
//!
//! Beside the harness: the reference scorer (`reference`), the random numbers (`draw`), the
//! buses (`bus`), faults (`faults`) and throwaway servers.

pub mod bus;
mod draw;
pub mod faults;
pub mod grpc_web;
pub mod mariadb;
pub mod pg;
pub mod process;
mod reference;
pub mod throwaway_cluster;
pub mod throwaway_redis;

pub use draw::Draw;
pub use reference::{ReferenceRow, built_in_reference, events_reference, independent_norm, whole_second};

use ranking_server::adapters::redis::RedisMode;
use ranking_server::adapters::redis::connection::Connection;
use std::net::SocketAddr;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use clap::Parser;
use ranking_client::{RankingServiceClient, tonic::transport::Channel, v1};
use ranking_server::app::scheduler::Scheduler;
use ranking_server::config::Settings;
use ranking_server::startup::Application;
use sea_orm::{ConnectionTrait, Database};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long before midnight (UTC, the servers' default `RANKING_TZ`) a test waits for the
/// new day instead of starting: a test records "now" and then reads today's ranking, and a
/// day that ends in between leaves today's ranking without its events. No test runs this long.
const MIDNIGHT_MARGIN: chrono::Duration = chrono::Duration::seconds(150);

/// Waits, when the day is about to end, until a few seconds into the next one.
pub async fn clear_of_midnight() {
    let now = Utc::now();
    let next_day = (now.date_naive() + chrono::Days::new(1)).and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    if next_day - now < MIDNIGHT_MARGIN {
        let wait = (next_day - now + chrono::Duration::seconds(2)).to_std().expect("positive");
        tokio::time::sleep(wait).await;
    }
}

/// An isolated database for one test.
pub struct TestDb {
    /// URL the server connects to.
    pub url: String,
    admin: Option<(String, String)>,
}

impl TestDb {
    /// A fresh empty database on the configured backend.
    pub async fn create() -> Self {
        let name = format!("rk_{:016x}", rand_u64());
        let backend = std::env::var("RANKING_TEST_DATABASE").unwrap_or_else(|_| "sqlite".into());
        if backend == "sqlite" {
            let path = std::env::temp_dir().join(format!("{name}.db"));
            return Self { url: format!("sqlite://{}?mode=rwc", path.display()), admin: None };
        }
        let admin = Database::connect(&backend).await.expect("admin connection to the test database server");
        admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create test database");
        let base = backend.rsplit_once('/').map(|(b, _)| b.to_string()).expect("URL with a database path");
        Self { url: format!("{base}/{name}"), admin: Some((backend, name)) }
    }

    /// Drops the database (SQLite: deletes the file).
    pub async fn drop_db(self) {
        match self.admin {
            Some((admin_url, name)) => {
                if let Ok(admin) = Database::connect(&admin_url).await {
                    let force = if admin_url.starts_with("postgres") { " WITH (FORCE)" } else { "" };
                    let _ = admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name}{force}")).await;
                }
            }
            None => {
                let path = self.url.trim_start_matches("sqlite://").split('?').next().unwrap_or_default().to_string();
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{path}{suffix}"));
                }
            }
        }
    }
}

/// A port that was free a moment ago, for a server a test stops and starts again on it.
///
/// Picked below the kernel's ephemeral range (32768 and up by default): a port from that range
/// can be handed, while its server is stopped, to any socket bound to port 0 or connecting out
/// (another test's server, a client's source port), and the restarted server then finds it
/// taken, or a script probing it finds someone else answering.
pub fn free_port() -> u16 {
    const FIRST: u16 = 20_000;
    const LAST: u16 = 32_000;
    loop {
        let port = FIRST + (rand_u64() % u64::from(LAST - FIRST)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Rows in the `events` ledger of the database at `url`.
pub async fn count_events(url: &str) -> i64 {
    use sea_orm::Statement;
    let db = Database::connect(url).await.expect("connect");
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), "SELECT COUNT(*) FROM events"))
        .await
        .expect("query")
        .expect("row");
    row.try_get_by_index(0).expect("count")
}

pub fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    h.finish()
}

/// A running server and a client connected to it.
pub struct TestApp {
    pub addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    pub client: RankingServiceClient<Channel>,
    pub scheduler: Arc<Scheduler>,
    pub db: Option<TestDb>,
    /// Redis URL and key prefix, when the test runs on Redis: its keys are deleted at stop.
    redis: Option<(String, String, RedisMode)>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<anyhow::Result<()>>>,
}

/// The Redis of the integration tests, when `RANKING_TEST_REDIS` names one; each test then
/// uses a key prefix of its own.
pub fn test_redis() -> Option<String> {
    std::env::var("RANKING_TEST_REDIS").ok().filter(|s| !s.is_empty())
}

/// `--redis-mode` of the test Redis: `cluster` when `RANKING_TEST_REDIS_MODE=cluster` (then
/// `RANKING_TEST_REDIS` lists the cluster's seed nodes), else `single`.
pub fn test_redis_mode() -> &'static str {
    match std::env::var("RANKING_TEST_REDIS_MODE").as_deref() {
        Ok("cluster") => "cluster",
        _ => "single",
    }
}

/// [`test_redis_mode`] as the store's setting.
pub fn test_redis_topology() -> RedisMode {
    if test_redis_mode() == "cluster" { RedisMode::Cluster } else { RedisMode::Single }
}

/// A connection to the test Redis (one node or the cluster, as the service sees it).
pub fn test_redis_connection(url: &str) -> Connection {
    redis_connection(url, test_redis_topology())
}

/// A connection to Redis at `url` (seed URLs in cluster mode).
pub fn redis_connection(url: &str, mode: RedisMode) -> Connection {
    ranking_server::adapters::redis::connection::open(mode, url, std::time::Duration::from_secs(10))
        .expect("Redis URL")
        .connection
}

/// Settings for a test: port 0, no periodic scheduler and no live passes unless asked for
/// (tests drive recomputes), the test
/// Redis under a fresh prefix when configured, and the given overrides as flags.
pub fn settings(db_url: &str, extra: &[&str]) -> Settings {
    let mut args = vec![
        "ranking-server".to_string(),
        "--listen=127.0.0.1:0".into(),
        format!("--database-url={db_url}"),
        "--recompute-interval=0".into(),
        "--metrics-listen=127.0.0.1:0".into(),
    ];
    // Live passes only where a test asks for them (they publish versions on their own).
    if !extra.iter().any(|a| a.starts_with("--live-interval")) {
        args.push("--live-interval=0".into());
    }
    if let Some(redis) = test_redis() {
        args.push(format!("--redis-url={redis}"));
        args.push(format!("--redis-mode={}", test_redis_mode()));
        args.push(format!("--redis-prefix=test-{:016x}", rand_u64()));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    Settings::try_parse_from(args).expect("test settings parse")
}

impl TestApp {
    /// Starts a server on a fresh database.
    pub async fn spawn(extra: &[&str]) -> Self {
        let db = TestDb::create().await;
        let mut app = Self::spawn_on(settings(&db.url, extra)).await;
        app.db = Some(db);
        app
    }

    /// Starts a server with explicit settings.
    pub async fn spawn_on(settings: Settings) -> Self {
        clear_of_midnight().await;
        let redis = settings
            .redis
            .redis_url
            .clone()
            .map(|url| (url, settings.redis.redis_prefix.clone(), settings.redis.redis_mode));
        if std::env::var_os("TEST_LOG").is_some() {
            std::mem::forget(ranking_server::telemetry::init("debug"));
        }
        let app = Application::build(settings).await.expect("application builds");
        let addr = app.local_addr();
        let metrics_addr = app.metrics_addr();
        let scheduler = app.scheduler();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until_stopped(async {
            let _ = stopped.await;
        }));
        let client = ranking_client::connect(format!("http://{addr}")).await.expect("client connects");
        // The start-up recompute runs in the background; tests start after it so that it
        // never interleaves with what they do.
        tokio::time::timeout(std::time::Duration::from_secs(30), scheduler.wait_started())
            .await
            .expect("start-up recompute finished");
        Self { addr, metrics_addr, client, scheduler, db: None, redis, stop: Some(stop), server: Some(server) }
    }

    /// Stops the server gracefully and drops the test database.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("server task").expect("server exits cleanly");
        }
        if let Some(db) = self.db.take() {
            db.drop_db().await;
        }
        if let Some((url, prefix, mode)) = self.redis.take() {
            delete_keys(&redis_connection(&url, mode), &prefix).await;
        }
    }

    /// Deletes every ranking-store key of this server when it runs on Redis (a flush of
    /// what it derived); `false` on the in-process store, which cannot be flushed from outside.
    pub async fn flush_redis(&self) -> bool {
        match &self.redis {
            Some((url, prefix, mode)) => {
                delete_keys(&redis_connection(url, *mode), prefix).await;
                true
            }
            None => false,
        }
    }

    /// The Prometheus text of the server's metrics endpoint.
    pub async fn scrape_metrics(&self) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.metrics_addr.expect("metrics endpoint on");
        let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").await.expect("write");
        let mut body = String::new();
        conn.read_to_string(&mut body).await.expect("read");
        assert!(body.starts_with("HTTP/1.1 200"), "{body}");
        body
    }

    pub async fn record(&mut self, events: Vec<v1::Event>) -> v1::RecordEventsResponse {
        self.client.record_events(v1::RecordEventsRequest { events }).await.expect("RecordEvents succeeds").into_inner()
    }

    pub async fn recompute(&mut self, date: &str) -> v1::RecomputeResponse {
        self.client
            .recompute(v1::RecomputeRequest { date: date.into() })
            .await
            .expect("Recompute succeeds")
            .into_inner()
    }

    pub async fn rank(
        &mut self,
        product_id: i64,
        date: &str,
    ) -> Result<v1::GetRankResponse, ranking_client::tonic::Status> {
        self.client
            .get_rank(v1::GetRankRequest { product_id, date: date.into(), ..Default::default() })
            .await
            .map(|r| r.into_inner())
    }

    pub async fn top(&mut self, date: &str, limit: u32) -> v1::GetTopNResponse {
        self.client
            .get_top_n(v1::GetTopNRequest { date: date.into(), limit, ..Default::default() })
            .await
            .expect("GetTopN succeeds")
            .into_inner()
    }
}

/// Deletes every key under `prefix` (the test's own; other tests use other prefixes).
pub async fn delete_keys(conn: &Connection, prefix: &str) {
    let mut conn = conn.clone();
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}:*")).query_async(&mut conn).await.unwrap_or_default();
    if !keys.is_empty() {
        let _: Result<(), _> = redis::cmd("DEL").arg(keys).query_async(&mut conn).await;
    }
}

pub fn ts(at: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: at.timestamp(), nanos: at.timestamp_subsec_nanos() as i32 }
}

pub fn event(id: &str, product_id: i64, kind: v1::EventType, amount: i64, at: DateTime<Utc>) -> v1::Event {
    v1::Event {
        event_id: id.into(),
        product_id,
        r#type: kind.into(),
        amount,
        occurred_at: Some(ts(at)),
        signal: String::new(),
        ..Default::default()
    }
}

/// A RETRACT of `original`, for product `product_id`, happening at `at`.
pub fn retract(id: &str, product_id: i64, original: &str, at: DateTime<Utc>) -> v1::Event {
    v1::Event { retracts: original.into(), ..event(id, product_id, v1::EventType::Retract, 0, at) }
}

/// `n` VIEW events for a product at `at`, with ids `{prefix}-{i}`.
pub fn views(prefix: &str, product_id: i64, n: usize, at: DateTime<Utc>) -> Vec<v1::Event> {
    (0..n).map(|i| event(&format!("{prefix}-{i}"), product_id, v1::EventType::View, 0, at)).collect()
}

/// The value of the first sample in Prometheus text `metrics` whose line starts with
/// `line_prefix` (name and labels).
pub fn metric_value(metrics: &str, line_prefix: &str) -> f64 {
    metric_sample(metrics, line_prefix).unwrap_or_else(|| panic!("no {line_prefix} in\n{metrics}"))
}

/// The value of the first line of Prometheus text starting with `line_prefix`, if any.
pub fn metric_sample(metrics: &str, line_prefix: &str) -> Option<f64> {
    metrics.lines().find(|l| l.starts_with(line_prefix)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok())
}

/// As [`metric_sample`], 0 while the series does not exist yet.
pub fn metric_or_zero(metrics: &str, line_prefix: &str) -> f64 {
    metric_sample(metrics, line_prefix).unwrap_or(0.0)
}

/// The rules of a test's direct write to the ledger: the profile given, any original may be
/// retracted, hours of UTC.
pub fn rules(profile: &ranking_server::domain::profile::ScoringProfile) -> ranking_server::ports::RecordRules<'_> {
    let calendar = ranking_server::domain::calendar::RankingCalendar::utc();
    ranking_server::ports::RecordRules { profile, retractable_since: DateTime::<Utc>::MIN_UTC, calendar }
}

/// A scoring profile file of the test's own (`--profile=…`), removed when dropped.
pub struct ProfileFile(std::path::PathBuf);

impl ProfileFile {
    /// Writes `text` to a fresh file.
    pub fn new(text: &str) -> Self {
        let path = std::env::temp_dir().join(format!("ranking-profile-{:016x}.toml", rand_u64()));
        std::fs::write(&path, text).expect("write the profile");
        Self(path)
    }

    /// Where it is.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// The server flag naming it.
    pub fn flag(&self) -> String {
        format!("--profile={}", self.0.display())
    }
}

impl Drop for ProfileFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
