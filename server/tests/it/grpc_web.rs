//! gRPC-Web on the API port, as browsers speak it: every RPC over HTTP/1.1 (WatchTopN
//! included) and over HTTP/2 answers what gRPC answers, behind the same tokens and counted
//! under the same metric names; cross-origin callers only from RANKING_CORS_ORIGINS; and the
//! hostile peers of the hardening tests, tried again over HTTP/1.1.

use std::net::SocketAddr;

use bytes::Bytes;
use chrono::Utc;
use ranking_client::tonic::{Code, Request};
use ranking_client::v1;
use ranking_test_kit::grpc_web::{self, Answer, call as h1_call, parse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{TestApp, views};
use ranking_server::test_support::EVENTUALLY;

/// Reads until `done` holds, with the tests' generous deadline.
async fn read_until(tcp: &mut TcpStream, raw: &mut Vec<u8>, done: impl Fn(&Answer) -> bool) -> Answer {
    grpc_web::read_until(tcp, raw, EVENTUALLY, done).await
}

fn with_token<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().expect("ascii"));
    request
}

/// The value of the series of `family` whose labels include every one of `labels`.
fn series(metrics: &str, family: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_answers_over_grpc_web_as_over_grpc_behind_the_same_tokens() {
    let mut app = TestApp::spawn(&["--read-token=r", "--write-token=w", "--admin-token=a"]).await;
    let addr = app.addr;
    let now = Utc::now();

    // Writes and the admin call, over HTTP/1.1.
    let mut events = views("web", 1, 3, now);
    events.extend(views("web2", 2, 5, now));
    let recorded = h1_call(addr, "RecordEvents", &v1::RecordEventsRequest { events }, Some("w")).await;
    assert_eq!((recorded.status, recorded.code()), (200, Some(0)), "{recorded:?}");
    assert_eq!(recorded.message::<v1::RecordEventsResponse>(0).accepted, 8);
    let entry =
        v1::CatalogEntry { product_id: 2, segments: vec!["brand:web".into()], hidden: false, ..Default::default() };
    let catalog = h1_call(addr, "UpdateCatalog", &v1::UpdateCatalogRequest { products: vec![entry] }, Some("a")).await;
    assert_eq!(catalog.message::<v1::UpdateCatalogResponse>(0).updated, 1);
    let recomputed = h1_call(addr, "Recompute", &v1::RecomputeRequest::default(), Some("a")).await;
    assert_eq!(recomputed.message::<v1::RecomputeResponse>(0).products, 2);

    // Every read answers what gRPC answers.
    let c = &mut app.client;
    let top = v1::GetTopNRequest { limit: 10, ..Default::default() };
    let web: v1::GetTopNResponse = h1_call(addr, "GetTopN", &top, Some("r")).await.message(0);
    assert_eq!(web, c.get_top_n(with_token(top, "r")).await.expect("gRPC").into_inner());
    assert_eq!(web.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), [2, 1]);
    let rank = v1::GetRankRequest { product_id: 1, neighbors: 1, ..Default::default() };
    let web: v1::GetRankResponse = h1_call(addr, "GetRank", &rank, Some("r")).await.message(0);
    assert_eq!(web, c.get_rank(with_token(rank, "r")).await.expect("gRPC").into_inner());
    let ranks = v1::GetRanksRequest { product_ids: vec![1, 2, 3], ..Default::default() };
    let web: v1::GetRanksResponse = h1_call(addr, "GetRanks", &ranks, Some("r")).await.message(0);
    assert_eq!(web, c.get_ranks(with_token(ranks, "r")).await.expect("gRPC").into_inner());
    let movers = v1::ListMoversRequest::default();
    let web: v1::ListMoversResponse = h1_call(addr, "ListMovers", &movers, Some("r")).await.message(0);
    assert_eq!(web, c.list_movers(with_token(movers, "r")).await.expect("gRPC").into_inner());
    let explain = v1::ExplainRankRequest { product_id: 2, segment: "brand:web".into(), ..Default::default() };
    let web: v1::ExplainRankResponse = h1_call(addr, "ExplainRank", &explain, Some("a")).await.message(0);
    assert_eq!(web, c.explain_rank(with_token(explain, "r")).await.expect("gRPC").into_inner());

    // The same tokens: none, a wrong one, the read token for a write.
    for (method, token) in [("GetTopN", None), ("GetTopN", Some("w")), ("RecordEvents", Some("r"))] {
        let refused = h1_call(addr, method, &v1::GetTopNRequest::default(), token).await;
        assert_eq!(refused.code(), Some(Code::Unauthenticated as i32), "{method} {token:?}: {refused:?}");
    }
    // Bad input: the field named, over gRPC-Web too.
    let bad = h1_call(addr, "GetTopN", &v1::GetTopNRequest { limit: 5000, ..Default::default() }, Some("r")).await;
    assert_eq!(bad.code(), Some(Code::InvalidArgument as i32));
    assert!(format!("{bad:?}").contains("limit"), "{bad:?}");

    // WatchTopN over HTTP/1.1: the current top at once, then the top that an order moves.
    let watch = v1::WatchTopNRequest { limit: 5, ..Default::default() };
    let request =
        grpc_web::request("/ranking.v1.RankingService/WatchTopN", &watch, &[("authorization", "Bearer r")], None);
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(&request).await.expect("write");
    let mut raw = Vec::new();
    let first = read_until(&mut tcp, &mut raw, |a| !a.messages.is_empty()).await;
    assert_eq!(first.header("content-type"), Some("application/grpc-web+proto"));
    let ids = |m: &v1::WatchTopNResponse| m.products.iter().map(|p| p.product_id).collect::<Vec<_>>();
    assert_eq!(ids(&first.message(0)), [2, 1]);
    let climb = v1::RecordEventsRequest { events: views("climb", 1, 10, now) };
    assert_eq!(h1_call(addr, "RecordEvents", &climb, Some("w")).await.code(), Some(0));
    assert_eq!(h1_call(addr, "Recompute", &v1::RecomputeRequest::default(), Some("a")).await.code(), Some(0));
    let moved = read_until(&mut tcp, &mut raw, |a| a.messages.len() >= 2).await;
    assert_eq!(ids(&moved.message(moved.messages.len() - 1)), [1, 2], "the stream follows the ranking");
    drop(tcp);

    // gRPC-Web over HTTP/2 as well.
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let request = tonic::codegen::http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/ranking.v1.RankingService/GetTopN"))
        .header("content-type", "application/grpc-web+proto")
        .header("authorization", "Bearer r")
        .body(())
        .expect("request");
    let (response, mut body) = client.send_request(request, false).expect("send");
    body.send_data(Bytes::from(grpc_web::frame(&v1::GetTopNRequest::default())), true).expect("message");
    let response = response.await.expect("response");
    assert_eq!(response.headers()["content-type"], "application/grpc-web+proto");
    let mut body = response.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        data.extend_from_slice(&chunk.expect("data"));
    }
    let mut raw = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
    raw.extend_from_slice(&data);
    let answer = parse(&raw).expect("frames");
    assert_eq!(answer.code(), Some(0), "{answer:?}");
    let top: v1::GetTopNResponse = answer.message(0);
    assert_eq!(top.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), [1, 2]);

    // Counted under the gRPC names: GetTopN's gRPC-Web calls (over HTTP/1.1 and HTTP/2) are
    // in the same series as its gRPC calls.
    let metrics = app.scrape_metrics().await;
    let handled = series(&metrics, "grpc_server_handled_total", &["grpc_method=\"GetTopN\"", "grpc_code=\"OK\""]);
    assert!(handled >= 3.0, "one gRPC and two gRPC-Web GetTopN calls answered OK: {handled}");
    let refused =
        series(&metrics, "grpc_server_handled_total", &["grpc_method=\"GetTopN\"", "grpc_code=\"Unauthenticated\""]);
    assert!(refused >= 2.0, "{refused}");
    app.stop().await;
}

/// A CORS preflight of GetTopN from `origin`.
async fn preflight(addr: SocketAddr, origin: &str) -> Answer {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "OPTIONS /ranking.v1.RankingService/GetTopN HTTP/1.1\r\nHost: localhost\r\nOrigin: {origin}\r\n\
         Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type,x-grpc-web,authorization\r\n\
         Connection: close\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.expect("read");
    parse(&raw).expect("an answer")
}

#[tokio::test]
async fn cross_origin_calls_are_allowed_only_from_the_configured_origins() {
    let app = TestApp::spawn(&["--cors-origins=https://shop.example,http://127.0.0.1:5173"]).await;
    let allowed = preflight(app.addr, "https://shop.example").await;
    assert_eq!(allowed.header("access-control-allow-origin"), Some("https://shop.example"));
    assert_eq!(allowed.header("access-control-allow-methods"), Some("POST"));
    assert!(allowed.header("access-control-allow-headers").is_some_and(|h| h.contains("authorization")));
    let other = preflight(app.addr, "https://evil.example").await;
    assert_eq!(other.header("access-control-allow-origin"), None, "{other:?}");

    // The call itself: the browser may read it from an allowed origin only.
    let request = grpc_web::request(
        "/ranking.v1.RankingService/GetTopN",
        &v1::GetTopNRequest::default(),
        &[("origin", "https://shop.example")],
        None,
    );
    let mut tcp = TcpStream::connect(app.addr).await.expect("connect");
    tcp.write_all(&request).await.expect("write");
    let answer = read_until(&mut tcp, &mut Vec::new(), |a| a.code().is_some()).await;
    assert_eq!(answer.header("access-control-allow-origin"), Some("https://shop.example"));
    assert!(answer.header("access-control-expose-headers").is_some_and(|h| h.contains("grpc-status")));
    app.stop().await;

    // No origin configured: none is allowed.
    let app = TestApp::spawn(&[]).await;
    assert_eq!(preflight(app.addr, "https://shop.example").await.header("access-control-allow-origin"), None);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_http1_peers_are_bounded_as_http2_ones_are() {
    let mut app = TestApp::spawn(&["--max-concurrent-calls=4", "--body-timeout=2s", "--handshake-timeout=2s"]).await;
    // 20 gRPC-Web calls whose message never comes in full, far beyond the 4 slots.
    let mut held = Vec::new();
    for _ in 0..20 {
        let request =
            grpc_web::request("/ranking.v1.RankingService/GetTopN", &v1::GetTopNRequest::default(), &[], Some(3));
        let mut tcp = TcpStream::connect(app.addr).await.expect("connect");
        tcp.write_all(&request).await.expect("write");
        held.push(tcp);
    }
    // Headers that never end, and a connection that never speaks.
    let mut slow = TcpStream::connect(app.addr).await.expect("connect");
    slow.write_all(b"POST /ranking.v1.RankingService/GetTopN HTTP/1.1\r\nHost: te").await.expect("write");
    let silent = TcpStream::connect(app.addr).await.expect("connect");

    // Another caller is served meanwhile: the held calls took no slot.
    app.client.get_top_n(v1::GetTopNRequest::default()).await.expect("GetTopN is admitted");
    app.record(views("ok", 1, 3, Utc::now())).await;

    // The held calls are answered DEADLINE_EXCEEDED once the body timeout passes; the slow
    // and silent connections are closed by the handshake timeout.
    let answer = read_until(&mut held[0], &mut Vec::new(), |a| a.code().is_some()).await;
    assert_eq!(answer.code(), Some(Code::DeadlineExceeded as i32), "{answer:?}");
    for mut tcp in [slow, silent] {
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(EVENTUALLY, tcp.read_to_end(&mut buf)).await.expect("closed in time");
    }

    // A header block of a megabyte is cut at the bound of a request head: the connection is
    // closed with nothing served.
    let mut huge = TcpStream::connect(app.addr).await.expect("connect");
    let mut request = b"POST /ranking.v1.RankingService/GetTopN HTTP/1.1\r\nHost: localhost\r\nx-pad: ".to_vec();
    request.extend(std::iter::repeat_n(b'a', 1 << 20));
    let _ = huge.write_all(&request).await; // the server closes before it has read it all
    let mut raw = Vec::new();
    let closed = tokio::time::timeout(EVENTUALLY, huge.read_to_end(&mut raw)).await.expect("closed in time");
    assert!(closed.is_err() || raw.is_empty(), "nothing answered: {:?}", parse(&raw));
    app.stop().await;

    // A message beyond RANKING_MAX_MESSAGE_BYTES is refused over gRPC-Web as over gRPC.
    let app = TestApp::spawn(&["--max-message-bytes=200000"]).await;
    let events = views("big", 1, 10_001, Utc::now());
    let refused = h1_call(app.addr, "RecordEvents", &v1::RecordEventsRequest { events }, None).await;
    assert_eq!(refused.code(), Some(Code::ResourceExhausted as i32), "{refused:?}");
    app.stop().await;
}
