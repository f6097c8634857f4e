//! Versions, in-process snapshots and page tokens: replicas converge on
//! every new version, also when an announcement is lost; the copy answers exactly what
//! Redis holds; walks by page token see one version while the ranking is recomputed;
//! the memory bound; expired and garbled tokens.

use std::collections::BTreeSet;

use chrono::Utc;
use futures_util::TryStreamExt;
use ranking_client::tonic::Code;
use ranking_client::v1::{self, EventType};
use redis::AsyncCommands;

use crate::helpers::throwaway_redis::ThrowawayRedis;
use crate::helpers::{TestApp, TestDb, event, free_port, metric_value, rand_u64, settings, views};
use crate::redis_store::{redis, redis_settings};
use ranking_server::test_support::eventually;

/// Waits (under a generous deadline) until `app` serves `version` of today's ranking.
async fn wait_for_version(app: &mut TestApp, version: u64) {
    eventually(&format!("the replica serves version {version}"), async || {
        let served = app.top("", 1).await.version;
        assert!(served <= version, "served {served}, newer than {version}");
        served == version
    })
    .await;
}

/// `n` products whose view counts give a ranking with ties, shifted by `round`.
fn population(round: i64, n: i64) -> Vec<v1::Event> {
    let now = Utc::now();
    (1..=n)
        .flat_map(|p| {
            let count = ((p * 7 + round * 13) % 11) as usize;
            views(&format!("r{round}p{p}"), p, count, now)
        })
        .collect()
}

async fn record_all(app: &mut TestApp, events: Vec<v1::Event>) {
    for chunk in events.chunks(10_000) {
        app.record(chunk.to_vec()).await;
    }
}

#[tokio::test]
async fn two_replicas_serve_each_new_version_and_continue_each_others_page_tokens() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut a = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let mut b = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let mut last = 0;
    for round in 0..3 {
        record_all(&mut a, population(round, 50)).await;
        let published = a.recompute("").await.version;
        assert!(published > last, "versions only grow: {published} after {last}");
        last = published;
        assert_eq!(a.top("", 1).await.version, published, "the replica that ran Recompute serves it at once");
        wait_for_version(&mut b, published).await;
        assert_eq!(a.top("", 50).await, b.top("", 50).await, "both replicas answer alike");
    }

    // A walk started on one replica continues on the other, on the version it started with.
    let first = a.top("", 20).await;
    record_all(&mut a, population(9, 50)).await;
    let newer = a.recompute("").await.version;
    wait_for_version(&mut b, newer).await;
    let request = v1::GetTopNRequest { page_token: first.next_page_token.clone(), ..Default::default() };
    let second = b.client.get_top_n(request).await.expect("page 2 on the other replica").into_inner();
    assert_eq!(second.version, first.version);
    assert_eq!(second.products.first().map(|p| p.rank), Some(21));
    a.stop().await;
    b.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_replica_that_missed_an_announcement_catches_up_by_its_poll() {
    let db = TestDb::create().await;
    let redis = ThrowawayRedis::start(free_port());
    let url = format!("--redis-url=redis://127.0.0.1:{}", redis.port);
    let prefix = format!("--redis-prefix=t{:x}", rand_u64());
    let mut a = TestApp::spawn_on(settings(&db.url, &[&url, &prefix, "--redis-mode=single"])).await;
    let mut b = TestApp::spawn_on(settings(&db.url, &[&url, &prefix, "--redis-mode=single"])).await;
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}", redis.port))
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("throwaway redis");
    // Both replicas subscribe shortly after they start.
    eventually("both replicas subscribe", async || {
        let clients: String =
            redis::cmd("CLIENT").arg("LIST").arg("TYPE").arg("pubsub").query_async(&mut conn).await.expect("LIST");
        clients.lines().count() >= 2
    })
    .await;
    // Cut both subscriptions: the next announcement reaches nobody.
    let killed: u64 =
        redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query_async(&mut conn).await.expect("KILL");
    assert_eq!(killed, 2);
    a.record(views("v", 5, 3, Utc::now())).await;
    let published = a.recompute("").await.version;
    wait_for_version(&mut b, published).await;
    assert_eq!(b.rank(5, "").await.expect("ranked").version, published);
    a.stop().await;
    b.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn the_copy_answers_exactly_what_redis_holds() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut app = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let n = 3_000;
    record_all(&mut app, population(1, n)).await;
    let version = app.recompute("").await.version;
    // The daily ranking's sorted set, written by the recompute with its version.
    let key = format!("{prefix}:{{daily:{}}}", Utc::now().date_naive());
    let mut conn = redis().await;
    let mut rng = rand_u64();
    for _ in 0..300 {
        rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let product = 1 + (rng >> 33) as i64 % n;
        let member = format!("{product:019}");
        let rank: Option<u64> = conn.zrevrank(&key, &member).await.expect("ZREVRANK");
        let score: Option<f64> = conn.zscore(&key, &member).await.expect("ZSCORE");
        match app.rank(product, "").await {
            Ok(r) => {
                let p = r.product.expect("entry");
                assert_eq!((Some(p.rank - 1), Some(p.score), r.version), (rank, score, version), "product {product}");
            }
            Err(status) => {
                assert_eq!(status.code(), Code::NotFound);
                assert_eq!(rank, None, "product {product}");
            }
        }
    }
    let all: Vec<(String, f64)> = conn.zrevrange_withscores(&key, 0, -1).await.expect("ZREVRANGE");
    let client =
        ranking_client::RankingClient::builder(format!("http://{}", app.addr)).connect().await.expect("client");
    let walked: Vec<v1::RankedProduct> =
        client.entries(v1::GetTopNRequest { limit: 1_000, ..Default::default() }).try_collect().await.expect("walk");
    let walked: Vec<(String, f64)> = walked.iter().map(|p| (format!("{:019}", p.product_id), p.score)).collect();
    assert_eq!(walked, all);
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_walk_by_page_token_sees_every_product_once_while_the_ranking_is_recomputed() {
    let mut app = TestApp::spawn(&[]).await;
    let n = 30_000;
    let now = Utc::now();
    let first: Vec<_> = (1..=n).map(|p| event(&format!("a{p}"), p, EventType::View, 0, now)).collect();
    record_all(&mut app, first).await;
    app.recompute("").await;
    let client =
        ranking_client::RankingClient::builder(format!("http://{}", app.addr)).connect().await.expect("client");
    let mut pages = client.pages(v1::GetTopNRequest { limit: 1_000, ..Default::default() });
    let mut seen = Vec::new();
    let mut versions = BTreeSet::new();
    let mut published = Vec::new();
    let mut page_no = 0;
    while let Some(page) = pages.try_next().await.expect("page") {
        versions.insert(page.version);
        seen.extend(page.products.iter().map(|p| (p.rank, p.product_id, p.score)));
        page_no += 1;
        if [3, 10, 20].contains(&page_no) {
            // Products from the bottom of the walk's version jump to the top of the next.
            let lift: Vec<_> = (0..200)
                .map(|i| {
                    event(&format!("lift{page_no}-{i}"), (page_no * 1_000 + i) as i64, EventType::Order, 50_000, now)
                })
                .collect();
            app.record(lift).await;
            published.push(app.recompute("").await.version);
        }
    }
    assert_eq!(versions.len(), 1, "one version for the whole walk: {versions:?}");
    assert_eq!(published.len(), 3);
    assert!(published.iter().all(|v| !versions.contains(v)), "the ranking did move on during the walk");
    assert_eq!(seen.len(), n as usize);
    let ids: BTreeSet<i64> = seen.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(ids.len(), n as usize, "every product exactly once");
    assert!(seen.iter().enumerate().all(|(i, (rank, _, _))| *rank == i as u64 + 1), "ranks 1..n in order");
    assert!(seen.windows(2).all(|w| w[0].2 >= w[1].2), "scores never increase along the walk");
    app.stop().await;
}

#[tokio::test]
async fn expired_and_garbled_page_tokens_say_what_to_do() {
    let mut app = TestApp::spawn(&["--snapshot-ttl=0"]).await;
    app.record((1..=30).flat_map(|p| views(&format!("p{p}"), p, p as usize % 4, Utc::now())).collect()).await;
    app.recompute("").await;
    let page = app.top("", 10).await;
    assert!(!page.next_page_token.is_empty());
    app.recompute("").await;
    let next = v1::GetTopNRequest { page_token: page.next_page_token.clone(), ..Default::default() };
    let expired = app.client.get_top_n(next.clone()).await.expect_err("superseded versions are not kept");
    assert_eq!(expired.code(), Code::FailedPrecondition, "{}", expired.message());
    assert!(expired.message().contains("start again"), "{}", expired.message());

    let mut garbled = page.next_page_token.clone();
    garbled.replace_range(3..4, if &garbled[3..4] == "A" { "B" } else { "A" });
    for token in [garbled, "not a token".into(), "A".repeat(100_000)] {
        let request = v1::GetTopNRequest { page_token: token, ..Default::default() };
        let e = app.client.get_top_n(request).await.expect_err("garbled");
        assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
        assert!(e.message().starts_with("page_token:"), "{}", e.message());
    }
    let other = v1::GetTopNRequest { window: v1::Window::Hourly.into(), ..next };
    let e = app.client.get_top_n(other).await.expect_err("token of another ranking");
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
    app.stop().await;
}

#[tokio::test]
async fn rankings_above_the_memory_bound_are_read_from_the_store() {
    let mut app = TestApp::spawn(&["--snapshot-max-entries=10"]).await;
    app.record((1..=20).flat_map(|p| views(&format!("p{p}"), p, p as usize, Utc::now())).collect()).await;
    let version = app.recompute("").await.version;
    let top = app.top("", 20).await;
    assert_eq!((top.total, top.version), (20, version));
    assert_eq!(top.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), (1..=20).rev().collect::<Vec<_>>());
    assert_eq!(app.rank(3, "").await.expect("ranked").product.expect("entry").rank, 18);
    let metrics = app.scrape_metrics().await;
    assert!(metric_value(&metrics, "ranking_snapshot_oversize_total") >= 1.0);
    assert!(!metrics.contains("ranking_snapshot_version{"), "nothing held: {metrics}");
    app.stop().await;
}
