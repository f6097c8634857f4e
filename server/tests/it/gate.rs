//! The layout gate against a real older build: a replica of this release beside one of the
//! last release that reads only layout 1 (`RANKING_TEST_LAYOUT1_SERVER`, built once per
//! machine by `scripts/previous-release.sh`) keeps writing layout 1 — no version stored as a
//! delta, every read of the older replica answered — until the older one is gone, and writes
//! deltas once its announcement has lapsed.

use std::path::PathBuf;

use chrono::{Duration as Age, Utc};
use ranking_client::v1;
use ranking_client::v1::ranking_service_client::RankingServiceClient;
use ranking_server::ports::WRITES;
use ranking_server::test_support::eventually;
use redis::AsyncCommands;

use crate::helpers::metric_or_zero as sample;
use crate::helpers::process::ServerProcess;
use crate::helpers::{TestApp, TestDb, rand_u64, test_redis_mode, views};
use crate::redis_store::{redis, redis_settings, redis_url};

/// Products of the board: a pass after a few views changes far less than an eighth of it.
const PRODUCTS: i64 = 1_000;

fn deltas_written(metrics: &str) -> f64 {
    sample(metrics, "ranking_published_entries_total{form=\"delta\",board=\"daily\"}")
}

fn live_passes(metrics: &str) -> f64 {
    sample(metrics, "ranking_live_passes_total{outcome=\"published\"}")
}

#[tokio::test]
#[ignore = "needs the build that reads only layout 1 (RANKING_TEST_LAYOUT1_SERVER) and PostgreSQL or MariaDB with Redis: make test's passes"]
async fn beside_a_replica_that_reads_only_layout_1_nothing_is_written_in_layout_2_until_it_is_gone() {
    let older: PathBuf = std::env::var_os("RANKING_TEST_LAYOUT1_SERVER")
        .expect("RANKING_TEST_LAYOUT1_SERVER names the server of the build that reads only layout 1")
        .into();
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let ttl = "2s";
    // This release's replica first: it takes the live lease, so that its passes are the ones
    // that would write deltas.
    let extra = ["--live-interval=100ms", "--replica-ttl=2s", "--replica-name=newer"];
    let mut newer = TestApp::spawn_on(redis_settings(&db.url, &prefix, &extra)).await;
    let at = |p: i64| Utc::now() - Age::seconds(30 + p);
    let events: Vec<v1::Event> =
        (1..=PRODUCTS).flat_map(|p| views(&format!("seed-{p}"), p, (p % 23 + 1) as usize, at(p))).collect();
    for batch in events.chunks(5_000) {
        newer.record(batch.to_vec()).await;
    }
    newer.recompute("").await;

    let envs = vec![
        ("DATABASE_URL", db.url.clone()),
        ("REDIS_URL", redis_url()),
        ("RANKING_REDIS_MODE", test_redis_mode().to_string()),
        ("RANKING_REDIS_PREFIX", prefix.clone()),
        ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
        ("RANKING_LIVE_INTERVAL", "100ms".to_string()),
        ("RANKING_REPLICA_TTL", ttl.to_string()),
        ("RANKING_REPLICA_NAME", "older".to_string()),
    ];
    let old = ServerProcess::start_binary(&older, &envs).await;
    let mut old_client = RankingServiceClient::connect(format!("http://{}", old.addr)).await.expect("connects");
    eventually("the newer replica sees the older one and writes layout 1", async || {
        let status = newer.client.get_status(v1::GetStatusRequest {}).await.expect("GetStatus").into_inner();
        status.replicas.len() == 2 && status.layout_in_force == 1
    })
    .await;

    // Live passes beside it: one product's view at a time, each pass published; none writes a
    // delta, and the older replica serves every version.
    let pointer = format!("{prefix}:{{daily:{}}}:version", Utc::now().date_naive());
    let mut conn = redis().await;
    let before = deltas_written(&newer.scrape_metrics().await);
    for n in 0..10i64 {
        let passes = live_passes(&newer.scrape_metrics().await);
        newer.record(views(&format!("beside-{n}"), n * 17 + 1, 1, at(n * 17 + 1))).await;
        eventually("a live pass published it", async || live_passes(&newer.scrape_metrics().await) > passes).await;
        let current: String = conn.get(&pointer).await.expect("GET");
        assert!(!current.contains(':'), "a version in layout 1 while the older replica runs: {current}");
        let top = v1::GetTopNRequest { limit: 10, ..Default::default() };
        let served = old_client.get_top_n(top).await.expect("the older replica serves every version");
        assert_eq!(served.into_inner().products.len(), 10);
    }
    assert_eq!(deltas_written(&newer.scrape_metrics().await), before, "no delta written beside it");

    // The older replica gone (its announcement withdrawn at its stop): this release's own
    // layout in force, and a pass after one view writes a delta.
    old.terminate();
    old.wait().await;
    eventually("this release's layout in force once the older replica is gone", async || {
        newer.client.get_status(v1::GetStatusRequest {}).await.expect("GetStatus").into_inner().layout_in_force
            == u32::from(WRITES)
    })
    .await;
    let mut n = 100;
    eventually("a pass writes a delta", async || {
        n += 1;
        newer.record(views(&format!("after-{n}"), n, 1, at(n))).await;
        deltas_written(&newer.scrape_metrics().await) > before
    })
    .await;
    let current: String = conn.get(&pointer).await.expect("GET");
    assert!(current.contains(":2:"), "{current}");
    newer.stop().await;
    db.drop_db().await;
}
