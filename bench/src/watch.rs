//! `watch`: 10,000 WatchTopN streams on one replica (the release binary in its own process),
//! opened by this process over 100 connections: the server's memory with them open, the time
//! from a Recompute returning until 99 % of them have its version, and server CPU per message.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use ranking_client::v1;
use ranking_client::v1::ranking_service_client::RankingServiceClient;

use crate::helpers::process::ServerProcess;
use crate::hostile::rss_mb;
use crate::reads::cpu_seconds;

const CONNECTIONS: usize = 100;
const STREAMS_PER_CONNECTION: usize = 100;

pub async fn bench_watch(redis: &str) {
    let server = ServerProcess::start(&[
        ("REDIS_URL", redis.to_string()),
        ("RANKING_REDIS_PREFIX", format!("bench-{:x}", Utc::now().timestamp_micros())),
        ("RANKING_RECOMPUTE_INTERVAL", "0".into()),
        ("RANKING_MAX_WATCHERS", "20000".into()),
    ])
    .await;
    let (addr, pid) = (server.addr, server.pid());
    let endpoint = format!("http://{addr}");
    let mut admin = RankingServiceClient::connect(endpoint.clone()).await.expect("connect");
    let now = prost_types::Timestamp { seconds: Utc::now().timestamp() - 5, nanos: 0 };
    let events: Vec<v1::Event> = (1..=1_000i64)
        .map(|p| v1::Event {
            event_id: format!("w{p}"),
            product_id: p,
            r#type: v1::EventType::View.into(),
            amount: 0,
            occurred_at: Some(now),
            signal: String::new(),
            ..Default::default()
        })
        .collect();
    admin.record_events(v1::RecordEventsRequest { events }).await.expect("events");
    admin.recompute(v1::RecomputeRequest::default()).await.expect("recompute");

    let rss_before = rss_mb(pid);
    let watchers = CONNECTIONS * STREAMS_PER_CONNECTION;
    // The newest version each watcher has received.
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..watchers).map(|_| AtomicU64::new(0)).collect());
    let opened = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for _ in 0..CONNECTIONS {
        let channel = ranking_client::tonic::transport::Endpoint::from_shared(endpoint.clone())
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        for _ in 0..STREAMS_PER_CONNECTION {
            let mut client = RankingServiceClient::new(channel.clone());
            let (seen, opened, me) = (seen.clone(), opened.clone(), readers.len());
            readers.push(tokio::spawn(async move {
                let request = v1::WatchTopNRequest { limit: 10, ..Default::default() };
                let mut stream = client.watch_top_n(request).await.expect("watch").into_inner();
                opened.fetch_add(1, Ordering::SeqCst);
                while let Ok(Some(m)) = stream.message().await {
                    seen[me].fetch_max(m.version, Ordering::SeqCst);
                }
            }));
        }
    }
    while opened.load(Ordering::SeqCst) < watchers {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_open = rss_mb(pid);

    let mut rounds = Vec::new();
    for round in 0..5 {
        // A change at the top: product 1 jumps ahead.
        let event = v1::Event {
            event_id: format!("jump{round}"),
            product_id: 1,
            r#type: v1::EventType::View.into(),
            amount: 0,
            occurred_at: Some(now),
            signal: String::new(),
            ..Default::default()
        };
        let burst: Vec<v1::Event> =
            (0..50).map(|i| v1::Event { event_id: format!("{}-{i}", event.event_id), ..event.clone() }).collect();
        admin.record_events(v1::RecordEventsRequest { events: burst }).await.expect("events");
        let cpu_before = cpu_seconds(pid);
        let started = Instant::now();
        let version = admin.recompute(v1::RecomputeRequest::default()).await.expect("recompute").into_inner().version;
        let returned = Instant::now();
        let reached = || seen.iter().filter(|v| v.load(Ordering::SeqCst) >= version).count();
        let deadline = returned + Duration::from_secs(30);
        while reached() * 100 < watchers * 99 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let done = Instant::now();
        // Let the rest arrive before measuring the CPU of the whole push.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let cpu = cpu_seconds(pid) - cpu_before;
        // The next round starts more than RANKING_WATCH_INTERVAL (1 s) after this one's
        // message, so it measures the push, not the one-message-per-interval pace.
        tokio::time::sleep(Duration::from_millis(700)).await;
        rounds.push((done - returned, done - started, cpu, reached()));
    }
    println!(
        "\n## WatchTopN: {watchers} watchers of the same top 10 on one replica ({CONNECTIONS} connections × {STREAMS_PER_CONNECTION} streams)\n"
    );
    println!(
        "server RSS: {rss_before:.1} MB before, {rss_open:.1} MB with the streams open (+{:.1} MB)\n",
        rss_open - rss_before
    );
    println!(
        "| round | Recompute returned → 99 % have the version, ms | Recompute called → 99 %, ms | watchers reached | server CPU for recompute + push, ms | CPU µs per message |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for (i, (after_return, after_call, cpu, got)) in rounds.iter().enumerate() {
        println!(
            "| {} | {:.0} | {:.0} | {got} | {:.0} | {:.1} |",
            i + 1,
            after_return.as_secs_f64() * 1e3,
            after_call.as_secs_f64() * 1e3,
            cpu * 1e3,
            cpu * 1e6 / *got as f64
        );
    }
    for r in readers {
        r.abort();
    }
    server.terminate();
    server.wait().await;
}
