//! The Redis ranking store against a real Redis (`RANKING_TEST_REDIS`, default the local
//! one): rebuild after a flush, replicas, atomic replace under readers, hourly keys, and
//! reads while the database is down. Each test works under a key prefix of its own.

use ranking_server::ports::Fence;

use ranking_server::test_support::{day, eventually, noon};

use crate::helpers::{TestApp, TestDb, event, rand_u64, settings, views};
use chrono::Utc;
use ranking_client::v1::{self, EventType};
use redis::AsyncCommands;

pub fn redis_url() -> String {
    crate::helpers::test_redis().unwrap_or_else(|| "redis://127.0.0.1:6379".into())
}

/// Settings on `db_url` with Redis under `prefix`.
pub fn redis_settings(db_url: &str, prefix: &str, extra: &[&str]) -> ranking_server::config::Settings {
    let mut args = vec![
        format!("--redis-url={}", redis_url()),
        format!("--redis-mode={}", crate::helpers::test_redis_mode()),
        format!("--redis-prefix={prefix}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    settings(db_url, &args)
}

/// A connection to the test Redis, a single node or the cluster.
pub async fn redis() -> ranking_server::adapters::redis::connection::Connection {
    crate::helpers::test_redis_connection(&redis_url())
}

async fn keys(prefix: &str) -> Vec<String> {
    let mut conn = redis().await;
    let mut keys: Vec<String> = conn.keys(format!("{prefix}:*")).await.expect("KEYS");
    keys.sort();
    keys
}

/// Deletes every key of the prefix: a FLUSHALL as far as this test's service can tell.
async fn flush(prefix: &str) {
    let mut conn = redis().await;
    for k in keys(prefix).await {
        let _: () = conn.del(k).await.expect("DEL");
    }
}

/// The current version of every daily, weekly and segment ranking under `prefix`: (version pointer key, members
/// with scores), by day.
async fn snapshot(prefix: &str) -> Vec<(String, Vec<(String, f64)>)> {
    versions(prefix).await.into_iter().map(|(pointer, _, members)| (pointer, members)).collect()
}

/// (version pointer key, current version, members with scores) of every daily and weekly
/// ranking (trending boards are scored as of their publication's instant, so a rebuild's
/// differ: `trending.rs` checks each against its instant).
async fn versions(prefix: &str) -> Vec<(String, u64, Vec<(String, f64)>)> {
    let mut conn = redis().await;
    let mut out = Vec::new();
    let trending = |k: &str| k.contains(":trending") || k.contains(":tseg:");
    for pointer in
        keys(prefix).await.into_iter().filter(|k| k.contains("{daily:") && k.ends_with(":version") && !trending(k))
    {
        let version: u64 = conn.get(&pointer).await.expect("GET");
        let key = format!("{}:v{version}", pointer.trim_end_matches(":version"));
        // Every version is its packed copy: 16 bytes an entry, id and score bits big-endian, in
        // ranking order (listed here lowest first, like ZRANGE).
        let packed: Vec<u8> = conn.get(format!("{key}:packed")).await.expect("GET");
        let mut members: Vec<(String, f64)> = packed
            .chunks_exact(16)
            .map(|e| {
                let id = i64::from_be_bytes(e[..8].try_into().expect("8 bytes"));
                (format!("{id:019}"), f64::from_bits(u64::from_be_bytes(e[8..].try_into().expect("8 bytes"))))
            })
            .collect();
        members.reverse();
        if pointer.ends_with("}:version") {
            // The daily ranking's sorted set holds the same version after a recompute.
            let sorted_set: Vec<(String, f64)> =
                conn.zrange_withscores(pointer.trim_end_matches(":version"), 0, -1).await.expect("ZRANGE");
            assert_eq!(sorted_set, members, "{pointer}: the sorted set and the packed copy of version {version}");
        }
        out.push((pointer, version, members));
    }
    out
}

#[tokio::test]
async fn flushed_rankings_are_restored_bit_for_bit_from_sql() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut app = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    for n in [3u64, 2, 1, 0] {
        let at = if n == 0 { Utc::now() } else { noon(n) };
        let mut events = Vec::new();
        for p in 1..=40i64 {
            events.extend(views(&format!("d{n}p{p}"), p, ((p * 7 + n as i64 * 3) % 23) as usize * 5, at));
            if p % 3 == 0 {
                events.push(event(&format!("o{n}p{p}"), p, EventType::Order, p * 1_000, at));
            }
            if p % 4 == 0 {
                events.push(event(&format!("l{n}p{p}"), p, EventType::Like, 0, at));
            }
        }
        app.record(events).await;
    }
    // Three segments over the 40 products, and one product hidden.
    let products = (1..=40i64).map(|p| v1::CatalogEntry {
        product_id: p,
        segments: vec![format!("s{}", p % 3)],
        hidden: p == 7,
        title: String::new(),
    });
    let request = v1::UpdateCatalogRequest { products: products.collect() };
    app.client.update_catalog(request).await.expect("UpdateCatalog");
    for n in [3u64, 2, 1, 0] {
        app.recompute(&day(n)).await;
    }
    let before = snapshot(&prefix).await;
    assert_eq!(before.len(), 32, "a daily and a weekly ranking per day, and one of each per segment");
    assert!(before.iter().all(|(_, m)| !m.is_empty()));
    let versions_before = versions(&prefix).await;
    let pointer = format!("{prefix}:{{daily:{}}}:version", day(0));
    let today = versions_before.iter().find(|(k, _, _)| *k == pointer).expect("today");
    let mut conn = redis().await;
    for key in [
        today.0.clone(),
        format!("{prefix}:{{daily:{}}}", day(0)),
        format!("{prefix}:{{daily:{}}}:v{}:packed", day(0), today.1),
        format!("{prefix}:{{daily:{}}}:v{}:index", day(0), today.1),
    ] {
        let ttl: i64 = conn.ttl(&key).await.expect("TTL");
        assert!(ttl > 8 * 86_400 && ttl <= 9 * 86_400, "{key} expires retention days after the day ends: {ttl}");
    }

    flush(&prefix).await;
    assert!(snapshot(&prefix).await.is_empty());
    // The scheduler's start-up run restores today and (missing) yesterday by itself.
    app.scheduler.startup(Utc::now()).await;
    let restored = snapshot(&prefix).await;
    assert_eq!(restored.len(), 16);
    for n in [3u64, 2] {
        app.recompute(&day(n)).await;
    }
    assert_eq!(snapshot(&prefix).await, before, "identical members and scores, carry-over and weeks included");
    for ((key, old, _), (_, new, _)) in versions_before.iter().zip(versions(&prefix).await) {
        assert!(new > *old, "{key}: version {new} after the flush, {old} before: versions only grow");
    }
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_read_of_a_ranking_lost_by_redis_rebuilds_it_at_once() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    // An hour between ticks: only the read can bring the ranking back within the test.
    let mut app = TestApp::spawn_on(redis_settings(&db.url, &prefix, &["--recompute-interval=1h"])).await;
    app.record(views("v", 7, 5, Utc::now())).await;
    app.record(views("w", 8, 2, Utc::now())).await;
    app.recompute("").await;
    let before = app.top("", 10).await;
    assert_eq!(before.total, 2);

    flush(&prefix).await; // Redis restarted empty
    // This replica still serves its copy of the version it published; a replica that
    // starts now has none, reads Redis, finds the ranking lost and rebuilds it.
    assert_eq!(app.top("", 10).await.products, before.products);
    let mut fresh = TestApp::spawn_on(redis_settings(&db.url, &prefix, &["--recompute-interval=1h"])).await;
    // Reads arriving together share one rebuild: they all answer its version.
    let reads = (0..8).map(|_| {
        let mut client = fresh.client.clone();
        async move {
            let request = v1::GetTopNRequest { limit: 10, ..Default::default() };
            client.get_top_n(request).await.expect("GetTopN").into_inner()
        }
    });
    let answers = futures_util::future::join_all(reads).await;
    let after = answers[0].clone();
    assert!(answers.iter().all(|a| a.version == after.version), "one rebuild for all: {answers:?}");
    assert_eq!(after.products, before.products, "served from a rebuild, not as an empty ranking");
    assert!(after.version > before.version, "the rebuild is a new version");
    assert_eq!(fresh.rank(8, "").await.expect("ranked").product.expect("entry").rank, 2);

    // A day that really has no products reads as empty, and is not rebuilt on every read.
    let empty_day = day(3);
    let empty = app.top(&empty_day, 10).await;
    assert_eq!(empty.total, 0);
    assert!(empty.version > 0, "an empty day is built, with a version");
    let mut conn = redis().await;
    let built: bool = conn.exists(format!("{prefix}:{{daily:{empty_day}}}:version")).await.expect("EXISTS");
    assert!(built, "the rebuild of an empty day leaves its version");
    assert_eq!(app.top(&empty_day, 10).await.version, empty.version, "not rebuilt on every read");
    fresh.stop().await;
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn two_replicas_recompute_each_day_once_per_tick() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    // Without live passes: the ticks' recomputes are the only changes of the day, so what is
    // counted is the claim, not a pass holding the day (or, on SQLite, its write lock).
    let extra = ["--recompute-interval=1h", "--live-interval=0"];
    let a = TestApp::spawn_on(redis_settings(&db.url, &prefix, &extra)).await;
    let b = TestApp::spawn_on(redis_settings(&db.url, &prefix, &extra)).await;
    let mut a = a;
    a.record(views("r", 9, 10, Utc::now())).await;
    // One recompute between both replicas per tick, never two. A slot whose recompute failed
    // (seen once on a busy machine: both ticks returned nothing) is left to the next slot, as
    // in production: the slots of the hours before are tried until one ran.
    let mut ran = None;
    for slot in (0..6).map(|k| Utc::now() - chrono::Duration::hours(k)) {
        let (ra, rb) = tokio::join!(a.scheduler.tick(slot), b.scheduler.tick(slot));
        assert!(ra.len() + rb.len() <= 1, "one recompute of today between both replicas: {ra:?} {rb:?}");
        if ra.len() + rb.len() == 1 {
            ran = Some(slot);
            break;
        }
    }
    let now = ran.expect("a tick of one of six slots recomputed today");
    let (ra, rb) = tokio::join!(a.scheduler.tick(now), b.scheduler.tick(now));
    assert_eq!(ra.len() + rb.len(), 0, "the same tick does not recompute again");
    // Both replicas read the same ranking, the other one once it has loaded the version
    // (on its announcement, or the next poll).
    let mut b = b;
    let served = a.top("", 10).await;
    assert_eq!(served.products.first().map(|p| p.product_id), Some(9));
    let reader = b.client.clone();
    eventually("the other replica serves the recomputed version", || {
        let (mut reader, expected) = (reader.clone(), served.clone());
        async move {
            let request = v1::GetTopNRequest { limit: 10, ..Default::default() };
            reader.get_top_n(request).await.is_ok_and(|t| t.into_inner() == expected)
        }
    })
    .await;
    assert_eq!(b.top("", 10).await, served);
    a.stop().await;
    b.stop().await;
    db.drop_db().await;
}

/// The Redis ranking store of the tests' Redis under `prefix`, without a service around it.
fn direct_store(prefix: &str) -> ranking_server::adapters::redis::RedisRankingStore {
    let mut options = ranking_server::adapters::redis::RedisOptions::new(redis_url());
    options.prefix = prefix.to_string();
    options.mode = crate::helpers::test_redis_topology();
    ranking_server::adapters::redis::RedisRankingStore::connect(&options).expect("store")
}

/// Versions superseded in quick succession (a live pass's, every second): the first is kept
/// for the whole `RANKING_SNAPSHOT_TTL`, the ones superseded within a tenth of it after that
/// for the grace only, each still readable meanwhile; so live passes keep tens of versions
/// of a ranking in Redis, not hundreds.
#[tokio::test]
async fn versions_superseded_in_quick_succession_are_kept_for_the_grace() {
    use ranking_server::domain::snapshot::Snapshot;
    use ranking_server::ports::{Form, Publishing, RankingKey, RankingStore, SUPERSEDED_GRACE, Scored, VersionLife};
    let prefix = format!("t{:x}", rand_u64());
    let store = direct_store(&prefix);
    let day = Utc::now().date_naive();
    let key = RankingKey::Daily(day);
    let ttl = std::time::Duration::from_secs(600);
    let life = VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: ttl };
    let mut published = Vec::new();
    for n in 1..=4i64 {
        let entries: Vec<Scored> = (1..=n).rev().map(|p| Scored { product_id: p, score: p as f64 }).collect();
        let copy = std::sync::Arc::new(Snapshot::from_ranked(entries).expect("ranked"));
        published.push(
            store
                .publish_copy(key, Publishing::copy(&copy), life, Form::Loadable, &Fence::unchecked())
                .await
                .expect("publish"),
        );
    }
    let mut conn = redis().await;
    let kept: Vec<(String, f64)> =
        conn.zrange_withscores(format!("{prefix}:{{daily:{day}}}:superseded"), 0, -1).await.expect("ZRANGE");
    let now_ms = Utc::now().timestamp_millis() as f64;
    let left: Vec<(u64, f64)> =
        kept.iter().map(|(v, until)| (v.parse().expect("a version"), (until - now_ms) / 1e3)).collect();
    assert_eq!(left.len(), 3, "three superseded versions: {left:?}");
    let (whole, graced): (Vec<_>, Vec<_>) = left.iter().partition(|(_, s)| *s > SUPERSEDED_GRACE.as_secs_f64() + 5.0);
    assert_eq!(whole.iter().map(|(v, _)| *v).collect::<Vec<_>>(), vec![published[0]], "{left:?}");
    assert!(whole[0].1 > ttl.as_secs_f64() - 30.0, "kept for the TTL: {left:?}");
    assert!(graced.iter().all(|(_, s)| *s > 0.0), "{left:?}");
    for (n, version) in published.iter().enumerate() {
        let page = store.version_page(key, *version, 0, 10).await.expect("read").expect("still readable");
        assert_eq!(page.total, n as u64 + 1);
    }
    flush(&prefix).await;
}

/// A version's statistics are published with it by the fenced script: read back by version
/// on one node and on the cluster, and nothing of a refused publication.
#[tokio::test]
async fn statistics_travel_with_their_versions() {
    let prefix = format!("t{:x}", rand_u64());
    let store = direct_store(&prefix);
    let key = ranking_server::ports::RankingKey::Daily(Utc::now().date_naive());
    ranking_server::test_support::statistics_travel_with_their_versions(&store, key).await;
    flush(&prefix).await;
}

#[tokio::test]
async fn readers_never_see_a_partial_ranking() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut app = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let now = Utc::now();
    let mut events = Vec::new();
    for p in 1..=20_000i64 {
        events.push(event(&format!("a{p}"), p, EventType::View, 0, now));
    }
    for chunk in events.chunks(10_000) {
        app.record(chunk.to_vec()).await;
    }
    app.recompute("").await;
    // Grow the population so that the next recompute writes a different ranking.
    let more: Vec<_> = (20_001..=30_000i64).map(|p| event(&format!("b{p}"), p, EventType::View, 0, now)).collect();
    app.record(more).await;

    // Read Redis itself, not the replica's copy (which is swapped in whole whatever Redis
    // holds): the current version through the pointer, and that version by its number.
    let direct = direct_store(&prefix);
    let today = ranking_server::ports::RankingKey::Daily(Utc::now().date_naive());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let reads = tokio::spawn(async move {
        use ranking_server::ports::RankingStore;
        let mut seen = std::collections::BTreeSet::new();
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let page = direct.top(today, 0, 1).await.expect("read");
            let version = page.version.expect("a version");
            let packed = direct.version_chunk(today, version, 0, 1).await.expect("read").map(|p| p.total);
            seen.insert((page.total, packed.unwrap_or(page.total)));
        }
        seen
    });
    for _ in 0..3 {
        app.recompute("").await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = reads.await.expect("reader");
    let whole = |(zset, packed): &(u64, u64)| zset == packed && (*zset == 20_000 || *zset == 30_000);
    assert!(seen.iter().all(whole), "only whole rankings are visible: {seen:?}");
    assert!(seen.iter().any(|(zset, _)| *zset == 30_000));
    assert!(keys(&prefix).await.iter().all(|k| !k.contains("staging")), "no staging key is left behind");
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn hourly_keys_ignore_duplicates_and_expire() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut app = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let now = Utc::now();
    app.record(vec![event("h1", 5, EventType::View, 0, now), event("h1", 5, EventType::View, 0, now)]).await;
    app.record(vec![event("h1", 5, EventType::View, 0, now), event("h2", 5, EventType::Unlike, 0, now)]).await;
    let hourly = keys(&prefix).await.into_iter().find(|k| k.contains("{hour:")).expect("hourly key");
    let mut conn = redis().await;
    let score: f64 = conn.zscore(&hourly, format!("{:019}", 5)).await.expect("ZSCORE");
    assert!((score - (0.1 - 0.2)).abs() < 1e-12, "one view, one unlike: {score}");
    let ttl: i64 = conn.ttl(&hourly).await.expect("TTL");
    assert!(ttl > 2 * 3_600 && ttl <= 3 * 3_600, "expires 2 h after the hour ends: {ttl}");
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn reads_keep_working_with_the_database_stopped() {
    let Some(pg) = crate::helpers::pg::ThrowawayPostgres::start() else {
        panic!("PostgreSQL server binaries are required (make test installs them)");
    };
    let prefix = format!("t{:x}", rand_u64());
    let mut app = TestApp::spawn_on(redis_settings(&pg.url(), &prefix, &["--db-timeout=1s"])).await;
    app.record(views("x", 77, 5, Utc::now())).await;
    app.recompute("").await;
    pg.stop();
    let top = app.top("", 10).await;
    assert_eq!(top.products[0].product_id, 77);
    assert_eq!(app.rank(77, "").await.expect("rank").product.expect("entry").rank, 1);
    let err = app
        .client
        .record_events(v1::RecordEventsRequest { events: views("y", 77, 1, Utc::now()) })
        .await
        .expect_err("writes need the database");
    assert_eq!(err.code(), ranking_client::tonic::Code::Unavailable, "{}", err.message());
    app.stop().await;
}

/// GetTopN reads of one page are coalesced (see `adapters::coalescing`, whose unit tests pin
/// the exact sharing rule with a gated store); end to end, a read that starts after a write
/// has returned must see it while many readers share the page, as it would uncoalesced.
#[tokio::test]
async fn coalesced_reads_see_every_write_that_returned_before_them() {
    use chrono::Timelike;

    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut app = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let at = Utc::now();
    let page = v1::GetTopNRequest {
        window: v1::Window::Hourly.into(),
        date: at.date_naive().to_string(),
        hour: Some(at.hour()),
        limit: 20,
        ..Default::default()
    };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..32)
        .map(|_| {
            let mut client = app.client.clone();
            let (stop, page) = (stop.clone(), page.clone());
            tokio::spawn(async move {
                let mut reads = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    client.get_top_n(page.clone()).await.expect("background read");
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for i in 1..=40u32 {
        app.record(vec![event(&format!("w{i}"), 9, EventType::View, 0, at)]).await;
        let top = app.client.get_top_n(page.clone()).await.expect("read after write").into_inner();
        let score = top.products.first().map(|p| p.score).unwrap_or_default();
        assert!((score - 0.1 * f64::from(i)).abs() < 1e-9, "after {i} views the read saw {score}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut calls = 40.0;
    for r in readers {
        let reads = r.await.expect("reader");
        assert!(reads > 0);
        calls += reads as f64;
    }
    let metrics = app.scrape_metrics().await;
    let fetches = crate::helpers::metric_value(&metrics, "ranking_top_fetches_total");
    assert!(fetches >= 1.0 && fetches <= calls, "{fetches} fetches for {calls} calls");
    app.stop().await;
    db.drop_db().await;
}

/// Redis down: daily reads keep answering from the replica's copy of the last version (with
/// that version), hourly reads and recomputes answer UNAVAILABLE (never an empty ranking),
/// writes still land in SQL; Redis back, empty: the service reconnects by itself and the
/// next recompute restores the ranking, the events of the outage included, as a newer
/// version.
#[tokio::test]
async fn a_redis_outage_means_unavailable_and_the_service_recovers_by_itself() {
    use ranking_client::tonic::Code;

    let db = TestDb::create().await;
    let mut redis = crate::helpers::throwaway_redis::ThrowawayRedis::start(crate::helpers::free_port());
    let url = format!("--redis-url=redis://127.0.0.1:{}", redis.port);
    let mut app = TestApp::spawn_on(settings(&db.url, &[&url, "--redis-mode=single"])).await;
    let now = Utc::now();
    // Product 8 gets its six views before the outage, product 7 five before and one during.
    app.record(views("before-8", 8, 6, now)).await;
    app.record(views("before-7", 7, 5, now)).await;
    app.recompute("").await;
    let top = app.top("", 10).await;
    assert!(top.products[0].product_id == 8 && top.products[0].score > top.products[1].score);

    redis.stop();
    let served = app.top("", 10).await;
    assert_eq!((served.products.clone(), served.version), (top.products.clone(), top.version), "the last version");
    assert_eq!(app.rank(7, "").await.expect("served from memory").product.expect("entry").rank, 2);
    let metrics = app.scrape_metrics().await;
    assert_eq!(
        crate::helpers::metric_value(&metrics, "ranking_snapshot_version{window=\"daily\"}"),
        top.version as f64
    );
    assert!(crate::helpers::metric_value(&metrics, "ranking_snapshot_age_seconds{window=\"daily\"}") >= 0.0);
    // Each of these answers UNAVAILABLE (bounded by the Redis response timeout) instead of
    // hanging; how long that takes belongs in a benchmark, not here.
    let hourly = v1::GetTopNRequest { window: v1::Window::Hourly.into(), ..Default::default() };
    let hourly = app.client.get_top_n(hourly).await.expect_err("hourly is a live Redis read");
    assert_eq!(hourly.code(), Code::Unavailable, "{}", hourly.message());
    let recompute =
        app.client.recompute(v1::RecomputeRequest::default()).await.expect_err("recompute needs the ranking store");
    assert_eq!(recompute.code(), Code::Unavailable, "{}", recompute.message());
    // SQL is the source of truth: a write commits; only its hourly increment is lost.
    let written = app.record(vec![event("during-7", 7, EventType::View, 0, now)]).await;
    assert_eq!(written.accepted, 1);
    // The replica's own poll of Redis says so, whatever the traffic (the alert's signal).
    let reachable = "ranking_store_reachable{store=\"ranking\"}";
    ranking_server::test_support::eventually("the poll finds Redis down", || {
        let app = &app;
        async move { crate::helpers::metric_value(&app.scrape_metrics().await, reachable) == 0.0 }
    })
    .await;

    let _redis = crate::helpers::throwaway_redis::ThrowawayRedis::start(redis.port);
    // The service reconnects by itself; the first calls may still find the old connection
    // broken, so this caller retries with backoff as any client would.
    let restored = ranking_server::test_support::eventually_some("the service reconnects", async || {
        app.client.recompute(v1::RecomputeRequest::default()).await.ok().map(|r| r.into_inner())
    })
    .await;
    assert_eq!(restored.products, 2);
    ranking_server::test_support::eventually("the poll finds Redis back", || {
        let app = &app;
        async move { crate::helpers::metric_value(&app.scrape_metrics().await, reachable) == 1.0 }
    })
    .await;
    assert!(restored.version > top.version, "a new version, although Redis lost the old one");
    let top = app.top("", 10).await;
    assert_eq!(top.version, restored.version, "served by this replica when Recompute returns");
    let ids: Vec<i64> = top.products.iter().map(|p| p.product_id).collect();
    assert_eq!(ids, [8, 7], "equal scores come in descending product id");
    assert_eq!(top.products[0].score, top.products[1].score, "the view recorded during the outage counts");
    app.stop().await;
    db.drop_db().await;
}
