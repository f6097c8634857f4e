//! The Lua scripts of the store, one `.lua` file each under `scripts/` (each opens with what
//! it takes and returns). Every script touches the keys of one ranking (one hash tag), so it
//! runs the same on one node and on a cluster. Those that read a version pointer open with
//! the layouts this release reads and `pointer.lua`: what a pointer's value holds, and the
//! refusal of a layout this release does not read.

use redis::Script;
use redis::aio::ConnectionLike;

/// The store's scripts, hashed once (redis-rs sends EVALSHA, and the source on NOSCRIPT).
#[derive(Clone)]
pub(super) struct Scripts {
    /// Publishes a staged version: [`super::RankingStore::publish`].
    pub publish: Script,
    /// A byte range of a named version's packed copy, if kept.
    pub version_chunk: Script,
    /// The current version of a ranking and a byte range of its packed copy.
    pub current_packed: Script,
    /// Several products' places in an hourly ranking (a ZSET).
    pub placements: Script,
    /// Several products' places in a version (binary searches of its product index).
    pub packed_placements: Script,
    /// Deletes a lease its holder still has.
    pub release: Script,
    /// Extends a lease its holder still has.
    pub renew: Script,
    /// Moves a board's feed cursor to a later version only.
    pub feed_cursor: Script,
}

impl Scripts {
    pub fn new() -> Self {
        Self {
            publish: reading_pointers(include_str!("scripts/publish.lua")),
            version_chunk: reading_pointers(include_str!("scripts/version_chunk.lua")),
            current_packed: reading_pointers(include_str!("scripts/current_packed.lua")),
            placements: Script::new(include_str!("scripts/placements.lua")),
            packed_placements: reading_pointers(include_str!("scripts/packed_placements.lua")),
            release: Script::new(include_str!("scripts/release.lua")),
            renew: Script::new(include_str!("scripts/renew.lua")),
            feed_cursor: Script::new(include_str!("scripts/feed_cursor.lua")),
        }
    }
}

/// A script that reads version pointers: `body` after `pointer.lua`, told the layouts this
/// release reads (the one range, [`crate::ports::READS`], that the Rust side checks too).
fn reading_pointers(body: &str) -> Script {
    let reads = crate::ports::READS;
    Script::new(&format!(
        "local OLDEST_LAYOUT, NEWEST_LAYOUT = {}, {}\n{}{body}",
        reads.start(),
        reads.end(),
        include_str!("scripts/pointer.lua")
    ))
}

/// One call of `publish.lua`: every key and argument by name, laid out in the one order the
/// script reads them.
pub(super) struct Publication<'a> {
    /// The staged sorted set (renamed over `daily_zset` when `replaces_sorted_set`).
    pub staged_zset: &'a str,
    /// The ranking's version pointer.
    pub pointer: &'a str,
    /// The index of superseded versions still kept, by the time they go.
    pub superseded: &'a str,
    /// The staged packed copy.
    pub staged_packed: &'a str,
    /// The staged product index.
    pub staged_index: &'a str,
    /// The daily ranking's sorted set.
    pub daily_zset: &'a str,
    /// The prefix of the version keys (`…:v:`; the version number follows).
    pub version_prefix: &'a str,
    /// When the version and the pointer expire (Unix seconds).
    pub expire_at: i64,
    /// How long the version before it stays readable (ms).
    pub superseded_life_ms: u64,
    /// The announcements' channel.
    pub channel: &'a str,
    /// What the announcement names before the version number.
    pub announced: &'a str,
    /// Whether the version holds entries (an empty ranking has nothing staged).
    pub has_entries: bool,
    /// Whether the staged sorted set replaces the daily ranking's.
    pub replaces_sorted_set: bool,
    /// The spacing of superseded versions kept for their whole life (ms).
    pub spacing_ms: u64,
    /// The grace of the other superseded versions (ms).
    pub grace_ms: u64,
    /// The writer's lease key, in the ranking's slot (the pointer when unchecked).
    pub lease_key: &'a str,
    /// The writer's lease token; empty: unchecked.
    pub lease_token: &'a str,
    /// Whether the staged version has a pins key (`<staged sorted set>:pins`).
    pub has_pins: bool,
    /// Whether it has a served parts key (`<staged sorted set>:served`).
    pub has_served: bool,
    /// The version's statistics are staged beside its entries (`…:stats`).
    pub has_stats: bool,
    /// Layout 2: the version the staged changes (`<staged sorted set>:delta`) follow; `None`:
    /// the version is staged whole.
    pub delta_of: Option<u64>,
    /// The deltas a chain may hold.
    pub chain_max: usize,
    /// The layout a delta's pointer names: 3 for a board with pins (read by releases that
    /// read layout 3 only), else 2.
    pub delta_layout: u16,
}

impl Publication<'_> {
    /// Runs `publish.lua`: the version number published.
    pub async fn invoke(&self, script: &Script, conn: &mut impl ConnectionLike) -> redis::RedisResult<u64> {
        let flag = |b: bool| if b { "1" } else { "0" };
        script
            .key(self.staged_zset)
            .key(self.pointer)
            .key(self.superseded)
            .key(self.staged_packed)
            .key(self.staged_index)
            .key(self.daily_zset)
            .key(self.lease_key)
            .arg(self.version_prefix)
            .arg(self.expire_at)
            .arg(self.superseded_life_ms)
            .arg(self.channel)
            .arg(self.announced)
            .arg(flag(self.has_entries))
            .arg(flag(self.replaces_sorted_set))
            .arg(self.spacing_ms)
            .arg(self.grace_ms)
            .arg(self.lease_token)
            .arg(flag(self.has_pins))
            .arg(flag(self.has_served))
            .arg(flag(self.has_stats))
            .arg(self.delta_of.map(|v| v.to_string()).unwrap_or_default())
            .arg(self.chain_max)
            .arg(self.delta_layout)
            .invoke_async(conn)
            .await
    }
}
