//! Event-bus ingestion against a real Kafka-compatible broker and NATS
//! JetStream: a three-day workload with 10 % redeliveries, poison records and refunded
//! orders (retractions, one of them refused by what is stored), consumed by
//! replicas of which one is killed with `kill -9` and restarted and a third joins, counts
//! exactly the valid events once, ranks them as RecordEvents would, and dead-letters exactly
//! the poison records with their errors; a database outage and a broker restart lose and
//! double nothing; a graceful stop commits every offset.
//!
//! The tests run where `make test` gives them a bus (`RANKING_TEST_KAFKA`,
//! `RANKING_TEST_NATS`) and a Redis, on the PostgreSQL and MariaDB passes (replicas share a
//! database server; SQLite files are one process's).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration as Age, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ranking_client::v1;
use ranking_server::test_support::{day, eventually, noon};
use serde_json::json;

use crate::helpers::bus::{DeadLetter, TestBus, test_kafka, test_nats};
use crate::helpers::pg::ThrowawayPostgres;
use crate::helpers::process::ServerProcess;
use crate::helpers::{TestApp, TestDb, count_events, event, metric_value, settings, test_redis};

/// A record of the workload: what is published, and what it should become.
struct Record {
    key: String,
    payload: Vec<u8>,
    /// The event it carries, when valid.
    event: Option<v1::Event>,
    /// The start of its `ranking-error`, when poison.
    error: Option<&'static str>,
}

/// The proto3 JSON of `e`, in lowerCamel with enum names and int64 strings, or in the proto
/// field names with enum numbers: producers write either.
fn json_of(e: &v1::Event, camel: bool) -> Vec<u8> {
    let at = e.occurred_at.as_ref().expect("timestamp");
    let at = DateTime::<Utc>::from_timestamp(at.seconds, at.nanos as u32).expect("instant").to_rfc3339();
    let kind = v1::EventType::try_from(e.r#type).expect("type");
    let value = if camel {
        json!({"eventId": e.event_id, "productId": e.product_id.to_string(), "type": kind.as_str_name(),
               "amount": e.amount, "occurredAt": at, "retracts": e.retracts, "actorId": e.actor_id})
    } else {
        json!({"event_id": e.event_id, "product_id": e.product_id, "type": e.r#type,
               "amount": e.amount.to_string(), "occurred_at": at, "retracts": e.retracts, "actor_id": e.actor_id})
    };
    serde_json::to_vec(&value).expect("json")
}

/// `valid` events over today and the two days before (60 products, every type) in two
/// halves, one redelivery of each tenth record somewhere later in its half, and 12 poison
/// records of six kinds in each half.
///
/// UNLIKE never goes below 0, which makes a count depend on the order of its
/// events once it would: the second half's UNLIKEs only take back likes of the first half,
/// which is consumed before the second is published, so every order of arrival, every
/// batching and every redelivery gives the same counts.
fn workload(seed: u64, valid: usize) -> (Vec<Record>, Vec<Record>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut likes: BTreeMap<(i64, u64), i64> = BTreeMap::new();
    let mut half = |rng: &mut StdRng, from: usize, n: usize, unlikes: bool| -> Vec<Record> {
        (from..from + n)
            .map(|i| {
                let product = rng.random_range(1..=60);
                let days_ago = rng.random_range(0..3u64);
                let at =
                    if days_ago == 0 { Utc::now() - Age::seconds(rng.random_range(30..600)) } else { noon(days_ago) };
                let (mut kind, amount) = match rng.random_range(0..10) {
                    0..=5 => (v1::EventType::View, 0),
                    6 | 7 => (v1::EventType::Like, 0),
                    8 => (v1::EventType::Unlike, 0),
                    _ => (v1::EventType::Order, rng.random_range(100..100_000)),
                };
                let left = likes.entry((product, days_ago)).or_default();
                match kind {
                    v1::EventType::Like if !unlikes => *left += 1,
                    v1::EventType::Unlike if unlikes && *left > 0 => *left -= 1,
                    v1::EventType::Unlike => kind = v1::EventType::View,
                    _ => {}
                }
                let mut e = event(&format!("w{seed:x}-{i}"), product, kind, amount, at);
                if kind == v1::EventType::View {
                    e.actor_id = format!("shopper-{}", rng.random_range(0..50));
                }
                Record { key: product.to_string(), payload: json_of(&e, i % 2 == 0), event: Some(e), error: None }
            })
            .collect()
    };
    let first = half(&mut rng, 0, valid / 2, false);
    let mut second = half(&mut rng, valid / 2, valid - valid / 2, true);
    // A tenth of the first half's orders are refunded in the second half (stored by then, so
    // each retraction takes its order back when it comes), and one retraction names its
    // order under another product: refused by what is stored, dead-lettered.
    let orders: Vec<&v1::Event> =
        first.iter().filter_map(|r| r.event.as_ref()).filter(|e| e.r#type == i32::from(v1::EventType::Order)).collect();
    let retract = |id: String, product_id: i64, original: &v1::Event| v1::Event {
        retracts: original.event_id.clone(),
        ..event(&id, product_id, v1::EventType::Retract, 0, Utc::now() - Age::seconds(60))
    };
    let mut refunds = Vec::new();
    for (n, original) in orders.iter().enumerate().filter(|(n, _)| n % 10 == 3) {
        let e = retract(format!("w{seed:x}-refund-{n}"), original.product_id, original);
        refunds.push(Record {
            key: e.product_id.to_string(),
            payload: json_of(&e, n % 2 == 0),
            event: Some(e),
            error: None,
        });
    }
    let misdirected = retract(format!("w{seed:x}-misdirected"), orders[0].product_id + 1, orders[0]);
    refunds.push(Record {
        key: misdirected.product_id.to_string(),
        payload: json_of(&misdirected, true),
        event: None,
        error: Some("product_id: is"),
    });
    for refund in refunds {
        let at = rng.random_range(0..=second.len());
        second.insert(at, refund);
    }
    (mix(first, &mut rng, seed, 0), mix(second, &mut rng, seed, 12))
}

/// Poison records and redeliveries among `records`.
fn mix(mut records: Vec<Record>, rng: &mut StdRng, seed: u64, poison_from: usize) -> Vec<Record> {
    let poison: [(&str, &'static str); 7] = [
        ("{not json", "record: not JSON"),
        (
            r#"{"eventId":"P","productId":7,"type":"EVENT_TYPE_VIEW","amount":3,"occurredAt":"NOW"}"#,
            "amount: must be 0 for VIEW",
        ),
        (r#"{"eventId":"P","productId":0,"type":"EVENT_TYPE_LIKE","occurredAt":"NOW"}"#, "product_id:"),
        (
            r#"{"eventId":"P","productId":7,"type":"EVENT_TYPE_CLICK","occurredAt":"NOW"}"#,
            "type: unrecognized enum value",
        ),
        (r#"{"eventId":"P","productId":7,"type":"EVENT_TYPE_VIEW","occurredAt":"OLD"}"#, "occurred_at:"),
        (r#"{"eventId":"","productId":7,"type":"EVENT_TYPE_VIEW","occurredAt":"NOW"}"#, "event_id:"),
        (r#"{"eventId":"P","productId":7,"type":"EVENT_TYPE_RETRACT","occurredAt":"NOW"}"#, "retracts: is required"),
    ];
    for i in poison_from..poison_from + 12 {
        let (template, error) = poison[i % poison.len()];
        let text = template
            .replace("\"P\"", &format!("\"poison-{seed:x}-{i}\""))
            .replace("NOW", &(Utc::now() - Age::seconds(60)).to_rfc3339())
            .replace("OLD", &(Utc::now() - Age::days(30)).to_rfc3339());
        let at = rng.random_range(0..records.len());
        records
            .insert(at, Record { key: format!("p{i}"), payload: text.into_bytes(), event: None, error: Some(error) });
    }
    for i in (0..records.len()).step_by(10) {
        let again =
            Record { key: records[i].key.clone(), payload: records[i].payload.clone(), event: None, error: None };
        let at = rng.random_range(i + 1..=records.len());
        records.insert(at, again);
    }
    records
}

fn published(records: &[Record]) -> Vec<(String, Vec<u8>)> {
    records.iter().map(|r| (r.key.clone(), r.payload.clone())).collect()
}

/// The daily top 100 of each of the three days, after a recompute of each.
async fn boards(app: &mut TestApp) -> BTreeMap<String, Vec<(i64, f64)>> {
    let mut out = BTreeMap::new();
    for days_ago in 0..3 {
        let date = day(days_ago);
        app.recompute(&date).await;
        let top = app.top(&date, 100).await;
        out.insert(date, top.products.iter().map(|p| (p.product_id, p.score)).collect());
    }
    out
}

/// The same valid events through RecordEvents on a database of their own.
async fn reference(records: &[Record]) -> BTreeMap<String, Vec<(i64, f64)>> {
    let events: Vec<v1::Event> = records.iter().filter_map(|r| r.event.clone()).collect();
    let mut app = TestApp::spawn(&[]).await;
    for chunk in events.chunks(5_000) {
        app.record(chunk.to_vec()).await;
    }
    let boards = boards(&mut app).await;
    app.stop().await;
    boards
}

/// Waits until the database holds `n` events and every poison payload has a dead letter.
/// Counted by payload, not by origin: a redelivered poison record is dead-lettered under an
/// origin of its own, so origins can outnumber the poison records before the last one is in.
async fn drained(db: &str, n: i64, bus: &TestBus, poison: &BTreeSet<Vec<u8>>) {
    eventually("every valid event in SQL", || async { count_events(db).await >= n }).await;
    eventually("every poison record dead-lettered", || async {
        let letters = bus.dead_letters().await;
        let seen: BTreeSet<&[u8]> = letters.iter().map(|d| d.payload.as_slice()).collect();
        poison.iter().all(|p| seen.contains(p.as_slice()))
    })
    .await;
    assert_eq!(count_events(db).await, n, "each valid event counted once");
}

/// Dead letters are exactly the poison records (a record may be dead-lettered again after a
/// kill: at least once), each with its error and origin.
fn assert_dead_letters(letters: &[DeadLetter], records: &[Record]) {
    let poison: BTreeMap<&[u8], &str> =
        records.iter().filter_map(|r| r.error.map(|e| (r.payload.as_slice(), e))).collect();
    let mut seen = BTreeSet::new();
    for letter in letters {
        let expected = poison.get(letter.payload.as_slice()).unwrap_or_else(|| {
            panic!("a valid record was dead-lettered: {}", String::from_utf8_lossy(&letter.payload))
        });
        assert!(letter.error.starts_with(expected), "ranking-error {:?} for {expected:?}", letter.error);
        assert!(letter.source.contains('/'), "ranking-source {:?}", letter.source);
        seen.insert(letter.payload.as_slice());
    }
    assert_eq!(seen.len(), poison.len(), "every poison record dead-lettered");
}

fn replica_envs(bus: &TestBus, db: &str) -> Vec<(&'static str, String)> {
    let mut envs = bus.envs(200);
    envs.extend([
        ("DATABASE_URL", db.to_string()),
        ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
        ("RANKING_LIVE_INTERVAL", "0".to_string()),
    ]);
    envs
}

/// The whole story on one bus: a replica consumes alone and is killed mid-way; another takes
/// over (the killed one's uncommitted records come again); the killed one restarts and a
/// third member joins (two rebalances); then everything is drained and compared.
async fn workload_is_counted_once(bus: TestBus, seed: u64) {
    let (first, second) = workload(seed, 3_000);
    let valid_in = |records: &[Record]| records.iter().filter(|r| r.event.is_some()).count() as i64;
    let first_valid = valid_in(&first);
    let (first_half, second_half) = (published(&first), published(&second));
    let records: Vec<Record> = first.into_iter().chain(second).collect();
    let valid = valid_in(&records);
    let poison: BTreeSet<Vec<u8>> = records.iter().filter(|r| r.error.is_some()).map(|r| r.payload.clone()).collect();
    let db = TestDb::create().await;

    let killed = ServerProcess::start(&replica_envs(&bus, &db.url)).await;
    bus.publish(&first_half).await;
    eventually("the first replica consumed some", || async { count_events(&db.url).await > 200 }).await;
    killed.kill();
    killed.wait().await;

    let flags = bus.flags(200);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut survivor = TestApp::spawn_on(settings(&db.url, &flags)).await;
    eventually("the first half consumed", || async { count_events(&db.url).await >= first_valid }).await;
    bus.publish(&second_half).await;
    let restarted = ServerProcess::start(&replica_envs(&bus, &db.url)).await;
    // Flags of its own: each call names another static member, and two members with one
    // `group.instance.id` fence each other out of the group for as long as both run.
    let flags = bus.flags(200);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let third = TestApp::spawn_on(settings(&db.url, &flags)).await;
    drained(&db.url, valid, &bus, &poison).await;

    assert_dead_letters(&bus.dead_letters().await, &records);
    assert_eq!(
        boards(&mut survivor).await,
        reference(&records).await,
        "rankings equal RecordEvents' of the same events"
    );
    let metrics = survivor.scrape_metrics().await + &third.scrape_metrics().await;
    let source = if matches!(bus, TestBus::Kafka { .. }) { "kafka" } else { "jetstream" };
    assert!(metrics.contains(&format!("ranking_bus_records_total{{source=\"{source}\",outcome=\"accepted\"}}")));

    let kafka = matches!(bus, TestBus::Kafka { .. });
    if kafka {
        // A batch that spanned a rebalance stored no offset: its records came again to the
        // partition's next owner, which stored them; every partition ends fully committed.
        eventually("every partition committed to its end", || async {
            bus.committed_and_high().iter().all(|(committed, high)| committed == high)
        })
        .await;
    }
    restarted.terminate();
    restarted.wait().await;
    third.stop().await;
    survivor.stop().await;
    if kafka {
        assert!(bus.committed_and_high().iter().all(|(c, h)| c == h), "no offset went back at the stops");
    }
    assert_eq!(count_events(&db.url).await, valid, "nothing more after the rebalances of the stops");
    db.drop_db().await;
    bus.discard().await;
}

/// Multi-replica tests need a shared database server and Redis: the ignored tests here run
/// in `make test`'s Redis passes, which give them both, and fail when run without.
pub(crate) fn assert_shared_servers() {
    assert!(
        test_redis().is_some() && std::env::var("RANKING_TEST_DATABASE").is_ok_and(|d| d != "sqlite"),
        "needs a database server and Redis shared by replicas (RANKING_TEST_DATABASE, RANKING_TEST_REDIS): run by make test's Redis passes"
    );
}

/// `RANKING_TEST_KAFKA`, which the test needs.
fn kafka() -> String {
    test_kafka().expect("RANKING_TEST_KAFKA: a Kafka broker (make test's Redis passes start one)")
}

/// `RANKING_TEST_NATS`, which the test needs.
fn nats() -> String {
    test_nats().expect("RANKING_TEST_NATS: a NATS server with JetStream (make test starts one)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs Kafka, a database server and Redis: make test's Redis passes"]
async fn kafka_workload_with_redeliveries_poison_a_kill_and_rebalances_is_counted_once() {
    assert_shared_servers();
    workload_is_counted_once(TestBus::kafka(&kafka()).await, 0x24a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs NATS, a database server and Redis: make test's Redis passes"]
async fn jetstream_workload_with_redeliveries_poison_a_kill_and_rebalances_is_counted_once() {
    assert_shared_servers();
    workload_is_counted_once(TestBus::jetstream(&nats()).await, 0x24b).await;
}

/// The database stops mid-stream: consumption pauses (nothing acknowledged), then resumes
/// where it stopped when the database is back; every event counted once.
async fn database_outage_loses_and_doubles_nothing(bus: TestBus) {
    let pg = ThrowawayPostgres::start().expect("PostgreSQL's server binaries (make test installs them)");
    let flags = bus.flags(100);
    let mut flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    flags.push("--db-timeout=1s");
    let app = TestApp::spawn_on(settings(&pg.url(), &flags)).await;
    let now = Utc::now() - Age::seconds(60);
    let batch = |from: usize| -> Vec<(String, Vec<u8>)> {
        (from..from + 500)
            .map(|i| {
                (
                    format!("{}", i % 20),
                    json_of(&event(&format!("o-{i}"), 1 + (i % 20) as i64, v1::EventType::View, 0, now), true),
                )
            })
            .collect()
    };
    bus.publish(&batch(0)).await;
    eventually("the first 500 in SQL", || async { count_events(&pg.url()).await == 500 }).await;
    pg.stop();
    bus.publish(&batch(500)).await;
    // The source fails against the stopped database (and will try again) before it comes back.
    let source = if matches!(bus, TestBus::Kafka { .. }) { "kafka" } else { "jetstream" };
    let unavailable = format!("ranking_bus_records_total{{source=\"{source}\",outcome=\"unavailable\"}}");
    eventually("the source finds the database down", async || {
        crate::helpers::metric_sample(&app.scrape_metrics().await, &unavailable).is_some_and(|n| n > 0.0)
    })
    .await;
    pg.restart();
    eventually("all 1,000 in SQL", || async { count_events(&pg.url()).await >= 1_000 }).await;
    assert_eq!(count_events(&pg.url()).await, 1_000);
    let metrics = app.scrape_metrics().await;
    let accepted =
        metric_value(&metrics, &format!("ranking_bus_records_total{{source=\"{source}\",outcome=\"accepted\"}}"));
    assert_eq!(accepted, 1_000.0, "nothing counted twice");
    app.stop().await;
    bus.discard().await;
}

pub(crate) fn views_json(prefix: &str, n: usize) -> Vec<(String, Vec<u8>)> {
    let now = Utc::now() - Age::seconds(60);
    (0..n)
        .map(|i| {
            let e = event(&format!("{prefix}-{i}"), 1 + (i % 10) as i64, v1::EventType::View, 0, now);
            ((i % 10).to_string(), json_of(&e, true))
        })
        .collect()
}

/// A graceful stop right after the last batch committed in SQL commits its offsets (the
/// auto-commit may not have run yet) and leaves the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs Kafka, a database server and Redis: make test's Redis passes"]
async fn kafka_shutdown_commits_what_committed() {
    assert_shared_servers();
    let bus = TestBus::kafka(&kafka()).await;
    let flags = bus.flags(50);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let app = TestApp::spawn(&flags).await;
    bus.publish(&views_json("s", 400)).await;
    let db = app.db.as_ref().expect("db").url.clone();
    eventually("all 400 in SQL", || async { count_events(&db).await == 400 }).await;
    app.stop().await;
    let offsets = bus.committed_and_high();
    assert_eq!(offsets.iter().map(|(_, h)| h).sum::<i64>(), 400);
    assert!(offsets.iter().all(|(c, h)| c == h), "committed at the stop: {offsets:?}");
    bus.discard().await;
}

/// A graceful stop right after the last batch committed acknowledges it (a batch's acks go
/// out while the next one commits, or before the source waits or stops) and has dead-lettered
/// its poison record: the durable consumer holds nothing pending or unacknowledged after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs NATS: make test's Redis passes"]
async fn jetstream_shutdown_acknowledges_what_committed() {
    let bus = TestBus::jetstream(&nats()).await;
    let flags = bus.flags(50);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let app = TestApp::spawn(&flags).await;
    let mut records = views_json("s", 400);
    records.push(("x".into(), b"not json".to_vec()));
    bus.publish(&records).await;
    let db = app.db.as_ref().expect("db").url.clone();
    eventually("all 400 in SQL", || async { count_events(&db).await == 400 }).await;
    eventually("the poison record dead-lettered", || async { bus.dead_letters().await.len() == 1 }).await;
    let metrics = app.scrape_metrics().await;
    assert!(
        metrics.contains("ranking_bus_dead_letters_total{source=\"jetstream\",delivery=\"first\"} 1\n"),
        "one dead letter, counted as a first delivery"
    );
    app.stop().await;
    let (delivered_unacknowledged, undelivered, floor) = bus.unacknowledged().await;
    assert_eq!((delivered_unacknowledged, undelivered, floor), (0, 0, 401), "acknowledged at the stop");

    // Stopped mid-stream (a replica on a database of its own): every record it committed is
    // acknowledged. One replica records the stream in order, so those are the next ones after
    // the floor. (What was pulled and not committed is handed back, or, when the stop came
    // while a pull was in flight, redelivered after the ack wait.)
    let own = TestDb::create().await;
    let app = TestApp::spawn_on(settings(&own.url, &flags)).await;
    bus.publish(&views_json("m", 5_000)).await;
    eventually("the stream being consumed", || async { count_events(&own.url).await > 0 }).await;
    app.stop().await;
    let committed = count_events(&own.url).await as u64;
    let (_, _, floor) = bus.unacknowledged().await;
    assert_eq!(floor, 401 + committed, "what committed is acknowledged at the stop");
    own.drop_db().await;
    bus.discard().await;
}

/// `ranking.bus`'s health status on `app` (-1 when the check fails).
pub(crate) async fn bus_health(app: &TestApp) -> i32 {
    let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{}", app.addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let request = tonic_health::pb::HealthCheckRequest { service: "ranking.bus".into() };
    health.check(request).await.map(|r| r.into_inner().status).unwrap_or(-1)
}

/// The bus goes away under a consuming replica: `ranking.bus` turns NOT_SERVING while
/// gRPC ingestion goes on; the bus comes back on the same data, the source reconnects by
/// itself and consumption resumes where it stopped.
async fn bus_restart_resumes_consumption(bus: &TestBus, stop: impl Fn(), restart: impl Fn()) -> TestApp {
    use tonic_health::pb::health_check_response::ServingStatus;
    let flags = bus.flags(50);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut app = TestApp::spawn(&flags).await;
    let db = app.db.as_ref().expect("db").url.clone();
    bus.publish(&views_json("before", 300)).await;
    eventually("the first 300 in SQL", || async { count_events(&db).await == 300 }).await;
    eventually("ranking.bus serving", || async { bus_health(&app).await == ServingStatus::Serving as i32 }).await;

    stop();
    eventually("ranking.bus not serving", || async { bus_health(&app).await == ServingStatus::NotServing as i32 })
        .await;
    let main = app.client.record_events(v1::RecordEventsRequest {
        events: vec![event("rpc-1", 99, v1::EventType::View, 0, Utc::now() - Age::seconds(5))],
    });
    assert!(main.await.is_ok(), "gRPC ingestion works without the bus");

    restart();
    bus.publish(&views_json("after", 300)).await;
    eventually("all 601 in SQL", || async { count_events(&db).await == 601 }).await;
    eventually("ranking.bus serving again", || async { bus_health(&app).await == ServingStatus::Serving as i32 }).await;
    app
}

/// The fault tests that bring their own database or broker and need no engine of a pass:
/// `make test` runs them once, in its PostgreSQL + Redis pass, and skips `once_per_run` in
/// the others.
mod once_per_run {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    #[ignore = "needs Kafka: make test's PostgreSQL + Redis pass"]
    async fn kafka_database_outage_pauses_and_resumes() {
        database_outage_loses_and_doubles_nothing(TestBus::kafka(&kafka()).await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    #[ignore = "needs NATS: make test's PostgreSQL + Redis pass"]
    async fn jetstream_database_outage_naks_and_resumes() {
        database_outage_loses_and_doubles_nothing(TestBus::jetstream(&nats()).await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    #[ignore = "needs Kafka's jars (scripts/kafka-broker.sh): make test's PostgreSQL + Redis pass"]
    async fn kafka_broker_restart_resumes_consumption() {
        kafka();
        let broker = crate::helpers::bus::ThrowawayBroker::start();
        let bus = TestBus::kafka(&broker.address()).await;
        let app = bus_restart_resumes_consumption(&bus, || broker.stop(), || broker.restart()).await;
        // Lag per assigned partition (high watermark − committed offset) reaches 0 once the
        // auto-commit has run.
        eventually("lag 0 on every partition", || async {
            let metrics = app.scrape_metrics().await;
            let lags: Vec<&str> = metrics.lines().filter(|l| l.starts_with("ranking_bus_lag_records{")).collect();
            lags.len() == crate::helpers::bus::PARTITIONS as usize && lags.iter().all(|l| l.ends_with(" 0"))
        })
        .await;
        app.stop().await;
    }

    /// The same with a NATS server of the test's own: the client reconnects and the messages
    /// it had not acked come again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    #[ignore = "needs nats-server: make test's PostgreSQL + Redis pass"]
    async fn jetstream_server_restart_resumes_consumption() {
        let nats = crate::helpers::bus::ThrowawayNats::start().expect("nats-server (make test installs it)");
        let bus = TestBus::jetstream(&nats.url()).await;
        let app = bus_restart_resumes_consumption(&bus, || nats.stop(), || nats.restart()).await;
        app.stop().await;
    }
}
