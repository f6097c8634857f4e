//! `hostile <addr> <pid>`: what a hostile or broken peer does to a running server (any
//! build, started separately, so its memory is its own), measured from outside:
//! - 2,100 request streams whose message never comes (21 connections × 100), then a health
//!   check and a GetTopN from a fresh connection: their status codes;
//! - 48 GetTopN calls whose `date` is 8,388,544 NUL bytes: error message size, server RSS;
//! - 2,000 silent TCP connections: RSS, and how many the server closed 15 s later (run the
//!   server with short `RANKING_HANDSHAKE_TIMEOUT`/`RANKING_IDLE_TIMEOUT` to see them go);
//! - SIGTERM while 10 silent TCP connections and 10 HTTP/2 connections with a call whose
//!   message never comes are held (a client that ignores GOAWAY): seconds until the process
//!   is gone (given up after 45 s). This ends the server.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ranking_client::v1;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

pub use crate::helpers::process::rss_mb;

use ranking_server::test_support::grpc_request as request;

/// Opens `n` streams whose message never comes on one connection; returns what keeps them
/// open.
async fn unfinished_streams(addr: SocketAddr, n: usize) -> Vec<Box<dyn std::any::Any + Send>> {
    let mut keep: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
    let Ok(tcp) = TcpStream::connect(addr).await else { return keep };
    let Ok((client, connection)) = h2::client::handshake(tcp).await else { return keep };
    keep.push(Box::new(tokio::spawn(connection)));
    let Ok(mut client) = client.ready().await else { return keep };
    for _ in 0..n {
        match client.send_request(request(addr, "/grpc.health.v1.Health/Check"), false) {
            Ok(stream) => keep.push(Box::new(stream)),
            Err(_) => break,
        }
        match tokio::time::timeout(Duration::from_secs(2), client.clone().ready()).await {
            Ok(Ok(c)) => client = c,
            _ => break, // the server's stream limit
        }
    }
    keep
}

async fn code_of<T>(call: impl std::future::Future<Output = Result<T, ranking_client::tonic::Status>>) -> String {
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Ok(_)) => "Ok".into(),
        Ok(Err(s)) => format!("{:?}", s.code()),
        Err(_) => "no answer in 5 s".into(),
    }
}

pub async fn bench_hostile(addr: SocketAddr, pid: u32) {
    println!("\n## Hostile peers against the server at {addr} (pid {pid})\n");
    println!("| case | figure |");
    println!("|---|---|");
    println!("| RSS at start | {:.0} MB |", rss_mb(pid));

    let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let mut ranking = ranking_client::RankingServiceClient::new(channel.clone());

    let mut held = Vec::new();
    for _ in 0..21 {
        held.extend(unfinished_streams(addr, 100).await);
    }
    // Let the server see them all.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fresh = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let h = code_of(
        tonic_health::pb::health_client::HealthClient::new(fresh.clone())
            .check(tonic_health::pb::HealthCheckRequest::default()),
    )
    .await;
    let t = code_of(ranking_client::RankingServiceClient::new(fresh).get_top_n(v1::GetTopNRequest::default())).await;
    println!("| 2,100 unfinished streams held: health check from another connection | {h} |");
    println!("| 2,100 unfinished streams held: GetTopN from another connection | {t} |");
    drop(held);
    tokio::time::sleep(Duration::from_secs(1)).await;

    let date = "\0".repeat(8_388_544);
    let before = rss_mb(pid);
    let mut calls = Vec::new();
    for _ in 0..48 {
        let mut c = ranking.clone();
        let date = date.clone();
        calls.push(tokio::spawn(async move {
            c.get_top_n(v1::GetTopNRequest { date, ..Default::default() }).await.err().map(|s| s.message().len())
        }));
    }
    let mut longest = 0;
    for c in calls {
        longest = longest.max(c.await.ok().flatten().unwrap_or(0));
    }
    let after = rss_mb(pid);
    println!("| 48 GetTopN with an 8 MB NUL date: longest error message | {longest} bytes |");
    println!("| … RSS before / after | {before:.0} / {after:.0} MB |");
    let started = Instant::now();
    let t = code_of(ranking.get_top_n(v1::GetTopNRequest::default())).await;
    println!("| … next ordinary GetTopN | {t} in {:.0} ms |", started.elapsed().as_secs_f64() * 1e3);
    let _ = health.check(tonic_health::pb::HealthCheckRequest::default()).await;

    let before = rss_mb(pid);
    let mut silent = Vec::new();
    for _ in 0..2_000 {
        if let Ok(c) = TcpStream::connect(addr).await {
            silent.push(c);
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("| 2,000 silent TCP connections: RSS before / with them | {before:.0} / {:.0} MB |", rss_mb(pid));
    tokio::time::sleep(Duration::from_secs(15)).await;
    let mut closed = 0;
    for c in &mut silent {
        // Past the server's SETTINGS frame, if it sent one: closed means end of stream.
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(Duration::from_millis(5), c.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => {
                    closed += 1;
                    break;
                }
                Ok(Ok(_)) => continue,
                Err(_) => break,
            }
        }
    }
    println!("| … closed by the server 16 s later | {closed} of {} |", silent.len());
    drop(silent);

    let _silent: Vec<_> = futures_util::future::join_all((0..10).map(|_| TcpStream::connect(addr))).await;
    let mut _unfinished = Vec::new();
    for _ in 0..10 {
        _unfinished.push(unfinished_streams(addr, 1).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let gone = loop {
        if gone_or_zombie(pid) {
            break Some(started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(45) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    match gone {
        Some(t) => println!(
            "| SIGTERM with 10 silent + 10 unfinished-call connections held: exited after | {:.1} s |",
            t.as_secs_f64()
        ),
        None => println!(
            "| SIGTERM with 10 silent + 10 unfinished-call connections held: exited after | still running after 45 s |"
        ),
    }
}

/// Whether the process has exited (gone, or a zombie waiting to be reaped).
fn gone_or_zombie(pid: u32) -> bool {
    procfs::process::Process::new(pid as i32).and_then(|p| p.stat()).map_or(true, |s| s.state == 'Z')
}

/// `hostile-reads <addr> <pid> <redis-pid>`: the server's Redis is stopped (SIGSTOP), and 4
/// rounds of 30,000 GetTopN calls with distinct offsets give up after 0.3 s each; server RSS
/// after each round, then after Redis resumes (SIGCONT).
pub async fn bench_hostile_reads(addr: SocketAddr, pid: u32, redis_pid: u32) {
    let channel = ranking_client::tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let client = ranking_client::RankingServiceClient::new(channel);
    println!("\n## Cancelled reads while Redis is stopped, server at {addr} (pid {pid})\n");
    println!("| moment | server RSS MB |");
    println!("|---|---:|");
    println!("| Redis running, before | {:.0} |", rss_mb(pid));
    let _ = std::process::Command::new("kill").args(["-STOP", &redis_pid.to_string()]).status();
    let mut offset = 0u32;
    for round in 1..=4 {
        for _ in 0..30 {
            let calls: Vec<_> = (0..1_000)
                .map(|_| {
                    offset += 1;
                    let mut c = client.clone();
                    let request = v1::GetTopNRequest { offset, limit: 1, ..Default::default() };
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(Duration::from_millis(300), c.get_top_n(request)).await;
                    })
                })
                .collect();
            for c in calls {
                let _ = c.await;
            }
        }
        println!("| Redis stopped, after round {round} (30,000 calls given up) | {:.0} |", rss_mb(pid));
    }
    let _ = std::process::Command::new("kill").args(["-CONT", &redis_pid.to_string()]).status();
    tokio::time::sleep(Duration::from_secs(10)).await;
    println!("| Redis resumed, 10 s later | {:.0} |", rss_mb(pid));
}
