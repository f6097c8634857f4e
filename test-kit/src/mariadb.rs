//! A throwaway MariaDB server for failure tests: its own data directory and port, so a test
//! can kill and restart the database under a running service.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

/// A private MariaDB instance (grant tables skipped: it listens on loopback for one test).
pub struct ThrowawayMariaDb {
    pub port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl ThrowawayMariaDb {
    /// Initialises and starts an instance, or `None` when MariaDB is not installed here.
    pub fn start() -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let dir = std::env::temp_dir().join(format!("rk-maria-{port}-{:x}", super::rand_u64()));
        std::fs::create_dir_all(&dir).ok()?;
        let _ = Command::new("chown").args(["-R", "mysql", &dir.display().to_string()]).status();
        let installed = Command::new("mariadb-install-db")
            .args(["--no-defaults", "--skip-test-db", "--auth-root-authentication-method=normal", "--user=mysql"])
            .arg(format!("--datadir={}/data", dir.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        if !installed.success() {
            return None;
        }
        let me = Self { port, dir, child: Mutex::new(None) };
        me.restart();
        Some(me)
    }

    /// URL of the instance's `mysql` database.
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/mysql", self.port)
    }

    /// Kills the server at once (connections are cut, nothing is shut down cleanly).
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it on the same port and data, and waits until it accepts connections.
    pub fn restart(&self) {
        let mut child = Command::new("/usr/sbin/mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}/data", self.dir.display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--socket={}/sock", self.dir.display()))
            .arg(format!("--pid-file={}/pid", self.dir.display()))
            .args(["--bind-address=127.0.0.1", "--user=mysql", "--skip-grant-tables", "--innodb-buffer-pool-size=32M"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mariadbd starts");
        let log = child.stderr.take().expect("piped stderr");
        *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        assert!(
            super::process::wait_for_line(log, "ready for connections").is_some(),
            "throwaway MariaDB did not come up"
        );
    }
}

impl Drop for ThrowawayMariaDb {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
