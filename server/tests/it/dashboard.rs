//! The Grafana dashboard (`deploy/grafana/ranking-service.json`) against a real Prometheus
//! (Debian's `prometheus`, installed by `scripts/ops-tools.sh`) scraping a running server
//! through a short workload: the JSON is a Grafana dashboard model, and every panel's
//! expression, with its template variables substituted, parses and returns at least one
//! series through Prometheus's HTTP API.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};

use chrono::Utc;
use ranking_client::{RankingClient, v1};
use ranking_server::test_support::eventually;
use serde_json::Value;

use crate::helpers::{TestApp, free_port, views};

/// A Prometheus server scraping one target every second, killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: TempDir,
}

/// A directory removed when dropped.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn scraping(target: std::net::SocketAddr) -> Self {
        let dir = std::env::temp_dir().join(format!("ranking-prometheus-{:x}", crate::helpers::rand_u64()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: ranking\n    static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("config");
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus on PATH (scripts/ops-tools.sh installs Debian's prometheus package)");
        Self { child, port, _dir: TempDir(dir) }
    }

    /// The value of the first series an instant query returns.
    async fn scalar(&self, expr: &str) -> Option<f64> {
        let series = self.query(expr).await?.ok()?;
        series.first()?["value"][1].as_str()?.parse().ok()
    }

    /// The result vector of an instant query, `None` while Prometheus is not answering.
    async fn query(&self, expr: &str) -> Option<Result<Vec<Value>, String>> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.ok()?;
        let body = format!("query={}", percent(expr));
        let request = format!(
            "POST /api/v1/query HTTP/1.1\r\nHost: prometheus\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(request.as_bytes()).await.ok()?;
        let mut response = String::new();
        conn.read_to_string(&mut response).await.ok()?;
        let json = response.split_once("\r\n\r\n")?.1;
        let answer: Value = serde_json::from_str(json).ok()?;
        Some(match answer["status"].as_str() {
            Some("success") => Ok(answer["data"]["result"].as_array().cloned().unwrap_or_default()),
            _ => Err(format!("{expr}: {}", answer["error"])),
        })
    }
}

/// `application/x-www-form-urlencoded` of a query.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The dashboard, checked as a Grafana dashboard model.
fn dashboard() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/ranking-service.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("dashboard")).expect("JSON");
    assert!(dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36), "a current schema version");
    assert!(dashboard["title"].is_string() && dashboard["uid"].is_string());
    let variables = dashboard["templating"]["list"].as_array().expect("template variables");
    assert!(
        variables.iter().any(|v| v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus"),
        "a datasource variable"
    );
    let panels = dashboard["panels"].as_array().expect("panels");
    let ids: HashSet<u64> = panels.iter().map(|p| p["id"].as_u64().expect("panel id")).collect();
    assert_eq!(ids.len(), panels.len(), "unique panel ids");
    for panel in panels {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{} reads the chosen datasource", panel["title"]);
        assert!(panel["gridPos"]["w"].is_u64() && panel["targets"].as_array().is_some_and(|t| !t.is_empty()));
    }
    dashboard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_of_the_dashboard_shows_a_scraped_server() {
    let dashboard = dashboard();
    // Live passes on: the live panels read their families; a JetStream source (`make test`
    // has one in every pass) for the bus panels, every one of which must show a series.
    let nats = crate::helpers::bus::test_nats().expect("NATS with JetStream (RANKING_TEST_NATS), as make test gives");
    let bus = crate::helpers::bus::TestBus::jetstream(&nats).await;
    let mut flags = vec!["--live-interval=100ms".to_string()];
    flags.extend(bus.flags(100));
    // The feed to JetStream too, for its panels.
    flags.push(format!("--feed-nats-subject=feed{:016x}", crate::helpers::rand_u64()));
    flags.push(format!("--feed-nats-url={nats}"));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let app = TestApp::spawn(&flags).await;
    let round = std::sync::atomic::AtomicUsize::new(0);
    let prometheus = Prometheus::scraping(app.metrics_addr.expect("metrics endpoint"));
    // The typed client retries what a busy machine makes UNAVAILABLE (a database pool wait
    // running out while every test runs at once), as a sibling service would.
    let client = RankingClient::builder(format!("http://{}", app.addr)).connect().await.expect("client");
    let at = Utc::now() - chrono::Duration::seconds(5);
    let workload = async || {
        let n = round.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        client.record_events(views(&format!("w{n}"), 1, 5, at)).await.expect("recorded");
        let valid = format!(
            r#"{{"eventId":"bus-{n}","productId":"2","type":"EVENT_TYPE_VIEW","occurredAt":"{}"}}"#,
            at.to_rfc3339()
        );
        bus.publish(&[("2".into(), valid.into_bytes()), ("x".into(), b"not json".to_vec())]).await;
        client.recompute("").await.expect("recomputed");
        client.top_n(v1::GetTopNRequest::default()).await.expect("read");
        let invalid = client.rank(v1::GetRankRequest::default()).await.expect_err("product 0");
        assert_eq!(invalid.code(), ranking_client::tonic::Code::InvalidArgument);
    };
    workload().await;
    // Two scrapes at least inside the 30 s window the rates are taken over, with calls
    // between them.
    eventually("Prometheus scrapes the server", || async {
        prometheus.scalar("count_over_time(up{job=\"ranking\"}[30s])").await.is_some_and(|n| n >= 2.0)
    })
    .await;
    workload().await;
    // Scraped after the second round of calls, so that the rates show them.
    eventually("Prometheus scrapes the second round", || async {
        prometheus.scalar("sum(grpc_server_started_total{grpc_method=\"GetTopN\"})").await.is_some_and(|n| n >= 2.0)
    })
    .await;
    let mut empty = Vec::new();
    // `RANKING_DASHBOARD_REPORT=<file>` writes what each panel shows, for a person to read.
    let mut report = String::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr").replace("$job", ".*").replace("$__rate_interval", "30s");
            // A series may need the next scrape (one a second): ask a few times.
            let mut found = None;
            for _ in 0..20 {
                found = prometheus.query(&expr).await;
                if matches!(&found, Some(Ok(series)) if !series.is_empty()) || matches!(found, Some(Err(_))) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            match found {
                Some(Ok(series)) if !series.is_empty() => {
                    for s in &series {
                        report.push_str(&format!("{} | {} | {}\n", panel["title"], s["metric"], s["value"][1]));
                    }
                }
                other => empty.push(format!("{}: {expr} → {other:?}", panel["title"])),
            }
        }
    }
    if let Ok(path) = std::env::var("RANKING_DASHBOARD_REPORT") {
        std::fs::write(path, &report).expect("report");
    }
    assert!(empty.is_empty(), "panels without a series:\n{}", empty.join("\n"));
    app.stop().await;
    bus.discard().await;
}
