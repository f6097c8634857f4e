//! Scoring-profile parts of the wire under the built-in profile: SIGNAL events
//! name a custom signal, of which the built-in profile has none (refused, nothing written);
//! entries carry their axis norms in profile order; explained axes carry their names.

use chrono::Utc;
use ranking_client::tonic::Code;
use ranking_client::v1::{self, EventType};

use crate::helpers::{ProfileFile, TestApp, TestDb, count_events, event, settings, views};
use crate::profile_reference::{CART_PROFILE, Happened, WISHLIST_PROFILE, reference, same, wire, workload};

#[tokio::test]
async fn signal_events_of_an_unknown_signal_are_refused_and_nothing_is_written() {
    let db = TestDb::create().await;
    let mut app = TestApp::spawn_on(settings(&db.url, &[])).await;
    let now = Utc::now();
    let signal = v1::Event { signal: "cart_adds".into(), ..event("s-1", 7, EventType::Signal, 0, now) };
    let batch = vec![event("v-1", 7, EventType::View, 0, now), signal.clone()];
    let refused = app.client.record_events(v1::RecordEventsRequest { events: batch }).await.expect_err("refused");
    assert_eq!((refused.code(), refused.message()), (Code::InvalidArgument, "events[1].signal: unknown \"cart_adds\""));
    let no_name = v1::Event { signal: String::new(), ..signal.clone() };
    let refused = app.client.record_event(v1::RecordEventRequest { event: Some(no_name) }).await.expect_err("refused");
    assert_eq!(refused.message(), "event.signal: is required for SIGNAL");
    let named_view = v1::Event { signal: "cart_adds".into(), ..event("v-2", 7, EventType::View, 0, now) };
    let refused =
        app.client.record_event(v1::RecordEventRequest { event: Some(named_view) }).await.expect_err("refused");
    assert_eq!(refused.message(), "event.signal: must be empty for VIEW");
    assert_eq!(count_events(&db.url).await, 0, "nothing of a refused request is written");
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn entries_carry_their_axis_norms_in_profile_order_and_axes_their_names() {
    let mut app = TestApp::spawn(&[]).await;
    let at = Utc::now() - chrono::Duration::seconds(5);
    app.record(views("a", 1, 3, at)).await;
    app.record(views("b", 2, 9, at)).await;
    app.recompute("").await;
    let top = app.top("", 10).await;
    for p in &top.products {
        let b = p.breakdown.clone().expect("breakdown");
        assert_eq!(b.axis_norms, vec![b.view_norm, b.like_norm, b.recency_norm], "{p:?}");
    }
    let explained = app
        .client
        .explain_rank(v1::ExplainRankRequest { product_id: 2, ..Default::default() })
        .await
        .expect("explained")
        .into_inner();
    let names =
        [&explained.views_axis, &explained.likes_axis, &explained.recency_axis].map(|a| a.clone().expect("axis").axis);
    assert_eq!(names, ["views", "likes", "recency"].map(String::from));
    app.stop().await;
}

#[tokio::test]
async fn each_recorded_version_names_the_profile_it_was_computed_with() {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let db = TestDb::create().await;
    let mut app = TestApp::spawn_on(settings(&db.url, &[])).await;
    app.record(views("a", 1, 3, Utc::now() - chrono::Duration::seconds(5))).await;
    app.recompute("").await;
    let version = app.top("", 10).await.version;
    let sql = Database::connect(&db.url).await.expect("connect");
    // The start-up run recorded yesterday too: the latest record is today's.
    let select = "SELECT version, profile_fingerprint FROM ranking_runs ORDER BY version DESC";
    let row = sql
        .query_one_raw(Statement::from_string(sql.get_database_backend(), select))
        .await
        .expect("query")
        .expect("a run recorded");
    let (recorded, fingerprint): (i64, String) =
        (row.try_get_by_index(0).expect("version"), row.try_get_by_index(1).expect("fingerprint"));
    assert_eq!(recorded as u64, version, "the record of the daily version served");
    assert_eq!(fingerprint, ranking_server::domain::profile::ScoringProfile::built_in().fingerprint());
    app.stop().await;
    db.drop_db().await;
}

async fn served(app: &mut TestApp, window: v1::Window) -> Vec<(i64, f64)> {
    let request = v1::GetTopNRequest { window: window as i32, limit: 1_000, ..Default::default() };
    let top = app.client.get_top_n(request).await.expect("top").into_inner();
    top.products.iter().map(|p| (p.product_id, p.score)).collect()
}

#[tokio::test]
async fn custom_profiles_rank_exactly_as_an_independent_reference() {
    let events = workload(26);
    let cart_terms = [("views", 0.1, false), ("cart_adds", 0.5, true), ("order_amount", 0.6, true)];
    let cart_axes = [("cart_adds", 2), ("views", 3), ("recency", 4)];
    let wish_terms = [("wishlist", 1.5, false), ("dwell_ms", 0.01, true), ("likes", 0.2, false)];
    let wish_axes = [("wishlist", 4), ("orders", 2), ("likes", 1)];
    for (text, terms, carry, axes, first_signal) in [
        (CART_PROFILE, &cart_terms[..], (0.2, 3), &cart_axes[..], "cart_adds"),
        (WISHLIST_PROFILE, &wish_terms[..], (0.0, 0), &wish_axes[..], "wishlist"),
    ] {
        let file = ProfileFile::new(text);
        let db = TestDb::create().await;
        let mut app = TestApp::spawn_on(settings(&db.url, &[&file.flag()])).await;
        // Each profile takes its own signals; the other's are unknown to it.
        let declared = |s: &str| s.is_empty() || text.contains(&format!("[signals.{s}]"));
        for chunk in wire(&events, &declared).chunks(500) {
            app.record(chunk.to_vec()).await;
        }
        let yesterday = (Utc::now().date_naive() - chrono::Duration::days(1)).to_string();
        app.recompute(&yesterday).await;
        app.recompute("").await;
        let kept: Vec<Happened> = events.iter().filter(|h| declared(h.signal)).cloned().collect();
        let daily = reference(&kept, terms, carry, axes, false);
        // Today's 30 products, and yesterday's 10 that carry over when the profile carries.
        let carried = if carry.1 > 0 { 1 } else { 0 };
        assert!(daily.len() >= 30 + carried, "the workload ranks every product: {}", daily.len());
        same(&served(&mut app, v1::Window::Daily).await, &daily, text);
        same(&served(&mut app, v1::Window::Weekly).await, &reference(&kept, terms, carry, axes, true), "weekly");

        // Entries carry one norm per axis of the profile, and none of the three named norms.
        let top = app.top("", 3).await;
        let b = top.products[0].breakdown.clone().expect("breakdown");
        assert_eq!((b.axis_norms.len(), b.view_norm, b.like_norm, b.recency_norm), (3, 0, 0, 0), "{b:?}");

        // ExplainRank reproduces the served score with the profile's terms and axes.
        let leader = top.products[0].product_id;
        let explained = app
            .client
            .explain_rank(v1::ExplainRankRequest { product_id: leader, ..Default::default() })
            .await
            .expect("explained")
            .into_inner();
        assert!(!explained.stale, "nothing arrived since the recompute");
        // The terms in order, then every other signal of the profile with no points.
        let names: Vec<&str> = explained.signals.iter().map(|s| s.signal.as_str()).collect();
        assert_eq!(names[..terms.len()], terms.iter().map(|t| t.0).collect::<Vec<_>>());
        let unscored = &explained.signals[terms.len()..];
        assert_eq!(unscored.len(), 4 + 2 - terms.len(), "4 built-in and 2 custom signals: {names:?}");
        assert!(unscored.iter().all(|s| s.points == 0.0 && !terms.iter().any(|t| t.0 == s.signal)));
        let axes_named: Vec<&str> = explained.axes.iter().map(|a| a.axis.as_str()).collect();
        assert_eq!(axes_named, axes.iter().map(|a| a.0).collect::<Vec<_>>());
        assert_eq!(explained.axes[0].axis, first_signal);
        assert_eq!(explained.axes.iter().map(|a| a.norm).collect::<Vec<_>>(), b.axis_norms);
        let points = explained.signals[..terms.len()]
            .iter()
            .fold(None::<f64>, |s, t| Some(s.map_or(t.points, |s| s + t.points)));
        assert_eq!(points.unwrap_or(0.0) + explained.carry_points, explained.main_score);
        app.stop().await;
        db.drop_db().await;
    }
}

#[tokio::test]
async fn a_profile_refuses_signals_it_does_not_declare_and_checks_their_amounts() {
    let file = ProfileFile::new(CART_PROFILE);
    let db = TestDb::create().await;
    let mut app = TestApp::spawn_on(settings(&db.url, &[&file.flag()])).await;
    let now = Utc::now();
    let signal = |id: &str, name: &str, amount| v1::Event {
        signal: name.into(),
        ..event(id, 7, EventType::Signal, amount, now)
    };
    for (batch, message) in [
        (vec![signal("a", "cart_adds", 0), signal("b", "wishlist", 0)], "events[1].signal: unknown \"wishlist\""),
        (vec![signal("c", "cart_adds", 2)], "events[0].amount: must be 0 for count signal \"cart_adds\""),
        (
            vec![signal("d", "refunds", -1)],
            "events[0].amount: must be 0..=1000000000000 for signal \"refunds\", got -1",
        ),
    ] {
        let refused = app.client.record_events(v1::RecordEventsRequest { events: batch }).await.expect_err("refused");
        assert_eq!((refused.code(), refused.message()), (Code::InvalidArgument, message));
    }
    assert_eq!(count_events(&db.url).await, 0, "nothing of a refused request is written");
    let accepted = app.record(vec![signal("e", "cart_adds", 0), signal("f", "refunds", 1_000_000_000_000)]).await;
    assert_eq!(accepted.accepted, 2);
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn the_built_in_profile_written_out_ranks_exactly_as_no_profile() {
    // A three-day workload of the built-in types on one database, recomputed by a server
    // without a profile and then by one with the built-in profile as a file.
    let db = TestDb::create().await;
    let now = Utc::now();
    let mut events = Vec::new();
    for (i, h) in workload(3).iter().filter(|h| h.signal.is_empty()).enumerate() {
        // Spread over three days: the day before yesterday feeds the carry-over chain.
        let at = if i % 4 == 0 { h.at - chrono::Duration::days(1) } else { h.at };
        events.push(event(&format!("b-{i}"), h.product, h.kind, h.amount, at.min(now)));
    }
    let days: Vec<String> =
        (0..3).rev().map(|back| (now.date_naive() - chrono::Duration::days(back)).to_string()).collect();
    let mut rankings = Vec::new();
    for extra in [None, Some(ProfileFile::new(include_str!("../../../deploy/profiles/built-in.toml")))] {
        let flags: Vec<String> = extra.iter().map(ProfileFile::flag).collect();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let mut app = TestApp::spawn_on(settings(&db.url, &flags)).await;
        if rankings.is_empty() {
            for chunk in events.chunks(500) {
                app.record(chunk.to_vec()).await;
            }
        }
        let mut seen = Vec::new();
        for day in &days {
            app.recompute(day).await;
            for window in [v1::Window::Daily, v1::Window::Weekly] {
                let request =
                    v1::GetTopNRequest { window: window as i32, date: day.clone(), limit: 1_000, ..Default::default() };
                let top = app.client.get_top_n(request).await.expect("top").into_inner();
                let entries: Vec<_> =
                    top.products.iter().map(|p| (p.product_id, p.score.to_bits(), p.breakdown.clone())).collect();
                seen.push((top.total, entries));
            }
        }
        rankings.push(seen);
        app.stop().await;
    }
    assert!(rankings[0].iter().all(|(total, _)| *total > 0));
    assert_eq!(rankings[0], rankings[1], "the built-in profile as a file is no profile, bit for bit");
    db.drop_db().await;
}

#[tokio::test]
#[ignore = "needs Redis shared by replicas: make test's Redis passes"]
async fn a_replica_explains_a_version_with_the_profile_it_was_computed_with() {
    // Two replicas on one database and one Redis, mid-way through a profile change: the
    // version the second computes is explained by the first with the second's profile.
    crate::helpers::test_redis().expect("Redis (RANKING_TEST_REDIS)");
    let (cart, wishlist) = (ProfileFile::new(CART_PROFILE), ProfileFile::new(WISHLIST_PROFILE));
    let db = TestDb::create().await;
    let first_settings = settings(&db.url, &[&cart.flag()]);
    let mut second_settings = settings(&db.url, &[&wishlist.flag()]);
    second_settings.redis.redis_prefix = first_settings.redis.redis_prefix.clone();
    let mut first = TestApp::spawn_on(first_settings).await;
    let now = Utc::now();
    let wish = |id: &str| v1::Event { signal: "wishlist".into(), ..event(id, 9, EventType::Signal, 0, now) };
    // Recorded by the replica whose profile declares the signal.
    let mut second = TestApp::spawn_on(second_settings).await;
    second.record(vec![wish("x-1"), wish("x-2"), event("x-3", 8, EventType::Like, 0, now)]).await;
    second.recompute("").await;
    let version = second.top("", 10).await.version;
    ranking_server::test_support::eventually("the first replica serves the second's version", || {
        let mut client = first.client.clone();
        async move {
            let top = client.get_top_n(v1::GetTopNRequest::default()).await.expect("top").into_inner();
            top.version == version
        }
    })
    .await;
    let explained = first
        .client
        .explain_rank(v1::ExplainRankRequest { product_id: 9, ..Default::default() })
        .await
        .expect("explained")
        .into_inner();
    let axes: Vec<&str> = explained.axes.iter().map(|a| a.axis.as_str()).collect();
    assert_eq!(axes, ["wishlist", "orders", "likes"], "the version's profile, not the replica's own");
    assert_eq!(explained.signals[0].signal, "wishlist");
    assert_eq!((explained.signals[0].value, explained.stale), (2.0, false));
    first.stop().await;
    second.stop().await;
    db.drop_db().await;
}
