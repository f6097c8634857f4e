//! `hostile-web`: the HTTP/1.1 and gRPC-Web attacks of the second probe, each at the scale it
//! was found at where this machine allows, against a release server started here with all
//! three tokens set: what a fresh client gets while each holds, and what the server's memory
//! does. One row per attack; the server is started again for the ones that need other caps.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ranking_client::v1;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::process::ServerProcess;
use crate::hostile::rss_mb;

/// The tokens the server runs with.
const WRITE: &str = "w-token";
const READ: &str = "r-token";

/// `n` health checks and GetTopN calls (read token) from a fresh connection: how many of
/// each were answered OK.
async fn fresh_client(addr: SocketAddr, n: usize) -> (usize, usize) {
    let Ok(channel) = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
    else {
        return (0, 0);
    };
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let mut client = v1::ranking_service_client::RankingServiceClient::new(channel);
    let (mut checks, mut reads) = (0, 0);
    for _ in 0..n {
        checks += usize::from(health.check(tonic_health::pb::HealthCheckRequest::default()).await.is_ok());
        let mut request = tonic::Request::new(v1::GetTopNRequest::default());
        request.metadata_mut().insert("authorization", format!("Bearer {READ}").parse().expect("ascii"));
        reads += usize::from(client.get_top_n(request).await.is_ok());
    }
    (checks, reads)
}

async fn server(extra: &[(&'static str, &str)]) -> ServerProcess {
    let mut envs = vec![
        ("RANKING_WRITE_TOKEN", WRITE.to_string()),
        ("RANKING_READ_TOKEN", READ.to_string()),
        ("RANKING_ADMIN_TOKEN", "a-token".to_string()),
        ("RANKING_METRICS_LISTEN", "127.0.0.1:0".to_string()),
    ];
    envs.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    ServerProcess::start(&envs).await
}

/// Connections opened at once, each sent `bytes`; the ones the server accepted.
async fn connections(addr: SocketAddr, n: usize, bytes: &[u8]) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let Ok(mut tcp) = TcpStream::connect(addr).await else { continue };
        let _ = tokio::time::timeout(Duration::from_millis(50), tcp.write_all(bytes)).await;
        open.push(tcp);
    }
    open
}

/// How many of `open` the server has closed (a read gives EOF or an error at once).
async fn closed(open: &mut [TcpStream]) -> usize {
    let mut n = 0;
    let mut buf = [0u8; 4096];
    for tcp in open.iter_mut() {
        loop {
            match tokio::time::timeout(Duration::from_millis(5), tcp.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => {
                    n += 1;
                    break;
                }
                Ok(Ok(_)) => continue,
                Err(_) => break,
            }
        }
    }
    n
}

fn row(attack: &str, held: &str, fresh: (usize, usize), n: usize, memory: String) {
    println!("| {attack} | {held} | {}/{n} · {}/{n} | {memory} |", fresh.0, fresh.1);
}

pub async fn bench_hostile_web() {
    println!("\n## Hostile peers, round two: HTTP/1.1 and gRPC-Web (release server, all three tokens set)\n");
    println!(
        "| attack | what the attackers got | fresh client: health OK · GetTopN OK | server RSS MB before → during |"
    );
    println!("|---|---|---|---|");
    let n = 20;

    // 1. Bodies of 8 MB without a token.
    let s = server(&[]).await;
    let before = rss_mb(s.pid());
    let head = "POST /ranking.v1.RankingService/RecordEvents HTTP/1.1\r\nHost: localhost\r\n\
                content-type: application/grpc-web+proto\r\nexpect: 100-continue\r\ncontent-length: 8388613\r\n\r\n";
    let mut attackers = connections(s.addr, 8, head.as_bytes()).await;
    let mut first = [0u8; 64];
    let answered = attackers[0].read(&mut first).await.unwrap_or(0);
    let answer = String::from_utf8_lossy(&first[..answered]).lines().next().unwrap_or_default().to_string();
    let chunk = vec![0u8; 1 << 20];
    for tcp in &mut attackers {
        for _ in 0..8 {
            if tokio::time::timeout(Duration::from_millis(200), tcp.write_all(&chunk)).await.is_err() {
                break;
            }
        }
    }
    let fresh = fresh_client(s.addr, n).await;
    row(
        "8 × 8 MB RecordEvents bodies, no token",
        &format!("`{answer}` at once, then UNAUTHENTICATED"),
        fresh,
        n,
        format!("{before:.0} → {:.0}", rss_mb(s.pid())),
    );
    drop(attackers);
    s.terminate();
    s.wait().await;

    // 2. Health watches over gRPC-Web holding the connection cap.
    let s = server(&[("RANKING_MAX_CONNECTIONS", "300")]).await;
    let before = rss_mb(s.pid());
    let watch = "POST /grpc.health.v1.Health/Watch HTTP/1.1\r\nHost: localhost\r\n\
                 content-type: application/grpc-web+proto\r\ncontent-length: 5\r\n\r\n\0\0\0\0\0";
    let mut watches = connections(s.addr, 1_000, watch.as_bytes()).await;
    let fresh = fresh_client(s.addr, n).await;
    let gone = closed(&mut watches).await;
    row(
        "1,000 health watches over gRPC-Web, RANKING_MAX_CONNECTIONS=300",
        &format!("100 streams (RANKING_MAX_PUBLIC_STREAMS); {gone} of 1,000 connections closed or refused"),
        fresh,
        n,
        format!("{before:.0} → {:.0}", rss_mb(s.pid())),
    );
    drop(watches);
    s.terminate();
    s.wait().await;

    // 3 and 4 on one server.
    let s = server(&[("RANKING_HANDSHAKE_TIMEOUT", "1h")]).await;
    let before = rss_mb(s.pid());
    let mut request = b"POST /grpc.health.v1.Health/Check HTTP/1.1\r\nHost: localhost\r\n\
                        content-type: application/grpc-web+proto\r\ncontent-length: 5\r\ngrpc-encoding: "
        .to_vec();
    request.extend(std::iter::repeat_n(0xFFu8, 12 * 1024));
    request.extend_from_slice(b"\r\n\r\n\0\0\0\0\0");
    let mut tcp = TcpStream::connect(s.addr).await.expect("connect");
    tcp.write_all(&request).await.expect("write");
    let mut answer = vec![0u8; 64 * 1024];
    let got = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut answer)).await.map_or(0, |r| r.unwrap_or(0));
    let echo = connections(s.addr, 400, &request).await;
    let fresh = fresh_client(s.addr, n).await;
    row(
        "400 × a 12 KB `grpc-encoding` of 0xFF, answers not read",
        &format!("{got} bytes answered to each (UNIMPLEMENTED, nothing echoed)"),
        fresh,
        n,
        format!("{before:.0} → {:.0}", rss_mb(s.pid())),
    );
    drop(echo);
    drop(tcp);

    let before = rss_mb(s.pid());
    let mut head = b"POST /ranking.v1.RankingService/GetTopN HTTP/1.1\r\nHost: localhost\r\nx-pad: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 390 * 1024));
    let mut heads = connections(s.addr, 1_000, &head).await;
    let during = rss_mb(s.pid());
    let fresh = fresh_client(s.addr, n).await;
    let gone = closed(&mut heads).await;
    row(
        "1,000 × 390 KB of unfinished HTTP/1.1 headers",
        &format!("{gone} of 1,000 closed at 17 KB"),
        fresh,
        n,
        format!("{before:.0} → {during:.0}"),
    );
    drop(heads);
    s.terminate();
    s.wait().await;

    // 6. WatchTopN calls with the read token whose message never comes.
    let s = server(&[("RANKING_MAX_CONCURRENT_CALLS", "256"), ("RANKING_BODY_TIMEOUT", "30s")]).await;
    let before = rss_mb(s.pid());
    let mut held = Vec::new();
    for _ in 0..8 {
        let Ok(tcp) = TcpStream::connect(s.addr).await else { continue };
        let Ok((h2, connection)) = h2::client::handshake(tcp).await else { continue };
        held.push(tokio::spawn(async move {
            let _ = connection.await;
        }));
        let Ok(mut h2) = h2.ready().await else { continue };
        let mut streams = Vec::new();
        for _ in 0..64 {
            let mut request =
                ranking_server::test_support::grpc_request(s.addr, "/ranking.v1.RankingService/WatchTopN");
            request.headers_mut().insert("authorization", format!("Bearer {READ}").parse().expect("ascii"));
            let Ok((response, mut body)) = h2.send_request(request, false) else { break };
            let _ = body.send_data(bytes::Bytes::from_static(&[0, 0, 0]), false);
            streams.push((response, body));
            match tokio::time::timeout(Duration::from_secs(2), h2.clone().ready()).await {
                Ok(Ok(c)) => h2 = c,
                _ => break,
            }
        }
        held.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(streams);
        }));
    }
    let started = Instant::now();
    let fresh = fresh_client(s.addr, n).await;
    row(
        "512 WatchTopN (read token) whose message never comes, RANKING_MAX_CONCURRENT_CALLS=256",
        &format!("no call slot; the fresh client's {n} rounds took {:.0} ms", started.elapsed().as_secs_f64() * 1e3),
        fresh,
        n,
        format!("{before:.0} → {:.0}", rss_mb(s.pid())),
    );
    for task in held {
        task.abort();
    }
    s.terminate();
    s.wait().await;
}
