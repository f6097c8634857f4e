//! A replica frozen (SIGSTOP) inside its write transaction does not stop the others: while it
//! sleeps with its transaction open, holding the change epoch's row and the metrics rows of
//! the products it wrote, the other replica's RecordEvents on those very products, its live
//! passes and a Recompute all complete; when the frozen one wakes, the database has rolled its
//! transaction back, its caller is told UNAVAILABLE (or its retry succeeds), and SQL holds
//! exactly the events that were acknowledged, none twice. Readers of both replicas never see
//! a version go back.
//!
//! Runs in `make test`'s Redis passes (two replicas need a shared database server); the limit
//! is set low (`RANKING_SQL_TX_TIMEOUT=2s`) and the freeze long (30 s), and the test asserts
//! the order of things (everything on the other replica done before the frozen one wakes),
//! never a duration.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use ranking_client::tonic::Code;
use ranking_client::v1;
use ranking_server::test_support::eventually;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, DbBackend, Statement};

use crate::helpers::faults::{VersionWatch, freeze_inside_a_write_transaction, signal, write_transaction_left_open};
use crate::helpers::process::ServerProcess;
use crate::helpers::{TestApp, TestDb, event, rand_u64, settings, test_redis, test_redis_mode};

/// The products both replicas write: every batch of either locks all of their rows.
const SHARED: i64 = 50;
/// The product the other replica's views put first, so that its live pass shows.
const LEADER: i64 = 9_999;
/// How long the frozen replica sleeps: far longer than the limit.
const FREEZE: Duration = Duration::from_secs(30);
/// The session limit both replicas run under.
const LIMIT: &str = "2s";

/// A batch of views of the shared products, ids `{prefix}-{i}`.
fn shared_views(prefix: &str, n: usize) -> Vec<v1::Event> {
    let at = Utc::now() - chrono::Duration::seconds(1);
    (0..n).map(|i| event(&format!("{prefix}-{i}"), 1 + (i as i64 % SHARED), v1::EventType::View, 0, at)).collect()
}

/// `(events stored, Σ views of every metrics row)`: equal when no event counted twice.
async fn stored(admin: &DatabaseConnection) -> (i64, i64) {
    let backend = admin.get_database_backend();
    let one = |sql: &'static str| async move {
        let row = admin.query_one_raw(Statement::from_string(backend, sql)).await.expect("query").expect("row");
        // SUM is NUMERIC or DECIMAL: cast to a 64-bit integer.
        row.try_get_by_index::<i64>(0).expect("integer")
    };
    let events = one("SELECT COUNT(*) FROM events").await;
    let views = match backend {
        DbBackend::MySql => one("SELECT CAST(COALESCE(SUM(views), 0) AS SIGNED) FROM product_daily_metrics").await,
        _ => one("SELECT CAST(COALESCE(SUM(views), 0) AS BIGINT) FROM product_daily_metrics").await,
    };
    (events, views)
}

/// What the frozen replica's producer got: events acknowledged, and the codes of the calls
/// refused.
#[derive(Default)]
struct Produced {
    acknowledged: usize,
    /// Status codes of the calls that failed (each retried with the same ids).
    refused: Vec<Code>,
}

/// Sends batches of 200 views of the shared products to `addr` until `stop`, each retried
/// with the same ids until it is acknowledged.
async fn produce(addr: std::net::SocketAddr, run: u64, produced: Arc<Mutex<Produced>>, stop: Arc<tokio::sync::Notify>) {
    // A channel without a call deadline: a call spans the freeze.
    let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut client = v1::ranking_service_client::RankingServiceClient::new(channel);
    let mut batch = 0;
    loop {
        let events = shared_views(&format!("a{run:x}-{batch}"), 200);
        loop {
            match client.record_events(v1::RecordEventsRequest { events: events.clone() }).await {
                Ok(_) => break,
                Err(status) => {
                    let mut produced = produced.lock().expect("lock");
                    produced.refused.push(status.code());
                    assert!(produced.refused.len() < 100, "refused again and again: {:?}", produced.refused);
                }
            }
            // A retry a moment later, as a caller's backoff would.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        produced.lock().expect("lock").acknowledged += events.len();
        batch += 1;
        let stopped = tokio::select! {
            () = stop.notified() => true,
            () = tokio::task::yield_now() => false,
        };
        if stopped {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server and Redis shared by replicas: make test's Redis passes"]
async fn a_replica_frozen_inside_its_write_transaction_holds_the_others_at_most_the_limit() {
    crate::bus::assert_shared_servers();
    let redis = test_redis().expect("Redis");
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let env = vec![
        ("DATABASE_URL", db.url.clone()),
        ("REDIS_URL", redis.clone()),
        ("RANKING_REDIS_MODE", test_redis_mode().to_string()),
        ("RANKING_REDIS_PREFIX", prefix.clone()),
        ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
        ("RANKING_LIVE_INTERVAL", "0".to_string()),
        ("RANKING_SQL_TX_TIMEOUT", LIMIT.to_string()),
        ("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())),
    ];
    let frozen = ServerProcess::start(&env).await;
    let mut other = TestApp::spawn_on(settings(
        &db.url,
        &[&format!("--redis-prefix={prefix}"), &format!("--sql-tx-timeout={LIMIT}"), "--live-interval=100ms"],
    ))
    .await;
    let admin = Database::connect(&db.url).await.expect("admin connection");

    let run = rand_u64();
    let produced = Arc::new(Mutex::new(Produced::default()));
    let stop = Arc::new(tokio::sync::Notify::new());
    let producer = tokio::spawn(produce(frozen.addr, run, produced.clone(), stop.clone()));
    eventually("the frozen replica's producer has batches acknowledged", || async {
        produced.lock().expect("lock").acknowledged >= 1_000
    })
    .await;

    let watches = [
        VersionWatch::start(ranking_client::connect(format!("http://{}", frozen.addr)).await.expect("client")),
        VersionWatch::start(other.client.clone()),
    ];
    freeze_inside_a_write_transaction(frozen.pid(), &admin).await;
    let woken_at = tokio::time::Instant::now() + FREEZE;

    // The other replica's work on the very rows the frozen transaction holds.
    let work = async {
        let mut events = shared_views(&format!("b{run:x}"), 100);
        events.extend(crate::helpers::views(&format!("lead{run:x}"), LEADER, 100, Utc::now()));
        let recorded = other.client.record_events(v1::RecordEventsRequest { events }).await.expect("RecordEvents");
        assert_eq!(recorded.into_inner().accepted, 200);
        let mut client = other.client.clone();
        eventually("a live pass of the other replica publishes its views", || {
            let mut client = client.clone();
            async move {
                let top = client.get_top_n(v1::GetTopNRequest { limit: 1, ..Default::default() }).await;
                top.is_ok_and(|t| t.into_inner().products.first().is_some_and(|p| p.product_id == LEADER))
            }
        })
        .await;
        client.recompute(v1::RecomputeRequest::default()).await.expect("Recompute");
    };
    let done = tokio::time::timeout_at(woken_at, work).await;
    let mut rolled_back = false;
    while !rolled_back && tokio::time::Instant::now() < woken_at {
        rolled_back = !write_transaction_left_open(&admin).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    signal(frozen.pid(), "CONT");
    assert!(done.is_ok(), "the other replica's writes, live pass and recompute ended before the frozen replica woke");
    assert!(rolled_back, "the database ended the frozen replica's transaction while it slept");

    // Awake: its interrupted batch was refused as UNAVAILABLE and retried, or succeeded.
    stop.notify_one();
    producer.await.expect("producer");
    let produced = Arc::try_unwrap(produced).ok().expect("producer ended").into_inner().expect("lock");
    // Its transaction is gone: the batch cannot have committed where it stood.
    assert!(
        !produced.refused.is_empty() && produced.refused.iter().all(|c| *c == Code::Unavailable),
        "the interrupted batch's caller was told UNAVAILABLE (and retried): {:?}",
        produced.refused
    );
    let acknowledged = (produced.acknowledged + 200) as i64;
    assert_eq!(stored(&admin).await, (acknowledged, acknowledged), "every acknowledged event counted once");
    let [frozen_watch, other_watch] = watches;
    frozen_watch.assert_never_went_back("the frozen replica").await;
    other_watch.assert_never_went_back("the other replica").await;

    frozen.terminate();
    frozen.wait().await;
    other.stop().await;
    db.drop_db().await;
}
