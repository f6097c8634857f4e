//! The bus servers the tests start, stop and break: the three-broker Kafka cluster of the
//! fault tests (through `scripts/kafka-broker.sh`), a throwaway Kafka broker, a throwaway NATS
//! server.

use std::time::Duration;

use crate::{free_port, rand_u64};

/// The three-broker cluster: node N (1-3) listens on the N-th address of the bootstrap list.
pub struct KafkaCluster {
    pub bootstrap: String,
    pub(super) dir: std::path::PathBuf,
}

/// Runs `scripts/kafka-broker.sh` with `args` (its address output dropped): whether it
/// succeeded.
fn kafka_broker(args: &[&str]) -> bool {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka-broker.sh");
    let status = std::process::Command::new(script)
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("kafka-broker.sh runs");
    status.success()
}

impl KafkaCluster {
    /// `kill -9` of node `node`.
    pub fn kill(&self, node: i32) {
        assert!(kafka_broker(&["kill", &self.dir.display().to_string(), &node.to_string()]), "node {node} killed");
    }

    /// Sends `signal` (`STOP`, `CONT`, …) to node `node`: a frozen broker keeps its
    /// connections open and answers nothing, as a stalled link to it would.
    pub fn signal(&self, node: i32, signal: &str) {
        let sent = kafka_broker(&["signal", &self.dir.display().to_string(), &node.to_string(), signal]);
        assert!(sent, "kill -{signal} node {node}");
    }

    /// Starts every node that does not answer, and waits until all three answer metadata.
    pub fn restart_missing(&self) {
        let base = self.bootstrap.split(',').next().and_then(|a| a.rsplit(':').next()).expect("a port");
        assert!(kafka_broker(&["start-cluster", base, &self.dir.display().to_string()]), "the cluster restarts");
    }
}

/// A broker of one test (Apache Kafka on a free port and a data directory of its own,
/// through `scripts/kafka-broker.sh`), for tests that stop and restart it.
pub struct ThrowawayBroker {
    port: u16,
    pub(super) dir: std::path::PathBuf,
}

impl ThrowawayBroker {
    /// Starts one (the jars are resolved once per machine by the script).
    pub fn start() -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("rk-kafka-{port}-{:x}", rand_u64()));
        let me = Self { port, dir };
        me.restart();
        me
    }

    /// Its bootstrap address.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills it (its data stays).
    pub fn stop(&self) {
        assert!(kafka_broker(&["stop", &self.dir.display().to_string()]), "broker stops");
        // Wait until the port is free, so the restart binds it again.
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("broker on {} did not stop", self.port);
    }

    /// Starts it again on the same port and data.
    pub fn restart(&self) {
        assert!(kafka_broker(&["start", &self.port.to_string(), &self.dir.display().to_string()]), "broker starts");
    }
}

impl Drop for ThrowawayBroker {
    fn drop(&mut self) {
        let _ = kafka_broker(&["stop", &self.dir.display().to_string()]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A NATS server with JetStream of one test (Debian's `nats-server` on a free port, its
/// store in a directory of its own), for tests that stop and restart it.
pub struct ThrowawayNats {
    port: u16,
    pub(super) dir: std::path::PathBuf,
    child: std::sync::Mutex<Option<std::process::Child>>,
}

impl ThrowawayNats {
    /// Starts one, or `None` when `nats-server` is not installed.
    pub fn start() -> Option<Self> {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("rk-nats-{port}-{:x}", rand_u64()));
        std::fs::create_dir_all(&dir).ok()?;
        let me = Self { port, dir, child: std::sync::Mutex::new(None) };
        me.restart_checked().then_some(me)
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn restart_checked(&self) -> bool {
        let child = std::process::Command::new("/usr/sbin/nats-server")
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string(), "-js", "-sd"])
            .arg(&self.dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let Ok(child) = child else { return false };
        *self.child.lock().expect("child") = Some(child);
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    /// Kills it (its store stays).
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().expect("child").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and store.
    pub fn restart(&self) {
        assert!(self.restart_checked(), "nats-server restarts");
    }
}

impl Drop for ThrowawayNats {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
