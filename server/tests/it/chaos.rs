//! The fault soak (`make chaos`): two replica processes over PostgreSQL, a Redis Cluster,
//! the three-broker Kafka cluster and NATS JetStream, while producers write over gRPC and
//! both buses (redeliveries, poison records, refunds) and readers read both replicas, under a
//! seeded schedule of faults: a replica killed (`kill -9`, then started again) or paused
//! (SIGSTOP, SIGCONT), PostgreSQL restarted at once, a Redis master killed or frozen, a
//! Kafka broker killed or frozen, NATS restarted, and the connections between a replica and
//! PostgreSQL or NATS stalled. Once the faults stop and ingest drains: SQL holds exactly the produced events,
//! every poison record is dead-lettered, both replicas serve the same ranking, equal to a
//! recompute and to an independent reference; no reader saw a replica's ranking go back, and
//! no read of a running, unpaused replica failed. It prints what happened as a table.
//!
//! `RANKING_CHAOS_SECONDS` (default 120) and `RANKING_CHAOS_SEED` (default 1) set the run.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ranking_client::v1;
use ranking_server::test_support::eventually;
use serde_json::json;

use crate::helpers::bus::{TestBus, ThrowawayNats, test_kafka_cluster};
use crate::helpers::faults::{StallingProxy, signal};
use crate::helpers::pg::ThrowawayPostgres;
use crate::helpers::process::ServerProcess;
use crate::helpers::throwaway_cluster::ThrowawayCluster;
use crate::helpers::{count_events, events_reference, whole_second};

type Client = v1::ranking_service_client::RankingServiceClient<ranking_client::tonic::transport::Channel>;

/// Products the producers spread over; the marker is apart.
const PRODUCTS: i64 = 300;
/// A product only the gRPC producer views, ten views a batch: its main score's integer part
/// counts the batches a ranking includes, so a reader sees any ranking going back.
const MARKER: i64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillReplica,
    PauseReplica,
    RestartPostgres,
    KillRedisMaster,
    KillKafkaBroker,
    RestartNats,
    StallPostgres,
    StallNats,
    FreezeRedisMaster,
    FreezeKafkaBroker,
}

const FAULTS: [Fault; 10] = [
    Fault::KillReplica,
    Fault::PauseReplica,
    Fault::RestartPostgres,
    Fault::KillRedisMaster,
    Fault::KillKafkaBroker,
    Fault::RestartNats,
    Fault::StallPostgres,
    Fault::StallNats,
    Fault::FreezeRedisMaster,
    Fault::FreezeKafkaBroker,
];

/// One replica: how to start it, the running process, and whether reads of it count
/// (running and not paused: `serving`).
struct Replica {
    env: Vec<(&'static str, String)>,
    process: tokio::sync::Mutex<Option<ServerProcess>>,
    addr: Mutex<Option<SocketAddr>>,
    serving: AtomicBool,
    /// Bumped whenever a fault touches the replica: a read that spans a change does not count.
    disturbed: AtomicU64,
}

impl Replica {
    async fn start(&self) {
        let process = ServerProcess::start(&self.env).await;
        *self.addr.lock().expect("addr") = Some(process.addr);
        *self.process.lock().await = Some(process);
        self.serving.store(true, Ordering::SeqCst);
    }

    fn client_addr(&self) -> Option<SocketAddr> {
        *self.addr.lock().expect("addr")
    }
}

/// What producers made: valid events by id, poison payloads, and the marker's acknowledged
/// batches with when each was acknowledged.
#[derive(Default)]
struct Produced {
    events: BTreeMap<String, v1::Event>,
    poison: BTreeSet<Vec<u8>>,
    by_source: BTreeMap<&'static str, u64>,
    marker_acks: Vec<(i64, Instant)>,
}

/// What readers saw.
#[derive(Default)]
struct Seen {
    reads: u64,
    failed: u64,
    regressions: u64,
    /// Per replica: the newest (version, marker batches) seen.
    last: BTreeMap<usize, (u64, i64)>,
    /// The first instant each marker count was seen.
    first_seen: BTreeMap<i64, Instant>,
}

fn at() -> DateTime<Utc> {
    whole_second(Utc::now() - chrono::Duration::seconds(2))
}

fn event(id: String, product_id: i64, kind: v1::EventType, amount: i64, retracts: &str) -> v1::Event {
    let when = at();
    v1::Event {
        event_id: id,
        product_id,
        r#type: kind.into(),
        amount,
        retracts: retracts.to_string(),
        occurred_at: Some(prost_types::Timestamp { seconds: when.timestamp(), nanos: 0 }),
        ..Default::default()
    }
}

fn json_of(e: &v1::Event) -> Vec<u8> {
    let at = e.occurred_at.as_ref().expect("timestamp");
    let at = DateTime::<Utc>::from_timestamp(at.seconds, 0).expect("instant").to_rfc3339();
    let kind = v1::EventType::try_from(e.r#type).expect("type");
    serde_json::to_vec(&json!({"eventId": e.event_id, "productId": e.product_id.to_string(),
        "type": kind.as_str_name(), "amount": e.amount, "occurredAt": at, "retracts": e.retracts}))
    .expect("json")
}

/// The next batch of a source: views, likes and orders over [`PRODUCTS`], and a refund of
/// one of its own earlier orders now and then.
fn batch(rng: &mut StdRng, source: &str, n: &mut u64, orders: &mut Vec<v1::Event>) -> Vec<v1::Event> {
    let mut out = Vec::new();
    for _ in 0..10 {
        *n += 1;
        let id = format!("{source}-{n}");
        let product = rng.random_range(1..=PRODUCTS);
        let e = match rng.random_range(0..10) {
            0..=5 => event(id, product, v1::EventType::View, 0, ""),
            6 | 7 => event(id, product, v1::EventType::Like, 0, ""),
            _ => {
                let e = event(id, product, v1::EventType::Order, rng.random_range(100..100_000), "");
                orders.push(e.clone());
                e
            }
        };
        out.push(e);
    }
    if rng.random_range(0..4) == 0 && !orders.is_empty() {
        let original = orders.swap_remove(rng.random_range(0..orders.len()));
        *n += 1;
        out.push(event(format!("{source}-{n}"), original.product_id, v1::EventType::Retract, 0, &original.event_id));
    }
    out
}

async fn connect(addr: SocketAddr) -> Option<Client> {
    let endpoint = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{addr}")).ok()?;
    let channel =
        endpoint.connect_timeout(Duration::from_secs(2)).timeout(Duration::from_secs(5)).connect().await.ok()?;
    Some(Client::new(channel))
}

/// Today's whole daily ranking a replica serves: `(version, entries)`.
async fn whole_board(client: &mut Client) -> Option<(u64, Vec<(i64, f64)>)> {
    let request = v1::GetTopNRequest { limit: 1_000, ..Default::default() };
    let top = client.get_top_n(request).await.ok()?.into_inner();
    Some((top.version, top.products.iter().map(|p| (p.product_id, p.score)).collect()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the fault soak: make chaos"]
async fn fault_soak() {
    let seconds: u64 = std::env::var("RANKING_CHAOS_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(120);
    let seed: u64 = std::env::var("RANKING_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let pg = ThrowawayPostgres::start().expect("PostgreSQL server binaries");
    let redis = ThrowawayCluster::start();
    let kafka_cluster = test_kafka_cluster().expect("RANKING_TEST_KAFKA_CLUSTER: make chaos starts it");
    let nats = ThrowawayNats::start().expect("nats-server");
    let kafka = TestBus::kafka_on_cluster(&kafka_cluster, None).await;
    let jetstream = TestBus::jetstream(&nats.url()).await;
    let prefix = format!("chaos-{seed:x}-{:x}", crate::helpers::rand_u64());

    let pg_target: SocketAddr =
        pg.url().split('@').nth(1).and_then(|h| h.split('/').next()).expect("host").parse().expect("addr");
    let nats_target: SocketAddr = nats.url().trim_start_matches("nats://").parse().expect("addr");
    let mut replicas = Vec::new();
    let mut proxies = Vec::new();
    for _ in 0..2 {
        let (pg_proxy, nats_proxy) = (StallingProxy::start(pg_target).await, StallingProxy::start(nats_target).await);
        let db = pg.url().replace(&pg_target.to_string(), &pg_proxy.addr.to_string());
        let mut env = vec![
            ("DATABASE_URL", db),
            ("REDIS_URL", redis.seeds.clone()),
            ("RANKING_REDIS_MODE", "cluster".to_string()),
            ("RANKING_REDIS_PREFIX", prefix.clone()),
            ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
            ("RANKING_LIVE_INTERVAL", "500ms".to_string()),
            ("RANKING_RECOMPUTE_LEASE", "3s".to_string()),
        ];
        env.extend(kafka.envs(100));
        env.extend(
            jetstream.envs(100).into_iter().map(|(k, v)| {
                if k == "RANKING_NATS_URL" { (k, format!("nats://{}", nats_proxy.addr)) } else { (k, v) }
            }),
        );
        // Both buses on one replica: the batch settings appear twice, the same values.
        let replica = Arc::new(Replica {
            env,
            process: tokio::sync::Mutex::new(None),
            addr: Mutex::new(None),
            serving: AtomicBool::new(false),
            disturbed: AtomicU64::new(0),
        });
        replica.start().await;
        replicas.push(replica);
        proxies.push((pg_proxy, nats_proxy));
    }

    let produced = Arc::new(Mutex::new(Produced::default()));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();

    // gRPC: a batch every 100 ms to a serving replica, retried (the same ids) until recorded.
    tasks.push(tokio::spawn({
        let (replicas, produced, stop) = (replicas.clone(), produced.clone(), stop.clone());
        async move {
            let mut rng = StdRng::seed_from_u64(seed ^ 0x67);
            let (mut n, mut orders, mut marker) = (0u64, Vec::new(), 0i64);
            while !stop.load(Ordering::SeqCst) {
                let mut events = batch(&mut rng, "grpc", &mut n, &mut orders);
                marker += 1;
                for i in 0..10 {
                    events.push(event(format!("grpc-marker-{marker}-{i}"), MARKER, v1::EventType::View, 0, ""));
                }
                let deadline = Instant::now() + Duration::from_secs(120);
                let mut turn = 0usize;
                loop {
                    assert!(Instant::now() < deadline, "a gRPC batch was not recorded within 120 s");
                    turn += 1;
                    let replica = &replicas[turn % replicas.len()];
                    let Some(addr) = replica.client_addr().filter(|_| replica.serving.load(Ordering::SeqCst)) else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let Some(mut client) = connect(addr).await else { continue };
                    let request = v1::RecordEventsRequest { events: events.clone() };
                    if client.record_events(request).await.is_ok() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                {
                    let mut p = produced.lock().expect("produced");
                    p.marker_acks.push((marker, Instant::now()));
                    *p.by_source.entry("gRPC").or_default() += events.len() as u64;
                    p.events.extend(events.into_iter().map(|e| (e.event_id.clone(), e)));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }));
    // The buses: a batch every 100 ms, one record in ten published again, one batch in five
    // with a poison record.
    let buses = [("Kafka", Arc::new(kafka)), ("JetStream", Arc::new(jetstream))];
    for (name, bus) in &buses {
        let (produced, stop, bus, name) = (produced.clone(), stop.clone(), bus.clone(), *name);
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ name.len() as u64);
            let (mut n, mut orders) = (0u64, Vec::new());
            while !stop.load(Ordering::SeqCst) {
                let events = batch(&mut rng, name, &mut n, &mut orders);
                let mut records: Vec<(String, Vec<u8>)> =
                    events.iter().map(|e| (e.product_id.to_string(), json_of(e))).collect();
                let mut poison = Vec::new();
                if rng.random_range(0..5) == 0 {
                    let payload = format!("{{not json {name} {n}").into_bytes();
                    poison.push(payload.clone());
                    records.push(("poison".into(), payload));
                }
                if rng.random_range(0..10) == 0 {
                    records.push(records[0].clone());
                }
                let deadline = Instant::now() + Duration::from_secs(120);
                while let Err(e) = bus.try_publish(&records).await {
                    assert!(Instant::now() < deadline, "{name} refused a batch for 120 s: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                {
                    let mut p = produced.lock().expect("produced");
                    *p.by_source.entry(name).or_default() += events.len() as u64;
                    p.events.extend(events.into_iter().map(|e| (e.event_id.clone(), e)));
                    p.poison.extend(poison);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    // Readers: each replica read back to back; a failure counts when the replica served
    // throughout the call.
    for (index, replica) in replicas.iter().enumerate() {
        let (replica, seen, stop) = (replica.clone(), seen.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut client: Option<(SocketAddr, Client)> = None;
            while !stop.load(Ordering::SeqCst) {
                let before = replica.disturbed.load(Ordering::SeqCst);
                let serving = replica.serving.load(Ordering::SeqCst);
                let Some(addr) = replica.client_addr().filter(|_| serving) else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if client.as_ref().is_none_or(|(a, _)| *a != addr) {
                    client = connect(addr).await.map(|c| (addr, c));
                }
                let read = match client.as_mut() {
                    Some((_, c)) => {
                        let request = v1::GetRankRequest { product_id: MARKER, ..Default::default() };
                        c.get_rank(request).await.map(|r| r.into_inner())
                    }
                    None => Err(ranking_client::tonic::Status::unavailable("no connection")),
                };
                let undisturbed =
                    replica.disturbed.load(Ordering::SeqCst) == before && replica.serving.load(Ordering::SeqCst);
                {
                    let mut s = seen.lock().expect("seen");
                    s.reads += 1;
                    match read {
                        Ok(answer) => {
                            let floor = answer.product.and_then(|p| p.breakdown).map_or(0, |b| b.main_floor);
                            let version = answer.version;
                            let last = s.last.get(&index).copied().unwrap_or((0, 0));
                            // A version older than one seen, or a newer one holding fewer of
                            // the marker's views: the ranking went back.
                            if version < last.0 || floor < last.1 {
                                s.regressions += 1;
                            }
                            s.last.insert(index, (last.0.max(version), last.1.max(floor)));
                            s.first_seen.entry(floor).or_insert_with(Instant::now);
                        }
                        Err(status) if status.code() == ranking_client::tonic::Code::NotFound => {}
                        Err(_) if undisturbed => s.failed += 1,
                        Err(_) => client = None,
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
    }

    // The schedule: a fault every few seconds, each healed after a few more; a replica fault
    // only while the other replica serves.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts: BTreeMap<Fault, u64> = BTreeMap::new();
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(rng.random_range(1_000..3_000))).await;
        let fault = FAULTS[rng.random_range(0..FAULTS.len())];
        let hold = Duration::from_millis(rng.random_range(1_000..5_000));
        let which = rng.random_range(0..replicas.len());
        let replica = &replicas[which];
        let other_serving = replicas[1 - which].serving.load(Ordering::SeqCst);
        match fault {
            Fault::KillReplica | Fault::PauseReplica if !other_serving => continue,
            Fault::KillReplica => {
                replica.serving.store(false, Ordering::SeqCst);
                replica.disturbed.fetch_add(1, Ordering::SeqCst);
                if let Some(process) = replica.process.lock().await.take() {
                    process.kill();
                    process.wait().await;
                }
                tokio::time::sleep(hold).await;
                replica.start().await;
            }
            Fault::PauseReplica => {
                replica.serving.store(false, Ordering::SeqCst);
                replica.disturbed.fetch_add(1, Ordering::SeqCst);
                let pid = replica.process.lock().await.as_ref().map(ServerProcess::pid).expect("running");
                signal(pid, "STOP");
                tokio::time::sleep(hold).await;
                signal(pid, "CONT");
                replica.disturbed.fetch_add(1, Ordering::SeqCst);
                replica.serving.store(true, Ordering::SeqCst);
            }
            Fault::RestartPostgres => {
                // Immediate: every connection cut mid-transaction, then the server back.
                pg.stop();
                tokio::time::sleep(hold / 4).await;
                pg.restart();
            }
            Fault::KillRedisMaster => {
                let key = format!("{prefix}:{{daily:{}}}", Utc::now().date_naive());
                let Some(master) = redis.master_of(&key, &[]) else { continue };
                redis.signal(master, "KILL");
                eventually("the cluster failed over", || async { redis.healthy(&key, &[master]) }).await;
                tokio::time::sleep(hold).await;
                redis.restart(master);
                // Rejoined and synced before the schedule goes on: the node is now the only
                // replica of the master that replaced it, and kept from taking over if that
                // master is killed next before the copy is made.
                eventually("the killed node rejoined and synced", || async {
                    redis.healthy(&key, &[]) && redis.synced(master)
                })
                .await;
            }
            // Redis and the Kafka brokers tell clients the addresses to reach them at, so a
            // proxy cannot stand between them and a replica: their stalls are the servers'
            // own, frozen with SIGSTOP (every connection to them open and silent).
            Fault::FreezeRedisMaster => {
                let key = format!("{prefix}:{{daily:{}}}", Utc::now().date_naive());
                let Some(master) = redis.master_of(&key, &[]) else { continue };
                redis.signal(master, "STOP");
                tokio::time::sleep(hold).await;
                redis.signal(master, "CONT");
                // Frozen past the node timeout, it was replaced and comes back as a replica.
                eventually("the frozen node is back", || async {
                    redis.healthy(&key, &[]) && (redis.master_of(&key, &[]) == Some(master) || redis.synced(master))
                })
                .await;
            }
            Fault::FreezeKafkaBroker => {
                let node = rng.random_range(1..=3);
                kafka_cluster.signal(node, "STOP");
                tokio::time::sleep(hold).await;
                kafka_cluster.signal(node, "CONT");
            }
            Fault::KillKafkaBroker => {
                kafka_cluster.kill(rng.random_range(1..=3));
                tokio::time::sleep(hold).await;
                kafka_cluster.restart_missing();
            }
            Fault::RestartNats => {
                nats.stop();
                tokio::time::sleep(hold).await;
                nats.restart();
            }
            Fault::StallPostgres | Fault::StallNats => {
                let proxy = if fault == Fault::StallPostgres { &proxies[which].0 } else { &proxies[which].1 };
                proxy.stall();
                tokio::time::sleep(hold).await;
                proxy.resume();
            }
        }
        *counts.entry(fault).or_default() += 1;
    }
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("a producer or reader failed");
    }

    // Drained: every valid event in SQL once, every poison record dead-lettered.
    let produced = Arc::try_unwrap(produced).ok().expect("producers done").into_inner().expect("produced");
    let expected = produced.events.len() as i64;
    let direct = pg.url();
    let deadline = Instant::now() + Duration::from_secs(240);
    while count_events(&direct).await != expected {
        assert!(
            Instant::now() < deadline,
            "SQL holds {} events, {expected} were produced",
            count_events(&direct).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut letters = BTreeSet::new();
    for (_, bus) in &buses {
        letters.extend(bus.dead_letters().await.into_iter().map(|d| d.payload));
    }
    let undelivered = produced.poison.iter().filter(|p| !letters.contains(*p)).count();
    assert_eq!(undelivered, 0, "every poison record is dead-lettered");

    // Both replicas serve what a recompute and the reference give.
    let mut clients = Vec::new();
    for replica in &replicas {
        clients.push(connect(replica.client_addr().expect("running")).await.expect("connect"));
    }
    let recomputed = clients[0].recompute(v1::RecomputeRequest::default()).await.expect("recompute").into_inner();
    let mut boards = Vec::new();
    for client in &clients {
        let mut c = client.clone();
        eventually("the replica serves the recompute's version", || {
            let mut c = c.clone();
            async move { whole_board(&mut c).await.is_some_and(|(v, _)| v >= recomputed.version) }
        })
        .await;
        boards.push(whole_board(&mut c).await.expect("board"));
    }
    assert_eq!(boards[0], boards[1], "both replicas serve the same ranking");
    let reference = events_reference(produced.events.values());
    assert_eq!(boards[0].1, reference, "the ranking is the events' own");

    let seen = std::mem::take(&mut *seen.lock().expect("seen"));
    let freshness = produced
        .marker_acks
        .iter()
        .filter_map(|(batches, acked)| {
            seen.first_seen.range(batches..).next().map(|(_, t)| t.saturating_duration_since(*acked))
        })
        .max()
        .unwrap_or_default();
    println!("\n## Fault soak: seed {seed}, {seconds} s\n");
    println!("| fault | times |");
    println!("|---|---:|");
    for fault in FAULTS {
        println!("| {fault:?} | {} |", counts.get(&fault).copied().unwrap_or(0));
    }
    println!(
        "\n| events (gRPC / Kafka / JetStream) | poison | reads | failed reads | version regressions | worst freshness |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let by = |s: &str| produced.by_source.get(s).copied().unwrap_or(0);
    println!(
        "| {expected} ({} / {} / {}) | {} | {} | {} | {} | {:.1} s |",
        by("gRPC"),
        by("Kafka"),
        by("JetStream"),
        produced.poison.len(),
        seen.reads,
        seen.failed,
        seen.regressions,
        freshness.as_secs_f64()
    );
    assert_eq!(seen.regressions, 0, "no reader saw a ranking go back");
    assert_eq!(seen.failed, 0, "no read of a running, unpaused replica failed");
    for replica in &replicas {
        if let Some(process) = replica.process.lock().await.take() {
            process.terminate();
            process.wait().await;
        }
    }
}
