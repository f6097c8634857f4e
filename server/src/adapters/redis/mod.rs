//! The Redis ranking store, on one node or a Redis Cluster ([`connection`]; redis-rs
//! reconnects by itself in both).
//!
//! Keys, with `P` the configured prefix (default `ranking`), all named in [`keys`]; `R` is a
//! ranking's base: `{daily:D}`, `{daily:D}:weekly` (the 7 days ending with D),
//! `{daily:D}:dseg:S`, `{daily:D}:wseg:S` (segment S of the daily or weekly ranking), with
//! `D` = `YYYY-MM-DD`: every ranking of a day shares the day's hash tag with its lease:
//!
//! | key | type | content |
//! |---|---|---|
//! | `P:R:version` | string | the current version of the ranking (`N`, or `N:2:<base>` for a version stored as a delta); its existence means "built since Redis was last emptied" (also for a day without products); expires `RANKING_RETENTION_DAYS` after the day ends |
//! | `P:R:v<N>:packed` | string | version N, immutable: 16 bytes per entry (product id, score bits; big-endian) in ranking order; what replicas load and every read of a version uses ([`packed`]) |
//! | `P:R:v<N>:index` | string | where each product is in version N's packed copy, 4 bytes per entry (a position, big-endian), in ascending product id |
//! | `P:R:v<N>:pins`, `P:R:v<N>:served` | string | a served board's (merchandising controls): the positions its pins placed, 4 bytes each, and its parts whole (pins and the annex of its organic board, JSON) ([`served`]) |
//! | `P:R:v<N>:delta` | string | layout 2: version N as the changes after the version before it, which its header names with N's size: the entries set (16 bytes each, by product id) and the products gone (8 bytes each) ([`delta`]); read whole from its chain ([`chains`]) |
//! | `P:R:v<B>:chain` | list | layout 2: the delta versions after the whole version B, in order (at most [`delta::CHAIN`], and about one version's entries in all: [`delta::chain_max`]); the chain lives while its last version is current, then as one superseded version (`<last>:<B>` in `superseded`) |
//! | `P:R:v<N>:stats` | string | the statistics ExplainRank reproduces version N's norms from (a daily or trending board's, JSON), renamed with the version by the fenced script ([`stats`]) |
//! | `P:{daily:D}` | ZSET | the daily ranking as a sorted set of product ids by packed score, replaced whole (staged, then renamed) by each full publication of the day (a recompute, a withdrawal); a live pass publishes the packed copy and index only, so this may be up to `RANKING_RECOMPUTE_INTERVAL` behind the current version |
//! | `P:R:superseded` | ZSET | superseded versions still kept for page tokens, scored by the Unix ms after which they go |
//! | `P:R:staging:<token>[:packed\|:index\|:pins\|:served\|:stats]` | ZSET, string | a version being written, renamed to `v<N>:packed`, `v<N>:index`, `v<N>:pins`, `v<N>:served`, `v<N>:stats` (and the ZSET to `P:{daily:D}`) when complete; expires after the staging TTL should its writer die |
//! | `P:R:feed` | hash | the ranking feed's cursor of the board: the last version fed (`version`), when it was last sent whole (`whole_at`, Unix ms) and its fed top (`top`, 24 bytes per entry); moved to later versions only ([`feed`]) |
//! | `P:R:segments` (daily and weekly) | set | the segments published with that day's daily or weekly ranking (replicas load their rankings; a recompute empties the ones that lost their members) |
//! | `P:{hour:YYYY-MM-DDTHH}` | ZSET | the approximate hourly ranking; expires 2 hours after the hour ends |
//! | `P:{daily:D}:lock` | string | the day's lease, which the publication script checks |
//! | `P:lock:<name>` | string | the other leases (live passes' holder, scheduler tick marker, retention) |
//! | channel `P:versions` | pub/sub | `daily D <N>`, `weekly D <N>`, `dseg D S <N>`, `wseg D S <N>` when version N of that ranking is published |
//!
//! A day's rankings and its lease share one slot (a cluster spreads days and hours over its
//! shards): the publish script checks the writer's lease in the slot it writes, and the
//! publish script and every read touch one slot only.
//!
//! Publishing is one Lua script: the new version number is `max(Redis TIME in ms,
//! previous+1)`, so it only grows, also after FLUSHALL (the clock does not go back); the
//! staging keys are renamed to the version's keys (no key is overwritten, so nothing big is
//! freed inside the script; the day's ZSET is UNLINKed before its replacement is renamed to
//! it), the pointer moves, the superseded version gets `RANKING_SNAPSHOT_TTL` (0: UNLINK
//! at once), versions past their time are UNLINKed (freed off the main thread; a superseded
//! version also expires by itself at twice its life, should no publication come to sweep
//! it), and the announcement is published. A reader resolves the pointer and reads the version in one
//! script, so it sees one version whole.
//!
//! Members of the ZSETs are product ids zero-padded to 19 digits ([`member`]): Redis orders
//! equal scores by member bytes, and padding makes that order numeric ("999" sorts before
//! "1000"). Reads use `ZREVRANGE`, so equal scores come in descending product id, the order
//! of the packed copies too.
//!
//! - [`connection`]: one node or a cluster, per-slot pipelines, pub/sub.
//! - [`keys`]: key and channel names, announcements.
//! - [`scripts`]: the Lua scripts (`scripts/*.lua`).
//! - [`packed`]: the packed copy and product index encodings.
//! - [`publish`]: staging and publishing a version, whole or as a delta ([`delta`]).
//! - [`chains`]: delta versions read whole, for replicas' copies and reads of the store.
//! - [`placements`]: products' places, from either form of ranking.
//! - [`lease`]: [`LeaseLock`](crate::ports::LeaseLock) on Redis.
//! - [`feed`]: [`FeedCursors`](crate::ports::FeedCursors) on Redis.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use redis::RedisError;

mod chains;
pub mod connection;
mod delta;
mod feed;
mod keys;
mod lease;
mod packed;
mod placements;
mod publish;
use publish::{Outcome, Written};
mod scripts;
mod served;
mod stats;

pub use connection::RedisMode;
use connection::{Connection, Subscriber};
pub use keys::member;
use keys::{Keys, parse_announcement, parse_version, product_of};
use packed::{PACKED, byte_range, unpack};
use scripts::Scripts;

use crate::domain::calendar::RankingHour;
use crate::domain::catalog::Segment;
use crate::domain::snapshot::Snapshot;
use crate::ports::{
    Announcements, Fence, Form, HourlyIncrement, InForce, Page, Placements, Publishing, RankingKey, RankingStore,
    Scored, ServedParts, StoreError, VersionCopy, VersionLife, VersionStats,
};

/// Connection settings of the Redis store.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// `redis://…`; in cluster mode a comma-separated list of seed node URLs.
    pub url: String,
    /// One node or a cluster.
    pub mode: RedisMode,
    /// Prefix of every key, so several deployments (or tests) can share one Redis.
    pub prefix: String,
    /// Time allowed for one command or pipeline before the call fails with UNAVAILABLE.
    pub response_timeout: Duration,
    /// Life of a staging key, so a crashed writer's half-written ranking goes away.
    pub staging_ttl: Duration,
    /// Prefix of the leases when they are another store's: a scoring profile's boards live
    /// under a prefix of their own, and are changed under the service profile's day leases
    /// (one recompute publishes every profile's boards under one fence). `None`: `prefix`.
    pub lease_prefix: Option<String>,
    /// The layout to write, as the replicas agree on it: from layout 2 on, a version may be
    /// written as a delta of its predecessor ([`delta`]).
    pub layout: InForce,
    /// Where the publications count what they wrote.
    pub written: crate::metrics::stores::Written,
}

impl RedisOptions {
    /// Defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            mode: RedisMode::Single,
            prefix: "ranking".into(),
            response_timeout: Duration::from_secs(5),
            staging_ttl: Duration::from_secs(3_600),
            lease_prefix: None,
            layout: InForce::default(),
            written: Default::default(),
        }
    }
}

/// Rankings and leases in Redis.
#[derive(Clone)]
pub struct RedisRankingStore {
    conn: Connection,
    subscriber: Subscriber,
    keys: Keys,
    staging_ttl: Duration,
    scripts: Scripts,
    layout: InForce,
    written: crate::metrics::stores::Written,
    /// Versions written as deltas, built whole for reads of the store ([`chains`]).
    materialized: Arc<chains::Materialized>,
}

/// A failed call: unavailable, or a ranking in a layout this release does not read (the
/// scripts' `LAYOUT <L>`).
fn unavailable(e: RedisError) -> StoreError {
    match (e.code(), e.detail().and_then(|d| d.trim().parse().ok())) {
        (Some("LAYOUT"), Some(found)) => StoreError::Layout { found },
        _ => StoreError::ranking(e),
    }
}

fn scored(members: Vec<(String, f64)>) -> Result<Vec<Scored>, StoreError> {
    members.into_iter().map(|(m, score)| Ok(Scored { product_id: product_of(&m)?, score })).collect()
}

/// `ZREVRANGE` bounds of a page.
fn bounds(offset: u64, limit: u64) -> (isize, isize) {
    let start = isize::try_from(offset).unwrap_or(isize::MAX);
    let stop = isize::try_from(offset.saturating_add(limit).saturating_sub(1)).unwrap_or(isize::MAX);
    (start, stop)
}

impl RedisRankingStore {
    /// A store on `options.url`. The connection is made lazily: the service starts while
    /// Redis is down and answers UNAVAILABLE until it is back.
    pub fn connect(options: &RedisOptions) -> Result<Self, StoreError> {
        let opened = connection::open(options.mode, &options.url, options.response_timeout).map_err(unavailable)?;
        Ok(Self {
            conn: opened.connection,
            subscriber: opened.subscriber,
            keys: Keys::new(options.prefix.clone())
                .with_lease_prefix(options.lease_prefix.clone().unwrap_or_else(|| options.prefix.clone())),
            staging_ttl: options.staging_ttl,
            scripts: Scripts::new(),
            layout: options.layout.clone(),
            written: options.written.clone(),
            materialized: Arc::default(),
        })
    }

    /// A part of one version kept beside its entries (`v<N>:<part>`), if kept.
    async fn version_part(&self, key: RankingKey, version: u64, part: &str) -> Result<Option<Vec<u8>>, StoreError> {
        redis::cmd("GET")
            .arg(format!("{}{version}:{part}", self.keys.versions(key)))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    /// The sorted set of a daily ranking ( tests and benchmarks read it directly).
    pub fn sorted_set_key(&self, key: RankingKey) -> String {
        self.keys.base(key)
    }
}

#[async_trait]
impl RankingStore for RedisRankingStore {
    async fn publish(
        &self,
        key: RankingKey,
        entries: &[Scored],
        life: VersionLife,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        let len = entries.len();
        let written = Written { entries, by_product: None, served: None, stats: None, delta: None, len };
        self.publish_version(key, written, life, Form::Full, fence).await?.whole()
    }

    async fn publish_copy(
        &self,
        key: RankingKey,
        publishing: Publishing<'_>,
        life: VersionLife,
        form: Form,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        let Publishing { copy, stats, .. } = publishing;
        let served = copy.served_parts();
        if let Some((previous, changes)) = self.delta_after(key, publishing, form).await? {
            let delta = Some((previous, &changes));
            let len = copy.len();
            let written = Written { entries: &[], by_product: None, served: served.as_ref(), stats, delta, len };
            if let Outcome::Published(version) = self.publish_version(key, written, life, form, fence).await? {
                return Ok(version);
            }
        }
        let entries = copy.page(0, u64::MAX);
        let by_product = copy.product_index();
        let len = entries.len();
        let written = Written { entries: &entries, by_product, served: served.as_ref(), stats, delta: None, len };
        self.publish_version(key, written, life, form, fence).await?.whole()
    }

    async fn version_copy(
        &self,
        key: RankingKey,
        version: u64,
        held: Option<(u64, &Arc<Snapshot>)>,
        max: u64,
    ) -> Result<Option<VersionCopy>, StoreError> {
        self.copy_of_delta(key, version, held, max).await
    }

    async fn version_stats(&self, key: RankingKey, version: u64) -> Result<Option<VersionStats>, StoreError> {
        let stored = self.version_part(key, version, "stats").await?;
        stored.map(|bytes| stats::decode(&bytes)).transpose()
    }

    async fn version_served(&self, key: RankingKey, version: u64) -> Result<Option<ServedParts>, StoreError> {
        let stored = self.version_part(key, version, "served").await?;
        stored.map(|bytes| served::decode(&bytes)).transpose()
    }

    async fn versions(&self, keys: &[RankingKey]) -> Result<Vec<Option<u64>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let gets = keys
            .iter()
            .map(|key| {
                let pointer = self.keys.pointer(*key);
                let mut get = redis::cmd("GET");
                get.arg(&pointer);
                (pointer, get)
            })
            .collect();
        let raw = self.conn.per_slot(gets).await.map_err(unavailable)?;
        raw.iter()
            .map(|v| {
                redis::from_redis_value_ref::<Option<String>>(v)
                    .map_err(|_| StoreError::Corrupt("a version pointer is not a string".into()))
                    .and_then(parse_version)
            })
            .collect()
    }

    async fn version_page(
        &self,
        key: RankingKey,
        version: u64,
        offset: u64,
        limit: u64,
    ) -> Result<Option<Page>, StoreError> {
        self.version_chunk(key, version, offset, limit).await
    }

    async fn version_chunk(
        &self,
        key: RankingKey,
        version: u64,
        start: u64,
        count: u64,
    ) -> Result<Option<Page>, StoreError> {
        let (first, last) = byte_range(start, count);
        let read: Result<(u8, Vec<u8>, u64), RedisError> = self
            .scripts
            .version_chunk
            .key(self.keys.pointer(key))
            .arg(self.keys.versions(key))
            .arg(version)
            .arg(first)
            .arg(last)
            .invoke_async(&mut self.conn.clone())
            .await;
        let (kept, bytes, total) = match read {
            Err(e) if chains::delta_refusal(&e) == Some(version) => {
                return self.chained_page(key, version, start, count).await;
            }
            read => read.map_err(unavailable)?,
        };
        if kept == 0 {
            return Ok(None);
        }
        Ok(Some(Page { entries: unpack(&bytes)?, total: total / PACKED as u64, version: Some(version) }))
    }

    async fn increment_hourly(&self, increments: &[HourlyIncrement]) -> Result<(), StoreError> {
        let mut commands = Vec::with_capacity(increments.len() + 2);
        let mut expiries = std::collections::BTreeMap::new();
        for inc in increments {
            let key = self.keys.base(RankingKey::Hourly(inc.hour));
            let mut zincrby = redis::cmd("ZINCRBY");
            zincrby.arg(&key).arg(inc.delta).arg(member(inc.product_id));
            expiries.insert(key.clone(), inc.expire_at.timestamp());
            commands.push((key, zincrby));
        }
        for (key, at) in expiries {
            let mut expireat = redis::cmd("EXPIREAT");
            expireat.arg(&key).arg(at);
            commands.push((key, expireat));
        }
        self.conn.per_slot(commands).await.map(drop).map_err(unavailable)
    }

    async fn published_segments(&self, whole: RankingKey) -> Result<Vec<Segment>, StoreError> {
        let names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.keys.segments(whole))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let mut segments: Vec<Segment> = names.iter().filter_map(|n| Segment::parse(n).ok()).collect();
        segments.sort_unstable();
        Ok(segments)
    }

    async fn record_segments(
        &self,
        whole: RankingKey,
        segments: &[Segment],
        expire_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let key = self.keys.segments(whole);
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("DEL").arg(&key).ignore();
        for chunk in segments.chunks(1_000) {
            pipe.cmd("SADD").arg(&key).arg(chunk.iter().map(Segment::as_str).collect::<Vec<_>>()).ignore();
        }
        pipe.cmd("EXPIREAT").arg(&key).arg(expire_at.timestamp()).ignore();
        pipe.query_async::<()>(&mut self.conn.clone()).await.map_err(unavailable)
    }

    async fn withdraw_hourly(&self, hours: &[RankingHour], ids: &[i64]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let members: Vec<String> = ids.iter().map(|id| member(*id)).collect();
        let commands = hours
            .iter()
            .map(|hour| {
                let key = self.keys.base(RankingKey::Hourly(*hour));
                let mut zrem = redis::cmd("ZREM");
                zrem.arg(&key).arg(&members);
                (key, zrem)
            })
            .collect();
        self.conn.per_slot(commands).await.map(drop).map_err(unavailable)
    }

    async fn top(&self, key: RankingKey, offset: u64, limit: u64) -> Result<Page, StoreError> {
        if key.is_versioned() {
            let (first, last) = byte_range(offset, limit);
            let read: Result<(Option<String>, Vec<u8>, u64), RedisError> = self
                .scripts
                .current_packed
                .key(self.keys.pointer(key))
                .arg(self.keys.versions(key))
                .arg(first)
                .arg(last)
                .invoke_async(&mut self.conn.clone())
                .await;
            let (version, bytes, total) = match read {
                Err(e) => match chains::delta_refusal(&e) {
                    Some(version) => {
                        let page = self.chained_page(key, version, offset, limit).await?;
                        // Swept between the pointer and the chain: a publication moved on.
                        return page.ok_or_else(|| StoreError::ranking("the current version moved while read"));
                    }
                    None => return Err(unavailable(e)),
                },
                Ok(read) => read,
            };
            return Ok(Page {
                entries: unpack(&bytes)?,
                total: total / PACKED as u64,
                version: parse_version(version)?,
            });
        }
        let (start, stop) = bounds(offset, limit);
        let key = self.keys.base(key);
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
        Ok(Page { entries: scored(members)?, total, version: None })
    }

    async fn placements(
        &self,
        key: RankingKey,
        version: Option<u64>,
        product_ids: &[i64],
    ) -> Result<Placements, StoreError> {
        self.find(key, version, product_ids).await
    }

    async fn announcements(&self) -> Result<Announcements, StoreError> {
        let pubsub = self.subscriber.subscribe(&self.keys.channel()).await.map_err(unavailable)?;
        Ok(pubsub
            .into_on_message()
            .filter_map(|msg| async move {
                let text: String = msg.get_payload().ok()?;
                parse_announcement(&text)
            })
            .boxed())
    }
}
