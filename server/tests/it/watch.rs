//! WatchTopN through the client: the first state at once, a message per change
//! and none without one, shared feeds across replicas, slow readers, limits, and the end of
//! every stream at shutdown.

use std::time::Duration;

use chrono::{Duration as Age, Timelike, Utc};
use futures_util::StreamExt;
use ranking_client::tonic::Code;
use ranking_client::{RankingClient, v1};

use crate::helpers::process::EVENTUALLY;
use crate::helpers::{TestApp, TestDb, metric_value, rand_u64, views};
use crate::redis_store::redis_settings;

fn ids(m: &v1::WatchTopNResponse) -> Vec<i64> {
    m.products.iter().map(|p| p.product_id).collect()
}

async fn client(app: &TestApp) -> RankingClient {
    RankingClient::builder(format!("http://{}", app.addr)).connect().await.expect("client")
}

async fn next(
    stream: &mut (impl futures_util::Stream<Item = Result<v1::WatchTopNResponse, ranking_client::tonic::Status>> + Unpin),
) -> v1::WatchTopNResponse {
    tokio::time::timeout(EVENTUALLY, stream.next()).await.expect("a message in time").expect("open").expect("a state")
}

#[tokio::test]
async fn a_watcher_gets_the_top_at_once_then_each_change_and_nothing_else() {
    let mut app = TestApp::spawn(&["--watch-interval=50ms"]).await;
    let at = Utc::now() - Age::seconds(5);
    app.record((1..=3).flat_map(|p| views(&format!("a{p}"), p, p as usize * 10, at)).collect()).await;
    let v1 = app.recompute("").await.version;
    let watcher = client(&app).await;
    let mut daily = watcher.watch_top_n(v1::WatchTopNRequest { limit: 2, ..Default::default() });
    let first = next(&mut daily).await;
    assert_eq!((ids(&first), first.version, first.total), (vec![3, 2], v1, 3));

    // A recompute that changes nothing in the top sends nothing: the next message is the
    // one that changes it (that an unchanged version never makes a frame is shown frame by
    // frame, on a paused clock, by `app::watch`'s unit tests).
    app.recompute("").await;
    app.record(views("b1", 1, 50, at)).await;
    let v3 = app.recompute("").await.version;
    let changed = next(&mut daily).await;
    assert_eq!((ids(&changed), changed.version), (vec![1, 3], v3), "the change, not an unchanged version");

    // Hourly tops move with the events themselves.
    let hour = Some(Utc::now().hour());
    let hourly = v1::WatchTopNRequest {
        window: v1::Window::Hourly.into(),
        hour,
        date: Utc::now().date_naive().to_string(),
        limit: 1,
        ..Default::default()
    };
    let mut hourly = watcher.watch_top_n(hourly);
    let now = Utc::now() - Age::seconds(1);
    assert_eq!(ids(&next(&mut hourly).await), vec![1]);
    app.record(views("c2", 2, 100, now)).await;
    let moved = next(&mut hourly).await;
    assert_eq!((ids(&moved), moved.hour), (vec![2], hour));

    let metrics = app.scrape_metrics().await;
    assert_eq!(metric_value(&metrics, "ranking_watch_streams "), 2.0);
    assert!(metric_value(&metrics, "ranking_watch_messages_total") >= 4.0);
    drop((daily, hourly));
    app.stop().await;
}

#[tokio::test]
async fn watchers_on_another_replica_see_each_new_version() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut a = TestApp::spawn_on(redis_settings(&db.url, &prefix, &["--watch-interval=50ms"])).await;
    let b = TestApp::spawn_on(redis_settings(&db.url, &prefix, &["--watch-interval=50ms"])).await;
    let at = Utc::now() - Age::seconds(5);
    a.record(views("a", 1, 3, at)).await;
    a.recompute("").await;
    let mut watched = client(&b).await.watch_top_n(v1::WatchTopNRequest::default());
    next(&mut watched).await;
    a.record(views("b", 2, 9, at)).await;
    let version = a.recompute("").await.version;
    loop {
        let m = next(&mut watched).await;
        if m.version == version {
            assert_eq!(ids(&m), vec![2, 1]);
            break;
        }
    }
    a.stop().await;
    b.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_slow_reader_gets_the_latest_state_not_a_backlog() {
    let mut app = TestApp::spawn(&["--watch-interval=10ms"]).await;
    let at = Utc::now() - Age::seconds(5);
    app.record((1..=100).flat_map(|p| views(&format!("a{p}"), p, 1, at)).collect()).await;
    app.recompute("").await;
    // A top of 100 entries is about 7 KB a message. A reader that does not read lets as
    // much wait in transit as its HTTP/2 window allows (16 KB here: two messages); every
    // other state must be skipped on the server, not queued.
    let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{}", app.addr))
        .expect("endpoint")
        .initial_stream_window_size(Some(16 * 1024))
        .initial_connection_window_size(Some(16 * 1024))
        .connect()
        .await
        .expect("connect");
    let mut slow = v1::ranking_service_client::RankingServiceClient::new(channel);
    let request = v1::WatchTopNRequest { limit: 100, ..Default::default() };
    let mut stream = slow.watch_top_n(request).await.expect("watch").into_inner();
    stream.message().await.expect("first").expect("state");
    let mut last = 0;
    for round in 0..20 {
        app.record(views(&format!("r{round}"), 1, 10, at)).await;
        last = app.recompute("").await.version;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let mut read = 0;
    loop {
        let m =
            tokio::time::timeout(EVENTUALLY, stream.message()).await.expect("in time").expect("next").expect("state");
        read += 1;
        if m.version == last {
            break;
        }
    }
    assert!(read < 20, "{read} messages before the latest state: a backlog");
    let metrics = app.scrape_metrics().await;
    assert!(metric_value(&metrics, "ranking_watch_skipped_total") > 0.0, "states were skipped, not queued");
    drop(stream);
    app.stop().await;
}

#[tokio::test]
async fn watches_are_checked_bounded_and_end_with_unavailable_at_shutdown() {
    let mut app = TestApp::spawn(&["--max-watchers=1"]).await;
    app.record(views("a", 1, 1, Utc::now() - Age::seconds(5))).await;
    app.recompute("").await;
    let refused = |r: Result<_, ranking_client::tonic::Status>| r.map(|_| ()).expect_err("refused");
    let too_long = v1::WatchTopNRequest { limit: 101, ..Default::default() };
    let e = refused(app.client.watch_top_n(too_long).await);
    assert!(e.code() == Code::InvalidArgument && e.message().starts_with("limit:"), "{e:?}");
    let hourly_segment =
        v1::WatchTopNRequest { window: v1::Window::Hourly.into(), segment: "brand:acme".into(), ..Default::default() };
    let e = refused(app.client.watch_top_n(hourly_segment).await);
    assert!(e.code() == Code::InvalidArgument && e.message().starts_with("segment:"), "{e:?}");

    let mut open = app.client.watch_top_n(v1::WatchTopNRequest::default()).await.expect("watch").into_inner();
    open.message().await.expect("first").expect("state");
    let e = refused(app.client.watch_top_n(v1::WatchTopNRequest::default()).await);
    assert_eq!(e.code(), Code::ResourceExhausted);

    let reader = tokio::spawn(async move {
        loop {
            match open.message().await {
                Ok(Some(_)) => continue,
                other => return other.map(|_| ()),
            }
        }
    });
    app.stop().await;
    let ended = reader.await.expect("reader");
    assert_eq!(ended.expect_err("ended by the server").code(), Code::Unavailable);
}

#[tokio::test]
async fn a_hidden_product_leaves_open_streams() {
    let mut app = TestApp::spawn(&["--watch-interval=50ms"]).await;
    let at = Utc::now() - Age::seconds(5);
    app.record((1..=3).flat_map(|p| views(&format!("a{p}"), p, p as usize, at)).collect()).await;
    app.recompute("").await;
    let mut watched = client(&app).await.watch_top_n(v1::WatchTopNRequest { limit: 3, ..Default::default() });
    assert_eq!(ids(&next(&mut watched).await), vec![3, 2, 1]);
    let hide = v1::CatalogEntry { product_id: 3, segments: vec![], hidden: true, ..Default::default() };
    app.client.update_catalog(v1::UpdateCatalogRequest { products: vec![hide] }).await.expect("hidden");
    assert_eq!(ids(&next(&mut watched).await), vec![2, 1]);
    drop(watched);
    app.stop().await;
}

#[tokio::test]
async fn the_client_watch_resumes_by_itself_when_its_replica_restarts() {
    let db = TestDb::create().await;
    let listen = format!("--listen=127.0.0.1:{}", crate::helpers::free_port());
    let args = [listen.as_str(), "--watch-interval=50ms"];
    let mut a = TestApp::spawn_on(crate::helpers::settings(&db.url, &args)).await;
    let at = Utc::now() - Age::seconds(5);
    a.record(views("a", 1, 2, at)).await;
    a.recompute("").await;
    let retry = ranking_client::RetryPolicy {
        max_attempts: 100,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(200),
        ..Default::default()
    };
    let endpoint = format!("http://{}", a.addr);
    let watcher = RankingClient::builder(&endpoint).retry(retry).connect_lazy().expect("client");
    let mut watched = watcher.watch_top_n(v1::WatchTopNRequest::default());
    assert_eq!(ids(&next(&mut watched).await), vec![1]);

    // The replica goes away (its stream ends with UNAVAILABLE) and another comes up at the
    // same address on the same database.
    a.stop().await;
    let mut b = TestApp::spawn_on(crate::helpers::settings(&db.url, &args)).await;
    b.record(views("b", 2, 9, at)).await;
    b.recompute("").await;
    loop {
        let m = next(&mut watched).await;
        if ids(&m) == vec![2, 1] {
            break;
        }
    }
    drop(watched);
    b.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_watch_outlives_the_unary_request_timeout() {
    // The request timeout bounds unary calls; it must not cut a watch. It is long enough for
    // the two unary calls that change the top, which come after it has passed.
    let mut app = TestApp::spawn(&["--request-timeout=3s", "--body-timeout=120s"]).await;
    let mut stream = app.client.watch_top_n(v1::WatchTopNRequest::default()).await.expect("watch").into_inner();
    let first = stream.message().await.expect("first").expect("state");
    assert_eq!(first.total, 0);
    // A unary call started after the watch whose message never comes: the server cuts it when
    // its request timeout passes (the body's is far longer), so once it is answered the watch
    // has outlived that timeout too.
    let tcp = tokio::net::TcpStream::connect(app.addr).await.expect("connect");
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let request = ranking_server::test_support::grpc_request(app.addr, "/ranking.v1.RankingService/GetTopN");
    let (held, _body) = client.send_request(request, false).expect("send");
    let code = tokio::time::timeout(EVENTUALLY, crate::hardening::grpc_status(held)).await.expect("answered");
    assert_eq!(code, Code::DeadlineExceeded as i32, "the held call cut by the request timeout");
    // Past the request timeout, a change of the top: the next thing on the stream is that
    // change, neither its end nor anything sent before it.
    app.record(views("a", 7, 3, Utc::now() - Age::seconds(1))).await;
    let version = app.recompute("").await.version;
    let next = stream.message().await.expect("still open").expect("a state");
    assert_eq!((ids(&next), next.version, next.total), (vec![7], version, 1));
    drop(stream);
    app.stop().await;
}
