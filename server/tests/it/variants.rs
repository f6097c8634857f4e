//! Several scoring profiles live at once (`RANKING_PROFILES`): each variant's boards equal an
//! independent reference of its own profile from the same events, every read names the
//! profile it was served from, an experiment (`RANKING_EXPERIMENT`) keeps each shopper on one
//! variant across replicas, restarts and share changes, and a variant that would count
//! differently from the service's profile is refused at start-up.

use chrono::Utc;
use ranking_client::tonic::Code;
use ranking_client::v1;

use crate::helpers::{ProfileFile, TestApp, TestDb, settings, views};
use crate::profile_reference::{CART_PROFILE, reference, same, wire, workload};

/// The service's profile with other weights, transforms, axes and no carry-over: the same
/// signals and caps, so the same rows rank it.
const CART_HEAVY: &str = r#"
carry_over = 0.0
carry_days = 0
[signals.cart_adds]
kind = "count"
[signals.refunds]
kind = "amount"
[[main]]
signal = "cart_adds"
weight = 2.0
[[main]]
signal = "views"
weight = 0.05
transform = "log1p"
[[main]]
signal = "order_amount"
weight = 0.3
transform = "log1p"
[[axes]]
signal = "recency"
digits = 3
[[axes]]
signal = "views"
digits = 3
"#;

async fn served(app: &mut TestApp, window: v1::Window, profile: &str) -> (Vec<(i64, f64)>, String) {
    let request =
        v1::GetTopNRequest { window: window as i32, limit: 1_000, profile: profile.into(), ..Default::default() };
    let top = app.client.get_top_n(request).await.expect("top").into_inner();
    (top.products.iter().map(|p| (p.product_id, p.score)).collect(), top.profile)
}

#[tokio::test]
async fn two_profiles_over_one_workload_each_rank_as_their_own_reference() {
    let events = workload(31);
    let (own, variant) = (ProfileFile::new(CART_PROFILE), ProfileFile::new(CART_HEAVY));
    let db = TestDb::create().await;
    let profiles = format!("--profiles=heavy={}", variant.path().display());
    let mut app = TestApp::spawn_on(settings(&db.url, &[&own.flag(), &profiles])).await;
    let declared = |s: &str| s.is_empty() || s == "cart_adds" || s == "refunds";
    for chunk in wire(&events, &declared).chunks(500) {
        app.record(chunk.to_vec()).await;
    }
    let yesterday = (Utc::now().date_naive() - chrono::Duration::days(1)).to_string();
    app.recompute(&yesterday).await;
    app.recompute("").await;
    let kept: Vec<_> = events.iter().filter(|h| declared(h.signal)).cloned().collect();
    let own_terms = [("views", 0.1, false), ("cart_adds", 0.5, true), ("order_amount", 0.6, true)];
    let own_axes = [("cart_adds", 2), ("views", 3), ("recency", 4)];
    let heavy_terms = [("cart_adds", 2.0, false), ("views", 0.05, true), ("order_amount", 0.3, true)];
    let heavy_axes = [("recency", 3), ("views", 3)];
    for (profile, name, terms, carry, axes) in [
        ("", "default", &own_terms[..], (0.2, 3), &own_axes[..]),
        ("default", "default", &own_terms[..], (0.2, 3), &own_axes[..]),
        ("heavy", "heavy", &heavy_terms[..], (0.0, 0), &heavy_axes[..]),
    ] {
        for (window, weekly) in [(v1::Window::Daily, false), (v1::Window::Weekly, true)] {
            let (board, answered) = served(&mut app, window, profile).await;
            assert_eq!(answered, name, "the answer names the profile it was read from");
            same(&board, &reference(&kept, terms, carry, axes, weekly), &format!("{name} {window:?}"));
        }
    }
    let (own_board, _) = served(&mut app, v1::Window::Daily, "").await;
    let (heavy_board, _) = served(&mut app, v1::Window::Daily, "heavy").await;
    assert_ne!(own_board, heavy_board, "the workload tells the two profiles apart");

    // Each profile explains its own board with its own terms, and says so.
    let leader = heavy_board[0].0;
    let explain =
        |profile: &str| v1::ExplainRankRequest { product_id: leader, profile: profile.into(), ..Default::default() };
    let explained = app.client.explain_rank(explain("heavy")).await.expect("explained").into_inner();
    assert_eq!(explained.profile, "heavy");
    assert!(!explained.stale, "nothing arrived since the recompute");
    let names: Vec<&str> = explained.signals.iter().take(3).map(|s| s.signal.as_str()).collect();
    assert_eq!(names, ["cart_adds", "views", "order_amount"]);
    assert_eq!(explained.product.expect("product").score, heavy_board[0].1, "the served score reproduced");
    let own_explained = app.client.explain_rank(explain("")).await.expect("explained").into_inner();
    assert_eq!((own_explained.profile.as_str(), own_explained.signals[0].signal.as_str()), ("default", "views"));

    // Each version is recorded with its own profile's fingerprint.
    let fingerprint =
        |text: &str| ranking_server::domain::profile::text::parse(text).expect("a valid profile").fingerprint();
    let recorded = recorded_fingerprints(&db.url).await;
    let heavy = fingerprint(CART_HEAVY);
    let boards: Vec<_> = recorded.iter().filter(|(name, _)| !name.starts_with("trending:")).cloned().collect();
    assert_eq!(boards, vec![("heavy".to_string(), heavy.clone())]);
    assert!(recorded.contains(&("trending:heavy".to_string(), heavy)), "and its trending board's: {recorded:?}");

    let unknown = app
        .client
        .get_top_n(v1::GetTopNRequest { profile: "light".into(), ..Default::default() })
        .await
        .expect_err("no such profile");
    assert_eq!((unknown.code(), unknown.message()), (Code::NotFound, "no scoring profile \"light\""));
    app.stop().await;
    db.drop_db().await;
}

/// The profile names and fingerprints of today's records of the variants.
async fn recorded_fingerprints(url: &str) -> Vec<(String, String)> {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let sql = Database::connect(url).await.expect("connect");
    let select = format!(
        "SELECT profile, profile_fingerprint FROM profile_runs WHERE metric_date = '{}' ORDER BY profile",
        Utc::now().date_naive()
    );
    let rows =
        sql.query_all_raw(Statement::from_string(sql.get_database_backend(), select)).await.expect("profile_runs");
    rows.iter()
        .map(|r| (r.try_get_by_index(0).expect("profile"), r.try_get_by_index(1).expect("fingerprint")))
        .collect()
}

/// FNV-1a, 32 bits, written here again from its definition.
fn fnv1a32(text: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// The profiles `actors` are served by the replica `app` (GetTopN naming no profile).
async fn exposures(app: &mut TestApp, actors: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for actor in actors {
        let request = v1::GetTopNRequest { limit: 1, actor_id: actor.clone(), ..Default::default() };
        out.push(app.client.get_top_n(request).await.expect("top").into_inner().profile);
    }
    out
}

#[tokio::test]
async fn an_experiment_keeps_each_shopper_on_one_variant_and_a_share_change_moves_only_its_buckets() {
    let variant = ProfileFile::new(
        &CART_HEAVY
            .replace("[signals.cart_adds]\nkind = \"count\"\n[signals.refunds]\nkind = \"amount\"\n", "")
            .replace("signal = \"cart_adds\"\nweight = 2.0", "signal = \"likes\"\nweight = 2.0"),
    );
    let profiles = format!("--profiles=heavy={}", variant.path().display());
    let at_10 = "--experiment=rank-test:default=90,heavy=10";
    let at_20 = "--experiment=rank-test:default=80,heavy=20";
    let actors: Vec<String> = (0..400).map(|i| format!("shopper-{i}")).collect();
    let bucket = |actor: &str| fnv1a32(&format!("rank-test:{actor}")) % 10_000;
    let wanted = |heavy_from: u32| -> Vec<String> {
        actors.iter().map(|a| if bucket(a) < heavy_from { "default" } else { "heavy" }.to_string()).collect()
    };

    let mut first = TestApp::spawn(&[&profiles, at_10]).await;
    let mut second = TestApp::spawn(&[&profiles, at_10]).await;
    let at = Utc::now() - chrono::Duration::seconds(5);
    first.record(views("v", 1, 3, at)).await;
    first.recompute("").await;
    let seen = exposures(&mut first, &actors).await;
    assert_eq!(seen, wanted(9_000), "each shopper's variant is its bucket's");
    assert!(seen.iter().any(|p| p == "heavy") && seen.iter().any(|p| p == "default"), "both variants served");
    assert_eq!(exposures(&mut second, &actors).await, seen, "another replica serves each shopper the same");
    // A named profile wins over the experiment; reads without an actor are the service's.
    let named = v1::GetTopNRequest { profile: "default".into(), actor_id: actors[0].clone(), ..Default::default() };
    assert_eq!(first.client.get_top_n(named).await.expect("top").into_inner().profile, "default");
    let anonymous = v1::GetTopNRequest::default();
    assert_eq!(first.client.get_top_n(anonymous).await.expect("top").into_inner().profile, "default");
    let metrics = first.scrape_metrics().await;
    let heavy_reads = seen.iter().filter(|p| *p == "heavy").count();
    let series = format!("ranking_experiment_reads_total{{experiment=\"rank-test\",variant=\"heavy\"}} {heavy_reads}");
    assert!(metrics.contains(&series), "{series} in\n{metrics}");
    first.stop().await;
    second.stop().await;

    // After a restart with the heavy variant's share raised to 20 %, exactly the shoppers of
    // buckets 8000-8999 moved, from the service's profile to it.
    let mut restarted = TestApp::spawn(&[&profiles, at_20]).await;
    let after = exposures(&mut restarted, &actors).await;
    assert_eq!(after, wanted(8_000));
    for (i, actor) in actors.iter().enumerate() {
        let moved = seen[i] != after[i];
        assert_eq!(moved, (8_000..9_000).contains(&bucket(actor)), "{actor} (bucket {})", bucket(actor));
    }
    restarted.stop().await;
}

#[tokio::test]
async fn a_variant_that_counts_differently_or_an_unknown_variant_is_refused_at_start_up() {
    let own = ProfileFile::new(CART_PROFILE);
    let extra_signal = ProfileFile::new(
        &CART_HEAVY.replace("[signals.refunds]", "[signals.wishlist]\nkind = \"count\"\n[signals.refunds]"),
    );
    let capped = ProfileFile::new(
        &CART_HEAVY
            .replace("[signals.cart_adds]\nkind = \"count\"", "[signals.cart_adds]\nkind = \"count\"\nper_actor = 1"),
    );
    let good = ProfileFile::new(CART_HEAVY);
    let db = TestDb::create().await;
    for (flags, message) in [
        (
            vec![format!("--profiles=wish={}", extra_signal.path().display())],
            "RANKING_PROFILES: wish: signals.wishlist",
        ),
        (
            vec![format!("--profiles=capped={}", capped.path().display())],
            "RANKING_PROFILES: capped: signals.cart_adds.per_actor",
        ),
        (vec![format!("--profiles=default={}", good.path().display())], "RANKING_PROFILES: `default`"),
        (vec![format!("--profiles=Big={}", good.path().display())], "RANKING_PROFILES: `Big`"),
        (
            vec![format!("--profiles=heavy={}", good.path().display()), "--experiment=e:default=50,light=50".into()],
            "RANKING_EXPERIMENT: variant `light` is no profile",
        ),
    ] {
        let mut args = vec![own.flag()];
        args.extend(flags);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let refused = ranking_server::startup::Application::build(settings(&db.url, &args)).await;
        let error = format!("{:#}", refused.err().expect("refused at start-up"));
        assert!(error.starts_with(message), "{error}");
    }
    db.drop_db().await;
}

#[tokio::test]
async fn live_passes_and_hidden_products_move_every_profiles_board() {
    let variant = ProfileFile::new(LIKES_FIRST);
    let profiles = format!("--profiles=likes={}", variant.path().display());
    let mut app = TestApp::spawn(&[&profiles, "--live-interval=100ms"]).await;
    let at = Utc::now() - chrono::Duration::seconds(5);
    app.record(views("v", 1, 30, at)).await;
    app.recompute("").await;
    let ids = |board: &[(i64, f64)]| board.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    assert_eq!(ids(&served(&mut app, v1::Window::Daily, "likes").await.0), [1]);
    // Ten likes of product 2, after the recompute: each profile's live pass ranks them.
    let likes: Vec<v1::Event> =
        (0..10).map(|i| crate::helpers::event(&format!("l{i}"), 2, v1::EventType::Like, 0, at)).collect();
    app.record(likes).await;
    ranking_server::test_support::eventually("both boards hold product 2", async || {
        let own = ids(&served(&mut app, v1::Window::Daily, "").await.0);
        let variant = ids(&served(&mut app, v1::Window::Daily, "likes").await.0);
        own == [1, 2] && variant == [2, 1]
    })
    .await;
    // What the live pass published for each profile is what a recompute of the same rows
    // publishes, bit for bit.
    let live_own = served(&mut app, v1::Window::Daily, "").await.0;
    let live_variant = served(&mut app, v1::Window::Daily, "likes").await.0;
    app.recompute("").await;
    same(&served(&mut app, v1::Window::Daily, "").await.0, &live_own, "the service profile, live then recomputed");
    same(&served(&mut app, v1::Window::Daily, "likes").await.0, &live_variant, "the variant, live then recomputed");
    // The hourly ranking is the service profile's running count, read by every profile.
    let hourly = v1::GetTopNRequest {
        window: v1::Window::Hourly as i32,
        limit: 10,
        profile: "likes".into(),
        ..Default::default()
    };
    let hourly = app.client.get_top_n(hourly).await.expect("hourly").into_inner();
    assert_eq!((hourly.profile.as_str(), hourly.products.len()), ("default", 2), "{hourly:?}");
    // A hidden product leaves both.
    let hide = v1::CatalogEntry { product_id: 2, hidden: true, ..Default::default() };
    app.client.update_catalog(v1::UpdateCatalogRequest { products: vec![hide] }).await.expect("hidden");
    assert_eq!(ids(&served(&mut app, v1::Window::Daily, "").await.0), [1]);
    assert_eq!(ids(&served(&mut app, v1::Window::Daily, "likes").await.0), [1]);
    app.stop().await;
}

/// The built-in profile's signals, ranked by likes first (as deploy/profiles/likes-first.toml).
const LIKES_FIRST: &str = include_str!("../../../deploy/profiles/likes-first.toml");

#[tokio::test]
async fn the_bound_on_watch_streams_counts_every_profiles_streams() {
    let variant = ProfileFile::new(LIKES_FIRST);
    let profiles = format!("--profiles=likes={}", variant.path().display());
    let mut app = TestApp::spawn(&[&profiles, "--max-watchers=2"]).await;
    let watch = |profile: &str| v1::WatchTopNRequest { limit: 5, profile: profile.into(), ..Default::default() };
    let _own = app.client.watch_top_n(watch("")).await.expect("the first stream");
    let _variant = app.client.watch_top_n(watch("likes")).await.expect("the second stream");
    let refused = app.client.watch_top_n(watch("likes")).await.expect_err("a third is over the bound");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    drop((_own, _variant));
    app.stop().await;
}
