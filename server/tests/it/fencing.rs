//! Fenced rankings across replicas sharing SQL and Redis: a replica that stalls past its
//! day's lease — paused with SIGSTOP in the middle of a recompute or of a live pass, or cut
//! off from Redis by a proxy that stops forwarding — publishes nothing when it wakes, while
//! the other replica's newer ranking (an order that moved a product to the top, a product
//! hidden meanwhile) stays served on both; and the fence itself, shown through the fault
//! point that holds a recompute just before its write until another replica holds the day:
//! the write is refused and counted.
//!
//! Readers of each replica, every 20 ms through the stall and after it, never see a version
//! go back.
//!
//! The tests run in `make test`'s Redis passes (replicas need a shared database server and
//! Redis) and wait for states, never for durations.

use chrono::{Duration as Age, Utc};
use ranking_client::v1;
use ranking_server::test_support::{eventually, eventually_some};

use crate::helpers::faults::{StallingProxy, VersionWatch, seed_day, signal};
use crate::helpers::process::ServerProcess;
use crate::helpers::{TestApp, TestDb, event, metric_value, rand_u64, settings, test_redis, test_redis_mode};

/// The generated client, as the test servers are called.
type Client = v1::ranking_service_client::RankingServiceClient<ranking_client::tonic::transport::Channel>;

/// Products in the seeded day: enough that a debug build's recompute lasts long enough to be
/// paused in the middle.
const PRODUCTS: i64 = 100_000;
/// The product an order moves to the top while the stalled replica sleeps.
const RISER: i64 = PRODUCTS + 1;

/// The day's lease key of `prefix` (a day's rankings and its lease share the day's tag).
fn lease_key(prefix: &str) -> String {
    format!("{prefix}:{{daily:{}}}:lock", Utc::now().date_naive())
}

async fn lease_holder(prefix: &str) -> Option<String> {
    let mut conn = crate::redis_store::redis().await;
    redis::AsyncCommands::get(&mut conn, lease_key(prefix)).await.expect("GET")
}

/// The environment of a replica process on `db` and the test Redis under `prefix`.
fn replica_env(db: &str, prefix: &str, redis: &str, live: &str) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", db.to_string()),
        ("REDIS_URL", redis.to_string()),
        ("RANKING_REDIS_MODE", test_redis_mode().to_string()),
        ("RANKING_REDIS_PREFIX", prefix.to_string()),
        ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
        ("RANKING_LIVE_INTERVAL", live.to_string()),
        ("RANKING_RECOMPUTE_LEASE", "2s".to_string()),
        ("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())),
    ]
}

/// Today's daily top 100 a replica serves: `(version, [(product, score)])`.
async fn board(client: &mut Client) -> Option<(u64, Vec<(i64, f64)>)> {
    let request = v1::GetTopNRequest { limit: 100, ..Default::default() };
    let top = client.get_top_n(request).await.ok()?.into_inner();
    Some((top.version, top.products.iter().map(|p| (p.product_id, p.score)).collect()))
}

/// The other replica's part while the stalled one sleeps: 6,000 views that move [`RISER`]
/// past every seeded product (600 points; the seeded ones have at most 570), `hidden`
/// hidden, and a recompute; returns that recompute's version.
async fn move_on(other: &mut TestApp, hidden: i64) -> u64 {
    let run = rand_u64();
    other.record(crate::helpers::views(&format!("rise-{run:x}"), RISER, 6_000, Utc::now())).await;
    let catalog = v1::CatalogEntry { product_id: hidden, hidden: true, ..Default::default() };
    other.client.update_catalog(v1::UpdateCatalogRequest { products: vec![catalog] }).await.expect("hide");
    other.recompute("").await.version
}

/// After the stalled replica woke: both replicas serve the same ranking, at least as new as
/// `newer`, with [`RISER`] first and `hidden` nowhere; and it is what a recompute gives.
async fn both_serve_the_newer_ranking(stalled: &mut Client, other: &mut TestApp, newer: u64, hidden: i64) {
    let mut other_client = other.client.clone();
    eventually("both replicas serve the same ranking, as new as the other's", || {
        let (mut a, mut b) = (stalled.clone(), other_client.clone());
        async move {
            match (board(&mut a).await, board(&mut b).await) {
                (Some(a), Some(b)) => a == b && a.0 >= newer,
                _ => false,
            }
        }
    })
    .await;
    let (version, served) = board(stalled).await.expect("served");
    let place = served.iter().position(|(p, _)| *p == RISER);
    assert_eq!(
        served[0].0,
        RISER,
        "the views recorded during the stall lead: version {version} (the other's {newer}), {RISER} at {place:?}, {:?}",
        &served[..3]
    );
    assert!(served.iter().all(|(p, _)| *p != hidden), "the product hidden during the stall stays hidden");
    let rank = v1::GetRankRequest { product_id: hidden, ..Default::default() };
    assert!(stalled.get_rank(rank).await.is_err(), "the hidden product is in no ranking");
    other.recompute("").await;
    let (_, recomputed) = board(&mut other_client).await.expect("served");
    assert_eq!(served, recomputed, "what is served is what a recompute gives");
}

/// One stall of a replica in the middle of a `work` (a recompute, or a live pass), by
/// `stall` and undone by `wake`; the other replica moves on meanwhile.
async fn stalled_replica_publishes_nothing_stale(live: bool, via_proxy: bool) {
    crate::bus::assert_shared_servers();
    let redis = test_redis().expect("Redis");
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    // The other replica keeps the default lease: only the stalled one's must run out soon.
    let mut other = TestApp::spawn_on(settings(&db.url, &[&format!("--redis-prefix={prefix}")])).await;
    seed_day(&db.url, Utc::now().date_naive(), PRODUCTS).await;
    other.recompute("").await;

    // The stalled replica reaches Redis directly, or through a proxy that can stop forwarding.
    let proxy = if via_proxy {
        // A cluster's clients follow the nodes' own addresses past any proxy: the cluster
        // pass skips these by name (cut_off_from_redis), the pauses stand for the stall there.
        assert_eq!(test_redis_mode(), "single", "a proxy stands between a replica and one Redis only");
        let target = redis.trim_start_matches("redis://").trim_end_matches('/').parse().expect("a host:port Redis URL");
        Some(StallingProxy::start(target).await)
    } else {
        None
    };
    let url = proxy.as_ref().map_or(redis.clone(), |p| format!("redis://{}", p.addr));
    let replica = ServerProcess::start(&replica_env(&db.url, &prefix, &url, if live { "50ms" } else { "0" })).await;
    let mut client = ranking_client::connect(format!("http://{}", replica.addr)).await.expect("client");
    // A change for the live pass to publish (it reads the day whole first: the long part).
    let recompute = if live {
        let view = event(&format!("v-{}", rand_u64()), 2, v1::EventType::View, 0, Utc::now() - Age::seconds(5));
        client.record_events(v1::RecordEventsRequest { events: vec![view] }).await.expect("record");
        None
    } else {
        // A channel of its own without the client's call timeout: the call spans the stall.
        let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{}", replica.addr))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let mut c = Client::new(channel);
        Some(tokio::spawn(async move { c.recompute(v1::RecomputeRequest::default()).await }))
    };
    // Readers of both replicas, through the stall and after it.
    let watches = [VersionWatch::start(client.clone()), VersionWatch::start(other.client.clone())];
    // Stalled the moment it holds the day: in the middle of its work.
    eventually("the replica holds the day's lease", || async { lease_holder(&prefix).await.is_some() }).await;
    match &proxy {
        Some(p) => p.stall(),
        None => signal(replica.pid(), "STOP"),
    }
    eventually("the stalled replica's lease runs out", || async { lease_holder(&prefix).await.is_none() }).await;
    let hidden = 3;
    let newer = move_on(&mut other, hidden).await;
    match &proxy {
        Some(p) => p.resume(),
        None => signal(replica.pid(), "CONT"),
    }
    if let Some(recompute) = recompute {
        // The paused work fails (its lease lost, Redis timed out under the stall, or the call
        // outlived the server's call deadline and was cancelled) and publishes nothing more.
        // The call may also succeed: when the pause caught the replica's own start-up
        // recompute holding the day, the requested one waited for the lease and ran after the
        // stall, from the SQL as it is then. Either way, what is served afterwards is checked
        // below against a fresh recompute.
        if let Err(refused) = recompute.await.expect("joined") {
            let code = refused.code();
            assert!(
                matches!(code, ranking_client::tonic::Code::Unavailable | ranking_client::tonic::Code::Cancelled),
                "{code:?}: {}",
                refused.message()
            );
        }
    }
    both_serve_the_newer_ranking(&mut client, &mut other, newer, hidden).await;
    let [stalled_watch, other_watch] = watches;
    stalled_watch.assert_never_went_back("the stalled replica").await;
    other_watch.assert_never_went_back("the other replica").await;
    replica.terminate();
    replica.wait().await;
    other.stop().await;
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server and Redis shared by replicas: make test's Redis passes"]
async fn a_replica_paused_in_the_middle_of_a_recompute_publishes_nothing_stale() {
    stalled_replica_publishes_nothing_stale(false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server and Redis shared by replicas: make test's Redis passes"]
async fn a_replica_paused_in_the_middle_of_a_live_pass_publishes_nothing_stale() {
    stalled_replica_publishes_nothing_stale(true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server and a single Redis shared by replicas: make test's Redis passes"]
async fn a_replica_cut_off_from_redis_in_the_middle_of_a_recompute_publishes_nothing_stale() {
    stalled_replica_publishes_nothing_stale(false, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server and a single Redis shared by replicas: make test's Redis passes"]
async fn a_replica_cut_off_from_redis_in_the_middle_of_a_live_pass_publishes_nothing_stale() {
    stalled_replica_publishes_nothing_stale(true, true).await;
}

/// A database and a Redis prefix for two replicas, their flags (a 60 s lease), and the first
/// replica, which has ranked products 1, 2 and 3 (3, 2 and 1 views): what a held write is
/// tested on.
async fn ranked_replica() -> (TestDb, String, Vec<String>, TestApp) {
    crate::bus::assert_shared_servers();
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let flags = vec![format!("--redis-prefix={prefix}"), "--recompute-lease=60s".to_string()];
    let flagged: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut held = TestApp::spawn_on(settings(&db.url, &flagged)).await;
    let at = Utc::now() - Age::seconds(30);
    for (product, n) in [(1, 3), (2, 2), (3, 1)] {
        held.record(crate::helpers::views(&format!("v{product}"), product, n, at)).await;
    }
    held.recompute("").await;
    (db, prefix, flags, held)
}

/// The fence itself: a recompute held just before its first write until the other replica
/// holds the day (its lease gone, as a stall past its life leaves it) is refused by the store
/// and counted, and the other replica's ranking stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server and Redis shared by replicas: make test's Redis passes"]
async fn a_write_held_until_another_replica_holds_the_day_is_refused_and_counted() {
    let (db, prefix, flags, held) = ranked_replica().await;
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut other = TestApp::spawn_on(settings(&db.url, &flags)).await;

    let (reached, release) = held.scheduler.recompute().faults().hold_before_publish();
    let mut client = held.client.clone();
    let work = tokio::spawn(async move { client.recompute(v1::RecomputeRequest::default()).await });
    reached.await.expect("the recompute reached its write");
    // The holder's lease is gone (its renewals would not come for another 20 s) and the
    // other replica takes the day.
    let mut conn = crate::redis_store::redis().await;
    let _: () = redis::AsyncCommands::del(&mut conn, lease_key(&prefix)).await.expect("DEL");
    let hidden = 2;
    let newer = move_on(&mut other, hidden).await;
    release.send(()).expect("released");
    let refused = work.await.expect("joined").expect_err("fenced");
    assert_eq!(refused.code(), ranking_client::tonic::Code::Unavailable);
    assert!(refused.message().contains("lost the lease"), "{}", refused.message());
    let metrics = held.scrape_metrics().await;
    assert_eq!(metric_value(&metrics, "ranking_fenced_writes_total{kind=\"recompute\"}"), 1.0);
    let mut client = held.client.clone();
    both_serve_the_newer_ranking(&mut client, &mut other, newer, hidden).await;
    held.stop().await;
    other.stop().await;
    db.drop_db().await;
}

/// A control pass held just before its write while its lease goes and another replica serves
/// the change itself: the held write is refused and counted, and both replicas serve the other
/// replica's version.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server and Redis shared by replicas: make test's Redis passes"]
async fn a_control_pass_held_past_its_lease_publishes_nothing_over_its_successor() {
    let (db, prefix, flags, mut held) = ranked_replica().await;
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();

    let (reached, release) = held.scheduler.recompute().faults().hold_before_publish();
    let pin = crate::previews::pin("hero", 3, 1);
    held.client.put_control(v1::PutControlRequest { control: Some(pin), expected_revision: 0 }).await.expect("put");
    reached.await.expect("the control pass reached its write");
    // Its lease is gone (as a pause past its life leaves it); a replica started now serves the
    // pin under the day's lease itself.
    let mut conn = crate::redis_store::redis().await;
    let _: () = redis::AsyncCommands::del(&mut conn, lease_key(&prefix)).await.expect("DEL");
    let mut other = TestApp::spawn_on(settings(&db.url, &flags)).await;
    let first = |top: &v1::GetTopNResponse| top.products.first().map(|p| (p.product_id, p.control_ids.clone()));
    let pinned = Some((3, vec!["hero".to_string()]));
    let version = eventually_some("the other replica serves the pin", async || {
        let top = other.top("", 10).await;
        (first(&top) == pinned).then_some(top.version)
    })
    .await;
    release.send(()).expect("released");
    eventually("the held write refused and counted", async || {
        crate::helpers::metric_or_zero(
            &held.scrape_metrics().await,
            "ranking_fenced_writes_total{kind=\"control_pass\"}",
        ) == 1.0
    })
    .await;
    eventually("both replicas serve the other's version", async || {
        let (mine, theirs) = (held.top("", 10).await, other.top("", 10).await);
        mine.version == version && theirs.version == version && first(&mine) == pinned
    })
    .await;
    held.stop().await;
    other.stop().await;
    db.drop_db().await;
}
