//! The service on a Redis Cluster of the test's own, through failovers: a planned
//! `CLUSTER FAILOVER` and a killed master under readers, a master frozen and killed during a
//! recompute, and three service processes of which the lease holder is killed mid-recompute.
//!
//! These run in the cluster pass of `make test` (`RANKING_TEST_REDIS_MODE=cluster`, with the
//! database of that pass); the other passes skip them, as they have no cluster to fail over.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use chrono::Utc;
use ranking_client::v1::{self, EventType};
use ranking_client::{RankingClient, tonic::Code};

use crate::helpers::process::ServerProcess;
use crate::helpers::throwaway_cluster::ThrowawayCluster;
use crate::helpers::{TestApp, TestDb, event, rand_u64, settings, test_redis_mode};
use ranking_server::test_support::{eventually, eventually_some};

/// These tests need the Redis Cluster of `make test`'s cluster pass, and fail without it.
fn assert_cluster_pass() {
    assert_eq!(
        test_redis_mode(),
        "cluster",
        "needs a Redis Cluster (RANKING_TEST_REDIS_MODE=cluster): make test's cluster pass"
    );
}

/// Events for products `first..first + n`: product p gets p % 7 + 1 views, p % 3 likes and an
/// order of p % 5 × 1,000 every fifth product, so scores spread and many tie.
fn population(tag: &str, first: i64, n: i64) -> Vec<v1::Event> {
    let now = Utc::now();
    let mut events = Vec::new();
    for p in first..first + n {
        for i in 0..(p % 7 + 1) {
            events.push(event(&format!("{tag}-v-{p}-{i}"), p, EventType::View, 0, now));
        }
        for i in 0..(p % 3) {
            events.push(event(&format!("{tag}-l-{p}-{i}"), p, EventType::Like, 0, now));
        }
        if p % 5 == 0 {
            events.push(event(&format!("{tag}-o-{p}"), p, EventType::Order, (p % 5 + 1) * 1_000, now));
        }
    }
    events
}

/// Records `events` through `client` in batches.
async fn record_all(client: &RankingClient, events: &[v1::Event]) {
    let client = client.clone();
    for batch in events.chunks(1_000) {
        let written = client.record_events(batch.to_vec()).await.expect("RecordEvents");
        assert_eq!(written.accepted as usize + written.duplicates as usize, batch.len());
    }
}

/// Every entry of today's daily ranking, following page tokens: (product, score bits), and
/// the version the walk read.
async fn walk(client: &RankingClient) -> (Vec<(i64, u64)>, u64) {
    use futures_util::StreamExt;
    let mut pages = client.pages(v1::GetTopNRequest { limit: 1_000, ..Default::default() });
    let (mut entries, mut version) = (Vec::new(), 0);
    while let Some(page) = pages.next().await {
        let page = page.expect("page");
        version = page.version;
        entries.extend(page.products.iter().map(|p| (p.product_id, p.score.to_bits())));
    }
    (entries, version)
}

async fn client_of(addr: impl std::fmt::Display) -> RankingClient {
    RankingClient::builder(format!("http://{addr}")).connect().await.expect("client")
}

/// A client that never retries: every error a caller would see reaches the test.
async fn strict_client_of(addr: impl std::fmt::Display) -> RankingClient {
    let once = ranking_client::RetryPolicy { max_attempts: 1, ..Default::default() };
    RankingClient::builder(format!("http://{addr}")).retry(once).connect().await.expect("client")
}

/// A server on a throwaway cluster and a fresh database, under a key prefix of its own.
struct OnCluster {
    cluster: ThrowawayCluster,
    db: TestDb,
    prefix: String,
    app: TestApp,
}

impl OnCluster {
    async fn start() -> Self {
        let cluster = ThrowawayCluster::start();
        let db = TestDb::create().await;
        let prefix = format!("t{:x}", rand_u64());
        let args = [
            format!("--redis-url={}", cluster.seeds),
            "--redis-mode=cluster".into(),
            format!("--redis-prefix={prefix}"),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let app = TestApp::spawn_on(settings(&db.url, &args)).await;
        Self { cluster, db, prefix, app }
    }
}

/// Retries a Recompute until it succeeds (the cluster heals within a few node timeouts).
async fn recompute_until_ok(client: &RankingClient) -> u64 {
    eventually_some("a recompute succeeds after the failover", async || match client.recompute("").await {
        Ok(r) => Some(r.version),
        Err(e) => {
            tracing::debug!(code = ?e.code(), "recompute during failover: {}", e.message());
            None
        }
    })
    .await
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    eventually(what, async || done()).await
}

/// Readers of today's top page and of ranks, asserting each answer equals `expected` (the
/// ranking does not change: the same events are recomputed), until stopped.
struct Readers {
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Readers {
    fn start(client: RankingClient, expected: Vec<(i64, u64)>, first_version: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let (stopping, counting) = (stop.clone(), reads.clone());
        let task = tokio::spawn(async move {
            let mut i = 0usize;
            while !stopping.load(Ordering::SeqCst) {
                let page = client
                    .top_n(v1::GetTopNRequest { limit: 50, ..Default::default() })
                    .await
                    .expect("GetTopN answers through the failover");
                let got: Vec<(i64, u64)> = page.products.iter().map(|p| (p.product_id, p.score.to_bits())).collect();
                assert_eq!(got, expected[..50], "a whole ranking, never a partial one");
                assert_eq!(page.total as usize, expected.len());
                assert!(page.version >= first_version);
                let (id, bits) = expected[i % expected.len()];
                let rank = client
                    .rank(v1::GetRankRequest { product_id: id, ..Default::default() })
                    .await
                    .expect("GetRank answers through the failover");
                let product = rank.product.expect("ranked");
                assert_eq!((product.rank as usize, product.score.to_bits()), (i % expected.len() + 1, bits));
                counting.fetch_add(1, Ordering::SeqCst);
                i += 7919;
            }
        });
        Self { stop, reads, task }
    }

    fn count(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        let reads = self.reads.clone();
        self.task.await.expect("readers saw only whole, unchanged rankings");
        reads.load(Ordering::SeqCst)
    }
}

/// A planned `CLUSTER FAILOVER` of the shard holding today's daily ranking, then a SIGKILL of
/// its new master: reads go on from the replica's copy without one error, and a recompute
/// after each switch publishes a newer version of the same ranking.
#[tokio::test]
#[ignore = "needs a Redis Cluster: make test's cluster pass"]
async fn reads_and_recomputes_go_on_through_a_planned_and_an_unplanned_failover() {
    assert_cluster_pass();
    let OnCluster { cluster, db, prefix, mut app } = OnCluster::start().await;
    let client = client_of(app.addr).await;
    record_all(&client, &population("f", 1, 600)).await;
    let first = app.recompute("").await.version;
    let (expected, version) = walk(&client).await;
    assert_eq!((expected.len(), version), (600, first));
    let pointer = format!("{prefix}:{{daily:{}}}:version", Utc::now().date_naive());

    let readers = Readers::start(strict_client_of(app.addr).await, expected.clone(), first);
    // Planned: the replica takes over with the master's consent; nothing is lost.
    let master = cluster.master_of(&pointer, &[]).expect("a master");
    let replica = cluster.replica_of(master);
    assert!(crate::helpers::throwaway_cluster::cli(replica, &["cluster", "failover"]).contains("OK"));
    wait_until("the planned failover", || cluster.master_of(&pointer, &[]) == Some(replica)).await;
    let second = recompute_until_ok(&client).await;
    assert!(second > first);
    assert_eq!(walk(&client).await, (expected.clone(), second));

    // Unplanned: the new master dies; its replica (the old master) is promoted.
    let before = readers.count();
    cluster.signal(replica, "KILL");
    wait_until("the promotion of the replica", || cluster.healthy(&pointer, &[replica])).await;
    assert_eq!(cluster.master_of(&pointer, &[replica]), Some(master));
    let reads_meanwhile = readers.count() - before;
    let third = recompute_until_ok(&client).await;
    assert!(third > second);
    assert_eq!(walk(&client).await, (expected, third));
    let reads = readers.finish().await;
    assert!(reads_meanwhile > 0 && reads > reads_meanwhile, "readers ran through the outage");
    app.stop().await;
    db.drop_db().await;
}

/// The master holding today's daily ranking is frozen while a recompute runs and killed once
/// its replica is promoted: the recompute either fails cleanly or completes on the new
/// master, readers only ever see the whole ranking, and the next scheduler tick publishes a
/// complete newer version that Redis holds entry for entry.
#[tokio::test]
#[ignore = "needs a Redis Cluster: make test's cluster pass"]
async fn a_master_lost_during_a_recompute_leaves_no_partial_ranking() {
    assert_cluster_pass();
    let OnCluster { cluster, db, prefix, app } = OnCluster::start().await;
    let client = client_of(app.addr).await;
    record_all(&client, &population("m", 1, 2_000)).await;
    let first = client.clone().recompute("").await.expect("recompute").version;
    let (expected, _) = walk(&client).await;
    let today = Utc::now().date_naive();
    let base = format!("{prefix}:{{daily:{today}}}");
    let master = cluster.master_of(&format!("{base}:version"), &[]).expect("a master");

    let readers = Readers::start(strict_client_of(app.addr).await, expected.clone(), first);
    cluster.signal(master, "STOP");
    let during = tokio::spawn({
        let client = strict_client_of(app.addr).await;
        async move { client.recompute("").await }
    });
    wait_until("the promotion of the replica", || cluster.healthy(&format!("{base}:version"), &[master])).await;
    cluster.signal(master, "KILL");
    let outcome = during.await.expect("recompute task");
    eprintln!("recompute across the failover: {:?}", outcome.as_ref().map(|r| r.version).map_err(|e| e.code()));
    match outcome {
        Ok(r) => assert!(r.version > first, "completed on the promoted replica"),
        Err(e) => assert!(matches!(e.code(), Code::Unavailable | Code::Aborted), "fails cleanly: {e}"),
    }
    // The next scheduler tick heals whatever the failover interrupted.
    let reports = app.scheduler.tick(Utc::now()).await;
    assert_eq!(reports.len(), 1, "the tick recomputed today");
    let (healed, version) = walk(&client).await;
    assert_eq!(healed, expected);
    assert!(version > first);
    readers.finish().await;
    // Redis holds the served version whole.
    let mut conn = crate::helpers::test_redis_connection(&cluster.seeds);
    let members: Vec<(String, f64)> =
        redis::AsyncCommands::zrevrange_withscores(&mut conn, &base, 0, -1).await.expect("ZREVRANGE");
    let held: Vec<(i64, u64)> = members.iter().map(|(m, s)| (m.parse().expect("id"), s.to_bits())).collect();
    assert_eq!(held, expected);
    app.stop().await;
    db.drop_db().await;
}

/// Three service processes on one cluster and one database; events go to all three; the one
/// that holds the day's lease is killed (SIGKILL) in the middle of its recompute; another
/// takes the day over once the dead holder's lease expires, and every replica then serves
/// exactly what a single process computes from the same events.
#[tokio::test]
#[ignore = "needs a Redis Cluster: make test's cluster pass"]
async fn another_replica_takes_over_from_one_killed_mid_recompute() {
    assert_cluster_pass();
    let cluster = ThrowawayCluster::start();
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let envs = |_: usize| {
        vec![
            ("DATABASE_URL", db.url.clone()),
            ("REDIS_URL", cluster.seeds.clone()),
            ("RANKING_REDIS_MODE", "cluster".to_string()),
            ("RANKING_REDIS_PREFIX", prefix.clone()),
            ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
            ("RANKING_RECOMPUTE_LEASE", "3s".to_string()),
        ]
    };
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(ServerProcess::start(&envs(i)).await);
    }
    let mut clients = Vec::new();
    for r in &replicas {
        clients.push(client_of(r.addr).await);
    }
    let events = population("r", 1, 3_000);
    for (i, part) in events.chunks(events.len().div_ceil(3)).enumerate() {
        record_all(&clients[i], part).await;
    }

    // Replica 0 takes the lease; it is frozen the moment the lease appears and then killed.
    let lock = format!("{prefix}:{{daily:{}}}:lock", Utc::now().date_naive());
    let mut conn = crate::helpers::test_redis_connection(&cluster.seeds);
    let holder = tokio::spawn({
        let client = strict_client_of(replicas[0].addr).await;
        async move { client.recompute("").await }
    });
    loop {
        let held: Option<String> = redis::AsyncCommands::get(&mut conn, &lock).await.expect("GET");
        if held.is_some() {
            break;
        }
        assert!(!holder.is_finished(), "the recompute finished before its lease was seen");
    }
    let victim = replicas.remove(0);
    std::process::Command::new("kill").args(["-STOP", &victim.pid().to_string()]).status().expect("kill");
    std::process::Command::new("kill").args(["-KILL", &victim.pid().to_string()]).status().expect("kill");
    let lost = holder.await.expect("task");
    assert!(lost.is_err(), "the killed replica never answered its recompute");
    let orphaned: Option<String> = redis::AsyncCommands::get(&mut conn, &lock).await.expect("GET");
    assert!(orphaned.is_some(), "the killed replica died holding the lease, in the middle of its recompute");

    // Replica 1 waits for the dead holder's lease to expire, then recomputes the day.
    let took_over = clients[1].clone().recompute("").await.expect("another replica takes over");
    let ttl: i64 = redis::AsyncCommands::pttl(&mut conn, &lock).await.expect("PTTL");
    assert_eq!(ttl, -2, "the lease was released by the replica that took over");
    let expected = {
        let single_db = TestDb::create().await;
        // One process with the in-process ranking store.
        let mut alone = settings(&single_db.url, &[]);
        alone.redis.redis_url = None;
        let single = TestApp::spawn_on(alone).await;
        let client = client_of(single.addr).await;
        record_all(&client, &events).await;
        client.recompute("").await.expect("single-process recompute");
        let (entries, _) = walk(&client).await;
        single.stop().await;
        single_db.drop_db().await;
        entries
    };
    assert_eq!(expected.len(), 3_000);
    for client in &clients[1..] {
        let what = format!("the replica loads version {}", took_over.version);
        let entries = eventually_some(&what, async || {
            let (entries, version) = walk(client).await;
            (version >= took_over.version).then_some(entries)
        })
        .await;
        assert_eq!(entries, expected, "equal to the single-process result");
    }
    let _ = victim;
    for r in replicas {
        r.terminate();
        assert!(r.wait().await.success());
    }
    db.drop_db().await;
}
