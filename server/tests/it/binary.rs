//! The `ranking-server` binary as an operator runs it: configured from the environment,
//! serving health, and stopping cleanly on SIGTERM.

use std::process::{Command, Stdio};
use std::time::Duration;

use ranking_client::tonic::transport::Endpoint;

#[tokio::test]
async fn sigterm_turns_health_off_and_exits_with_code_0() {
    let db = std::env::temp_dir().join(format!("rk-bin-{:x}.db", crate::helpers::rand_u64()));
    let port = crate::helpers::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ranking-server"))
        .env_clear()
        .env("RANKING_LISTEN", format!("127.0.0.1:{port}"))
        .env("DATABASE_URL", format!("sqlite://{}?mode=rwc", db.display()))
        .env("RANKING_METRICS_LISTEN", "")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");

    let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{port}")).expect("uri");
    let mut channel = None;
    for _ in 0..100 {
        if let Ok(c) = endpoint.connect().await {
            channel = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.expect("server came up"));
    let serving = health
        .check(tonic_health::pb::HealthCheckRequest { service: "ranking.v1.RankingService".into() })
        .await
        .expect("health")
        .into_inner();
    assert_eq!(serving.status, tonic_health::pb::health_check_response::ServingStatus::Serving as i32);

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let mut status = None;
    for _ in 0..100 {
        if let Some(s) = child.try_wait().expect("wait") {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = status.unwrap_or_else(|| {
        let _ = child.kill();
        panic!("server did not stop within 10 s of SIGTERM")
    });
    assert_eq!(status.code(), Some(0), "clean exit");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}
