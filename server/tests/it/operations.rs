//! What on-call engineers rely on: the Prometheus endpoint, bearer tokens and load shedding.

use crate::helpers::{TestApp, event, metric_value as value, views};
use chrono::Utc;
use ranking_client::tonic::{Code, Request};
use ranking_client::v1::{self, EventType};

#[tokio::test]
async fn metrics_reflect_the_calls_made() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    let mut events = views("m", 1, 3, now);
    events.push(event("m-0", 1, EventType::View, 0, now)); // duplicate
    app.record(events).await;
    let _ = app
        .client
        .record_events(v1::RecordEventsRequest { events: vec![event("bad", 0, EventType::View, 0, now)] })
        .await;
    app.recompute("").await;
    app.top("", 5).await;
    app.top("", 5).await;

    let m = app.scrape_metrics().await;
    assert_eq!(value(&m, "ranking_events_accepted_total"), 3.0);
    assert_eq!(value(&m, "ranking_events_duplicate_total"), 1.0);
    assert_eq!(value(&m, "ranking_events_rejected_total"), 1.0);
    assert_eq!(value(&m, r#"ranking_rpc_calls_total{method="GetTopN",code="Ok"}"#), 2.0);
    assert_eq!(value(&m, r#"ranking_rpc_calls_total{method="RecordEvents",code="InvalidArgument"}"#), 1.0);
    assert!(value(&m, r#"ranking_rpc_duration_seconds_count{method="GetTopN",code="Ok"}"#) >= 2.0);
    assert_eq!(value(&m, "ranking_recompute_products"), 1.0);
    assert!(value(&m, "ranking_seconds_since_last_recompute") >= 0.0);
    app.stop().await;
}

fn with_token<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(t) = token {
        request.metadata_mut().insert("authorization", format!("Bearer {t}").parse().expect("ascii"));
    }
    request
}

#[tokio::test]
async fn tokens_guard_writes_admin_and_reads_separately() {
    let mut app = TestApp::spawn(&["--write-token=w-secret", "--admin-token=a-secret"]).await;
    let c = &mut app.client;
    let batch = || v1::RecordEventsRequest { events: views("t", 1, 1, Utc::now()) };

    for token in [None, Some("wrong"), Some("a-secret")] {
        let err = c.record_events(with_token(batch(), token)).await.expect_err("write needs the write token");
        assert_eq!(err.code(), Code::Unauthenticated, "{token:?}");
    }
    let ok = c.record_events(with_token(batch(), Some("w-secret"))).await.expect("right token").into_inner();
    assert_eq!(ok.accepted, 1);

    let recompute = || v1::RecomputeRequest::default();
    assert_eq!(
        c.recompute(with_token(recompute(), Some("w-secret"))).await.expect_err("admin").code(),
        Code::Unauthenticated
    );
    c.recompute(with_token(recompute(), Some("a-secret"))).await.expect("admin token");

    // Reads stay open while RANKING_READ_TOKEN is unset.
    c.get_top_n(v1::GetTopNRequest::default()).await.expect("open reads");
    app.stop().await;

    let mut app = TestApp::spawn(&["--read-token=r-secret", "--write-token=w-secret", "--admin-token=a-secret"]).await;
    let c = &mut app.client;
    let err = c.get_top_n(v1::GetTopNRequest::default()).await.expect_err("read token required");
    assert_eq!(err.code(), Code::Unauthenticated);
    c.get_top_n(with_token(v1::GetTopNRequest::default(), Some("r-secret"))).await.expect("read token");
    // The admin token opens the reads and the catalog too, never the event writes.
    c.get_top_n(with_token(v1::GetTopNRequest::default(), Some("a-secret"))).await.expect("admin reads");
    let entry = || v1::UpdateCatalogRequest {
        products: vec![v1::CatalogEntry {
            product_id: 7,
            segments: vec!["brand:acme".into()],
            hidden: false,
            ..Default::default()
        }],
    };
    c.update_catalog(with_token(entry(), Some("a-secret"))).await.expect("admin edits the catalog");
    c.update_catalog(with_token(entry(), Some("w-secret"))).await.expect("the write token edits the catalog");
    for token in [Some("r-secret"), None] {
        let err = c.update_catalog(with_token(entry(), token)).await.expect_err("catalog needs write or admin");
        assert_eq!(err.code(), Code::Unauthenticated, "{token:?}");
    }
    let err = c.record_events(with_token(batch(), Some("a-secret"))).await.expect_err("events need the write token");
    assert_eq!(err.code(), Code::Unauthenticated);

    // GetAccess needs no token and says what the call's own token opens, as the calls above
    // found: (read, write, catalog, admin).
    let access = |token: Option<&'static str>| {
        let mut c = app.client.clone();
        async move {
            let a = c.get_access(with_token(v1::GetAccessRequest {}, token)).await.expect("GetAccess is open");
            let a = a.into_inner();
            (a.read, a.write, a.catalog, a.admin)
        }
    };
    assert_eq!(access(None).await, (false, false, false, false));
    assert_eq!(access(Some("r-secret")).await, (true, false, false, false));
    assert_eq!(access(Some("w-secret")).await, (false, true, true, false));
    assert_eq!(access(Some("a-secret")).await, (true, false, true, true));
    assert_eq!(access(Some("wrong")).await, (false, false, false, false));
    app.stop().await;

    // A class without a token stays open to anyone.
    let mut app = TestApp::spawn(&["--admin-token=a-secret"]).await;
    let open = app.client.get_access(v1::GetAccessRequest {}).await.expect("GetAccess").into_inner();
    assert_eq!((open.read, open.write, open.catalog, open.admin), (true, true, true, false));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_beyond_the_limit_is_refused_fast_while_admitted_calls_succeed() {
    let app = TestApp::spawn(&["--max-concurrent-calls=4"]).await;
    let mut callers = Vec::new();
    for i in 0..64 {
        let mut c = app.client.clone();
        callers.push(tokio::spawn(async move {
            let events = views(&format!("f{i}"), 1 + i, 2_000, Utc::now());
            let r = c.record_events(v1::RecordEventsRequest { events }).await;
            // A shed call says when to retry (RetryInfo); the client retries only such calls.
            r.map(|r| r.into_inner().accepted).map_err(|s| (s.code(), ranking_client::retry_after(&s)))
        }));
    }
    let (mut ok, mut refused) = (0, 0);
    for c in callers {
        match c.await.expect("caller") {
            Ok(accepted) => {
                assert_eq!(accepted, 2_000);
                ok += 1;
            }
            Err((Code::ResourceExhausted, Some(_))) => refused += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    // Outcomes only: every call either committed in full or was refused with
    // RESOURCE_EXHAUSTED (none waited in a queue until a deadline); how many of each depends
    // on the machine's speed and is not asserted beyond "at least the limit got through".
    assert!(ok >= 4, "admitted calls succeed: {ok}");
    assert_eq!(ok + refused, 64);
    // The standard families count the refused calls too, under Go's code names.
    let metrics = app.scrape_metrics().await;
    let handled = |code: &str| {
        let series = format!(
            "grpc_server_handled_total{{grpc_type=\"unary\",grpc_service=\"ranking.v1.RankingService\",grpc_method=\"RecordEvents\",grpc_code=\"{code}\"}}"
        );
        value(&metrics, &series)
    };
    assert_eq!((handled("OK"), handled("ResourceExhausted")), (ok as f64, refused as f64), "{metrics}");
    app.stop().await;
}

#[tokio::test]
async fn oversized_batches_and_messages_and_slow_calls_are_bounded() {
    let mut app = TestApp::spawn(&["--max-message-bytes=200000"]).await;
    let now = Utc::now();
    // 10,001 events exceed the batch limit (and this message limit): nothing is written.
    let too_many = views("big", 1, 10_001, now);
    let err = app.client.record_events(v1::RecordEventsRequest { events: too_many }).await.expect_err("too large");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(ranking_client::retry_after(&err), None, "a refused request is not to be retried");
    app.stop().await;

    // Within the default message limit, more than 10,000 events are refused by validation.
    let mut app = TestApp::spawn(&[]).await;
    let err = app
        .client
        .record_events(v1::RecordEventsRequest { events: views("big", 1, 10_001, now) })
        .await
        .expect_err("batch limit");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("events: at most 10000"), "{}", err.message());
    app.record(views("ok", 1, 10_000, now)).await;
    app.stop().await;

    // A call that outlives RANKING_REQUEST_TIMEOUT is cut off instead of holding a slot.
    let mut app = TestApp::spawn(&["--request-timeout=1ms"]).await;
    let err = app
        .client
        .record_events(v1::RecordEventsRequest { events: views("slow", 2, 10_000, now) })
        .await
        .expect_err("times out");
    assert!(matches!(err.code(), Code::Cancelled | Code::DeadlineExceeded), "{err:?}");
    app.stop().await;
}
