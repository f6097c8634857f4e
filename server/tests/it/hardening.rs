//! What a hostile or broken peer must not be able to do, through real sockets: hold every
//! call slot with streams whose message never comes, keep idle connections open forever,
//! hold a stopping server open, or make the server copy megabytes of input into an error.
//! Each test asserts outcomes and their order; durations only appear as generous deadlines.

use bytes::Bytes;
use ranking_client::tonic::Code;
use ranking_client::v1;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::helpers::{TestApp, metric_value};

use ranking_server::test_support::{EVENTUALLY, eventually, grpc_request};

/// The grpc-status of a raw response (headers of a trailers-only answer, else trailers).
pub(crate) async fn grpc_status(response: h2::client::ResponseFuture) -> i32 {
    let response = response.await.expect("response");
    if let Some(s) = response.headers().get("grpc-status") {
        return s.to_str().expect("ascii").parse().expect("code");
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("data");
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.expect("trailers").expect("some trailers");
    trailers.get("grpc-status").expect("grpc-status").to_str().expect("ascii").parse().expect("code")
}

/// Whether a connection that sends nothing is closed by the server.
async fn closed_by_server(mut tcp: TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(EVENTUALLY, tcp.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => continue, // the server's SETTINGS and the like
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_whose_message_never_comes_hold_no_call_slot() {
    let mut app = TestApp::spawn(&["--max-concurrent-calls=8", "--body-timeout=2s"]).await;
    let tcp = TcpStream::connect(app.addr).await.expect("connect");
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");

    // 99 calls whose HEADERS arrive but whose message never does, far beyond the 8 slots.
    let mut held = Vec::new();
    for _ in 0..99 {
        let (response, body) =
            client.send_request(grpc_request(app.addr, "/ranking.v1.RankingService/GetTopN"), false).expect("send");
        held.push((response, body));
        client = client.ready().await.expect("ready");
    }
    // A complete health check behind them on the same connection: once it is answered, the
    // server has seen every stream before it.
    let (health, mut body) =
        client.send_request(grpc_request(app.addr, "/grpc.health.v1.Health/Check"), false).expect("send");
    body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true).expect("message");
    assert_eq!(grpc_status(health).await, 0, "health answers on the attacking connection too");
    assert_eq!(client.current_max_send_streams(), 100, "the server advertises SETTINGS_MAX_CONCURRENT_STREAMS");

    // Another caller is served: the held streams took no slot.
    app.client.get_top_n(v1::GetTopNRequest::default()).await.expect("GetTopN is admitted");
    app.record(crate::helpers::views("ok", 1, 3, chrono::Utc::now())).await;

    // The held streams are answered DEADLINE_EXCEEDED once the body timeout passes.
    let (first, _body) = held.swap_remove(0);
    let code = tokio::time::timeout(EVENTUALLY, grpc_status(first)).await.expect("answered");
    assert_eq!(code, Code::DeadlineExceeded as i32);
    drop(held);
    app.stop().await;
}

#[tokio::test]
async fn idle_and_silent_connections_are_closed_and_the_cap_refuses_the_rest() {
    let app = TestApp::spawn(&["--handshake-timeout=1s", "--idle-timeout=1s"]).await;
    // A TCP connection that never speaks.
    let silent = TcpStream::connect(app.addr).await.expect("connect");
    assert!(closed_by_server(silent).await, "a connection without a call is closed");
    // An HTTP/2 connection that made one call and then went quiet.
    let tcp = TcpStream::connect(app.addr).await.expect("connect");
    let (client, connection) = h2::client::handshake(tcp).await.expect("handshake");
    let connection = tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let (health, mut body) =
        client.send_request(grpc_request(app.addr, "/grpc.health.v1.Health/Check"), false).expect("send");
    body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true).expect("message");
    assert_eq!(grpc_status(health).await, 0);
    let _ = tokio::time::timeout(EVENTUALLY, connection).await.expect("the idle connection is closed").expect("task");
    let metrics = app.scrape_metrics().await;
    assert!(metric_value(&metrics, "ranking_connections_timed_out_total") >= 2.0, "{metrics}");
    app.stop().await;

    let app =
        TestApp::spawn(&["--max-connections=2", "--handshake-timeout=1h", "--body-timeout=1h", "--shutdown-grace=1s"])
            .await;
    // The test client holds one connection (with a call made); a silent one fills the cap.
    // A newcomer takes the place of the silent one, which never made a call.
    app.client.clone().get_top_n(v1::GetTopNRequest::default()).await.expect("a call");
    let silent = TcpStream::connect(app.addr).await.expect("connect");
    let newcomer = TcpStream::connect(app.addr).await.expect("connect");
    assert!(closed_by_server(silent).await, "at the cap an idle connection makes room for a new one");
    // Both open connections busy: the client's with a watch, the newcomer's with a call
    // whose message never ends. Now nothing can make room: the next one is closed at once.
    let mut client = app.client.clone();
    let _watch = client.watch_top_n(v1::WatchTopNRequest::default()).await.expect("watch");
    let (h2, connection) = h2::client::handshake(newcomer).await.expect("handshake");
    let _connection = tokio::spawn(connection);
    let mut h2 = h2.ready().await.expect("ready");
    let (_pending, mut body) =
        h2.send_request(grpc_request(app.addr, "/grpc.health.v1.Health/Check"), false).expect("send");
    body.send_data(Bytes::from_static(&[0, 0, 0]), false).expect("half a message");
    eventually("the newcomer's call is in progress", || async {
        let metrics = app.scrape_metrics().await;
        metrics.lines().any(|l| {
            l.starts_with("grpc_server_started_total{") && l.contains("grpc_method=\"Check\"") && !l.ends_with(" 0")
        })
    })
    .await;
    let refused = TcpStream::connect(app.addr).await.expect("the kernel accepts");
    assert!(closed_by_server(refused).await, "beyond the cap, with every connection busy, a connection is closed");
    let metrics = app.scrape_metrics().await;
    assert!(metric_value(&metrics, "ranking_connections_evicted_total") >= 1.0, "{metrics}");
    assert!(metric_value(&metrics, "ranking_connections_refused_total") >= 1.0, "{metrics}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_closes_connections_that_outlive_the_grace() {
    let app = TestApp::spawn(&["--shutdown-grace=1s", "--handshake-timeout=1h", "--body-timeout=1h"]).await;
    let silent: Vec<TcpStream> = futures_util::future::join_all((0..10).map(|_| TcpStream::connect(app.addr)))
        .await
        .into_iter()
        .map(|c| c.expect("connect"))
        .collect();
    // A call in progress that never completes: its client ignores the server's GOAWAY.
    let tcp = TcpStream::connect(app.addr).await.expect("connect");
    let (client, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let (_response, _body) =
        client.send_request(grpc_request(app.addr, "/ranking.v1.RankingService/GetTopN"), false).expect("send");

    tokio::time::timeout(EVENTUALLY, app.stop()).await.expect("the server stops although peers hold connections");
    for tcp in silent {
        assert!(closed_by_server(tcp).await, "held connections are closed by the stop");
    }
}

#[tokio::test]
async fn rejected_values_are_quoted_by_a_short_prefix() {
    let mut app = TestApp::spawn(&[]).await;
    let date = "\0".repeat(1 << 20);
    let err = app
        .client
        .get_top_n(v1::GetTopNRequest { date: date.clone(), ..Default::default() })
        .await
        .expect_err("bad date");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("date: "), "{}", &err.message()[..40]);
    assert!(err.message().len() < 1_000, "a {}-byte message", err.message().len());
    let err = app.client.recompute(v1::RecomputeRequest { date }).await.expect_err("bad date");
    assert!(err.message().len() < 1_000, "a {}-byte message", err.message().len());
    for bad in ["+026-11-30", " 026-11-30"] {
        let err =
            app.client.get_top_n(v1::GetTopNRequest { date: bad.into(), ..Default::default() }).await.expect_err(bad);
        assert_eq!(err.code(), Code::InvalidArgument, "{bad}");
    }
    app.stop().await;
}

#[tokio::test]
async fn an_empty_batch_and_an_out_of_range_time_say_what_is_wrong() {
    let mut app = TestApp::spawn(&[]).await;
    let err = app.client.record_events(v1::RecordEventsRequest { events: vec![] }).await.expect_err("empty");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("events: at least 1"), "{}", err.message());
    let mut event = crate::helpers::event("t", 1, v1::EventType::View, 0, chrono::Utc::now());
    event.occurred_at.as_mut().expect("time").nanos = 1_000_000_000;
    let err = app.client.record_event(v1::RecordEventRequest { event: Some(event) }).await.expect_err("nanos");
    assert!(err.message().starts_with("event.occurred_at: nanos must be"), "{}", err.message());
    app.stop().await;
}
