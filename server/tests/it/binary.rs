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

#[test]
fn check_profile_prints_the_layout_or_names_the_problem() {
    let bin = env!("CARGO_BIN_EXE_ranking-server");
    let built_in = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/profiles/built-in.toml");
    let ok = std::process::Command::new(bin).arg("--check-profile").arg(&built_in).output().expect("ran");
    let printed = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{printed}");
    assert!(
        printed.contains("axis 3: recency, 3 digits") && printed.contains("clamped below 2^22 = 4194304"),
        "{printed}"
    );

    let bad = std::env::temp_dir().join(format!("profile-{:x}.toml", crate::helpers::rand_u64()));
    let text = std::fs::read_to_string(&built_in).expect("profile").replace("digits = 3", "digits = 5");
    std::fs::write(&bad, text).expect("written");
    let refused = std::process::Command::new(bin).arg("--check-profile").arg(&bad).output().expect("ran");
    let _ = std::fs::remove_file(&bad);
    let problem = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{problem}");
    assert!(problem.contains("axes[0].digits must be 1-4, got 5"), "{problem}");

    // The server refuses to start on the same profile, naming the variable, file and problem.
    let bad = std::env::temp_dir().join(format!("profile-{:x}.toml", crate::helpers::rand_u64()));
    std::fs::write(&bad, "carry_over = 0.1\ncarry_days = 7\n[[main]]\nsignal = \"dwell\"\nweight = 1.0\n")
        .expect("written");
    let db = std::env::temp_dir().join(format!("rk-bad-profile-{:x}.db", crate::helpers::rand_u64()));
    let started = std::process::Command::new(bin)
        .env_clear()
        .env("RANKING_PROFILE", &bad)
        .env("DATABASE_URL", format!("sqlite://{}?mode=rwc", db.display()))
        .env("RANKING_LISTEN", "127.0.0.1:0")
        .env("RANKING_METRICS_LISTEN", "")
        .output()
        .expect("ran");
    let _ = std::fs::remove_file(&bad);
    let _ = std::fs::remove_file(&db);
    let problem = String::from_utf8_lossy(&started.stderr).to_string() + &String::from_utf8_lossy(&started.stdout);
    assert!(!started.status.success(), "{problem}");
    assert!(problem.contains("RANKING_PROFILE: ") && problem.contains(&bad.display().to_string()), "{problem}");
    assert!(problem.contains("missing field `axes`"), "{problem}");
}
