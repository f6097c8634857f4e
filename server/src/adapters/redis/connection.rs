//! One connection type for both Redis topologies (`RANKING_REDIS_MODE`): a single node through
//! redis-rs's `ConnectionManager`, or a cluster through its async `ClusterConnection`, which
//! learns the slot map from the seeds, follows MOVED/ASK and reconnects after a failover.
//!
//! The store's commands and scripts each touch one ranking, whose keys share a hash tag and
//! so a slot: they go through either connection unchanged. What does not is a pipeline over
//! several rankings (version pointers of many rankings, hourly increments of two hours): a
//! cluster refuses a pipeline whose keys live in different slots, so [`Connection::per_slot`]
//! sends one pipeline per slot, concurrently, and puts the answers back in order.
//!
//! Announcements use plain pub/sub (`PUBLISH`), which a cluster forwards to every node, so
//! a subscriber on any one seed hears every ranking's announcements; when that node goes
//! away the subscription ends and the next one is made on the next seed (the version poll
//! covers the gap). Sharded pub/sub would tie the channel to one shard and buy nothing at one
//! announcement per recompute.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::try_join_all;
use redis::aio::{ConnectionLike, ConnectionManager, PubSub};
use redis::cluster::{ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Client, Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

/// How the store reaches Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisMode {
    /// One Redis server (`REDIS_URL` is one `redis://…` URL).
    #[default]
    Single,
    /// A Redis Cluster (`REDIS_URL` is a comma-separated list of seed node URLs).
    Cluster,
}

/// A connection to one node or to a cluster; cheap to clone (both kinds multiplex).
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// The connection and what it takes to open pub/sub connections.
pub struct Opened {
    pub connection: Connection,
    pub subscriber: Subscriber,
}

/// Opens the connection lazily: the service starts while Redis is down and its calls answer
/// UNAVAILABLE until Redis is back.
pub fn open(mode: RedisMode, url: &str, timeout: Duration) -> RedisResult<Opened> {
    match mode {
        RedisMode::Single => {
            let client = Client::open(url)?;
            let config = redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout))
                .set_number_of_retries(2);
            let manager = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
            Ok(Opened { connection: Connection::Single(manager), subscriber: Subscriber::new(vec![client], timeout) })
        }
        RedisMode::Cluster => {
            let seeds: Vec<&str> = url.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            if seeds.is_empty() {
                return Err(RedisError::from((redis::ErrorKind::InvalidClientConfig, "no cluster seed URL")));
            }
            let clients = seeds.iter().map(|s| Client::open(*s)).collect::<RedisResult<Vec<_>>>()?;
            // Retries with backoff cover a failover (a replica is promoted within a few
            // cluster-node-timeouts); the overall timeout still bounds every call.
            let cluster =
                ClusterClientBuilder::new(seeds).retries(6).overall_response_timeout(Some(timeout)).build()?;
            let config = ClusterConfig::new().set_connection_timeout(timeout).set_response_timeout(timeout);
            let connection = cluster.get_pending_async_connection_with_config(config);
            Ok(Opened { connection: Connection::Cluster(connection), subscriber: Subscriber::new(clients, timeout) })
        }
    }
}

impl Connection {
    /// Runs commands that each touch one key (given with the command) and returns their
    /// answers in order: one pipeline on a single node, one pipeline per slot on a cluster.
    pub async fn per_slot(&self, commands: Vec<(String, Cmd)>) -> RedisResult<Vec<Value>> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            Connection::Single(_) => {
                let mut pipe = redis::pipe();
                for (_, cmd) in commands {
                    pipe.add_command(cmd);
                }
                pipe.query_async(&mut self.clone()).await
            }
            Connection::Cluster(_) => {
                // Indexed by slot: a version poll names thousands of segment rankings, each
                // its own slot.
                let mut groups: HashMap<Slot, (Vec<usize>, Pipeline)> = HashMap::new();
                let count = commands.len();
                for (i, (key, cmd)) in commands.into_iter().enumerate() {
                    let (indexes, pipe) =
                        groups.entry(Slot::for_key(key.as_bytes())).or_insert_with(|| (Vec::new(), redis::pipe()));
                    indexes.push(i);
                    pipe.add_command(cmd);
                }
                let groups: Vec<(Vec<usize>, Pipeline)> = groups.into_values().collect();
                let answers = try_join_all(groups.iter().map(|(_, pipe)| {
                    let mut conn = self.clone();
                    async move { pipe.query_async::<Vec<Value>>(&mut conn).await }
                }))
                .await?;
                let mut out = vec![Value::Nil; count];
                for ((indexes, _), values) in groups.iter().zip(answers) {
                    for (i, v) in indexes.iter().zip(values) {
                        out[*i] = v;
                    }
                }
                Ok(out)
            }
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// Opens pub/sub connections, trying the seed nodes in turn: each new subscription starts at
/// the seed after the one the last subscription used, so a node that went away is not the
/// first one tried again.
#[derive(Clone)]
pub struct Subscriber {
    seeds: Arc<Vec<Client>>,
    next: Arc<AtomicUsize>,
    timeout: Duration,
}

impl Subscriber {
    fn new(seeds: Vec<Client>, timeout: Duration) -> Self {
        Self { seeds: Arc::new(seeds), next: Arc::new(AtomicUsize::new(0)), timeout }
    }

    /// A pub/sub connection subscribed to `channel`, on the first seed that answers.
    pub async fn subscribe(&self, channel: &str) -> RedisResult<PubSub> {
        let first = self.next.fetch_add(1, Ordering::Relaxed);
        let mut last = None;
        for i in 0..self.seeds.len() {
            let client = &self.seeds[(first + i) % self.seeds.len()];
            let attempt = async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(channel).await?;
                Ok::<_, RedisError>(pubsub)
            };
            match tokio::time::timeout(self.timeout, attempt).await {
                Ok(Ok(pubsub)) => return Ok(pubsub),
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(RedisError::from((redis::ErrorKind::Io, "timed out subscribing to announcements")))
                }
            }
        }
        Err(last.unwrap_or_else(|| RedisError::from((redis::ErrorKind::InvalidClientConfig, "no Redis URL"))))
    }
}
