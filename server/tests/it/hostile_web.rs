//! Hostile peers on the HTTP/1.1 and gRPC-Web surface, each attack reproduced at a scale
//! this machine allows (lower caps through the settings) while a fresh client's health
//! checks and reads must be answered: bodies sent without a token, unauthenticated streams
//! holding connections, echoed headers, endless HTTP/1.1 heads, the metrics port flooded,
//! streaming calls whose message never comes, DNS rebinding, and the smaller ones (a
//! gRPC-Web deadline, bad base64, a health watch at shutdown).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use ranking_client::tonic::Code;
use ranking_client::v1;
use ranking_test_kit::grpc_web::{self, Answer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::process::{ServerProcess, rss_mb};
use crate::helpers::{TestApp, metric_value, views};
use ranking_server::test_support::{EVENTUALLY, eventually, grpc_request};

/// What a fresh client must still get while an attack holds: health checks and a read.
async fn a_fresh_client_is_served(addr: SocketAddr) {
    let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("a fresh client connects");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    for _ in 0..10 {
        let answer = health.check(tonic_health::pb::HealthCheckRequest::default()).await.expect("health answers");
        assert_eq!(answer.into_inner().status, 1, "SERVING");
    }
    let mut client = v1::ranking_service_client::RankingServiceClient::new(channel);
    client.get_top_n(v1::GetTopNRequest::default()).await.expect("a read is answered");
}

/// Reads what the server sends until it closes the connection (or the deadline).
async fn until_closed(tcp: &mut TcpStream) -> Vec<u8> {
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(EVENTUALLY, tcp.read_to_end(&mut raw)).await.expect("closed in time");
    raw
}

/// 1. A body sent without the token is never buffered, and no `100 Continue` invites it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_without_the_token_is_refused_before_a_byte_of_it_is_read() {
    let app = TestApp::spawn(&["--write-token=w"]).await;
    let mut attackers = Vec::new();
    for _ in 0..8 {
        let mut tcp = TcpStream::connect(app.addr).await.expect("connect");
        let head = "POST /ranking.v1.RankingService/RecordEvents HTTP/1.1\r\nHost: localhost\r\n\
                    content-type: application/grpc-web+proto\r\nexpect: 100-continue\r\n\
                    content-length: 8388613\r\n\r\n";
        tcp.write_all(head.as_bytes()).await.expect("head");
        attackers.push(tcp);
    }
    for tcp in &mut attackers {
        let answer = grpc_web::read_until(tcp, &mut Vec::new(), EVENTUALLY, |a| a.code().is_some()).await;
        assert_eq!(answer.status, 200, "a final answer, not 100 Continue: {answer:?}");
        assert_eq!(answer.code(), Some(Code::Unauthenticated as i32), "{answer:?}");
    }
    // The bodies come anyway, in megabytes, while the server is asked for other things.
    let senders: Vec<_> = attackers
        .into_iter()
        .map(|mut tcp| {
            tokio::spawn(async move {
                let chunk = vec![0u8; 1 << 20];
                for _ in 0..8 {
                    if tcp.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
                tcp
            })
        })
        .collect();
    a_fresh_client_is_served(app.addr).await;
    let mut writer = app.client.clone();
    let mut request = ranking_client::tonic::Request::new(v1::RecordEventsRequest {
        events: views("after", 1, 3, chrono::Utc::now()),
    });
    request.metadata_mut().insert("authorization", "Bearer w".parse().expect("ascii"));
    writer.record_events(request).await.expect("a write with the token is taken");
    for sender in senders {
        drop(sender.await.expect("sender"));
    }
    app.stop().await;
}

/// A gRPC-Web health watch over HTTP/1.1 (5 zero bytes), on a connection of its own.
async fn open_health_watch(addr: SocketAddr) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let request = "POST /grpc.health.v1.Health/Watch HTTP/1.1\r\nHost: localhost\r\n\
                   content-type: application/grpc-web+proto\r\ncontent-length: 5\r\n\r\n\0\0\0\0\0";
    tcp.write_all(request.as_bytes()).await.expect("watch");
    tcp
}

/// The first message or status a connection answers, `None` when it is closed (or says
/// nothing for a while) first.
async fn first_answer(tcp: &mut TcpStream) -> Option<Answer> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(answer) = grpc_web::parse(&raw).filter(|a| !a.messages.is_empty() || a.code().is_some()) {
            return Some(answer);
        }
        match tokio::time::timeout(Duration::from_secs(2), tcp.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => raw.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

/// 2. Unauthenticated long-lived streams are held to their own small bound, and idle
/// connections make room at the connection cap, so a fresh client gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_streams_cannot_hold_the_connection_cap() {
    let app = TestApp::spawn(&[
        "--max-connections=60",
        "--max-public-streams=8",
        "--handshake-timeout=1h",
        "--idle-timeout=1h",
    ])
    .await;
    let mut watches = Vec::new();
    for _ in 0..80 {
        watches.push(open_health_watch(app.addr).await);
    }
    let mut streaming = 0;
    let mut refused = 0;
    for tcp in &mut watches {
        match first_answer(tcp).await {
            Some(a) if a.code() == Some(Code::ResourceExhausted as i32) => refused += 1,
            Some(a) if !a.messages.is_empty() => streaming += 1,
            // Closed to make room for a later connection.
            _ => {}
        }
    }
    assert!(streaming <= 8, "at most RANKING_MAX_PUBLIC_STREAMS watches stream: {streaming}");
    assert!(refused > 0, "the others are refused");
    a_fresh_client_is_served(app.addr).await;
    let metrics = app.scrape_metrics().await;
    assert!(metric_value(&metrics, "ranking_connections_evicted_total") >= 1.0, "{metrics}");
    app.stop().await;
}

/// 3. A request value is not echoed back at length.
#[tokio::test]
async fn a_huge_grpc_encoding_is_not_echoed() {
    let app = TestApp::spawn(&[]).await;
    let encoding = vec![0xFFu8; 12 * 1024];
    // Over HTTP/1.1 (gRPC-Web), on every path, health included.
    for path in ["/grpc.health.v1.Health/Check", "/ranking.v1.RankingService/GetTopN"] {
        let mut tcp = TcpStream::connect(app.addr).await.expect("connect");
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/grpc-web+proto\r\n\
             content-length: 5\r\ngrpc-encoding: "
        )
        .into_bytes();
        request.extend_from_slice(&encoding);
        request.extend_from_slice(b"\r\n\r\n\0\0\0\0\0");
        tcp.write_all(&request).await.expect("write");
        let mut raw = Vec::new();
        let answer = grpc_web::read_until(&mut tcp, &mut raw, EVENTUALLY, |a| a.code().is_some()).await;
        assert_eq!(answer.code(), Some(Code::Unimplemented as i32), "{answer:?}");
        assert!(raw.len() < 1_024, "{} bytes answered to a 12 KB header", raw.len());
    }
    // Over HTTP/2 with a header near its 16 KB bound.
    let tcp = TcpStream::connect(app.addr).await.expect("connect");
    let (h2, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(connection);
    let mut h2 = h2.ready().await.expect("ready");
    let mut request = grpc_request(app.addr, "/grpc.health.v1.Health/Check");
    let value =
        ranking_client::tonic::codegen::http::HeaderValue::from_bytes(&vec![0xFFu8; 14 * 1024]).expect("obs-text");
    request.headers_mut().insert("grpc-encoding", value);
    let (response, mut body) = h2.send_request(request, false).expect("send");
    body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true).expect("message");
    let response = response.await.expect("response");
    let echoed: usize = response.headers().iter().map(|(n, v)| n.as_str().len() + v.len()).sum();
    assert!(echoed < 1_024, "{echoed} bytes of headers answered");
    app.stop().await;
}

/// 4. An HTTP/1.1 request head is bounded like an HTTP/2 one: unfinished heads of 390 KB
/// cost the server at most their bound each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_http1_heads_are_cut_at_their_bound() {
    let server = ServerProcess::start(&[("RANKING_HANDSHAKE_TIMEOUT", "1h".to_string())]).await;
    let before = rss_mb(server.pid());
    let mut connections = Vec::new();
    for _ in 0..300 {
        let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
        let mut head = b"POST /ranking.v1.RankingService/GetTopN HTTP/1.1\r\nHost: localhost\r\nx-pad: ".to_vec();
        head.extend(std::iter::repeat_n(b'a', 390 * 1024));
        // The server stops reading at the bound: the rest may never be taken.
        let _ = tokio::time::timeout(Duration::from_millis(200), tcp.write_all(&head)).await;
        connections.push(tcp);
    }
    let grown = rss_mb(server.pid()) - before;
    for tcp in &mut connections {
        until_closed(tcp).await;
    }
    // 300 × (16 KB of head + hyper's buffers) is a few MB; 390 KB each would be 117 MB.
    assert!(grown < 40.0, "the server grew {grown:.1} MB for 300 unfinished heads");
    a_fresh_client_is_served(server.addr).await;
    server.terminate();
    server.wait().await;
}

/// 5. The metrics port has a small connection cap and a head timeout of its own: a crowd of
/// half-sent requests costs it a few connections, never the API's descriptors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_port_is_bounded_apart_from_the_api() {
    let app = TestApp::spawn(&[]).await;
    let metrics_addr = app.metrics_addr.expect("metrics port");
    let mut half_sent = Vec::new();
    for _ in 0..200 {
        let mut tcp = TcpStream::connect(metrics_addr).await.expect("connect");
        let _ = tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").await;
        half_sent.push(tcp);
    }
    // Beyond its cap they are closed at once; the rest after the head timeout.
    for tcp in &mut half_sent {
        until_closed(tcp).await;
    }
    a_fresh_client_is_served(app.addr).await;
    let scraped = app.scrape_metrics().await;
    assert!(scraped.contains("ranking_connections_open"), "a scrape is answered after the crowd");
    app.stop().await;
}

/// 6. A streaming call takes a call slot only once its message has arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_whose_message_never_comes_hold_no_call_slot() {
    let app = TestApp::spawn(&["--max-concurrent-calls=4", "--body-timeout=2s"]).await;
    let tcp = TcpStream::connect(app.addr).await.expect("connect");
    let (h2, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(connection);
    let mut h2 = h2.ready().await.expect("ready");
    let mut held = Vec::new();
    for _ in 0..40 {
        let (response, mut body) =
            h2.send_request(grpc_request(app.addr, "/ranking.v1.RankingService/WatchTopN"), false).expect("send");
        body.send_data(Bytes::from_static(&[0, 0, 0]), false).expect("half a frame header");
        held.push((response, body));
        h2 = h2.ready().await.expect("ready");
    }
    let mut client = app.client.clone();
    for _ in 0..10 {
        client.get_top_n(v1::GetTopNRequest::default()).await.expect("GetTopN is admitted");
    }
    let (first, _body) = held.swap_remove(0);
    let response = tokio::time::timeout(EVENTUALLY, first).await.expect("answered").expect("response");
    let code = response.headers().get("grpc-status").map(|s| s.to_str().expect("ascii").to_string());
    assert_eq!(code.as_deref(), Some("4"), "DEADLINE_EXCEEDED once the body timeout passes");
    drop(held);
    app.stop().await;
}

/// A gRPC-Web UpdateCatalog hiding `product`, sent as a page under `host` would send it.
fn rebound_update(host: &str, product: i64) -> Vec<u8> {
    let entry = v1::CatalogEntry { product_id: product, hidden: true, ..Default::default() };
    let message = v1::UpdateCatalogRequest { products: vec![entry] };
    let body = grpc_web::frame(&message);
    let mut request = format!(
        "POST /ranking.v1.RankingService/UpdateCatalog HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n\
         content-type: application/grpc-web+proto\r\nx-grpc-web: 1\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    request
}

/// 7. A page under another host name (DNS rebinding to this server) is refused with 421,
/// and nothing it sent is done; the names the server is known by are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_for_another_host_name_are_misdirected() {
    let mut app = TestApp::spawn(&[]).await;
    app.record(views("seen", 7, 3, chrono::Utc::now())).await;
    app.recompute("").await;
    let port = app.addr.port();
    let attacker = format!("rebind.attacker.test:{port}");
    for request in
        [rebound_update(&attacker, 7), format!("GET /console/ HTTP/1.1\r\nHost: {attacker}\r\n\r\n").into_bytes()]
    {
        let mut tcp = TcpStream::connect(app.addr).await.expect("connect");
        tcp.write_all(&request).await.expect("write");
        let answer = grpc_web::parse(&until_closed(&mut tcp).await).expect("an answer");
        assert_eq!(answer.status, 421, "{answer:?}");
    }
    let rank = app.client.get_rank(v1::GetRankRequest { product_id: 7, ..Default::default() }).await;
    assert!(rank.is_ok(), "the rebound page's UpdateCatalog hid nothing");
    // The loopback names, with any port, are this server's.
    let mut tcp = TcpStream::connect(app.addr).await.expect("connect");
    tcp.write_all(format!("GET /console/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let answer = grpc_web::parse(&until_closed(&mut tcp).await).expect("an answer");
    assert_ne!(answer.status, 421, "{answer:?}");
    // Plain gRPC over HTTP/2 (no browser) keeps whatever authority its mesh gives it.
    let tcp = TcpStream::connect(app.addr).await.expect("connect");
    let (h2, connection) = h2::client::handshake(tcp).await.expect("handshake");
    tokio::spawn(connection);
    let mut h2 = h2.ready().await.expect("ready");
    let mut request = grpc_request(app.addr, "/grpc.health.v1.Health/Check");
    *request.uri_mut() = "http://ranking.mesh.internal/grpc.health.v1.Health/Check".parse().expect("uri");
    let (response, mut body) = h2.send_request(request, false).expect("send");
    body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true).expect("message");
    assert_eq!(response.await.expect("response").status(), 200);
    app.stop().await;
}

/// 8a. A gRPC-Web call that outlives RANKING_REQUEST_TIMEOUT is answered as gRPC-Web, with
/// its CORS headers, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_web_deadline_is_answered_as_grpc_web_and_counted() {
    let app =
        TestApp::spawn(&["--request-timeout=1s", "--body-timeout=1h", "--cors-origins=http://shop.example"]).await;
    let message = v1::GetTopNRequest::default();
    let request = grpc_web::request(
        "/ranking.v1.RankingService/GetTopN",
        &message,
        &[("origin", "http://shop.example")],
        Some(3),
    );
    let mut tcp = TcpStream::connect(app.addr).await.expect("connect");
    tcp.write_all(&request).await.expect("write");
    let answer: Answer = grpc_web::read_until(&mut tcp, &mut Vec::new(), EVENTUALLY, |a| a.code().is_some()).await;
    assert_eq!(answer.code(), Some(Code::DeadlineExceeded as i32), "{answer:?}");
    assert!(answer.header("content-type").is_some_and(|c| c.starts_with("application/grpc-web")), "{answer:?}");
    assert_eq!(answer.header("access-control-allow-origin"), Some("http://shop.example"), "{answer:?}");
    eventually("the deadline is counted", || async {
        let metrics = app.scrape_metrics().await;
        metrics.lines().any(|l| {
            l.starts_with("grpc_server_handled_total{")
                && l.contains("grpc_method=\"GetTopN\"")
                && l.contains("grpc_code=\"DeadlineExceeded\"")
                && !l.ends_with(" 0")
        })
    })
    .await;
    app.stop().await;
}

/// 8b. A grpc-web-text body that is not base64 is the caller's mistake: INVALID_ARGUMENT.
#[tokio::test]
async fn bad_base64_is_invalid_argument() {
    let app = TestApp::spawn(&[]).await;
    let body = "!!!!not base64!!!!";
    let request = format!(
        "POST /ranking.v1.RankingService/GetTopN HTTP/1.1\r\nHost: localhost\r\n\
         content-type: application/grpc-web-text\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = TcpStream::connect(app.addr).await.expect("connect");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let answer = grpc_web::read_until(&mut tcp, &mut Vec::new(), EVENTUALLY, |a| a.code().is_some()).await;
    assert_eq!(answer.code(), Some(Code::InvalidArgument as i32), "{answer:?}");
    app.stop().await;
}

/// 8c. At shutdown an open health watch gets a status (UNAVAILABLE) at once and does not
/// hold the process for the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_watch_ends_at_shutdown() {
    let app = TestApp::spawn(&["--shutdown-grace=1h"]).await;
    let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{}", app.addr))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let mut watch = health.watch(tonic_health::pb::HealthCheckRequest::default()).await.expect("watch").into_inner();
    assert_eq!(watch.message().await.expect("first").expect("status").status, 1, "SERVING");
    let stopping = tokio::spawn(app.stop());
    let ended = loop {
        match tokio::time::timeout(EVENTUALLY, watch.message()).await.expect("the watch hears of the stop") {
            Ok(Some(_)) => continue, // NOT_SERVING first, when it gets through
            Ok(None) => break None,
            Err(status) => break Some(status.code()),
        }
    };
    assert_eq!(ended, Some(Code::Unavailable));
    tokio::time::timeout(EVENTUALLY, stopping).await.expect("stopped well within the grace").expect("joined");
}

/// The bytes waiting in the kernel's send queue of each of the server's connections to the
/// peers at `peer_ports` (from `/proc/net/tcp`: `tx_queue`, hex).
fn send_queues(server_port: u16, peer_ports: &[u16]) -> Vec<usize> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let port_of = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap_or(""), 16).ok();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, remote, queues) = (fields.get(1)?, fields.get(2)?, fields.get(4)?);
            if port_of(local)? != server_port || !peer_ports.contains(&port_of(remote)?) {
                return None;
            }
            usize::from_str_radix(queues.split(':').next()?, 16).ok()
        })
        .collect()
}

/// 8d. Watchers that never read cost the kernel a bounded send buffer each, and the states
/// they never took are counted as skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_that_never_read_hold_a_bounded_send_queue() {
    let mut app = TestApp::spawn(&["--watch-interval=10ms"]).await;
    for p in 1..=100 {
        app.record(views(&format!("seed-{p}"), p, 1, chrono::Utc::now())).await;
    }
    app.recompute("").await;
    let message = v1::WatchTopNRequest { limit: 100, ..Default::default() };
    let request = grpc_web::request("/ranking.v1.RankingService/WatchTopN", &message, &[], None);
    let mut watchers = Vec::new();
    for _ in 0..10 {
        // A peer that reads nothing, with the smallest receive buffer the kernel allows.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4_096).expect("SO_RCVBUF");
        let mut tcp = socket.connect(app.addr).await.expect("connect");
        tcp.write_all(&request).await.expect("watch");
        watchers.push(tcp);
    }
    let ports: Vec<u16> = watchers.iter().map(|t| t.local_addr().expect("addr").port()).collect();
    // New versions in a loop, each moving the top, until the watchers' backlog shows.
    // New versions in a loop, each moving the top, until the watchers' backlog has reached
    // the server's send queues; then as many again, more than the server buffers for them.
    let round = std::sync::atomic::AtomicI64::new(0);
    let move_the_top = || async {
        let round = round.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut client = app.client.clone();
        let events = views(&format!("move-{round}"), 1 + round % 100, 50, chrono::Utc::now());
        client.record_events(v1::RecordEventsRequest { events }).await.expect("record");
        client.recompute(v1::RecomputeRequest::default()).await.expect("recompute");
    };
    eventually("the backlog of the watchers that never read reaches the server's send queues", || async {
        move_the_top().await;
        send_queues(app.addr.port(), &ports).iter().any(|q| *q >= 48 * 1024)
    })
    .await;
    for _ in 0..120 {
        move_the_top().await;
    }
    let queues = send_queues(app.addr.port(), &ports);
    assert_eq!(queues.len(), watchers.len(), "{queues:?}");
    // The send buffer set (64 KB) counts twice in the kernel's accounting.
    assert!(queues.iter().all(|q| *q <= 2 * 64 * 1024 + 16 * 1024), "send queues: {queues:?}");
    a_fresh_client_is_served(app.addr).await;
    // The states they never read are counted as skipped once they are gone.
    drop(watchers);
    eventually("the states never read are counted as skipped", || async {
        metric_value(&app.scrape_metrics().await, "ranking_watch_skipped_total") > 0.0
    })
    .await;
    app.stop().await;
}
