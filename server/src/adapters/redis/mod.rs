//! The Redis ranking store, on one node or a Redis Cluster ([`connection`]; redis-rs
//! reconnects by itself in both).
//!
//! Keys, with `P` the configured prefix (default `ranking`):
//!
//! | key | type | content |
//! |---|---|---|
//! | `P:{daily:YYYY-MM-DD}:version` | string | the current version of the day's daily ranking; its existence means "built since Redis was last emptied" (also for a day without products); expires `RANKING_RETENTION_DAYS` after the day ends |
//! | `P:{daily:YYYY-MM-DD}:v<N>` | ZSET | version N of the daily ranking (absent when it has no entry); immutable once written; weekly (`{weekly:…}`) and segment rankings (`{dseg:…}`, `{wseg:…}`) have none, only the packed copy and its index |
//! | `P:{daily:YYYY-MM-DD}:v<N>:packed` | string | the same version packed for replicas to load: 16 bytes per entry (product id, score bits; big-endian) in ranking order |
//! | `P:{weekly:YYYY-MM-DD}:v<N>:index` | string | where each product is in the packed copy of a weekly or segment ranking: 4 bytes per entry (a position in the packed copy, big-endian), in ascending order of the product id found there |
//! | `P:{daily:YYYY-MM-DD}:superseded` | ZSET | superseded versions still kept for page tokens, scored by the Unix ms after which they go |
//! | `P:{daily:YYYY-MM-DD}:staging:<token>[:packed\|:index]` | ZSET, string | a version being written, renamed to `v<N>[:packed\|:index]` when complete |
//! | `P:{hour:YYYY-MM-DDTHH}` | ZSET | the approximate hourly ranking; expires 2 hours after the hour ends |
//! | `P:lock:<name>` | string | a lease (recompute of a day, scheduler tick marker) |
//! | channel `P:versions` | pub/sub | `daily YYYY-MM-DD <N>` when version N is published |
//!
//! Every ranking has a hash tag of its own (`{daily:…}`, `{hour:…}`), so a cluster spreads
//! rankings over its shards, while a ranking's version pointer, versions, staging key and
//! superseded index share one slot: the publish script and every read touch one slot only.
//!
//! Publishing is one Lua script: the new version number is `max(Redis TIME in ms,
//! previous+1)`, so it only grows, also after FLUSHALL (the clock does not go back); the
//! staging key is renamed to its version key (no key is overwritten, so nothing big is freed inside the
//! script), the pointer moves, the superseded version gets `RANKING_SNAPSHOT_TTL` (0: UNLINK
//! at once), versions past their time are UNLINKed (freed off the main thread; a superseded
//! version also expires by itself at twice its life, should no publication come to sweep
//! it), and the announcement is published. A reader resolves the pointer and reads the version in one
//! script, so it sees one version whole.
//!
//! Members are product ids zero-padded to 19 digits: Redis orders equal scores by member
//! bytes, and padding makes that order numeric ("999" sorts before "1000"). Reads use
//! `ZREVRANGE`, so equal scores come in descending product id.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use futures_util::StreamExt;
use redis::{RedisError, Script};

pub mod connection;

pub use connection::RedisMode;
use connection::{Connection, Subscriber};

use crate::domain::calendar::RankingHour;
use crate::domain::catalog::Segment;
use crate::ports::{
    Announcement, Announcements, Found, HourlyIncrement, Lease, LeaseLock, Page, Placements, RankingKey, RankingStore,
    Scored, StoreError, VersionLife,
};

/// Members per ZADD when writing a staging key.
const ZADD_CHUNK: usize = 5_000;
/// ZADD commands per pipeline round trip.
const PIPELINE_CHUNKS: usize = 20;

/// Publishes a staging key (and its packed copy) as the next version. KEYS: staging,
/// version pointer, superseded index, packed staging, product index staging. ARGV: version
/// key prefix, expire-at (Unix s), superseded life (ms), channel, announcement prefix,
/// whether the version holds entries (1/0), whether it has a ZSET besides its packed copy
/// (1/0; weekly and segment rankings have the packed copy and its product index instead).
const PUBLISH: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = tonumber(redis.call('GET', KEYS[2]) or '0')
local v = math.max(now, old + 1)
local vs = string.format('%.0f', v)
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, g in ipairs(gone) do redis.call('UNLINK', ARGV[1] .. g, ARGV[1] .. g .. ':packed', ARGV[1] .. g .. ':index') end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if old > 0 then
  local os = string.format('%.0f', old)
  local ok = ARGV[1] .. os
  local keep = tonumber(ARGV[3])
  if keep > 0 and redis.call('EXISTS', ok .. ':packed') == 1 then
    redis.call('PEXPIRE', ok, keep * 2)
    redis.call('PEXPIRE', ok .. ':packed', keep * 2)
    redis.call('PEXPIRE', ok .. ':index', keep * 2)
    redis.call('ZADD', KEYS[3], now + keep, os)
    redis.call('EXPIREAT', KEYS[3], ARGV[2])
  else
    redis.call('UNLINK', ok, ok .. ':packed', ok .. ':index')
  end
end
if ARGV[6] == '1' then
  if ARGV[7] == '1' then
    redis.call('RENAME', KEYS[1], ARGV[1] .. vs)
    redis.call('EXPIREAT', ARGV[1] .. vs, ARGV[2])
  else
    redis.call('RENAME', KEYS[5], ARGV[1] .. vs .. ':index')
    redis.call('EXPIREAT', ARGV[1] .. vs .. ':index', ARGV[2])
  end
  redis.call('RENAME', KEYS[4], ARGV[1] .. vs .. ':packed')
  redis.call('EXPIREAT', ARGV[1] .. vs .. ':packed', ARGV[2])
end
redis.call('SET', KEYS[2], vs, 'EXAT', ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[5] .. ' ' .. vs)
return v
";

/// Packed entries of one version, if kept. KEYS: version pointer. ARGV: version key prefix,
/// version, first byte, last byte. Returns {kept (1/0), bytes, total bytes}.
const VERSION_CHUNK: &str = r"
local k = ARGV[1] .. ARGV[2] .. ':packed'
if redis.call('EXISTS', k) == 1 then
  return {1, redis.call('GETRANGE', k, ARGV[3], ARGV[4]), redis.call('STRLEN', k)}
end
if redis.call('GET', KEYS[1]) == ARGV[2] then return {1, '', 0} end
return {0, '', 0}
";

/// The current version and a page of it. KEYS: version pointer. ARGV: version key prefix,
/// start, stop. Returns {version or false, members with scores, cardinality}.
const CURRENT_PAGE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return {false, {}, 0} end
local k = ARGV[1] .. v
return {v, redis.call('ZREVRANGE', k, ARGV[2], ARGV[3], 'WITHSCORES'), redis.call('ZCARD', k)}
";

/// The current version of a packed-only ranking and a byte range of it. KEYS: version
/// pointer. ARGV: version key prefix, first byte, last byte. Returns {version or false, bytes,
/// total bytes}.
const CURRENT_PACKED: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return {false, '', 0} end
local k = ARGV[1] .. v .. ':packed'
return {v, redis.call('GETRANGE', k, ARGV[2], ARGV[3]), redis.call('STRLEN', k)}
";

/// Several products' places in a packed-only ranking (entries of 16 bytes in ranking order:
/// product id and score bits, big-endian). KEYS: version pointer. ARGV: version key prefix,
/// `current` or a version number, then each product id as its 8 bytes. Returns {version or
/// false, entries, then per product: index or false, score bits or false, entries with a
/// greater score or false}.
///
/// A product is found by a binary search of the version's product index (4 bytes an entry:
/// the positions of the packed entries in ascending product id; ids compared as a signed high
/// and an unsigned low half, so that Lua's doubles stay exact and no locale orders bytes),
/// the entries above it by a binary search of the scores, which descend: a few dozen
/// `GETRANGE`s of a few bytes per product, whatever the ranking's size. A version published
/// before product indexes existed is searched byte by byte (aligned to an entry) instead.
const PACKED_PLACEMENTS: &str = r"
local v
if ARGV[2] == 'current' then
  v = redis.call('GET', KEYS[1])
  if not v then return {false, 0} end
else
  v = ARGV[2]
  if redis.call('EXISTS', ARGV[1] .. v .. ':packed') == 0 and redis.call('GET', KEYS[1]) ~= v then
    return {false, 0}
  end
end
local pk, ik = ARGV[1] .. v .. ':packed', ARGV[1] .. v .. ':index'
local n = redis.call('STRLEN', pk) / 16
local out = {v, n}
local data = nil
if n > 0 and redis.call('EXISTS', ik) == 0 then data = redis.call('GET', pk) end
local function entry(i)
  if data then return string.sub(data, i * 16 + 1, i * 16 + 16) end
  return redis.call('GETRANGE', pk, i * 16, i * 16 + 15)
end
local function score(i) return (struct.unpack('>d', entry(i), 9)) end
local function halves(bytes, at) return struct.unpack('>i4', bytes, at), (struct.unpack('>I4', bytes, at + 4)) end
local function position(id)
  if data then
    local at = 1
    while true do
      local s = string.find(data, id, at, true)
      if not s then return nil end
      if (s - 1) % 16 == 0 then return (s - 1) / 16 end
      at = s + 1
    end
  end
  local hi_id, lo_id = halves(id, 1)
  local lo, hi = 0, n - 1
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local at = struct.unpack('>I4', redis.call('GETRANGE', ik, mid * 4, mid * 4 + 3))
    local h, l = halves(entry(at), 1)
    if h == hi_id and l == lo_id then return at end
    if h < hi_id or (h == hi_id and l < lo_id) then lo = mid + 1 else hi = mid - 1 end
  end
  return nil
end
for a = 3, #ARGV do
  local i = position(ARGV[a])
  if i then
    local e = entry(i)
    local mine = (struct.unpack('>d', e, 9))
    local lo, hi = 0, i
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if score(mid) > mine then lo = mid + 1 else hi = mid end
    end
    table.insert(out, i)
    table.insert(out, string.sub(e, 9, 16))
    table.insert(out, lo)
  else
    table.insert(out, false)
    table.insert(out, false)
    table.insert(out, false)
  end
end
return out
";

/// A page of one version, if kept. KEYS: version pointer. ARGV: version key prefix,
/// version, start, stop. Returns {kept (1/0), members with scores, cardinality}.
const VERSION_PAGE: &str = r"
local k = ARGV[1] .. ARGV[2]
if redis.call('EXISTS', k) == 0 and redis.call('GET', KEYS[1]) ~= ARGV[2] then return {0, {}, 0} end
return {1, redis.call('ZREVRANGE', k, ARGV[3], ARGV[4], 'WITHSCORES'), redis.call('ZCARD', k)}
";

/// Several products' places in one ranking. KEYS: version pointer (unused for hourly).
/// ARGV: the ranking's key (hourly) or version key prefix, the mode (`hourly`, `current` or a
/// version number), then the members. Returns {version or false, cardinality, then per
/// member: rank or false, score or false, entries with a greater score or false}.
const PLACEMENTS: &str = r"
local k, v
if ARGV[2] == 'hourly' then
  k, v = ARGV[1], false
elseif ARGV[2] == 'current' then
  v = redis.call('GET', KEYS[1])
  if not v then return {false, 0} end
  k = ARGV[1] .. v
else
  v = ARGV[2]
  k = ARGV[1] .. v
  if redis.call('EXISTS', k) == 0 and redis.call('GET', KEYS[1]) ~= v then return {false, 0} end
end
local out = {v, redis.call('ZCARD', k)}
for i = 3, #ARGV do
  local r = redis.call('ZREVRANK', k, ARGV[i])
  if r then
    local s = redis.call('ZSCORE', k, ARGV[i])
    table.insert(out, r)
    table.insert(out, s)
    table.insert(out, redis.call('ZCOUNT', k, '(' .. s, '+inf'))
  else
    table.insert(out, false)
    table.insert(out, false)
    table.insert(out, false)
  end
end
return out
";

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
        }
    }
}

/// Rankings and leases in Redis.
#[derive(Clone)]
pub struct RedisRankingStore {
    conn: Connection,
    subscriber: Subscriber,
    prefix: String,
    staging_ttl: Duration,
    release: Script,
    renew: Script,
    publish: Script,
    current_page: Script,
    version_page: Script,
    version_chunk: Script,
    placements: Script,
    current_packed: Script,
    packed_placements: Script,
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

fn scored(members: Vec<(String, f64)>) -> Result<Vec<Scored>, StoreError> {
    members.into_iter().map(|(m, score)| Ok(Scored { product_id: product_of(&m)?, score })).collect()
}

/// `ZREVRANGE` bounds of a page.
fn bounds(offset: u64, limit: u64) -> (isize, isize) {
    let start = isize::try_from(offset).unwrap_or(isize::MAX);
    let stop = isize::try_from(offset.saturating_add(limit).saturating_sub(1)).unwrap_or(isize::MAX);
    (start, stop)
}

/// `GETRANGE` bounds of `count` packed entries from `start` (an empty range when `count` is 0:
/// `GETRANGE k 0 -1` would mean the whole value).
fn byte_range(start: u64, count: u64) -> (u64, u64) {
    if count == 0 {
        return (1, 0);
    }
    let first = start.saturating_mul(PACKED as u64).min(i64::MAX as u64);
    let last = start.saturating_add(count).saturating_mul(PACKED as u64).saturating_sub(1).min(i64::MAX as u64);
    (first, last)
}

/// Whether a ranking is stored as its packed copy and product index only (no ZSET). Weekly
/// and segment rankings are: replicas serve them from memory, and a ZSET would cost 118 bytes
/// an entry and a ZADD of every entry per recompute (a million for the week) against 26 for
/// the packed copy and its index, written as a few large appends. Their reads from Redis
/// decode the packed copy ([`PACKED_PLACEMENTS`], [`CURRENT_PACKED`]). The daily ranking
/// keeps its ZSET, the first wave's daily key (SPEC §5).
fn packed_only(key: RankingKey) -> bool {
    matches!(key, RankingKey::Weekly(..) | RankingKey::DailySegment(..) | RankingKey::WeeklySegment(..))
}

fn parse_version(v: Option<String>) -> Result<Option<u64>, StoreError> {
    v.map(|v| v.parse().map_err(|_| StoreError::Corrupt(format!("ranking version {v:?} is not a number")))).transpose()
}

impl RedisRankingStore {
    /// A store on `options.url`. The connection is made lazily: the service starts while
    /// Redis is down and answers UNAVAILABLE until it is back.
    pub fn connect(options: &RedisOptions) -> Result<Self, StoreError> {
        let opened = connection::open(options.mode, &options.url, options.response_timeout).map_err(unavailable)?;
        Ok(Self {
            conn: opened.connection,
            subscriber: opened.subscriber,
            prefix: options.prefix.clone(),
            staging_ttl: options.staging_ttl,
            release: Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
            ),
            renew: Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end",
            ),
            publish: Script::new(PUBLISH),
            current_page: Script::new(CURRENT_PAGE),
            version_page: Script::new(VERSION_PAGE),
            version_chunk: Script::new(VERSION_CHUNK),
            placements: Script::new(PLACEMENTS),
            current_packed: Script::new(CURRENT_PACKED),
            packed_placements: Script::new(PACKED_PLACEMENTS),
        })
    }

    /// The hash-tagged base of a ranking's keys: `P:{daily:2026-12-01}`,
    /// `P:{weekly:2026-12-01}`, `P:{hour:2026-12-01T13}`.
    pub fn base(&self, key: RankingKey) -> String {
        match key {
            RankingKey::Daily(date) => format!("{}:{{daily:{date}}}", self.prefix),
            RankingKey::Weekly(date) => format!("{}:{{weekly:{date}}}", self.prefix),
            RankingKey::DailySegment(date, s) => format!("{}:{{dseg:{date}:{s}}}", self.prefix),
            RankingKey::WeeklySegment(date, s) => format!("{}:{{wseg:{date}:{s}}}", self.prefix),
            RankingKey::Hourly(h) => format!("{}:{{hour:{}T{:02}}}", self.prefix, h.date, h.hour),
        }
    }

    /// The key of the current version pointer of a versioned ranking.
    pub fn version_key(&self, key: RankingKey) -> String {
        format!("{}:version", self.base(key))
    }

    /// The key of one version of a versioned ranking.
    pub fn versioned_key(&self, key: RankingKey, version: u64) -> String {
        format!("{}:v{version}", self.base(key))
    }

    /// The pub/sub channel of announcements.
    pub fn channel(&self) -> String {
        format!("{}:versions", self.prefix)
    }

    fn lock_key(&self, name: &str) -> String {
        format!("{}:lock:{name}", self.prefix)
    }

    /// The announcement text of a ranking (before the version number).
    fn announced(key: RankingKey) -> Option<String> {
        match key {
            RankingKey::Daily(date) => Some(format!("daily {date}")),
            RankingKey::Weekly(date) => Some(format!("weekly {date}")),
            RankingKey::DailySegment(date, s) => Some(format!("dseg {date} {s}")),
            RankingKey::WeeklySegment(date, s) => Some(format!("wseg {date} {s}")),
            RankingKey::Hourly(_) => None,
        }
    }

    fn parse_announcement(text: &str) -> Option<Announcement> {
        let parts: Vec<&str> = text.split(' ').collect();
        let date = parts.get(1)?.parse::<NaiveDate>().ok()?;
        let segment = |i: usize| parts.get(i).and_then(|s| Segment::parse(s).ok());
        let (key, version) = match (parts[0], parts.len()) {
            ("daily", 3) => (RankingKey::Daily(date), parts[2]),
            ("weekly", 3) => (RankingKey::Weekly(date), parts[2]),
            ("dseg", 4) => (RankingKey::DailySegment(date, segment(2)?), parts[3]),
            ("wseg", 4) => (RankingKey::WeeklySegment(date, segment(2)?), parts[3]),
            _ => return None,
        };
        Some(Announcement { key, version: version.parse().ok()? })
    }

    fn hourly(&self, hour: RankingHour) -> String {
        self.base(RankingKey::Hourly(hour))
    }

    /// Writes `entries` into fresh staging keys of `base`: a ZSET when `zset`, else the
    /// product index; and the packed copy (a string, for replicas to load).
    async fn stage(&self, base: &str, entries: &[Scored], zset: bool) -> Result<Staged, RedisError> {
        let mut conn = self.conn.clone();
        let staged = Staged::named(base);
        let ttl = self.staging_ttl.as_secs().max(1);
        let order = if zset { Vec::new() } else { product_order(entries) };
        let mut index = order.chunks(STAGE_GROUP);
        for group in entries.chunks(STAGE_GROUP) {
            let mut pipe = redis::pipe();
            for chunk in group.chunks(ZADD_CHUNK).filter(|_| zset) {
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(&staged.zset);
                for e in chunk {
                    zadd.arg(e.score).arg(member(e.product_id));
                }
                pipe.add_command(zadd).ignore();
            }
            pipe.cmd("APPEND").arg(&staged.packed).arg(pack(group)).ignore();
            if let Some(positions) = index.next() {
                pipe.cmd("APPEND").arg(&staged.index).arg(indexed(positions)).ignore();
            }
            // A crashed writer's staging keys must not live forever.
            for key in staged.keys() {
                pipe.cmd("EXPIRE").arg(key).arg(ttl).ignore();
            }
            if let Err(e) = pipe.query_async::<()>(&mut conn).await {
                let _ = redis::cmd("UNLINK").arg(&staged.keys()).query_async::<()>(&mut conn).await;
                return Err(e);
            }
        }
        Ok(staged)
    }
}

/// Entries per pipeline round trip when staging a version.
const STAGE_GROUP: usize = ZADD_CHUNK * PIPELINE_CHUNKS;

/// The staging keys of a version being written.
struct Staged {
    zset: String,
    packed: String,
    index: String,
}

impl Staged {
    fn named(base: &str) -> Self {
        let zset = format!("{base}:staging:{:016x}", rand::random::<u64>());
        Self { packed: format!("{zset}:packed"), index: format!("{zset}:index"), zset }
    }

    fn keys(&self) -> [&String; 3] {
        [&self.zset, &self.packed, &self.index]
    }
}

impl RedisRankingStore {
    /// [`RankingStore::placements`] of a packed-only ranking.
    async fn packed_placements(
        &self,
        key: RankingKey,
        version: Option<u64>,
        product_ids: &[i64],
    ) -> Result<Placements, StoreError> {
        let mut invocation = self.packed_placements.key(self.version_key(key));
        invocation.arg(format!("{}:v", self.base(key)));
        match version {
            Some(v) => invocation.arg(v),
            None => invocation.arg("current"),
        };
        for id in product_ids {
            invocation.arg(id.to_be_bytes().as_slice());
        }
        let raw: Vec<redis::Value> = invocation.invoke_async(&mut self.conn.clone()).await.map_err(unavailable)?;
        let bad = || StoreError::Corrupt("unexpected reply to a packed placements script".into());
        let number = |v: &redis::Value| -> Result<Option<u64>, StoreError> {
            match v {
                redis::Value::Nil => Ok(None),
                other => redis::from_redis_value_ref::<u64>(other).map(Some).map_err(|_| bad()),
            }
        };
        let version = match raw.first().ok_or_else(bad)? {
            redis::Value::Nil => None,
            v => Some(redis::from_redis_value_ref::<u64>(v).map_err(|_| bad())?),
        };
        let Some(version) = version else {
            return Ok(Placements { found: vec![None; product_ids.len()], total: 0, version: None });
        };
        let total = number(raw.get(1).ok_or_else(bad)?)?.unwrap_or(0);
        let mut found = Vec::with_capacity(product_ids.len());
        for triple in raw[2..].chunks(3) {
            let [index, bits, above] = triple else { return Err(bad()) };
            let parsed = match (number(index)?, bits, number(above)?) {
                (Some(index), redis::Value::BulkString(bits), Some(above)) => {
                    let bits: [u8; 8] = bits.as_slice().try_into().map_err(|_| bad())?;
                    Some(Found { index, score: f64::from_bits(u64::from_be_bytes(bits)), above })
                }
                _ => None,
            };
            found.push(parsed);
        }
        if found.len() != product_ids.len() {
            return Err(bad());
        }
        Ok(Placements { found, total, version: Some(version) })
    }
}

/// Bytes per packed entry: product id and score bits, big-endian.
const PACKED: usize = 16;

fn pack(entries: &[Scored]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(entries.len() * PACKED);
    for e in entries {
        bytes.extend_from_slice(&e.product_id.to_be_bytes());
        bytes.extend_from_slice(&e.score.to_bits().to_be_bytes());
    }
    bytes
}

/// Bytes per product index entry: a position in ranking order, big-endian. The product id
/// is the packed copy's at that position: the index costs 4 bytes an entry, not 12, for one
/// more `GETRANGE` per step of a search.
const INDEXED: usize = 4;

/// The positions of `entries` (in ranking order) in ascending product order: the product
/// index.
fn product_order(entries: &[Scored]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..u32::try_from(entries.len()).unwrap_or(u32::MAX)).collect();
    order.sort_unstable_by_key(|&i| entries[i as usize].product_id);
    order
}

/// The product index entries of `positions` (a run of [`product_order`]).
fn indexed(positions: &[u32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(positions.len() * INDEXED);
    for &at in positions {
        bytes.extend_from_slice(&at.to_be_bytes());
    }
    bytes
}

fn unpack(bytes: &[u8]) -> Result<Vec<Scored>, StoreError> {
    if !bytes.len().is_multiple_of(PACKED) {
        return Err(StoreError::Corrupt(format!("packed ranking of {} bytes", bytes.len())));
    }
    Ok(bytes
        .chunks_exact(PACKED)
        .map(|e| {
            let (id, score) = e.split_at(8);
            Scored {
                product_id: i64::from_be_bytes(id.try_into().unwrap_or_default()),
                score: f64::from_bits(u64::from_be_bytes(score.try_into().unwrap_or_default())),
            }
        })
        .collect())
}

#[async_trait]
impl RankingStore for RedisRankingStore {
    async fn publish(&self, key: RankingKey, entries: &[Scored], life: VersionLife) -> Result<u64, StoreError> {
        let announced = Self::announced(key).ok_or_else(|| StoreError::Corrupt(format!("{key:?} has no versions")))?;
        let base = self.base(key);
        let zset = !packed_only(key);
        let staged = self.stage(&base, entries, zset).await.map_err(unavailable)?;
        let superseded_ms = u64::try_from(life.superseded_for.as_millis()).unwrap_or(u64::MAX);
        let published = self
            .publish
            .key(&staged.zset)
            .key(self.version_key(key))
            .key(format!("{base}:superseded"))
            .key(&staged.packed)
            .key(&staged.index)
            .arg(format!("{base}:v"))
            .arg(life.expire_at.timestamp())
            .arg(superseded_ms)
            .arg(self.channel())
            .arg(announced)
            .arg(if entries.is_empty() { "0" } else { "1" })
            .arg(if zset { "1" } else { "0" })
            .invoke_async::<u64>(&mut self.conn.clone())
            .await;
        if published.is_err() && !entries.is_empty() {
            let _ = redis::cmd("UNLINK").arg(&staged.keys()).query_async::<()>(&mut self.conn.clone()).await;
        }
        published.map_err(unavailable)
    }

    async fn versions(&self, keys: &[RankingKey]) -> Result<Vec<Option<u64>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let gets = keys
            .iter()
            .map(|key| {
                let pointer = self.version_key(*key);
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
        if packed_only(key) {
            return self.version_chunk(key, version, offset, limit).await;
        }
        let (start, stop) = bounds(offset, limit);
        let (kept, members, total): (u8, Vec<(String, f64)>, u64) = self
            .version_page
            .key(self.version_key(key))
            .arg(format!("{}:v", self.base(key)))
            .arg(version)
            .arg(start)
            .arg(stop)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        if kept == 0 {
            return Ok(None);
        }
        Ok(Some(Page { entries: scored(members)?, total, version: Some(version) }))
    }

    async fn version_chunk(
        &self,
        key: RankingKey,
        version: u64,
        start: u64,
        count: u64,
    ) -> Result<Option<Page>, StoreError> {
        if count == 0 && !packed_only(key) {
            return self.version_page(key, version, start, 0).await;
        }
        let (first, last) = byte_range(start, count);
        let (kept, bytes, total): (u8, Vec<u8>, u64) = self
            .version_chunk
            .key(self.version_key(key))
            .arg(format!("{}:v", self.base(key)))
            .arg(version)
            .arg(first)
            .arg(last)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        if kept == 0 {
            return Ok(None);
        }
        Ok(Some(Page { entries: unpack(&bytes)?, total: total / PACKED as u64, version: Some(version) }))
    }

    async fn increment_hourly(&self, increments: &[HourlyIncrement]) -> Result<(), StoreError> {
        let mut commands = Vec::with_capacity(increments.len() + 2);
        let mut expiries = std::collections::BTreeMap::new();
        for inc in increments {
            let key = self.hourly(inc.hour);
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
            .arg(format!("{}:segments", self.base(whole)))
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
        let key = format!("{}:segments", self.base(whole));
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
                let key = self.hourly(*hour);
                let mut zrem = redis::cmd("ZREM");
                zrem.arg(&key).arg(&members);
                (key, zrem)
            })
            .collect();
        self.conn.per_slot(commands).await.map(drop).map_err(unavailable)
    }

    async fn top(&self, key: RankingKey, offset: u64, limit: u64) -> Result<Page, StoreError> {
        if packed_only(key) {
            let (first, last) = byte_range(offset, limit);
            let (version, bytes, total): (Option<String>, Vec<u8>, u64) = self
                .current_packed
                .key(self.version_key(key))
                .arg(format!("{}:v", self.base(key)))
                .arg(first)
                .arg(last)
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(unavailable)?;
            return Ok(Page {
                entries: unpack(&bytes)?,
                total: total / PACKED as u64,
                version: parse_version(version)?,
            });
        }
        let (start, stop) = bounds(offset, limit);
        if key.is_versioned() {
            let (version, members, total): (Option<String>, Vec<(String, f64)>, u64) = self
                .current_page
                .key(self.version_key(key))
                .arg(format!("{}:v", self.base(key)))
                .arg(start)
                .arg(stop)
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(unavailable)?;
            return Ok(Page { entries: scored(members)?, total, version: parse_version(version)? });
        }
        let key = self.base(key);
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
        if packed_only(key) {
            return self.packed_placements(key, version, product_ids).await;
        }
        let mut invocation = self.placements.key(self.version_key(key));
        if key.is_versioned() {
            invocation.arg(format!("{}:v", self.base(key)));
            match version {
                Some(v) => invocation.arg(v),
                None => invocation.arg("current"),
            };
        } else {
            invocation.arg(self.base(key)).arg("hourly");
        }
        for id in product_ids {
            invocation.arg(member(*id));
        }
        let raw: Vec<redis::Value> = invocation.invoke_async(&mut self.conn.clone()).await.map_err(unavailable)?;
        let bad = || StoreError::Corrupt("unexpected reply to a placements script".into());
        let value = |v: &redis::Value| -> Result<Option<String>, StoreError> {
            match v {
                redis::Value::Nil => Ok(None),
                other => redis::from_redis_value_ref::<String>(other).map(Some).map_err(|_| bad()),
            }
        };
        let version = parse_version(value(raw.first().ok_or_else(bad)?)?)?;
        if version.is_none() && key.is_versioned() {
            return Ok(Placements { found: vec![None; product_ids.len()], total: 0, version: None });
        }
        let total: u64 = value(raw.get(1).ok_or_else(bad)?)?.and_then(|t| t.parse().ok()).unwrap_or(0);
        let mut found = Vec::with_capacity(product_ids.len());
        for triple in raw[2..].chunks(3) {
            let [rank, score, above] = triple else { return Err(bad()) };
            let parsed = match (value(rank)?, value(score)?, value(above)?) {
                (Some(r), Some(s), Some(a)) => Some(Found {
                    index: r.parse().map_err(|_| bad())?,
                    score: s.parse().map_err(|_| bad())?,
                    above: a.parse().map_err(|_| bad())?,
                }),
                _ => None,
            };
            found.push(parsed);
        }
        if found.len() != product_ids.len() {
            return Err(bad());
        }
        Ok(Placements { found, total, version })
    }

    async fn announcements(&self) -> Result<Announcements, StoreError> {
        let pubsub = self.subscriber.subscribe(&self.channel()).await.map_err(unavailable)?;
        Ok(pubsub
            .into_on_message()
            .filter_map(|msg| async move {
                let text: String = msg.get_payload().ok()?;
                Self::parse_announcement(&text)
            })
            .boxed())
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

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError> {
        self.renew
            .key(self.lock_key(&lease.name))
            .arg(&lease.token)
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .invoke_async::<i64>(&mut self.conn.clone())
            .await
            .map(|renewed| renewed == 1)
            .map_err(unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_entries_round_trip_bit_for_bit() {
        let entries = [
            Scored { product_id: i64::MAX, score: 4_194_303.999_999_999 },
            Scored { product_id: 1, score: -0.0 },
            Scored { product_id: 42, score: 5.700_500_8 },
        ];
        let back = unpack(&pack(&entries)).expect("unpacks");
        assert_eq!(back.len(), 3);
        for (a, b) in entries.iter().zip(&back) {
            assert_eq!((a.product_id, a.score.to_bits()), (b.product_id, b.score.to_bits()));
        }
        assert!(unpack(&[0; 17]).is_err());
    }
}
