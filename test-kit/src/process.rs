//! The `ranking-server` binary run as an operator runs it, on port 0: the address comes from
//! its "serving" log line, so the test waits for that state instead of polling the port.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};

/// The tests' one generous bound for reaching a state, here for a process: never an
/// assertion about speed.
pub use ranking_server::test_support::EVENTUALLY;

/// A process's `stat`, read through procfs; `None` when the process is gone.
fn stat(pid: u32) -> Option<procfs::process::Stat> {
    procfs::process::Process::new(pid as i32).ok()?.stat().ok()
}

/// Clock ticks per second of the CPU counters.
fn tick() -> f64 {
    procfs::ticks_per_second() as f64
}

/// User + system CPU seconds of a process so far; NaN when it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    stat(pid).map_or(f64::NAN, |s| (s.utime + s.stime) as f64 / tick())
}

/// Resident memory of a process, MB; NaN when it is gone.
pub fn rss_mb(pid: u32) -> f64 {
    let status = procfs::process::Process::new(pid as i32).and_then(|p| p.status());
    status.ok().and_then(|s| s.vmrss).map_or(f64::NAN, |kb| kb as f64 / 1024.0)
}

/// User + system CPU seconds of this process's finished (waited-for) children.
pub fn children_cpu_seconds() -> f64 {
    procfs::process::Process::myself()
        .and_then(|me| me.stat())
        .map_or(f64::NAN, |s| (s.cutime + s.cstime) as f64 / tick())
}

/// The processes whose `comm` is `name` (the broker of a benchmark, say).
pub fn pids_named(name: &str) -> Vec<u32> {
    processes().filter(|p| p.stat().is_ok_and(|s| s.comm == name)).map(|p| p.pid as u32).collect()
}

/// The command line of a process (its arguments); empty when it is gone.
pub fn command_line(pid: u32) -> Vec<String> {
    procfs::process::Process::new(pid as i32).and_then(|p| p.cmdline()).unwrap_or_default()
}

/// Every process alive now.
pub fn processes() -> impl Iterator<Item = procfs::process::Process> {
    procfs::process::all_processes().into_iter().flatten().flatten()
}

/// Waits (blocking, at most [`EVENTUALLY`]) for a line of `output` containing `needle` and
/// returns it; the rest of the output is drained on a thread of its own, so the child never
/// blocks on a full pipe. `None` when the output ended or the deadline passed first.
pub fn wait_for_line(output: impl std::io::Read + Send + 'static, needle: &'static str) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        // `RANKING_TEST_SERVER_LOG=FILE`: the servers' lines appended there, to read after a
        // failure.
        let mut copy = std::env::var_os("RANKING_TEST_SERVER_LOG")
            .and_then(|path| std::fs::OpenOptions::new().create(true).append(true).open(path).ok());
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            if let Some(file) = copy.as_mut() {
                use std::io::Write;
                let _ = writeln!(file, "{line}");
            }
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
    reaper: Reaper,
}

/// Kills the process when its [`ServerProcess`] is dropped without being waited for (a test
/// that failed half-way), so that no server outlives its test.
struct Reaper(Option<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}

/// The `ranking-server` binary of this build: `RANKING_SERVER_BIN`, or the one Cargo built
/// beside this executable (an integration test runs from `target/<profile>/deps/`, the
/// benchmark from `target/<profile>/`).
pub fn server_binary() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("RANKING_SERVER_BIN") {
        return path.into();
    }
    let exe = std::env::current_exe().expect("the running executable");
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("ranking-server"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!("no ranking-server binary beside {}: build it (cargo build -p ranking-server)", exe.display())
        })
}

impl ServerProcess {
    /// Starts this build's binary with a clean environment plus `envs`, and waits for it to
    /// serve.
    pub async fn start(envs: &[(&str, String)]) -> Self {
        Self::start_binary(&server_binary(), envs).await
    }

    /// Starts `binary` (another release's, say) as [`ServerProcess::start`] does.
    pub async fn start_binary(binary: &std::path::Path, envs: &[(&str, String)]) -> Self {
        super::clear_of_midnight().await;
        let db = std::env::temp_dir().join(format!("rk-bin-{:x}.db", super::rand_u64()));
        let mut child = Command::new(binary)
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
        let reaper = Reaper(Some(child.id()));
        Self { child, addr, db, reaper }
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
        let Self { mut child, db, mut reaper, .. } = self;
        // Waited for here: killed below only if it does not exit.
        reaper.0 = None;
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

#[test]
fn process_figures_are_read_for_this_process() {
    let me = std::process::id();
    let spin = std::time::Instant::now();
    while spin.elapsed() < std::time::Duration::from_millis(50) {
        std::hint::black_box(0u64.wrapping_add(1));
    }
    assert!(cpu_seconds(me) > 0.0, "this process has spent CPU");
    assert!(cpu_seconds(u32::MAX).is_nan(), "a process that does not exist has no figure");
    assert!(!command_line(me).is_empty());
    let comm = procfs::process::Process::myself().and_then(|p| p.stat()).expect("own stat").comm;
    assert!(pids_named(&comm).contains(&me));
    assert!(children_cpu_seconds() >= 0.0);
}
