//! The Redis ranking store (redis-rs `ConnectionManager`, which reconnects by itself).
//!
//! Keys, with `P` the configured prefix (default `ranking`):
//!
//! | key | type | content |
//! |---|---|---|
//! | `P:{YYYY-MM-DD}:daily` | ZSET | the exact daily ranking; expires `RANKING_RETENTION_DAYS` after the day ends |
//! | `P:{YYYY-MM-DD}:daily:staging:<token>` | ZSET | a daily ranking being written, renamed over the daily key when complete |
//! | `P:{YYYY-MM-DD}:built` | string | set by every recompute of the day (also of an empty one), with the daily key's expiry: a daily key missing while this is missing means Redis lost it |
//! | `P:{YYYY-MM-DD}:hour:HH` | ZSET | the approximate hourly ranking; expires 2 hours after the hour ends |
//! | `P:lock:<name>` | string | a lease (recompute of a day, scheduler tick marker) |
//!
//! The `{date}` hash tag puts a daily key and its staging key in the same cluster slot, so
//! RENAME works in cluster mode. Members are product ids zero-padded to 19 digits: Redis
//! orders equal scores by member bytes, and padding makes that order numeric ("999" sorts
//! before "1000"). Reads use `ZREVRANGE`, so equal scores come in descending product id.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use redis::aio::ConnectionManager;
use redis::{Client, RedisError, Script};

use crate::ports::{HourlyIncrement, Lease, LeaseLock, Page, Placement, RankingKey, RankingStore, Scored, StoreError};

/// Members per ZADD when writing a staging key.
const ZADD_CHUNK: usize = 5_000;
/// ZADD commands per pipeline round trip.
const PIPELINE_CHUNKS: usize = 20;

/// Connection settings of the Redis store.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// `redis://…`.
    pub url: String,
    /// Prefix of every key, so several deployments (or tests) can share one Redis.
    pub prefix: String,
    /// Time allowed for one command or pipeline before the call fails with UNAVAILABLE.
    pub response_timeout: Duration,
    /// Life of a staging key, so a crashed writer's half-written ranking goes away.
    pub staging_ttl: Duration,
}

impl RedisOptions {
    /// Defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: "ranking".into(),
            response_timeout: Duration::from_secs(5),
            staging_ttl: Duration::from_secs(3_600),
        }
    }
}

/// Rankings and leases in Redis.
#[derive(Clone)]
pub struct RedisRankingStore {
    conn: ConnectionManager,
    prefix: String,
    staging_ttl: Duration,
    release: Script,
}

fn unavailable(e: RedisError) -> StoreError {
    StoreError::ranking(e)
}

/// The sorted-set member of a product.
pub fn member(product_id: i64) -> String {
    format!("{product_id:019}")
}

fn product_of(member: &str) -> Result<i64, StoreError> {
    member.parse().map_err(|_| StoreError::Corrupt(format!("ranking member {member:?} is not a product id")))
}

impl RedisRankingStore {
    /// A store on `options.url`. The connection is made lazily: the service starts while
    /// Redis is down and answers UNAVAILABLE until it is back.
    pub fn connect(options: &RedisOptions) -> Result<Self, StoreError> {
        let client = Client::open(options.url.as_str()).map_err(unavailable)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.response_timeout))
            .set_response_timeout(Some(options.response_timeout))
            .set_number_of_retries(2);
        let conn = ConnectionManager::new_lazy_with_config(client, config).map_err(unavailable)?;
        Ok(Self {
            conn,
            prefix: options.prefix.clone(),
            staging_ttl: options.staging_ttl,
            release: Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
            ),
        })
    }

    /// The Redis key of a ranking.
    pub fn key(&self, key: RankingKey) -> String {
        match key {
            RankingKey::Daily(date) => format!("{}:{{{date}}}:daily", self.prefix),
            RankingKey::Hourly(h) => format!("{}:{{{}}}:hour:{:02}", self.prefix, h.date, h.hour),
        }
    }

    /// The marker of a built daily ranking (same hash tag as the daily key).
    fn built_key(&self, date: NaiveDate) -> String {
        format!("{}:{{{date}}}:built", self.prefix)
    }

    fn lock_key(&self, name: &str) -> String {
        format!("{}:lock:{name}", self.prefix)
    }
}

#[async_trait]
impl RankingStore for RedisRankingStore {
    async fn replace_daily(
        &self,
        date: NaiveDate,
        entries: &[Scored],
        expire_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let daily = self.key(RankingKey::Daily(date));
        let built = self.built_key(date);
        if entries.is_empty() {
            // An empty ZSET cannot exist; the ranking of a day without products is no key
            // and a marker.
            redis::pipe()
                .atomic()
                .cmd("DEL")
                .arg(&daily)
                .ignore()
                .cmd("SET")
                .arg(&built)
                .arg(0)
                .arg("EXAT")
                .arg(expire_at.timestamp())
                .ignore()
                .query_async::<()>(&mut conn)
                .await
                .map_err(unavailable)?;
            return Ok(());
        }
        let staging = format!("{daily}:staging:{:016x}", rand::random::<u64>());
        let write = async {
            for group in entries.chunks(ZADD_CHUNK * PIPELINE_CHUNKS) {
                let mut pipe = redis::pipe();
                for chunk in group.chunks(ZADD_CHUNK) {
                    let mut zadd = redis::cmd("ZADD");
                    zadd.arg(&staging);
                    for e in chunk {
                        zadd.arg(e.score).arg(member(e.product_id));
                    }
                    pipe.add_command(zadd).ignore();
                }
                // A crashed writer's staging key must not live forever.
                pipe.cmd("EXPIRE").arg(&staging).arg(self.staging_ttl.as_secs().max(1)).ignore();
                pipe.query_async::<()>(&mut conn).await?;
            }
            // RENAME replaces the old ranking in one step; readers see old or new.
            redis::pipe()
                .atomic()
                .cmd("RENAME")
                .arg(&staging)
                .arg(&daily)
                .ignore()
                .cmd("EXPIREAT")
                .arg(&daily)
                .arg(expire_at.timestamp())
                .ignore()
                .cmd("SET")
                .arg(&built)
                .arg(entries.len())
                .arg("EXAT")
                .arg(expire_at.timestamp())
                .ignore()
                .query_async::<()>(&mut conn)
                .await
        };
        if let Err(e) = write.await {
            let _ = redis::cmd("DEL").arg(&staging).query_async::<()>(&mut self.conn.clone()).await;
            return Err(unavailable(e));
        }
        Ok(())
    }

    async fn increment_hourly(&self, increments: &[HourlyIncrement]) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        let mut expiries = std::collections::BTreeMap::new();
        for inc in increments {
            let key = self.key(RankingKey::Hourly(inc.hour));
            pipe.cmd("ZINCRBY").arg(&key).arg(inc.delta).arg(member(inc.product_id)).ignore();
            expiries.insert(key, inc.expire_at.timestamp());
        }
        for (key, at) in expiries {
            pipe.cmd("EXPIREAT").arg(key).arg(at).ignore();
        }
        pipe.query_async::<()>(&mut self.conn.clone()).await.map_err(unavailable)
    }

    async fn top(&self, key: RankingKey, offset: u64, limit: u64) -> Result<Page, StoreError> {
        let key = self.key(key);
        let start = isize::try_from(offset).unwrap_or(isize::MAX);
        let stop = isize::try_from(offset.saturating_add(limit).saturating_sub(1)).unwrap_or(isize::MAX);
        let (members, total): (Vec<(String, f64)>, u64) = redis::pipe()
            .cmd("ZREVRANGE")
            .arg(&key)
            .arg(start)
            .arg(stop)
            .arg("WITHSCORES")
            .cmd("ZCARD")
            .arg(&key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let entries = members
            .into_iter()
            .map(|(m, score)| Ok(Scored { product_id: product_of(&m)?, score }))
            .collect::<Result<_, StoreError>>()?;
        Ok(Page { entries, total })
    }

    async fn placement(&self, key: RankingKey, product_id: i64) -> Result<(Option<Placement>, u64), StoreError> {
        let key = self.key(key);
        let m = member(product_id);
        let (rank, score, total): (Option<u64>, Option<f64>, u64) = redis::pipe()
            .cmd("ZREVRANK")
            .arg(&key)
            .arg(&m)
            .cmd("ZSCORE")
            .arg(&key)
            .arg(&m)
            .cmd("ZCARD")
            .arg(&key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let placement = rank.zip(score).map(|(index, score)| Placement { index, score });
        Ok((placement, total))
    }

    async fn exists(&self, key: RankingKey) -> Result<bool, StoreError> {
        let key = match key {
            RankingKey::Daily(date) => self.built_key(date),
            hourly => self.key(hourly),
        };
        redis::cmd("EXISTS").arg(key).query_async(&mut self.conn.clone()).await.map_err(unavailable)
    }
}

#[async_trait]
impl LeaseLock for RedisRankingStore {
    async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<Option<Lease>, StoreError> {
        let token = format!("{:032x}", rand::random::<u128>());
        let set: Option<String> = redis::cmd("SET")
            .arg(self.lock_key(name))
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(set.map(|_| Lease { name: name.to_string(), token }))
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.release
            .key(self.lock_key(&lease.name))
            .arg(&lease.token)
            .invoke_async::<i64>(&mut self.conn.clone())
            .await
            .map(|_| ())
            .map_err(unavailable)
    }
}
