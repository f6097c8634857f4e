//! A Redis server of a test's own, for outage tests: killed and restarted under a running
//! service.

/// A Redis server of the test's own on a free port, stopped when dropped.
pub struct ThrowawayRedis {
    child: std::process::Child,
    /// Its port.
    pub port: u16,
}

impl ThrowawayRedis {
    /// Starts a server on `port` and waits until it accepts connections.
    pub fn start(port: u16) -> Self {
        let mut child = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("redis-server binary (make test installs it)");
        let stdout = child.stdout.take().expect("piped stdout");
        assert!(
            super::process::wait_for_line(stdout, "Ready to accept connections").is_some(),
            "redis-server did not start on {port}"
        );
        Self { child, port }
    }

    /// Kills it at once.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ThrowawayRedis {
    fn drop(&mut self) {
        self.stop();
    }
}
