//! The `ranking-server` binary as an operator runs it: configured from the environment,
//! serving health, and stopping cleanly on SIGTERM.

use ranking_client::tonic::transport::Endpoint;

use crate::helpers::process::ServerProcess;

#[tokio::test]
async fn sigterm_turns_health_off_and_exits_with_code_0() {
    let server = ServerProcess::start(&[]).await;
    let channel =
        Endpoint::from_shared(format!("http://{}", server.addr)).expect("uri").connect().await.expect("connect");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let serving = health
        .check(tonic_health::pb::HealthCheckRequest { service: "ranking.v1.RankingService".into() })
        .await
        .expect("health")
        .into_inner();
    assert_eq!(serving.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);

    server.terminate();
    assert_eq!(server.wait().await.code(), Some(0), "clean exit");
}
