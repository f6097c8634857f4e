//! The ranking feed from outside: a consumer of the real Kafka topic and of the JetStream
//! subject applies every record and holds, after each `RankingVersion`, a top whose checksum
//! and size are the record's, each version chained to the one before, across a recompute, live
//! passes, a hidden product and a pin; at the end it holds the served top exactly. The cursors
//! move forward only.

use std::collections::{BTreeMap, HashMap};

use async_nats::jetstream;
use chrono::{Duration as Age, Utc};
use prost::Message;
use ranking_client::v1::{self, feed_record::Record};
use ranking_server::adapters::memory::MemoryRankingStore;
use ranking_server::domain::feed::FedEntry;
use ranking_server::ports::{FeedCursor, FeedCursors, RankingKey};
use ranking_server::test_support::{eventually, eventually_some};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::message::Message as _;

use crate::helpers::bus::{test_kafka, test_nats};
use crate::helpers::{TestApp, event, rand_u64, views};

/// Entries of each board the feed follows here.
const TOP: usize = 30;

/// What a consumer holds of one board, built only from the records.
#[derive(Default)]
struct Held {
    version: u64,
    top: HashMap<i64, (u64, f64)>,
    /// Changes of the version being read.
    pending: u32,
    /// Versions closed, in order.
    closed: Vec<u64>,
}

/// The FNV-1a 64 checksum, written apart from the service's.
fn fnv(ranked: &[i64]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in ranked.iter().enumerate() {
        let mut bytes = p.to_be_bytes().to_vec();
        bytes.extend_from_slice(&(i as u64 + 1).to_be_bytes());
        for b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x100_0000_01b3);
        }
    }
    hash
}

fn ranked(top: &HashMap<i64, (u64, f64)>) -> Vec<(i64, f64)> {
    let mut entries: Vec<(u64, i64, f64)> = top.iter().map(|(p, (r, s))| (*r, *p, *s)).collect();
    entries.sort_by_key(|e| e.0);
    entries.into_iter().map(|(_, p, s)| (p, s)).collect()
}

fn board_name(b: &v1::BoardKey) -> String {
    format!("{}/{}/{}/{}", b.window, b.date, b.segment, b.profile)
}

/// Applies `records` in order, checking each version as it closes; returns the boards held.
fn apply(records: &[v1::FeedRecord]) -> BTreeMap<String, Held> {
    let mut boards: BTreeMap<String, Held> = BTreeMap::new();
    for record in records {
        match record.record.as_ref().expect("a record") {
            Record::Change(c) => {
                let held = boards.entry(board_name(c.board.as_ref().expect("board"))).or_default();
                if c.version <= held.version {
                    continue; // a late or repeated record of a version already held
                }
                if held.pending == 0 && c.previous_version == 0 {
                    held.top.clear();
                }
                assert!(
                    c.previous_version == 0 || c.previous_version == held.version,
                    "chained: {c:?} onto {} (closed {:?})",
                    held.version,
                    held.closed
                );
                held.pending += 1;
                if c.rank == 0 {
                    assert!(held.top.remove(&c.product_id).is_some(), "a product that left was held: {c:?}");
                } else {
                    held.top.insert(c.product_id, (c.rank, c.score));
                }
            }
            Record::Version(v) => {
                let held = boards.entry(board_name(v.board.as_ref().expect("board"))).or_default();
                if v.version <= held.version {
                    continue;
                }
                if v.previous_version == 0 && v.changes == 0 {
                    held.top.clear();
                }
                assert!(v.previous_version == 0 || v.previous_version == held.version, "chained: {v:?}");
                assert_eq!(held.pending, v.changes, "every change of {v:?} arrived before it");
                let ids: Vec<i64> = ranked(&held.top).into_iter().map(|(p, _)| p).collect();
                assert_eq!(ids.len() as u32, v.entries, "{v:?}");
                assert_eq!(fnv(&ids), v.checksum, "the held top of {v:?}");
                held.version = v.version;
                held.pending = 0;
                held.closed.push(v.version);
            }
        }
    }
    boards
}

/// Every record of partition 0 of `topic`, in order.
async fn kafka_records(brokers: &str, topic: &str) -> Vec<v1::FeedRecord> {
    crate::helpers::bus::partition_records(brokers, topic)
        .await
        .iter()
        .map(|m| v1::FeedRecord::decode(m.payload().unwrap_or_default()).expect("a FeedRecord"))
        .collect()
}

/// Every message of the feed's stream, in order.
async fn nats_records(url: &str, prefix: &str) -> Vec<v1::FeedRecord> {
    let js = jetstream::new(async_nats::connect(url).await.expect("nats connects"));
    let name = js.stream_by_subject(format!("{prefix}.>")).await.expect("the feed's stream");
    crate::helpers::bus::stream_messages(url, &name)
        .await
        .iter()
        .map(|m| v1::FeedRecord::decode(m.payload.as_ref()).expect("a FeedRecord"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs Kafka and NATS: make test's Redis passes"]
async fn a_consumer_of_either_bus_holds_each_fed_version_exactly() {
    let brokers = test_kafka().expect("RANKING_TEST_KAFKA");
    let nats = test_nats().expect("RANKING_TEST_NATS");
    let topic = format!("feed-{:016x}", rand_u64());
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &brokers).create().expect("admin");
    let created = admin
        .create_topics(&[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))], &AdminOptions::new())
        .await
        .expect("create topic");
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    let subject = format!("feed{:016x}", rand_u64());
    let flags = [
        format!("--feed-kafka-topic={topic}"),
        format!("--feed-kafka-brokers={brokers}"),
        format!("--feed-nats-subject={subject}"),
        format!("--feed-nats-url={nats}"),
        format!("--feed-top={TOP}"),
        "--feed-interval=50ms".to_string(),
        "--live-interval=100ms".to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut app = TestApp::spawn(&flags).await;
    let now = Utc::now() - Age::seconds(5);
    let segment = |p: i64| if p % 2 == 0 { "category:even" } else { "category:odd" };
    let entries: Vec<v1::CatalogEntry> = (1..=60)
        .map(|p| v1::CatalogEntry { product_id: p, segments: vec![segment(p).into()], ..Default::default() })
        .collect();
    app.client.update_catalog(v1::UpdateCatalogRequest { products: entries }).await.expect("catalog");
    app.record((1..=60).flat_map(|p| views(&format!("a{p}"), p, (p as usize % 13) + 1, now)).collect()).await;
    app.recompute("").await;
    // The feeder sends the latest version of a board each round: a step is awaited until both
    // buses fed it, so that each kind of publication is fed, however busy the machine.
    let today = app.top("", 1).await.date;
    let whole = |b: &v1::BoardKey| b.window == v1::Window::Daily as i32 && b.segment.is_empty() && b.date == today;
    let last_fed = |records: &[v1::FeedRecord]| {
        records.iter().rev().find_map(|r| match &r.record {
            Some(Record::Version(v)) if whole(v.board.as_ref().expect("board")) => Some(v.version),
            _ => None,
        })
    };
    let fed = async |app: &mut TestApp, what: &str| {
        let served = app.top("", 1).await.version;
        eventually(&format!("{what}: version {served} fed on both buses"), async || {
            last_fed(&kafka_records(&brokers, &topic).await) >= Some(served)
                && last_fed(&nats_records(&nats, &subject).await) >= Some(served)
        })
        .await;
    };
    fed(&mut app, "the recompute").await;
    // Live passes move the board.
    for round in 0..3 {
        let climbers: Vec<v1::Event> = (0..5)
            .map(|i| event(&format!("o{round}-{i}"), 40 + round * 5 + i, v1::EventType::Order, 50_000, now))
            .collect();
        app.record(climbers).await;
        let before = app.top("", 1).await.version;
        eventually("a live pass published", async || app.top("", 1).await.version > before).await;
        fed(&mut app, "a live pass").await;
    }
    // A hidden product leaves; a pin places a product.
    let first = app.top("", 1).await.products[0].product_id;
    app.client
        .update_catalog(v1::UpdateCatalogRequest {
            products: vec![v1::CatalogEntry { product_id: first, hidden: true, ..Default::default() }],
        })
        .await
        .expect("hide");
    eventually("the hidden product withdrawn", async || app.top("", 1).await.products[0].product_id != first).await;
    fed(&mut app, "the withdrawal").await;
    let pin = v1::Control {
        control_id: "feed-pin".into(),
        action: Some(v1::control::Action::Pin(v1::Pin { product_id: 3, position: 1 })),
        ..Default::default()
    };
    app.client.put_control(v1::PutControlRequest { control: Some(pin), expected_revision: 0 }).await.expect("pin");
    eventually("the pin served", async || app.top("", 1).await.products[0].product_id == 3).await;

    for bus in ["kafka", "jetstream"] {
        let read = async || match bus {
            "kafka" => kafka_records(&brokers, &topic).await,
            _ => nats_records(&nats, &subject).await,
        };
        // The feed catches up with the served version (a later one may be published meanwhile:
        // read both again), then the consumer holds exactly its top.
        let (served, records) = eventually_some(&format!("{bus}: the served version fed"), async || {
            let served = app.top("", TOP as u32).await;
            let records = read().await;
            (last_fed(&records) == Some(served.version)).then_some((served, records))
        })
        .await;
        let versions: Vec<(u64, u64, u32, String)> = records
            .iter()
            .filter_map(|r| match &r.record {
                Some(Record::Version(v)) if whole(v.board.as_ref().expect("board")) => {
                    Some((v.version, v.previous_version, v.changes, v.cause.clone()))
                }
                _ => None,
            })
            .collect();
        eprintln!("{bus}: {} records; the daily board's versions: {versions:?}", records.len());
        let boards = apply(&records);
        let daily_name = format!("{}/{today}//default", v1::Window::Daily as i32);
        let daily = boards.get(&daily_name).expect("the whole daily board fed");
        assert!(daily.closed.len() >= 4, "{bus}: a recompute, live passes, a withdrawal and a pin: {:?}", daily.closed);
        assert!(daily.closed.windows(2).all(|w| w[0] < w[1]), "{bus}: versions in order");
        assert_eq!(daily.version, served.version, "{bus}");
        let held = ranked(&daily.top);
        let want: Vec<(i64, f64)> = served.products.iter().map(|p| (p.product_id, p.score)).collect();
        assert_eq!(held, want, "{bus}: the held top is the served one");
        assert!(!daily.top.contains_key(&first), "{bus}: the hidden product left");
        // Segments and the weekly board are fed too.
        assert!(boards.keys().any(|k| k.contains("category:even")), "{bus}: {:?}", boards.keys().collect::<Vec<_>>());
        assert!(boards.keys().any(|k| k.starts_with(&format!("{}/", v1::Window::Weekly as i32))), "{bus}");
        // And today's trending board, every version checked as it closed.
        let trending = format!("{}/{today}//default", v1::Window::Trending as i32);
        assert!(boards.get(&trending).is_some_and(|b| !b.closed.is_empty()), "{bus}: the trending board fed");
        // A repeated record changes nothing: the whole feed applied twice holds the same.
        let twice: Vec<v1::FeedRecord> = records.iter().chain(records.iter()).cloned().collect();
        let again = apply(&twice);
        assert_eq!(ranked(&again[&daily_name].top), held, "{bus}: duplicates change nothing");
    }
    // rankctl follow, the consumer's reference, reads the same and ends at the served top. Live
    // passes may publish again while it reads: a run counts when the version it ends at is the
    // one served both before and after it.
    let (endpoint, day) = (format!("http://{}", app.addr), today.clone());
    let follows = [
        vec!["--kafka".to_string(), brokers.clone(), "--topic".into(), topic.clone()],
        vec!["--nats".to_string(), nats.clone(), "--subject".into(), subject.clone()],
    ];
    for bus in follows {
        let mut args: Vec<String> = vec!["--json".into(), "follow".into()];
        args.extend(bus);
        args.extend(["--date".into(), day.clone(), "--limit".into(), TOP.to_string(), "--once".into()]);
        let (served, last) = eventually_some("rankctl follow ends at the served version", async || {
            let before = app.top("", TOP as u32).await;
            let (endpoint, args) = (endpoint.clone(), args.clone());
            let (ok, out) = tokio::task::spawn_blocking(move || {
                crate::rankctl::run(&endpoint, &args.iter().map(String::as_str).collect::<Vec<_>>())
            })
            .await
            .expect("rankctl");
            assert!(ok, "{out}");
            let last = out.lines().rfind(|l| l.starts_with('{')).expect("a version printed").to_string();
            let after = app.top("", TOP as u32).await;
            let settled = before.version == after.version && last.contains(&format!(r#""version":{}"#, after.version));
            settled.then_some((after, last))
        })
        .await;
        let want: Vec<String> = served.products.iter().map(|p| format!(r#""product_id":{}"#, p.product_id)).collect();
        let shown: Vec<&str> = last.split('{').skip(2).collect();
        assert_eq!(shown.len(), want.len(), "{last}");
        for (entry, product) in shown.iter().zip(&want) {
            assert!(entry.contains(product.as_str()), "{entry} is {product}");
        }
    }
    let metrics = app.scrape_metrics().await;
    assert!(metrics.contains("ranking_feed_records_total{sink=\"kafka\",kind=\"version\"}"), "records counted");
    // Every board fed: none is behind, the gauge is back to 0 (it once stayed at 1 and more).
    eventually("ranking_feed_behind_versions back to 0", async || {
        let metrics = app.scrape_metrics().await;
        crate::helpers::metric_sample(&metrics, "ranking_feed_behind_versions ") == Some(0.0)
    })
    .await;
    app.stop().await;
}

/// A cursor at version 5 of one board, as `store` is asked to move it to 5, 4, 5 and 6.
async fn moves_forward_only(store: &dyn FeedCursors) {
    let key = RankingKey::Daily(Utc::now().date_naive());
    let until = Utc::now() + Age::days(1);
    let at = |version| FeedCursor {
        version,
        whole_at_ms: 1,
        top: vec![FedEntry { product_id: 7, score: 2.5, organic_rank: 3 }],
    };
    assert_eq!(store.feed_cursor(key).await.expect("read"), None);
    assert!(store.advance_feed_cursor(key, &at(5), until).await.expect("advance"));
    assert!(!store.advance_feed_cursor(key, &at(4), until).await.expect("advance"), "an older version");
    assert!(!store.advance_feed_cursor(key, &at(5), until).await.expect("advance"), "the same version");
    assert_eq!(store.feed_cursor(key).await.expect("read"), Some(at(5)));
    assert!(store.advance_feed_cursor(key, &at(6), until).await.expect("advance"));
}

#[tokio::test]
async fn a_feed_cursor_moves_forward_only_in_process() {
    moves_forward_only(&MemoryRankingStore::new()).await;
}

#[tokio::test]
#[ignore = "needs Redis: make test's Redis passes"]
async fn a_feed_cursor_moves_forward_only_in_redis() {
    let url = crate::helpers::test_redis().expect("RANKING_TEST_REDIS");
    let mut options = ranking_server::adapters::redis::RedisOptions::new(url);
    options.prefix = format!("test-{:016x}", rand_u64());
    options.mode = crate::helpers::test_redis_topology();
    let redis = ranking_server::adapters::redis::RedisRankingStore::connect(&options).expect("redis");
    moves_forward_only(&redis).await;
}

/// Tests with a broker of their own (stopped and restarted), run once by `make test`, in its
/// PostgreSQL + Redis pass.
mod once_per_run {
    use super::*;
    use crate::helpers::{TestDb, settings};

    /// Replica B feeds version 1; replica A, a process whose feed cannot reach its broker,
    /// publishes version 2 and is killed (SIGKILL) before feeding it; the broker stops while
    /// B publishes version 3, until B's feeder has failed to send it. The feed's chain has no gap: B's next fed version
    /// carries every change since version 1 and ends at the served version.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    #[ignore = "needs Kafka's jars, a database server and Redis: make test's PostgreSQL + Redis pass"]
    async fn a_replica_dead_before_feeding_and_a_broker_outage_leave_no_gap() {
        crate::bus::assert_shared_servers();
        let broker = crate::helpers::bus::ThrowawayBroker::start();
        let topic = format!("feed-{:016x}", rand_u64());
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", broker.address()).create().expect("admin");
        let created = admin
            .create_topics(&[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))], &AdminOptions::new())
            .await
            .expect("create topic");
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        let db = TestDb::create().await;
        let prefix = format!("--redis-prefix=test-{:016x}", rand_u64());
        let replica = |brokers: String| {
            let flags = [
                prefix.clone(),
                format!("--feed-kafka-topic={topic}"),
                format!("--feed-kafka-brokers={brokers}"),
                format!("--feed-top={TOP}"),
                "--feed-interval=50ms".to_string(),
            ];
            settings(&db.url, &flags.iter().map(String::as_str).collect::<Vec<_>>())
        };
        let now = Utc::now() - Age::seconds(5);
        let mut b = TestApp::spawn_on(replica(broker.address())).await;
        b.record((1..=40).flat_map(|p| views(&format!("a{p}"), p, (p as usize % 11) + 1, now)).collect()).await;
        let v1 = b.recompute("").await.version;
        let today = b.top("", 1).await.date;
        let fed = async || {
            let records = kafka_records(&broker.address(), &topic).await;
            records.iter().rev().find_map(|r| match &r.record {
                Some(Record::Version(v))
                    if v.board.as_ref().is_some_and(|b| b.segment.is_empty() && b.window == 1 && b.date == today) =>
                {
                    Some(v.version)
                }
                _ => None,
            })
        };
        eventually("version 1 fed", async || fed().await >= Some(v1)).await;

        // A publishes version 2 and is killed before it feeds it.
        let envs = [
            ("DATABASE_URL", db.url.clone()),
            ("REDIS_URL", crate::helpers::test_redis().expect("RANKING_TEST_REDIS")),
            ("RANKING_REDIS_MODE", crate::helpers::test_redis_mode().to_string()),
            ("RANKING_REDIS_PREFIX", prefix.trim_start_matches("--redis-prefix=").to_string()),
            ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
            ("RANKING_FEED_KAFKA_TOPIC", topic.clone()),
            ("RANKING_FEED_KAFKA_BROKERS", "127.0.0.1:1".to_string()),
        ];
        let a = crate::helpers::process::ServerProcess::start(&envs).await;
        let mut client = ranking_client::connect(format!("http://{}", a.addr)).await.expect("connect");
        let orders: Vec<v1::Event> =
            (1..=10).map(|p| event(&format!("o{p}"), p, v1::EventType::Order, 10_000 * p, now)).collect();
        client.record_events(v1::RecordEventsRequest { events: orders }).await.expect("record");
        let v2 = client.recompute(v1::RecomputeRequest::default()).await.expect("recompute").into_inner().version;
        assert!(v2 > v1);
        a.kill();
        a.wait().await;

        // The broker down while B publishes version 3.
        broker.stop();
        b.record((11..=20).map(|p| event(&format!("o{p}"), p, v1::EventType::Order, 20_000 * p, now)).collect()).await;
        let v3 = b.recompute("").await.version;
        // Down until B's feeder has tried to send it and failed, at least once.
        eventually("B's feed refused while the broker is down", async || {
            let metrics = b.scrape_metrics().await;
            crate::helpers::metric_or_zero(&metrics, "ranking_feed_failures_total{sink=\"kafka\"}") >= 1.0
        })
        .await;
        broker.restart();
        eventually("version 3 fed", async || fed().await == Some(v3)).await;

        let records = kafka_records(&broker.address(), &topic).await;
        let boards = apply(&records);
        let daily = &boards[&format!("{}/{today}//default", v1::Window::Daily as i32)];
        assert!(!daily.closed.contains(&v2), "version 2 folded into version 3: {:?}", daily.closed);
        assert_eq!(daily.closed.last(), Some(&v3));
        let served = b.top("", TOP as u32).await;
        assert_eq!(served.version, v3);
        let want: Vec<(i64, f64)> = served.products.iter().map(|p| (p.product_id, p.score)).collect();
        assert_eq!(ranked(&daily.top), want, "the held top is the served one");
        b.stop().await;
        db.drop_db().await;
    }
}
