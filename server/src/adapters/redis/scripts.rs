//! The Lua scripts of the store, one `.lua` file each under `scripts/` (each opens with what
//! it takes and returns). Every script touches the keys of one ranking (one hash tag), so it
//! runs the same on one node and on a cluster.

use redis::Script;

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
}

impl Scripts {
    pub fn new() -> Self {
        Self {
            publish: Script::new(include_str!("scripts/publish.lua")),
            version_chunk: Script::new(include_str!("scripts/version_chunk.lua")),
            current_packed: Script::new(include_str!("scripts/current_packed.lua")),
            placements: Script::new(include_str!("scripts/placements.lua")),
            packed_placements: Script::new(include_str!("scripts/packed_placements.lua")),
            release: Script::new(include_str!("scripts/release.lua")),
            renew: Script::new(include_str!("scripts/renew.lua")),
        }
    }
}
