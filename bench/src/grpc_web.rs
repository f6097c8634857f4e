//! `grpc-web`: what gRPC-Web costs next to gRPC on the same server (the release binary in its
//! own process, 10,000 ranked products): GetTopN(20) over gRPC (HTTP/2) and over gRPC-Web
//! (HTTP/1.1 keep-alive, as a browser on plaintext), beside the health check, the cheapest
//! gRPC call the transport allows. Each is measured as calls per second from 8 connections
//! with one caller each, and as the server's CPU time per call.

use std::time::Instant;

use chrono::Utc;
use ranking_client::v1;
use ranking_client::v1::ranking_service_client::RankingServiceClient;

use crate::helpers::grpc_web;
use crate::helpers::process::{ServerProcess, cpu_seconds};

const PRODUCTS: i64 = 10_000;
const CONNECTIONS: usize = 8;
const CALLS_PER_CONNECTION: usize = 5_000;

pub async fn bench_grpc_web() {
    let server = ServerProcess::start(&[("RANKING_RECOMPUTE_INTERVAL", "0".into())]).await;
    let (addr, pid) = (server.addr, server.pid());
    let endpoint = format!("http://{addr}");
    let mut admin = RankingServiceClient::connect(endpoint.clone()).await.expect("connect");
    let at = prost_types::Timestamp { seconds: Utc::now().timestamp() - 5, nanos: 0 };
    for chunk in (1..=PRODUCTS).collect::<Vec<_>>().chunks(2_000) {
        let events = chunk
            .iter()
            .flat_map(|&p| {
                (0..1 + p % 7).map(move |i| v1::Event {
                    event_id: format!("gw{p}-{i}"),
                    product_id: p,
                    r#type: v1::EventType::View.into(),
                    occurred_at: Some(at),
                    ..Default::default()
                })
            })
            .collect();
        admin.record_events(v1::RecordEventsRequest { events }).await.expect("events");
    }
    admin.recompute(v1::RecomputeRequest::default()).await.expect("recompute");
    let top = v1::GetTopNRequest { limit: 20, ..Default::default() };

    println!(
        "\n## gRPC-Web next to gRPC (release server, {PRODUCTS} products, {CONNECTIONS} connections × 1 caller)\n"
    );
    println!("| call | transport | calls/s | server CPU µs per call | × gRPC (CPU) |");
    println!("|---|---|---:|---:|---:|");
    let mut grpc_cpu = 0.0;
    for case in ["health", "grpc", "grpc-web"] {
        let cpu_before = cpu_seconds(pid);
        let started = Instant::now();
        let mut callers = Vec::new();
        for _ in 0..CONNECTIONS {
            let (endpoint, top) = (endpoint.clone(), top.clone());
            callers.push(tokio::spawn(async move {
                match case {
                    "health" => {
                        let channel = ranking_client::tonic::transport::Endpoint::from_shared(endpoint)
                            .expect("endpoint")
                            .connect()
                            .await
                            .expect("connect");
                        let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
                        for _ in 0..CALLS_PER_CONNECTION {
                            health.check(tonic_health::pb::HealthCheckRequest::default()).await.expect("health");
                        }
                    }
                    "grpc" => {
                        let mut client = RankingServiceClient::connect(endpoint).await.expect("connect");
                        for _ in 0..CALLS_PER_CONNECTION {
                            let answer = client.get_top_n(top.clone()).await.expect("GetTopN").into_inner();
                            assert_eq!(answer.products.len(), 20);
                        }
                    }
                    _ => {
                        let mut web = grpc_web::Connection::open(addr).await;
                        for _ in 0..CALLS_PER_CONNECTION {
                            let answer = web.call("GetTopN", &top, None).await;
                            assert_eq!(answer.code(), Some(0));
                            assert_eq!(answer.message::<v1::GetTopNResponse>(0).products.len(), 20);
                        }
                    }
                }
            }));
        }
        for caller in callers {
            caller.await.expect("caller");
        }
        let calls = (CONNECTIONS * CALLS_PER_CONNECTION) as f64;
        let rate = calls / started.elapsed().as_secs_f64();
        let cpu = (cpu_seconds(pid) - cpu_before) / calls * 1e6;
        let (call, transport) = match case {
            "health" => ("Health/Check", "gRPC, HTTP/2"),
            "grpc" => ("GetTopN(20)", "gRPC, HTTP/2"),
            _ => ("GetTopN(20)", "gRPC-Web, HTTP/1.1"),
        };
        if case == "grpc" {
            grpc_cpu = cpu;
        }
        let ratio = if case == "grpc-web" { format!("{:.2}", cpu / grpc_cpu) } else { "—".into() };
        println!("| {call} | {transport} | {rate:.0} | {cpu:.1} | {ratio} |");
    }
    server.terminate();
    server.wait().await;
}
