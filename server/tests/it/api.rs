//! End-to-end behaviour of the API through the client crate, on the embedded ranking store.

use crate::helpers::{TestApp, event, views};
use chrono::{Days, Duration, NaiveTime, Utc};
use ranking_client::tonic::Code;
use ranking_client::v1::{self, EventType};

const ACCEPTED: i32 = v1::RecordOutcome::Accepted as i32;
const DUPLICATE: i32 = v1::RecordOutcome::Duplicate as i32;

fn days_ago_noon(n: u64) -> chrono::DateTime<Utc> {
    let day = Utc::now().date_naive().checked_sub_days(Days::new(n)).expect("valid");
    day.and_time(NaiveTime::from_hms_opt(12, 0, 0).expect("valid")).and_utc()
}

#[tokio::test]
async fn recorded_events_are_ranked_with_the_spec_score() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    let mut events = views("v", 101, 30, now);
    events.push(event("o1", 101, EventType::Order, 10_000, now));
    events.push(event("l1", 202, EventType::Like, 0, now));
    events.push(event("o2", 202, EventType::Order, 1_000, now));
    let r = app.record(events).await;
    assert_eq!((r.accepted, r.duplicates), (33, 0));

    let done = app.recompute("").await;
    assert_eq!(done.products, 2);
    assert_eq!(done.date, now.date_naive().to_string());

    let top = app.top("", 0).await;
    assert_eq!(top.total, 2);
    let ids: Vec<_> = top.products.iter().map(|p| (p.rank, p.product_id)).collect();
    assert_eq!(ids, vec![(1, 101), (2, 202)]);
    // 30·0.1 + 0.6·ln_1p(10,000) = 8.526… → main floor 8; 0.2 + 0.6·ln_1p(1,000) = 4.345… → 4.
    let first = top.products[0].breakdown.clone().expect("daily entries carry a breakdown");
    assert_eq!(first.main_floor, 8);
    assert_eq!(top.products[1].breakdown.clone().expect("breakdown").main_floor, 4);
    assert!(first.view_norm > 500, "more views than the mean");

    let rank = app
        .client
        .get_rank(v1::GetRankRequest { product_id: 202, ..Default::default() })
        .await
        .expect("ranked")
        .into_inner();
    assert_eq!((rank.product.expect("entry").rank, rank.total), (2, 2));
    app.stop().await;
}

#[tokio::test]
async fn the_same_id_counts_once_across_calls_and_within_a_batch() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    let single = app
        .client
        .record_event(v1::RecordEventRequest { event: Some(event("same", 7, EventType::View, 0, now)) })
        .await
        .expect("ok")
        .into_inner();
    assert_eq!(single.outcome, ACCEPTED);
    let again = app
        .client
        .record_event(v1::RecordEventRequest { event: Some(event("same", 7, EventType::View, 0, now)) })
        .await
        .expect("ok")
        .into_inner();
    assert_eq!(again.outcome, DUPLICATE);

    // Same id twice in one batch, and an id already stored: first occurrence wins.
    let r = app
        .record(vec![
            event("b1", 7, EventType::View, 0, now),
            event("b1", 7, EventType::View, 0, now),
            event("same", 7, EventType::Like, 0, now),
            event("b2", 7, EventType::View, 0, now),
        ])
        .await;
    assert_eq!(r.outcomes, vec![ACCEPTED, DUPLICATE, DUPLICATE, ACCEPTED]);
    assert_eq!((r.accepted, r.duplicates), (2, 2));

    app.recompute("").await;
    let top = app.top("", 10).await;
    // 3 views counted, the LIKE under a reused id ignored: 0.3 → floor 0.
    assert_eq!(top.products[0].breakdown.clone().expect("breakdown").main_floor, 0);
    let sql = app_views(&app).await;
    assert_eq!(sql, (3, 0));
    app.stop().await;
}

/// (views, likes) of product 7 today, read from SQL.
async fn app_views(app: &TestApp) -> (i64, i64) {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let db = Database::connect(&app.db.as_ref().expect("db").url).await.expect("connect");
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT views, likes FROM product_metrics WHERE product_id = 7",
        ))
        .await
        .expect("query")
        .expect("row");
    (row.try_get_by_index(0).expect("views"), row.try_get_by_index(1).expect("likes"))
}

#[tokio::test]
async fn a_malformed_event_rejects_the_whole_batch_naming_index_and_field() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    let mut events = views("ok", 7, 3, now);
    events.push(event("bad", 7, EventType::View, 5, now));
    let err = app.client.record_events(v1::RecordEventsRequest { events }).await.expect_err("rejected");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "events[3].amount: must be 0 for VIEW");

    let cases: Vec<(v1::Event, &str)> = vec![
        (event("", 7, EventType::View, 0, now), "event.event_id"),
        (event(&"x".repeat(129), 7, EventType::View, 0, now), "event.event_id"),
        (event("id", 0, EventType::View, 0, now), "event.product_id"),
        (event("id", 7, EventType::Unspecified, 0, now), "event.type"),
        (event("id", 7, EventType::Order, -1, now), "event.amount"),
        (event("id", 7, EventType::Order, 1_000_000_000_001, now), "event.amount"),
        (event("id", 7, EventType::Like, 1, now), "event.amount"),
        (event("id", 7, EventType::View, 0, now + Duration::minutes(6)), "event.occurred_at"),
        (event("id", 7, EventType::View, 0, now - Duration::days(8)), "event.occurred_at"),
        (v1::Event { occurred_at: None, ..event("id", 7, EventType::View, 0, now) }, "event.occurred_at"),
    ];
    for (e, field) in cases {
        let err = app.client.record_event(v1::RecordEventRequest { event: Some(e) }).await.expect_err(field);
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().starts_with(&format!("{field}: ")), "{} should name {field}", err.message());
    }
    let err = app.client.record_event(v1::RecordEventRequest { event: None }).await.expect_err("missing");
    assert!(err.message().starts_with("event: "));

    // Nothing of the rejected requests was written.
    app.recompute("").await;
    assert_eq!(app.top("", 10).await.total, 0);
    app.stop().await;
}

#[tokio::test]
async fn read_and_recompute_requests_are_validated() {
    let mut app = TestApp::spawn(&[]).await;
    let c = &mut app.client;
    let bad_top = [
        (v1::GetTopNRequest { limit: 1_001, ..Default::default() }, "limit"),
        (v1::GetTopNRequest { date: "2026-13-01".into(), ..Default::default() }, "date"),
        (v1::GetTopNRequest { window: 7, ..Default::default() }, "window"),
        (v1::GetTopNRequest { hour: Some(24), window: 2, ..Default::default() }, "hour"),
    ];
    for (req, field) in bad_top {
        let err = c.get_top_n(req).await.expect_err(field);
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().starts_with(&format!("{field}: ")), "{}", err.message());
    }
    let err = c.get_rank(v1::GetRankRequest { product_id: 0, ..Default::default() }).await.expect_err("id");
    assert!(err.message().starts_with("product_id: "));
    let err = c.get_rank(v1::GetRankRequest { product_id: 5, ..Default::default() }).await.expect_err("unranked");
    assert_eq!(err.code(), Code::NotFound);

    let tomorrow = (Utc::now().date_naive() + Days::new(1)).to_string();
    let too_old = (Utc::now().date_naive() - Days::new(9)).to_string();
    for date in [tomorrow, too_old, "not-a-date".to_string()] {
        let err = c.recompute(v1::RecomputeRequest { date: date.clone() }).await.expect_err(&date);
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().starts_with("date: "), "{}", err.message());
    }
    app.stop().await;
}

#[tokio::test]
async fn unlike_never_takes_likes_below_zero() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    app.record(vec![
        event("u1", 7, EventType::Unlike, 0, now),
        event("u2", 7, EventType::Unlike, 0, now),
        event("l1", 7, EventType::Like, 0, now),
    ])
    .await;
    assert_eq!(app_views(&app).await, (0, 1), "unlike, unlike, like from zero is one like");
    app.record(vec![event("u3", 7, EventType::Unlike, 0, now), event("u4", 7, EventType::Unlike, 0, now)]).await;
    assert_eq!(app_views(&app).await, (0, 0));
    app.stop().await;
}

#[tokio::test]
async fn carry_over_10_then_1_then_0_1_then_gone() {
    let mut app = TestApp::spawn(&[]).await;
    // 100 views three days ago: main 10.
    app.record(views("d3", 55, 100, days_ago_noon(3))).await;
    let day = |n: u64| (Utc::now().date_naive() - Days::new(n)).to_string();
    let floor_on = |top: &v1::GetTopNResponse| {
        top.products.iter().find(|p| p.product_id == 55).map(|p| (p.score, p.breakdown.clone().expect("b").main_floor))
    };

    for n in [3, 2, 1, 0] {
        app.recompute(&day(n)).await;
    }
    let d3 = app.top(&day(3), 10).await;
    assert_eq!(floor_on(&d3).map(|f| f.1), Some(10));
    let d2 = app.top(&day(2), 10).await;
    assert_eq!(floor_on(&d2).map(|f| f.1), Some(1), "ranked through carry-over alone");
    let d1 = app.top(&day(1), 10).await;
    assert_eq!(floor_on(&d1).map(|f| f.1), Some(0), "floor(1.0) = 1 carries 0.1");
    assert_eq!(d1.total, 1);
    let d0 = app.top(&day(0), 10).await;
    assert_eq!(d0.total, 0, "floor(0.1) = 0 carries nothing");

    // Carry-over adds to a day's own points.
    app.record(views("d2", 56, 25, days_ago_noon(2))).await;
    app.record(views("d2b", 55, 25, days_ago_noon(2))).await;
    app.recompute(&day(2)).await;
    let d2 = app.top(&day(2), 10).await;
    let ids: Vec<_> = d2.products.iter().map(|p| (p.product_id, p.breakdown.clone().expect("b").main_floor)).collect();
    assert_eq!(ids, vec![(55, 3), (56, 2)], "2.5 + 1.0 carried vs 2.5");
    app.stop().await;
}

#[tokio::test]
async fn equal_scores_are_ordered_by_descending_product_id() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    let mut events = Vec::new();
    for id in [999_i64, 1000, 5, 42] {
        events.push(event(&format!("e{id}"), id, EventType::View, 0, now));
    }
    app.record(events).await;
    app.recompute("").await;
    let top = app.top("", 10).await;
    let scores: Vec<f64> = top.products.iter().map(|p| p.score).collect();
    assert!(scores.windows(2).all(|w| w[0] == w[1]), "identical activity, identical scores: {scores:?}");
    let ids: Vec<i64> = top.products.iter().map(|p| p.product_id).collect();
    assert_eq!(ids, vec![1000, 999, 42, 5]);
    // Paging follows the same order.
    let page = app
        .client
        .get_top_n(v1::GetTopNRequest { offset: 1, limit: 2, ..Default::default() })
        .await
        .expect("page")
        .into_inner();
    assert_eq!(page.products.iter().map(|p| (p.rank, p.product_id)).collect::<Vec<_>>(), vec![(2, 999), (3, 42)]);
    app.stop().await;
}

#[tokio::test]
async fn hourly_ranking_counts_fresh_events_only() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    app.record(vec![
        event("h1", 1, EventType::View, 0, now),
        event("h2", 1, EventType::Like, 0, now),
        event("h3", 2, EventType::Order, 1_000, now),
    ])
    .await;
    app.record(vec![event("h3", 2, EventType::Order, 1_000, now)]).await; // duplicate
    let top = app
        .client
        .get_top_n(v1::GetTopNRequest { window: v1::Window::Hourly.into(), ..Default::default() })
        .await
        .expect("hourly")
        .into_inner();
    let got: Vec<_> = top.products.iter().map(|p| (p.product_id, p.score, p.breakdown.is_none())).collect();
    let order = 0.6 * 1_000f64.ln_1p();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], (2, order, true));
    assert_eq!(got[1].0, 1);
    assert!((got[1].1 - 0.3).abs() < 1e-12);
    app.stop().await;
}

#[tokio::test]
async fn health_and_reflection_are_served() {
    let app = TestApp::spawn(&[]).await;
    let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{}", app.addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let status = health
        .check(tonic_health::pb::HealthCheckRequest { service: "ranking.v1.RankingService".into() })
        .await
        .expect("health")
        .into_inner();
    assert_eq!(status.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);

    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::{ServerReflectionRequest, server_reflection_request::MessageRequest};
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut reflection = ServerReflectionClient::new(channel);
    let answer = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection")
        .into_inner()
        .message()
        .await
        .expect("answer")
        .expect("one answer");
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else { panic!("{answer:?}") };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"ranking.v1.RankingService".to_string()), "{names:?}");
    assert!(names.contains(&"grpc.health.v1.Health".to_string()), "{names:?}");
    app.stop().await;
}

async fn channel_for_reflection(addr: std::net::SocketAddr) -> ranking_client::tonic::transport::Channel {
    ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect")
}

#[tokio::test]
async fn shutdown_finishes_in_flight_calls_and_exits_cleanly() {
    let mut app = TestApp::spawn(&[]).await;
    let mut client = app.client.clone();
    let now = Utc::now();
    let in_flight = tokio::spawn(async move {
        client.record_events(v1::RecordEventsRequest { events: views("s", 3, 10_000, now) }).await
    });
    // Stop once the call is admitted (or, on a machine fast enough, already answered).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while !in_flight.is_finished() {
        let metrics = app.scrape_metrics().await;
        if crate::helpers::metric_value(&metrics, "ranking_calls_in_flight") >= 1.0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the call never reached the server");
        tokio::task::yield_now().await;
    }
    let db = app.db.take();
    app.stop().await; // panics unless the server exits with Ok
    let r = in_flight.await.expect("task").expect("in-flight call completed");
    assert_eq!(r.into_inner().accepted, 10_000);
    if let Some(db) = db {
        db.drop_db().await;
    }
}

#[tokio::test]
async fn the_day_boundary_follows_ranking_tz() {
    let mut app = TestApp::spawn(&["--tz=Asia/Seoul"]).await;
    let tz = chrono_tz::Asia::Seoul;
    let today = Utc::now().with_timezone(&tz).date_naive();
    let yesterday = today - Days::new(1);
    let midnight =
        today.and_time(NaiveTime::MIN).and_local_timezone(tz).single().expect("unambiguous").with_timezone(&Utc);
    let last_second = midnight - Duration::seconds(1);
    app.record(vec![
        event("late", 1, EventType::View, 0, last_second),
        event("early", 2, EventType::View, 0, midnight),
    ])
    .await;
    app.recompute(&yesterday.to_string()).await;
    app.recompute(&today.to_string()).await;
    let y = app.top(&yesterday.to_string(), 10).await;
    let t = app.top(&today.to_string(), 10).await;
    assert_eq!(y.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), vec![1], "23:59:59 local is yesterday");
    assert_eq!(t.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), vec![2], "00:00:00 local is today");
    assert_eq!(t.date, today.to_string(), "an empty date means today in RANKING_TZ");
    app.stop().await;
}

#[tokio::test]
async fn event_ids_are_compared_byte_for_byte() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    let ids = ["Case", "case", "pad", "pad ", "quote\"d", "back\\slash", "~!@#$%^&*()_+{}|:<>?`-=[];',./"];
    let events: Vec<_> = ids.iter().map(|id| event(id, 3, EventType::View, 0, now)).collect();
    let r = app.record(events.clone()).await;
    assert_eq!(r.accepted as usize, ids.len(), "ids differing in case or trailing space are distinct");
    let again = app.record(events).await;
    assert_eq!(again.duplicates as usize, ids.len(), "and each is recognised on redelivery");
    app.stop().await;
}
