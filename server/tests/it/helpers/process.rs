//! The `ranking-server` binary run as an operator runs it, on port 0: the address comes from
//! its "serving" log line, so the test waits for that state instead of polling the port.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// A generous bound for the binary to reach a state; never an assertion about speed.
const EVENTUALLY: Duration = Duration::from_secs(120);

/// A running `ranking-server` process on a SQLite file of its own.
pub struct ServerProcess {
    child: Child,
    /// The gRPC address it serves.
    pub addr: SocketAddr,
    db: PathBuf,
}

impl ServerProcess {
    /// Starts the binary with a clean environment plus `envs`, and waits for it to serve.
    pub async fn start(envs: &[(&str, String)]) -> Self {
        let db = std::env::temp_dir().join(format!("rk-bin-{:x}.db", super::rand_u64()));
        let mut child = Command::new(env!("CARGO_BIN_EXE_ranking-server"))
            .env_clear()
            .env("RANKING_LISTEN", "127.0.0.1:0")
            .env("DATABASE_URL", format!("sqlite://{}?mode=rwc", db.display()))
            .env("RANKING_METRICS_LISTEN", "")
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Reads the log until the serving line, then keeps draining it so the pipe never fills.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("serving ranking.v1.RankingService") {
                    let addr = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).map(str::to_string);
                    if let (Some(tx), Some(addr)) = (tx.take(), addr) {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let addr = match tokio::time::timeout(EVENTUALLY, rx).await {
            Ok(Ok(addr)) => addr.parse().expect("a socket address in the serving line"),
            _ => {
                let _ = child.kill();
                panic!("ranking-server never logged that it was serving");
            }
        };
        Self { child, addr, db }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let killed = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill");
        assert!(killed.success());
    }

    /// Waits for the process to exit and removes its database.
    pub async fn wait(self) -> ExitStatus {
        let Self { mut child, db, .. } = self;
        let pid = child.id();
        let waited = tokio::time::timeout(EVENTUALLY, tokio::task::spawn_blocking(move || child.wait())).await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
        }
        match waited {
            Ok(status) => status.expect("wait task").expect("wait"),
            Err(_) => {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                panic!("ranking-server did not exit after SIGTERM");
            }
        }
    }
}
