//! The `ranking-server` binary run as an operator runs it, on port 0: the address comes from
//! its "serving" log line, so the test waits for that state instead of polling the port.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// A generous bound for a process to reach a state; never an assertion about speed.
pub const EVENTUALLY: Duration = Duration::from_secs(120);

/// The fields of `/proc/<process>/stat` (a pid, or `self`) after the parenthesised command
/// name, which may hold spaces: the state first, then the parent's pid, …; `None` when the
/// process is gone.
pub fn stat_fields(process: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{process}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Seconds of the two tick counters of `fields` (from [`stat_fields`]) at `first` and
/// `first + 1`: 11 is the process's own user + system time, 13 that of its finished children.
pub fn tick_seconds(fields: &[String], first: usize) -> f64 {
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    (ticks(first) + ticks(first + 1)) / clock_ticks()
}

/// User + system CPU seconds of a process so far; NaN when it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    stat_fields(&pid.to_string()).map_or(f64::NAN, |fields| tick_seconds(&fields, 11))
}

/// The processes whose `comm` is `name` (the broker of a benchmark, say).
pub fn pids_named(name: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name))
        .collect()
}

/// Clock ticks per second of the `/proc` counters, asked of `getconf` once.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Waits (blocking, at most [`EVENTUALLY`]) for a line of `output` containing `needle` and
/// returns it; the rest of the output is drained on a thread of its own, so the child never
/// blocks on a full pipe. `None` when the output ended or the deadline passed first.
pub fn wait_for_line(output: impl std::io::Read + Send + 'static, needle: &'static str) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            if line.contains(needle)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(line);
            }
        }
    });
    rx.recv_timeout(EVENTUALLY).ok()
}

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
        super::clear_of_midnight().await;
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
        let serving = tokio::task::spawn_blocking(move || wait_for_line(stdout, "serving ranking.v1.RankingService"))
            .await
            .expect("reader task");
        let Some(line) = serving else {
            let _ = child.kill();
            panic!("ranking-server never logged that it was serving");
        };
        let addr = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("addr="))
            .and_then(|a| a.parse().ok())
            .expect("a socket address in the serving line");
        Self { child, addr, db }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let killed = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill");
        assert!(killed.success());
    }

    /// Sends SIGKILL: the process ends at once, giving back nothing it holds.
    pub fn kill(&self) {
        let killed = Command::new("kill").args(["-KILL", &self.child.id().to_string()]).status().expect("kill");
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
