//! A throwaway PostgreSQL server for failure tests: its own data directory and port, so a
//! test can stop and restart the database under a running service without touching the
//! shared server.

use std::path::PathBuf;
use std::process::Command;

/// A private PostgreSQL instance.
pub struct ThrowawayPostgres {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    extra_options: String,
}

impl ThrowawayPostgres {
    /// Initialises and starts an instance (without fsync: tests need no durability across a
    /// machine crash), or returns `None` when PostgreSQL's server
    /// binaries are not installed here.
    pub fn start() -> Option<Self> {
        Self::start_with("-c fsync=off")
    }

    /// Like [`ThrowawayPostgres::start`], with extra server options (`-c name=value …`).
    pub fn start_with(extra_options: &str) -> Option<Self> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .find(|p| p.join("initdb").exists())?;
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            l.local_addr().ok()?.port()
        };
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("rk-pg-{port}-{nanos:x}"));
        std::fs::create_dir_all(&dir).ok()?;
        let me = Self { port, dir, bin, extra_options: extra_options.to_string() };
        // PostgreSQL refuses to run as root; run it as the `postgres` user when we are root.
        me.run(&format!("chown postgres {}", me.dir.display()), false);
        me.run(
            &format!("{}/initdb -D {}/data -A trust -U postgres >/dev/null", me.bin.display(), me.dir.display()),
            true,
        )
        .then_some(())?;
        me.pg_ctl("start").then_some(me)
    }

    fn run(&self, script: &str, as_pg: bool) -> bool {
        let root = running_as_root();
        let mut cmd = if as_pg && root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", "sh", "-c", script]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", script]);
            c
        };
        cmd.status().map(|s| s.success()).unwrap_or(false)
    }

    fn pg_ctl(&self, action: &str) -> bool {
        let opts =
            format!("-p {} -k {} -c listen_addresses=127.0.0.1 {}", self.port, self.dir.display(), self.extra_options);
        self.run(
            &format!(
                "{}/pg_ctl -D {}/data -o '{opts}' -l {}/log -w -t 30 {action} >/dev/null 2>&1",
                self.bin.display(),
                self.dir.display(),
                self.dir.display()
            ),
            true,
        )
    }

    /// URL of the `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// CPU seconds (user + system) spent so far by the server's processes: the postmaster
    /// and its children (backends, writers, checkpointer) that are alive now.
    pub fn cpu_seconds(&self) -> f64 {
        let pids = self.pids();
        if pids.is_empty() {
            return f64::NAN; // no server to measure: a figure, not a silent zero
        }
        pids.into_iter().map(super::process::cpu_seconds).filter(|s| !s.is_nan()).sum()
    }

    /// The postmaster and its children alive now.
    pub fn pids(&self) -> Vec<u32> {
        let pid_file = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).unwrap_or_default();
        let Some(postmaster) = pid_file.lines().next().map(str::to_string) else { return Vec::new() };
        let Ok(postmaster) = postmaster.trim().parse::<u32>() else { return Vec::new() };
        super::process::processes()
            .filter_map(|p| p.stat().ok())
            .filter(|s| s.pid as u32 == postmaster || s.ppid as u32 == postmaster)
            .map(|s| s.pid as u32)
            .collect()
    }

    /// Stops the server immediately (connections are cut).
    pub fn stop(&self) {
        assert!(self.pg_ctl("stop -m immediate"), "throwaway PostgreSQL stops");
    }

    /// Starts it again on the same port and data.
    pub fn restart(&self) {
        assert!(self.pg_ctl("start"), "throwaway PostgreSQL restarts");
    }
}

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false)
}

impl Drop for ThrowawayPostgres {
    fn drop(&mut self) {
        self.pg_ctl("stop -m immediate");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
