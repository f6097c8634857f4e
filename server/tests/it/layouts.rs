//! The ranking store's layout, agreed by the running replicas: each announces in SQL what it
//! reads, GetStatus and the metrics show the layout in force and each replica's, a replica
//! that shares no layout with the live ones refuses to start naming both, and a ranking
//! stored in a layout this release does not read is refused, never served as an empty page.

use chrono::Utc;
use ranking_client::v1;
use ranking_server::ports::{READS, WRITES};
use ranking_server::startup::Application;
use ranking_server::test_support::{eventually, eventually_some};
use redis::AsyncCommands;
use sea_orm::Database;

use crate::helpers::{TestApp, TestDb, rand_u64, settings, views};
use crate::redis_store::{redis, redis_settings};
use crate::upgrades::execute;

async fn status(app: &TestApp) -> v1::GetStatusResponse {
    app.client.clone().get_status(v1::GetStatusRequest {}).await.expect("GetStatus").into_inner()
}

fn names(status: &v1::GetStatusResponse) -> Vec<&str> {
    status.replicas.iter().map(|r| r.replica.as_str()).collect()
}

#[tokio::test]
async fn replicas_announce_what_they_read_and_one_sharing_no_layout_refuses_naming_both() {
    let db = TestDb::create().await;
    let ttl = "--replica-ttl=900ms";
    let a = TestApp::spawn_on(settings(&db.url, &[ttl, "--replica-name=replica-a"])).await;
    let b = TestApp::spawn_on(settings(&db.url, &[ttl, "--replica-name=replica-b"])).await;
    let seen = eventually_some("A lists both replicas", async || {
        let s = status(&a).await;
        (names(&s) == ["replica-a", "replica-b"]).then_some(s)
    })
    .await;
    let (oldest, newest) = (u32::from(*READS.start()), u32::from(*READS.end()));
    // This release writes its default layout (one behind the newest it reads).
    let writes = u32::from(WRITES);
    assert_eq!((seen.layout_in_force, seen.replica.as_str()), (writes, "replica-a"));
    for r in &seen.replicas {
        assert_eq!((r.reads_min, r.reads_max), (oldest, newest), "{r:?}");
        assert_eq!(r.release, env!("CARGO_PKG_VERSION"));
        assert!(r.seen_at.is_some());
    }
    let scraped = a.scrape_metrics().await;
    assert!(scraped.contains(&format!("ranking_layout_in_force {writes}")), "{scraped}");
    assert!(scraped.contains("ranking_layout_replica_reads{replica=\"replica-b\""), "{scraped}");

    // A replica of a release two ahead, reading only the two layouts after this release's
    // newest, is live (its announcement dated ahead, so that it stays live through the wait).
    let admin = Database::connect(&db.url).await.expect("connect");
    let ahead = Utc::now().timestamp_millis() + 120_000;
    let (next, after) = (newest + 1, newest + 2);
    let insert = format!(
        "INSERT INTO replica_layouts (replica, reads_min, reads_max, release_name, seen_at) \
         VALUES ('from-two-releases-on', {next}, {after}, '9.9.9', {ahead})"
    );
    execute(&admin, insert).await;
    let refused = Application::build(settings(&db.url, &[ttl, "--replica-name=replica-c"]))
        .await
        .err()
        .expect("a replica sharing no layout with the live ones does not start");
    let message = format!("{refused:#}");
    assert!(
        message.contains(&format!("from-two-releases-on (release 9.9.9) reads layouts {next}..={after}")),
        "{message}"
    );
    assert!(message.contains("replica-c"), "{message}");
    assert!(message.contains(&format!("reads {oldest}..={newest}")), "{message}");
    // A reads the announcements every third of their life: within a round it sees the refused
    // replica's gone, and the one ahead.
    let s = eventually_some("the refused replica left no announcement", async || {
        let s = status(&a).await;
        (names(&s) == ["from-two-releases-on", "replica-a", "replica-b"]).then_some(s)
    })
    .await;
    assert_eq!(s.layout_in_force, writes, "the live replicas keep writing the layout in force");
    let delete = "DELETE FROM replica_layouts WHERE replica = 'from-two-releases-on'".to_string();
    execute(&admin, delete).await;

    // A replica that stops withdraws its announcement.
    b.stop().await;
    eventually("A no longer lists the stopped replica", async || names(&status(&a).await) == ["replica-a"]).await;
    a.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_ranking_in_a_layout_this_release_does_not_read_is_refused_never_served_empty() {
    let db = TestDb::create().await;
    let prefix = format!("test-{:016x}", rand_u64());
    // Every read goes to Redis: the replica holds no copy of a board this size.
    let mut app = TestApp::spawn_on(redis_settings(&db.url, &prefix, &["--snapshot-max-entries=1"])).await;
    app.record(views("v", 7, 3, Utc::now() - chrono::Duration::seconds(5))).await;
    app.record(views("w", 8, 2, Utc::now() - chrono::Duration::seconds(5))).await;
    let published = app.recompute("").await;
    let top = app.top("", 10).await;
    assert_eq!(top.products.len(), 2);

    // A newer release's version of the same board: its pointer names the layout after this
    // release's newest.
    let unread = *READS.end() + 1;
    let pointer = format!("{prefix}:{{daily:{}}}:version", published.date);
    let mut conn = redis().await;
    let newer = format!("{}:{unread}:{}", published.version + 1, published.version);
    let _: () = conn.set(&pointer, &newer).await.expect("SET");
    let request = v1::GetTopNRequest { limit: 10, ..Default::default() };
    let refused = app.client.get_top_n(request.clone()).await.expect_err("not served");
    assert_eq!(refused.code(), ranking_client::tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains(&format!("layout {unread}")), "{}", refused.message());
    let rank = app.rank(7, "").await.expect_err("not served");
    assert_eq!(rank.code(), ranking_client::tonic::Code::Unavailable, "{rank:?}");

    // This release's next publication moves past the newer version and is served again.
    let again = app.recompute("").await;
    assert!(again.version > published.version + 1, "{} after {}", again.version, published.version + 1);
    let top = app.client.get_top_n(request).await.expect("served").into_inner();
    assert_eq!(top.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), [7, 8]);
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rankctl_status_shows_the_layout_in_force_and_each_replica() {
    let app = TestApp::spawn(&["--replica-name=replica-status"]).await;
    let endpoint = format!("http://{}", app.addr);
    let (table, json) = tokio::task::spawn_blocking(move || {
        (crate::rankctl::run(&endpoint, &["status"]), crate::rankctl::run(&endpoint, &["--json", "status"]))
    })
    .await
    .expect("blocking");
    let (oldest, newest) = (*READS.start(), *READS.end());
    let head = format!("layout in force: {WRITES} (answered by replica-status)");
    assert!(table.0 && table.1.starts_with(&head), "{}", table.1);
    let reads = format!("{oldest}..={newest}");
    assert!(table.1.lines().any(|l| l.starts_with("replica-status") && l.contains(&reads)), "{}", table.1);
    assert!(json.0, "{}", json.1);
    let parsed: serde_json::Value = serde_json::from_str(json.1.trim()).expect("JSON");
    assert_eq!(parsed["layout_in_force"], WRITES, "{parsed}");
    assert_eq!(parsed["replicas"][0]["replica"], "replica-status", "{parsed}");
    assert_eq!(parsed["replicas"][0]["reads_max"], newest, "{parsed}");
    app.stop().await;
}
