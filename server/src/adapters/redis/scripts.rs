//! The Lua scripts of the store, one `.lua` file each under `scripts/` (each opens with what
//! it takes and returns). Every script touches the keys of one ranking (one hash tag), so it
//! runs the same on one node and on a cluster.

use redis::Script;

/// The store's scripts, hashed once (redis-rs sends EVALSHA, and the source on NOSCRIPT).
#[derive(Clone)]
pub(super) struct Scripts {
    /// Publishes a staged version: [`super::RankingStore::publish`].
    pub publish: Script,
    /// The current version and a page of its ZSET.
    pub current_page: Script,
    /// A page of a named version's ZSET, if kept.
    pub version_page: Script,
    /// A byte range of a named version's packed copy, if kept.
    pub version_chunk: Script,
    /// The current version of a packed-only ranking and a byte range of it.
    pub current_packed: Script,
    /// Several products' places in a ZSET ranking.
    pub placements: Script,
    /// Several products' places in a packed-only ranking (binary searches of its index).
    pub packed_placements: Script,
    /// Deletes a lease its holder still has.
    pub release: Script,
    /// Extends a lease its holder still has.
    pub renew: Script,
}

impl Scripts {
    pub fn new() -> Self {
        Self {
            publish: Script::new(include_str!("scripts/publish.lua")),
            current_page: Script::new(include_str!("scripts/current_page.lua")),
            version_page: Script::new(include_str!("scripts/version_page.lua")),
            version_chunk: Script::new(include_str!("scripts/version_chunk.lua")),
            current_packed: Script::new(include_str!("scripts/current_packed.lua")),
            placements: Script::new(include_str!("scripts/placements.lua")),
            packed_placements: Script::new(include_str!("scripts/packed_placements.lua")),
            release: Script::new(include_str!("scripts/release.lua")),
            renew: Script::new(include_str!("scripts/renew.lua")),
        }
    }
}
