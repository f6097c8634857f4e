//! Upgrades in place: the previous release (`PREVIOUS_RELEASE`, built once per machine by
//! `scripts/previous-release.sh`) and this one side by side over one SQL database and one
//! Redis, replaced one replica at a time as Kubernetes rolls a Deployment, and one back, under
//! ingest and reads: old A + old B → new B (its migrations run while old A serves) → new A →
//! B back to the old release (Redis flushed while the releases are mixed) → B new again. A
//! holds copies of the boards; B holds none (`RANKING_SNAPSHOT_MAX_ENTRIES` below the board)
//! and reads Redis. A pin holds a product at the top throughout, so the boards are written
//! in the layouts of a board with pins too, and while B runs the previous release again it
//! serves a pin published by this release's A as a delta (layout 3). At every step every read
//! is answered by a running replica with a whole page topped by the pin, no replica serves a
//! version older than one it served, every write lands once; at the end, the pins deleted,
//! both replicas serve the same board, and a Recompute serves the same bits.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use chrono::Utc;
use ranking_client::v1;
use ranking_client::v1::ranking_service_client::RankingServiceClient;
use ranking_server::test_support::eventually;
use tokio::sync::Mutex;
use tonic::transport::Channel;

use crate::helpers::process::{ServerProcess, server_binary};
use crate::helpers::{
    TestDb, count_events, event, events_reference, rand_u64, test_redis, test_redis_mode, whole_second,
};
use crate::previews::pin;

/// Products seeded before the rollout; a page is this long or shorter only if it is short.
const PRODUCTS: i64 = 60;
const PAGE: u32 = 20;
/// Pinned at position 1 before the rollout and until its end.
const TOP: i64 = 13;
/// Pinned at position 2 by this release while the previous one reads Redis beside it.
const SECOND: i64 = 29;

/// One replica slot (A or B) and what runs in it.
struct Running {
    process: ServerProcess,
    client: RankingServiceClient<Channel>,
    release: &'static str,
    /// Set before it is sent SIGTERM: its refusals from then on are its shutdown's.
    stopping: Arc<AtomicBool>,
    /// The newest version it served.
    served: Arc<AtomicU64>,
}

#[derive(Default)]
struct Fleet {
    slots: [Mutex<Option<Running>>; 2],
    /// What went wrong, as it happened.
    anomalies: std::sync::Mutex<Vec<String>>,
    sent: AtomicU64,
    /// Set: the writer holds its next batch (`idle` says it has).
    quiet: AtomicBool,
    idle: AtomicBool,
    /// Every event landed: the reference's input.
    landed: std::sync::Mutex<Vec<v1::Event>>,
}

impl Fleet {
    fn anomaly(&self, what: String) {
        self.anomalies.lock().expect("anomalies").push(what);
    }

    fn landed(&self, events: &[v1::Event]) {
        self.landed.lock().expect("landed").extend_from_slice(events);
    }

    /// The board the built-in profile gives what landed, as the reference computes it.
    fn reference(&self) -> Vec<(i64, u64)> {
        let landed = self.landed.lock().expect("landed");
        events_reference(landed.iter()).into_iter().map(|(p, score)| (p, score.to_bits())).collect()
    }

    /// A client of a slot's replica, with its stopping flag and served version.
    async fn client(
        &self,
        slot: usize,
    ) -> Option<(RankingServiceClient<Channel>, Arc<AtomicBool>, Arc<AtomicU64>, &'static str)> {
        let running = self.slots[slot].lock().await;
        running.as_ref().map(|r| (r.client.clone(), r.stopping.clone(), r.served.clone(), r.release))
    }
}

fn envs(db: &str, redis: &str, prefix: &str, holds_copies: bool) -> Vec<(&'static str, String)> {
    let mut envs = vec![
        ("DATABASE_URL", db.to_string()),
        ("REDIS_URL", redis.to_string()),
        ("RANKING_REDIS_MODE", test_redis_mode().to_string()),
        ("RANKING_REDIS_PREFIX", prefix.to_string()),
        ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
        ("RANKING_LIVE_INTERVAL", "200ms".to_string()),
        ("RANKING_REPLICA_TTL", "3s".to_string()),
        ("RANKING_SHUTDOWN_GRACE", "2s".to_string()),
        // `RANKING_TEST_ROLLING_LOG`: the replicas' log filter (with `RANKING_TEST_SERVER_LOG`).
        ("RUST_LOG", std::env::var("RANKING_TEST_ROLLING_LOG").unwrap_or("info".into())),
    ];
    if !holds_copies {
        envs.push(("RANKING_SNAPSHOT_MAX_ENTRIES", "10".to_string()));
    }
    envs
}

async fn start(
    fleet: &Fleet,
    slot: usize,
    binary: &std::path::Path,
    release: &'static str,
    envs: &[(&'static str, String)],
) {
    let process = ServerProcess::start_binary(binary, envs).await;
    let client = RankingServiceClient::connect(format!("http://{}", process.addr)).await.expect("connects");
    let running = Running {
        process,
        client,
        release,
        stopping: Arc::new(AtomicBool::new(false)),
        served: Arc::new(AtomicU64::new(0)),
    };
    *fleet.slots[slot].lock().await = Some(running);
}

/// SIGTERM, as Kubernetes stops a pod, and its exit awaited.
async fn stop(fleet: &Fleet, slot: usize) {
    let running = fleet.slots[slot].lock().await.take().expect("a replica in the slot");
    running.stopping.store(true, Ordering::SeqCst);
    running.process.terminate();
    let status = running.process.wait().await;
    assert!(status.success(), "the {} replica exits cleanly: {status}", running.release);
}

/// Records batches of ten views, each to one replica and to the other when it refuses (the
/// same ids: a retry lands once), until `done`.
async fn write(fleet: Arc<Fleet>, done: Arc<AtomicBool>) {
    let mut batch = 0u64;
    while !done.load(Ordering::SeqCst) {
        if fleet.quiet.load(Ordering::SeqCst) {
            fleet.idle.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        fleet.idle.store(false, Ordering::SeqCst);
        let at = whole_second(Utc::now()) - chrono::Duration::seconds(1);
        let events: Vec<v1::Event> = (0..10)
            .map(|i| {
                event(
                    &format!("roll-{batch}-{i}"),
                    ((batch * 10 + i) as i64 % PRODUCTS) + 1,
                    v1::EventType::View,
                    0,
                    at,
                )
            })
            .collect();
        let mut landed = false;
        for attempt in 0..200 {
            let slot = (batch as usize + attempt) % 2;
            let Some((mut client, stopping, _, release)) = fleet.client(slot).await else { continue };
            match client.record_events(v1::RecordEventsRequest { events: events.clone() }).await {
                Ok(_) => {
                    fleet.landed(&events);
                    landed = true;
                    break;
                }
                Err(e) if stopping.load(Ordering::SeqCst) => drop(e),
                Err(e) => fleet.anomaly(format!("RecordEvents on the {release} replica in slot {slot}: {e:?}")),
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(landed, "batch {batch} landed nowhere");
        fleet.sent.fetch_add(10, Ordering::SeqCst);
        batch += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a page of the daily board from each running replica until `done`: a whole page,
/// never a version older than one the same replica served.
async fn read(fleet: Arc<Fleet>, done: Arc<AtomicBool>) -> u64 {
    let mut reads = 0u64;
    while !done.load(Ordering::SeqCst) {
        for slot in 0..2 {
            let Some((mut client, stopping, served, release)) = fleet.client(slot).await else { continue };
            let request = v1::GetTopNRequest { limit: PAGE, ..Default::default() };
            match client.get_top_n(request).await {
                Ok(page) => {
                    let page = page.into_inner();
                    reads += 1;
                    if page.products.len() < PAGE as usize {
                        fleet.anomaly(format!(
                            "the {release} replica in slot {slot} served a page of {} (version {})",
                            page.products.len(),
                            page.version
                        ));
                    } else if page.products[0].product_id != TOP {
                        fleet.anomaly(format!(
                            "the {release} replica in slot {slot} served version {} without its pin: {} first",
                            page.version, page.products[0].product_id
                        ));
                    }
                    let before = served.fetch_max(page.version, Ordering::SeqCst);
                    if page.version < before {
                        fleet.anomaly(format!(
                            "the {release} replica in slot {slot} served version {} after {before}",
                            page.version
                        ));
                    }
                }
                Err(_) if stopping.load(Ordering::SeqCst) => {}
                Err(e) => fleet.anomaly(format!("GetTopN on the {release} replica in slot {slot}: {e:?}")),
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    reads
}

/// With B on the previous release and A on this one, writes held: a second pin put on A is
/// served by A's control pass as a delta of a board with pins (layout 3, which the previous
/// release reads and this one writes by default), and B, which holds no copy, serves it from
/// Redis. B polls the controls too and may win the pass (writing the board whole, as its
/// release does by default): then the pin moves to another product and A tries again.
async fn previous_reads_a_pin_written_as_a_delta(fleet: &Fleet, redis: &str, prefix: &str) {
    use redis::AsyncCommands;
    fleet.quiet.store(true, Ordering::SeqCst);
    eventually("the writer holds its batches", async || fleet.idle.load(Ordering::SeqCst)).await;
    let (mut a, ..) = fleet.client(0).await.expect("A");
    let (mut b, _, _, release) = fleet.client(1).await.expect("B");
    assert_eq!(release, "previous");
    let mut conn = crate::helpers::test_redis_connection(redis);
    let pointer = format!("{prefix}:{{daily:{}}}:version", Utc::now().date_naive());
    let mut layouts = Vec::new();
    for product in [SECOND, SECOND + 1, SECOND + 2] {
        let put = v1::PutControlRequest { control: Some(pin("second", product, 2)), expected_revision: 0 };
        a.put_control(put).await.expect("the second pin put");
        let mut version = 0;
        eventually("the previous release serves the second pin", async || {
            let Ok(page) = b.get_top_n(v1::GetTopNRequest { limit: 2, ..Default::default() }).await else {
                return false;
            };
            let page = page.into_inner();
            version = page.version;
            page.products.get(1).map(|p| p.product_id) == Some(product)
        })
        .await;
        let current: String = conn.get(&pointer).await.expect("GET the pointer");
        if current.starts_with(&format!("{version}:3:")) {
            fleet.quiet.store(false, Ordering::SeqCst);
            return;
        }
        layouts.push(current);
    }
    panic!("no pin was written as a delta by this release in three tries: {layouts:?}");
}

/// Lets the traffic run through a step for a while.
async fn traffic() {
    tokio::time::sleep(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the previous release's server (RANKING_TEST_PREVIOUS_SERVER) and PostgreSQL or MariaDB with Redis: make test's passes"]
async fn a_rolling_upgrade_and_a_rollback_serve_every_read_and_lose_nothing() {
    let previous: PathBuf = std::env::var_os("RANKING_TEST_PREVIOUS_SERVER")
        .expect("RANKING_TEST_PREVIOUS_SERVER names the previous release's server (scripts/previous-release.sh)")
        .into();
    let redis = test_redis().expect("RANKING_TEST_REDIS: the releases share one Redis");
    let db = TestDb::create().await;
    assert!(!db.url.starts_with("sqlite"), "the releases share one SQL database: PostgreSQL or MariaDB");
    let current = server_binary();
    let prefix = format!("test-{:016x}", rand_u64());
    let (a_envs, b_envs) = (envs(&db.url, &redis, &prefix, true), envs(&db.url, &redis, &prefix, false));
    let fleet = Arc::new(Fleet::default());

    // The previous release serves alone first, with a board of every product.
    start(&fleet, 0, &previous, "previous", &a_envs).await;
    start(&fleet, 1, &previous, "previous", &b_envs).await;
    let (mut a, ..) = fleet.client(0).await.expect("A");
    let seed: Vec<v1::Event> = (1..=PRODUCTS)
        .map(|p| {
            event(
                &format!("seed-{p}"),
                p,
                v1::EventType::View,
                0,
                whole_second(Utc::now()) - chrono::Duration::seconds(2),
            )
        })
        .collect();
    a.record_events(v1::RecordEventsRequest { events: seed.clone() }).await.expect("seeded");
    fleet.landed(&seed);
    a.recompute(v1::RecomputeRequest::default()).await.expect("Recompute");
    a.put_control(v1::PutControlRequest { control: Some(pin("top", TOP, 1)), expected_revision: 0 })
        .await
        .expect("the pin put");
    let (mut b, ..) = fleet.client(1).await.expect("B");
    eventually("both replicas serve the pin", async || {
        let request = || v1::GetTopNRequest { limit: 1, ..Default::default() };
        let (Ok(x), Ok(y)) = (a.get_top_n(request()).await, b.get_top_n(request()).await) else { return false };
        [x.into_inner(), y.into_inner()].iter().all(|page| page.products.first().map(|p| p.product_id) == Some(TOP))
    })
    .await;

    let done = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write(fleet.clone(), done.clone()));
    let reader = tokio::spawn(read(fleet.clone(), done.clone()));
    traffic().await;
    // B to this release (its migrations run while the previous A serves), then A.
    stop(&fleet, 1).await;
    start(&fleet, 1, &current, "current", &b_envs).await;
    traffic().await;
    stop(&fleet, 0).await;
    start(&fleet, 0, &current, "current", &a_envs).await;
    traffic().await;
    // B back to the previous release, on the schema this one left; Redis flushed while mixed.
    stop(&fleet, 1).await;
    start(&fleet, 1, &previous, "previous", &b_envs).await;
    traffic().await;
    previous_reads_a_pin_written_as_a_delta(&fleet, &redis, &prefix).await;
    crate::helpers::delete_keys(&crate::helpers::test_redis_connection(&redis), &prefix).await;
    traffic().await;
    // And B new again.
    stop(&fleet, 1).await;
    start(&fleet, 1, &current, "current", &b_envs).await;
    traffic().await;
    done.store(true, Ordering::SeqCst);
    writer.await.expect("writer");
    let reads = reader.await.expect("reader");

    let anomalies = fleet.anomalies.lock().expect("anomalies").clone();
    assert!(
        anomalies.is_empty(),
        "{} anomalies in {reads} reads, the first: {:#?}",
        anomalies.len(),
        &anomalies[..anomalies.len().min(10)]
    );
    let sent = fleet.sent.load(Ordering::SeqCst) as i64;
    assert_eq!(count_events(&db.url).await, sent + PRODUCTS, "every write landed once");

    // Both replicas come to serve the reference's board (the live passes catch up), and a
    // Recompute serves the same bits.
    let (mut a, ..) = fleet.client(0).await.expect("A");
    let (mut b, ..) = fleet.client(1).await.expect("B");
    for id in ["top", "second"] {
        let request = v1::DeleteControlRequest { control_id: id.into(), expected_revision: 0 };
        a.delete_control(request).await.expect("the pin deleted");
    }
    let whole = || v1::GetTopNRequest { limit: PRODUCTS as u32, ..Default::default() };
    let board = |page: v1::GetTopNResponse| -> Vec<(i64, u64)> {
        page.products.iter().map(|p| (p.product_id, p.score.to_bits())).collect()
    };
    let reference = fleet.reference();
    eventually("both replicas serve the reference's board", async || {
        let (Ok(x), Ok(y)) = (a.get_top_n(whole()).await, b.get_top_n(whole()).await) else { return false };
        board(x.into_inner()) == reference && board(y.into_inner()) == reference
    })
    .await;
    a.recompute(v1::RecomputeRequest::default()).await.expect("Recompute");
    let recomputed = board(b.get_top_n(whole()).await.expect("read").into_inner());
    assert_eq!(recomputed, reference, "a Recompute serves the reference's bits");
    for slot in [0, 1] {
        stop(&fleet, slot).await;
    }
    db.drop_db().await;
}
