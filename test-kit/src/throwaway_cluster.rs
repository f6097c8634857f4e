//! A Redis Cluster of a test's own (3 masters, 3 replicas, started by
//! `scripts/redis-cluster.sh` on free ports), for failover tests: its nodes are frozen,
//! killed and promoted under running services, which the shared test cluster must never be.

use std::path::PathBuf;
use std::process::Command;

/// Cluster node timeout of throwaway clusters: a dead master's replica is promoted a few of
/// these after the master stops answering.
const NODE_TIMEOUT_MS: &str = "1000";

/// Six redis-server processes in cluster mode, removed when dropped.
pub struct ThrowawayCluster {
    /// Port of the first node; the nodes listen on `first` … `first + 5`.
    pub first: u16,
    /// Comma-separated seed URLs (`REDIS_URL` in cluster mode).
    pub seeds: String,
    dir: PathBuf,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/redis-cluster.sh")
}

/// Six consecutive ports, and their cluster bus ports (+10000), that nobody listens on.
fn free_ports() -> u16 {
    loop {
        let first = 20_000 + (super::rand_u64() % 9_000) as u16;
        let free = (first..first + 6)
            .flat_map(|p| [p, p + 10_000])
            .all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free {
            return first;
        }
    }
}

/// One line of `CLUSTER NODES`.
struct Node {
    port: u16,
    master: bool,
    /// The master's node id (of a replica).
    of: String,
    /// Slot ranges served (by a master).
    slots: Vec<(u16, u16)>,
    /// Flagged failing.
    failed: bool,
}

/// `redis-cli -p port args…`, its output.
pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").arg("-p").arg(port.to_string()).args(args).output().expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl ThrowawayCluster {
    /// Starts a cluster and waits until every node reports it healthy.
    pub fn start() -> Self {
        let first = free_ports();
        let dir = std::env::temp_dir().join(format!("rk-cluster-{first}-{:x}", super::rand_u64()));
        let out = Command::new(script())
            .args(["start", &first.to_string(), &dir.display().to_string(), NODE_TIMEOUT_MS])
            .output()
            .expect("scripts/redis-cluster.sh runs");
        assert!(out.status.success(), "cluster start failed: {}", String::from_utf8_lossy(&out.stderr));
        let seeds = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Self { first, seeds, dir }
    }

    /// The ports of the nodes.
    pub fn ports(&self) -> impl Iterator<Item = u16> {
        self.first..self.first + 6
    }

    /// Every node as the node on `port` sees it.
    fn nodes(&self, port: u16) -> Vec<Node> {
        cli(port, &["cluster", "nodes"])
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let port: u16 = f.get(1)?.split(['@', ':']).nth(1)?.parse().ok()?;
                let master = f[2].contains("master");
                let failed = f[2].contains("fail");
                let slots = f[8..]
                    .iter()
                    .filter(|s| !s.starts_with('['))
                    .filter_map(|s| match s.split_once('-') {
                        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                        None => s.parse().ok().map(|x| (x, x)),
                    })
                    .collect();
                Some(Node { port, master, of: f[3].to_string(), slots, failed })
            })
            .collect()
    }

    /// A node that answers, other than those in `dead`.
    fn live(&self, dead: &[u16]) -> u16 {
        self.ports().find(|p| !dead.contains(p)).expect("a live node")
    }

    /// The port of the master serving `key`'s slot, as the live nodes see it.
    pub fn master_of(&self, key: &str, dead: &[u16]) -> Option<u16> {
        let asked = self.live(dead);
        let slot: u16 = cli(asked, &["cluster", "keyslot", key]).trim().parse().expect("a slot");
        self.nodes(asked)
            .into_iter()
            .find(|n| {
                n.master
                    && !n.failed
                    && !dead.contains(&n.port)
                    && n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
            })
            .map(|n| n.port)
    }

    /// A replica of the master on `port`.
    pub fn replica_of(&self, port: u16) -> u16 {
        let id = cli(port, &["cluster", "myid"]).trim().to_string();
        self.nodes(port)
            .into_iter()
            .find(|n| !n.master && n.of == id && !n.failed)
            .map(|n| n.port)
            .expect("the master has a replica")
    }

    /// Whether every live node reports the cluster healthy and sees `key` served by a live master.
    pub fn healthy(&self, key: &str, dead: &[u16]) -> bool {
        self.ports().filter(|p| !dead.contains(p)).all(|p| cli(p, &["cluster", "info"]).contains("cluster_state:ok"))
            && self.master_of(key, dead).is_some()
    }

    /// Whether the node on `port` is a replica whose link to its master is up, i.e. holds a
    /// copy recent enough to be promoted: a restarted node that has not synced yet cannot take
    /// over when its new master dies, and the cluster would stay down.
    pub fn synced(&self, port: u16) -> bool {
        let info = cli(port, &["info", "replication"]);
        info.contains("role:slave") && info.contains("master_link_status:up")
    }

    fn pid(&self, port: u16) -> String {
        std::fs::read_to_string(self.dir.join(format!("redis-{port}.pid"))).expect("pid file").trim().to_string()
    }

    /// Starts the node on `port` again (after a `KILL`) with its cluster file: it rejoins,
    /// as a replica of whichever node took its slots.
    pub fn restart(&self, port: u16) {
        let dir = self.dir.display().to_string();
        let started = Command::new("redis-server")
            .args(["--daemonize", "yes", "--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", NODE_TIMEOUT_MS])
            .args(["--cluster-config-file", &format!("{dir}/nodes-{port}.conf")])
            .args(["--save", "", "--appendonly", "no", "--dir", &dir])
            .args(["--logfile", &format!("{dir}/redis-{port}.log"), "--pidfile", &format!("{dir}/redis-{port}.pid")])
            .status()
            .expect("redis-server runs");
        assert!(started.success(), "node {port} restarted");
    }

    /// Sends `signal` (`STOP`, `KILL`, …) to the node on `port`.
    pub fn signal(&self, port: u16, signal: &str) {
        let sent = Command::new("kill").arg(format!("-{signal}")).arg(self.pid(port)).status().expect("kill");
        assert!(sent.success(), "kill -{signal} node {port}");
    }
}

impl Drop for ThrowawayCluster {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["stop", &self.dir.display().to_string()]).status();
    }
}
