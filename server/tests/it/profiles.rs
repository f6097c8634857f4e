//! Scoring-profile parts of the wire (SPEC §10.3) under the built-in profile: SIGNAL events
//! name a custom signal, of which the built-in profile has none (refused, nothing written);
//! entries carry their axis norms in profile order; explained axes carry their names.

use chrono::Utc;
use ranking_client::tonic::Code;
use ranking_client::v1::{self, EventType};

use crate::helpers::{TestApp, TestDb, count_events, event, settings, views};

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
