//! Live exact ranking on every engine: after a workload, the live version of
//! today's daily and weekly rankings and their segments is entry for entry what `Recompute`
//! publishes from the same rows; a transaction committed late with an earlier timestamp is
//! in the next live version; a product hidden between passes never comes back from one; a
//! Redis flush loses nothing;
//! the live lease moves to the other replica when its holder is killed; with
//! `RANKING_LIVE_INTERVAL=0` nothing moves between recomputes.

use chrono::{Duration as Age, Utc};
use ranking_client::v1;
use ranking_server::test_support::{eventually, noon};
use sea_orm::{ConnectionTrait, Database, TransactionTrait};

use crate::helpers::metric_or_zero as sample;
use crate::helpers::process::ServerProcess;
use crate::helpers::{Draw, TestApp, TestDb, event, rand_u64, test_redis_mode, views};
use crate::redis_store::{redis_settings, redis_url};

const LIVE: &str = "--live-interval=50ms";

fn passes_of(metrics: &str, outcomes: &[&str]) -> f64 {
    outcomes.iter().map(|o| sample(metrics, &format!("ranking_live_passes_total{{outcome=\"{o}\"}}"))).sum()
}

/// Live passes of `app` that ran to their end.
async fn passes(app: &TestApp) -> f64 {
    passes_of(&app.scrape_metrics().await, &["loaded", "published", "unchanged"])
}

/// Waits until two more live passes have ended: the second began after the first ended, so
/// after everything committed before this call, and its version (or an earlier one)
/// includes it.
async fn settled(app: &TestApp) {
    let before = passes(app).await;
    eventually("two more live passes", || async { passes(app).await >= before + 2.0 }).await;
}

/// A whole ranking read page by page: its version, total and `(product, score)` in order.
async fn board(app: &mut TestApp, window: v1::Window, segment: &str) -> (u64, u64, Vec<(i64, f64)>) {
    let first =
        v1::GetTopNRequest { window: window.into(), segment: segment.into(), limit: 1_000, ..Default::default() };
    let mut page = app.client.get_top_n(first).await.expect("GetTopN").into_inner();
    let (version, total) = (page.version, page.total);
    let mut entries: Vec<(i64, f64)> = Vec::new();
    loop {
        entries.extend(page.products.iter().map(|p| (p.product_id, p.score)));
        if page.next_page_token.is_empty() {
            return (version, total, entries);
        }
        let next = v1::GetTopNRequest { page_token: page.next_page_token.clone(), ..Default::default() };
        page = app.client.get_top_n(next).await.expect("next page").into_inner();
        assert_eq!(page.version, version, "pages of one version");
    }
}

/// The daily and weekly rankings and a segment of each.
async fn boards(app: &mut TestApp) -> Vec<(u64, u64, Vec<(i64, f64)>)> {
    vec![
        board(app, v1::Window::Daily, "").await,
        board(app, v1::Window::Weekly, "").await,
        board(app, v1::Window::Daily, "even").await,
        board(app, v1::Window::Weekly, "category:x").await,
    ]
}

/// Asserts the live rankings equal what a recompute publishes now, and returns them.
async fn live_equals_recompute(app: &mut TestApp) -> Vec<(u64, u64, Vec<(i64, f64)>)> {
    settled(app).await;
    let live = boards(app).await;
    app.recompute("").await;
    let recomputed = boards(app).await;
    for (i, (l, r)) in live.iter().zip(&recomputed).enumerate() {
        // (A segment without members has no version on either side.)
        assert!(r.0 > l.0 || r.2.is_empty(), "ranking {i}: the recompute published a newer version");
        assert_eq!((l.1, &l.2), (r.1, &r.2), "ranking {i}: live entries and totals equal the recompute's");
    }
    live
}

/// `n` events of random types over products 1..=`products`, on `days_ago` (0: the last ten
/// minutes of today).
fn workload(rng: &mut Draw, tag: &str, n: usize, products: u64, days_ago: u64) -> Vec<v1::Event> {
    let now = Utc::now() - Age::seconds(30);
    (0..n)
        .map(|i| {
            let product = 1 + rng.next(products) as i64;
            let at = if days_ago == 0 { now } else { noon(days_ago) } - Age::seconds(rng.next(600) as i64);
            let (kind, amount) = match rng.next(10) {
                0..=4 => (v1::EventType::View, 0),
                5 | 6 => (v1::EventType::Like, 0),
                7 => (v1::EventType::Unlike, 0),
                _ => (v1::EventType::Order, 1 + rng.next(50_000) as i64),
            };
            event(&format!("{tag}-{i}"), product, kind, amount, at)
        })
        .collect()
}

async fn catalog(app: &mut TestApp, products: u64, hidden: &[i64]) {
    let products = (1..=products as i64)
        .map(|p| {
            let mut segments = vec![if p % 2 == 0 { "even" } else { "odd" }.to_string()];
            if p % 3 == 0 {
                segments.push("category:x".into());
            }
            v1::CatalogEntry { product_id: p, segments, hidden: hidden.contains(&p), title: String::new() }
        })
        .collect();
    app.client.update_catalog(v1::UpdateCatalogRequest { products }).await.expect("UpdateCatalog");
}

#[tokio::test]
async fn live_versions_are_what_a_recompute_of_the_same_rows_publishes() {
    let seed = rand_u64();
    eprintln!("workload seed {seed}");
    let mut rng = Draw::seeded(seed);
    let mut app = TestApp::spawn(&[LIVE]).await;
    catalog(&mut app, 200, &[7]).await;
    for days_ago in [3, 2, 1, 0] {
        app.record(workload(&mut rng, &format!("d{days_ago}"), 600, 200, days_ago)).await;
    }
    let first = live_equals_recompute(&mut app).await;
    assert!(first[0].1 > 100, "a population worth ranking: {}", first[0].1);
    assert!(first[0].2.iter().all(|(id, _)| *id != 7), "hidden products are never ranked");

    // Redis flushed (on the engines that have it): the next passes publish into the empty
    // store, reads of a lost ranking rebuild it, and nothing the live day holds is lost.
    if app.flush_redis().await {
        app.record(workload(&mut rng, "after-flush", 100, 200, 0)).await;
        live_equals_recompute(&mut app).await;
    }

    // More of today, UNLIKEs among them, and late events of yesterday (carry-over and week).
    let (before, _, _) = board(&mut app, v1::Window::Daily, "").await;
    app.record(workload(&mut rng, "more", 800, 250, 0)).await;
    app.record(workload(&mut rng, "late", 200, 250, 1)).await;
    settled(&app).await;
    let (moved, _, _) = board(&mut app, v1::Window::Daily, "").await;
    assert!(moved > before, "the daily ranking moved without a recompute");
    live_equals_recompute(&mut app).await;

    let metrics = app.scrape_metrics().await;
    assert!(sample(&metrics, "ranking_live_rows_read_total") > 0.0, "{metrics}");
    assert!(sample(&metrics, "ranking_freshness_seconds_count") > 0.0, "{metrics}");
    assert!(sample(&metrics, "ranking_live_pass_seconds_count") > 0.0, "{metrics}");
    app.stop().await;
}

#[tokio::test]
async fn a_transaction_committed_late_with_an_earlier_timestamp_is_in_the_next_live_version() {
    let mut app = TestApp::spawn(&[LIVE]).await;
    let url = app.db.as_ref().expect("database").url.clone();
    let now = Utc::now() - Age::seconds(30);
    app.record(views("early", 900, 1, now)).await;
    app.record(views("other", 901, 3, now)).await;
    settled(&app).await;

    // Another connection holds product 900's row (on SQLite, the write lock): the service's
    // transaction for an event older than the others (the same day), started now, cannot commit until it lets go,
    // while live passes try to advance the epoch meanwhile.
    let db = Database::connect(&url).await.expect("connect");
    let holder = db.begin().await.expect("begin");
    holder
        .execute_unprepared("UPDATE product_daily_metrics SET views = views WHERE product_id = 900")
        .await
        .expect("lock the row");
    let mut client = app.client.clone();
    let late = tokio::spawn(async move {
        let events = vec![event("late", 900, v1::EventType::View, 0, now - Age::seconds(20))];
        client.record_events(v1::RecordEventsRequest { events }).await.expect("RecordEvents").into_inner()
    });
    eventually("the late transaction waiting for the row", || waiting_for_a_lock(&app, &db)).await;
    holder.rollback().await.expect("let go");
    assert_eq!(late.await.expect("task").accepted, 1);

    let live = live_equals_recompute(&mut app).await;
    let ranked: Vec<i64> = live[0].2.iter().map(|(id, _)| *id).collect();
    assert_eq!(ranked, vec![901, 900]);
    let explain = v1::ExplainRankRequest { product_id: 900, ..Default::default() };
    let explained = app.client.explain_rank(explain).await.expect("ExplainRank").into_inner();
    assert_eq!(explained.views, 2, "both views of 900 count");
    app.stop().await;
}

#[tokio::test]
async fn a_product_hidden_between_passes_never_returns_from_a_live_pass() {
    let mut app = TestApp::spawn(&[LIVE]).await;
    let now = Utc::now() - Age::seconds(30);
    let events = (1..=20).flat_map(|p| views(&format!("p{p}"), p, p as usize, now)).collect();
    app.record(events).await;
    catalog(&mut app, 20, &[]).await;
    settled(&app).await;
    assert!(board(&mut app, v1::Window::Daily, "").await.2.iter().any(|(id, _)| *id == 20));

    catalog(&mut app, 20, &[20]).await;
    app.record(views("again", 20, 50, now)).await;
    app.record(views("others", 3, 5, now)).await;
    for _ in 0..3 {
        settled(&app).await;
        for (i, (_, _, entries)) in boards(&mut app).await.iter().enumerate() {
            assert!(entries.iter().all(|(id, _)| *id != 20), "ranking {i} holds the hidden product");
        }
    }
    live_equals_recompute(&mut app).await;
    app.stop().await;
}

#[tokio::test]
async fn the_other_replica_takes_over_live_passes_when_the_holder_is_killed() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let envs = [
        ("DATABASE_URL", db.url.clone()),
        ("REDIS_URL", redis_url()),
        ("RANKING_REDIS_MODE", test_redis_mode().to_string()),
        ("RANKING_REDIS_PREFIX", prefix.clone()),
        ("RANKING_RECOMPUTE_INTERVAL", "0".to_string()),
        ("RANKING_RECOMPUTE_LEASE", "2s".to_string()),
        ("RANKING_LIVE_INTERVAL", "50ms".to_string()),
    ];
    let holder = ServerProcess::start(&envs).await;
    let mut first = ranking_client::connect(format!("http://{}", holder.addr)).await.expect("client");
    let now = Utc::now() - Age::seconds(30);
    first.record_events(v1::RecordEventsRequest { events: views("a", 1, 2, now) }).await.expect("record");
    let daily = || v1::GetTopNRequest { limit: 10, ..Default::default() };
    let mut probe = first.clone();
    eventually("the first replica's live pass", || {
        let mut probe = probe.clone();
        async move { probe.get_top_n(daily()).await.is_ok_and(|t| t.into_inner().products.len() == 1) }
    })
    .await;
    probe.get_top_n(daily()).await.expect("read");

    let mut other = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[LIVE, "--recompute-lease=2s"])).await;
    // Turns at the live lease, every one refused while the first replica renews it: observed
    // as turns counted `held_elsewhere`, none of which ran a pass.
    eventually("the other replica's turns refused", || async {
        passes_of(&other.scrape_metrics().await, &["held_elsewhere"]) >= 3.0
    })
    .await;
    assert_eq!(passes_of(&other.scrape_metrics().await, &["loaded", "published"]), 0.0, "one holder at a time");

    holder.kill();
    holder.wait().await;
    other.record(views("b", 2, 5, now)).await;
    eventually("the other replica's live pass", || {
        let mut client = other.client.clone();
        async move { client.get_top_n(daily()).await.is_ok_and(|t| t.into_inner().products.len() == 2) }
    })
    .await;
    // Counted once the pass has given the day's lease back, just after the version is served.
    eventually("the other replica's pass counted", || async {
        passes_of(&other.scrape_metrics().await, &["loaded"]) >= 1.0
    })
    .await;
    live_equals_recompute(&mut other).await;
    other.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn without_live_passes_nothing_moves_between_recomputes() {
    let mut app = TestApp::spawn(&["--live-interval=0"]).await;
    let (version, total, _) = board(&mut app, v1::Window::Daily, "").await;
    let at = Utc::now() - Age::seconds(30);
    app.record(views("v", 1, 3, at)).await;
    // The events are stored (the hourly ranking of their hour has them), and a live pass
    // would have had several turns meanwhile.
    let hour = v1::GetTopNRequest {
        window: v1::Window::Hourly.into(),
        date: at.date_naive().to_string(),
        hour: Some(chrono::Timelike::hour(&at)),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(app.client.get_top_n(hour).await.expect("hourly").into_inner().products.len(), 1);
    // No live pass task runs at all (the unit test `without_an_interval_no_live_pass_runs`
    // shows it ends at once): the board is the start-up version until the recompute.
    assert_eq!(board(&mut app, v1::Window::Daily, "").await, (version, total, Vec::new()));
    assert_eq!(passes_of(&app.scrape_metrics().await, &["loaded", "published", "unchanged"]), 0.0);
    app.recompute("").await;
    assert_eq!(board(&mut app, v1::Window::Daily, "").await.2.len(), 1);
    app.stop().await;
}

/// Whether the late transaction is held up: on PostgreSQL, a session of `db`'s database
/// waiting for a lock (its own view of waiting sessions); elsewhere, the call under way while
/// the row (SQLite: the write lock) is held, since MariaDB's lock-wait view did not show that
/// wait reliably and SQLite has none.
async fn waiting_for_a_lock(app: &TestApp, db: &sea_orm::DatabaseConnection) -> bool {
    use sea_orm::{ConnectionTrait, DbBackend, Statement};
    if db.get_database_backend() != DbBackend::Postgres {
        return sample(&app.scrape_metrics().await, "ranking_calls_in_flight") >= 1.0;
    }
    let sql = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    let row = db.query_one_raw(Statement::from_string(DbBackend::Postgres, sql)).await;
    row.ok().flatten().and_then(|r| r.try_get_by_index::<i64>(0).ok()).is_some_and(|n| n > 0)
}

/// The day's sorted set as `(product, score)`, best first.
async fn sorted_set(prefix: &str) -> Vec<(i64, f64)> {
    let mut conn = crate::redis_store::redis().await;
    let key = format!("{prefix}:{{daily:{}}}", Utc::now().date_naive());
    let members: Vec<(String, f64)> =
        redis::AsyncCommands::zrevrange_withscores(&mut conn, &key, 0, -1).await.expect("ZREVRANGE");
    members.into_iter().map(|(m, s)| (m.parse().expect("a product id"), s)).collect()
}

/// A live pass publishes the daily ranking in the form replicas load only: a
/// replica that holds no copy reads the live version from Redis like any other, entry for
/// entry what the holder serves from its copy, while the day's sorted set keeps the last
/// recompute's ranking until the next recompute replaces it.
#[tokio::test]
#[ignore = "needs Redis (the in-process store has one form): make test's Redis passes"]
async fn live_versions_are_read_from_redis_and_the_sorted_set_follows_the_recompute() {
    crate::helpers::test_redis().expect("Redis (RANKING_TEST_REDIS)");
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let direct_settings = ["--snapshot-max-entries=0", "--live-interval=0"];
    let mut direct = TestApp::spawn_on(redis_settings(&db.url, &prefix, &direct_settings)).await;
    // Both start-up recomputes over before the workload: the recomputes below are the only
    // full publications of its rows.
    eventually("the start-up recompute", || async {
        let top = v1::GetTopNRequest { window: v1::Window::Daily.into(), limit: 1, ..Default::default() };
        direct.client.clone().get_top_n(top).await.is_ok_and(|r| r.into_inner().version > 0)
    })
    .await;
    let mut holder = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[LIVE])).await;
    settled(&holder).await;
    let seed = rand_u64();
    eprintln!("workload seed {seed}");
    let mut rng = Draw::seeded(seed);
    holder.record(workload(&mut rng, "a", 300, 100, 0)).await;
    holder.recompute("").await;
    let recomputed = board(&mut holder, v1::Window::Daily, "").await;
    assert_eq!(sorted_set(&prefix).await, recomputed.2, "a recompute writes the sorted set");

    holder.record(workload(&mut rng, "b", 300, 100, 0)).await;
    settled(&holder).await;
    let live = board(&mut holder, v1::Window::Daily, "").await;
    assert!(live.0 > recomputed.0 && live.2 != recomputed.2, "a live version moved the ranking");
    assert_eq!(board(&mut direct, v1::Window::Daily, "").await, live, "read from Redis, as served from the copy");
    let ids: Vec<i64> = (1..=101).collect();
    let ranks = |app: &TestApp| {
        let mut client = app.client.clone();
        let request = v1::GetRanksRequest { product_ids: ids.clone(), ..Default::default() };
        async move { format!("{:?}", client.get_ranks(request).await.expect("GetRanks").into_inner()) }
    };
    assert_eq!(ranks(&direct).await, ranks(&holder).await, "GetRanks from Redis and from the copy");
    assert_eq!(sorted_set(&prefix).await, recomputed.2, "live passes leave the sorted set to the recompute");

    holder.recompute("").await;
    let again = board(&mut holder, v1::Window::Daily, "").await;
    assert_eq!((again.1, &again.2), (live.1, &live.2), "no event since: the recompute ranks as the live pass did");
    assert_eq!(sorted_set(&prefix).await, live.2, "the recompute replaced the sorted set");
    holder.stop().await;
    direct.stop().await;
    db.drop_db().await;
}
