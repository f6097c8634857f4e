//! Publishing a version: the entries written into fresh staging keys (the packed copy, its
//! product index, a served board's pins and parts, the version's statistics and, for a daily
//! ranking's full publication, its sorted set of product ids by packed score),
//! then one script (`scripts/publish.lua`) that renames them to the next version (the sorted
//! set to the day's key), moves the pointer, keeps the superseded version for
//! `RANKING_SNAPSHOT_TTL` and announces the new one, only while the writer's lease is held
//! (the script reads the lease key, in the ranking's slot, before anything else).

use std::sync::Arc;

use redis::RedisError;

use super::keys::{announced, member};
use super::packed::{INDEXED, PACKED, indexed, pack, product_order};
use super::scripts::Publication;
use super::{RedisRankingStore, unavailable};
use crate::domain::snapshot::Changes;
use crate::ports::{Fence, Form, Publishing, RankingKey, Scored, ServedParts, StoreError, VersionLife, VersionStats};

/// Members per ZADD when writing a staging key.
const ZADD_CHUNK: usize = 5_000;
/// ZADD commands per pipeline round trip.
const PIPELINE_CHUNKS: usize = 20;
/// Entries per pipeline round trip when staging a version.
const STAGE_GROUP: usize = ZADD_CHUNK * PIPELINE_CHUNKS;

/// The staging keys of a version being written.
struct Staged {
    zset: String,
    packed: String,
    index: String,
    /// A served board's pins' positions and its annex ([`super::served`]).
    pins: String,
    served: String,
    /// The version's statistics ([`super::stats`]).
    stats: String,
    /// The changes after the version before, when it is written as a delta ([`super::delta`]).
    delta: String,
}

impl Staged {
    fn named(zset: String) -> Self {
        Self {
            packed: format!("{zset}:packed"),
            index: format!("{zset}:index"),
            pins: format!("{zset}:pins"),
            served: format!("{zset}:served"),
            stats: format!("{zset}:stats"),
            delta: format!("{zset}:delta"),
            zset,
        }
    }

    fn keys(&self) -> [&String; 7] {
        [&self.zset, &self.packed, &self.index, &self.pins, &self.served, &self.stats, &self.delta]
    }
}

/// What a publication writes of a version.
pub(super) struct Written<'a> {
    /// Its entries, in ranking order (a served board's: but at its pins).
    pub entries: &'a [Scored],
    /// The entries' product index, when the caller has it.
    pub by_product: Option<&'a [u32]>,
    /// A served board's parts.
    pub served: Option<&'a ServedParts>,
    /// The version's statistics.
    pub stats: Option<&'a VersionStats>,
    /// Written as the changes after this version (the current one; `entries` and
    /// `by_product` are then not written): layout 2.
    pub delta: Option<(u64, &'a Changes)>,
    /// The version's entries (those of `entries`, or of the copy a delta makes).
    pub len: usize,
}

/// What a publication came to.
pub(super) enum Outcome {
    /// Published as this version.
    Published(u64),
    /// Written as a delta and refused (the version before is not the current one, or its
    /// chain is full or lost its base): nothing written; the version is to be written whole.
    Rebase,
}

impl Outcome {
    /// The version a publication written whole came to (one is never refused as a delta is).
    pub(super) fn whole(self) -> Result<u64, StoreError> {
        match self {
            Outcome::Published(version) => Ok(version),
            Outcome::Rebase => Err(StoreError::Corrupt("a whole version refused as a delta".into())),
        }
    }
}

impl RedisRankingStore {
    /// [`crate::ports::RankingStore::publish`] and `publish_copy`.
    pub(super) async fn publish_version(
        &self,
        key: RankingKey,
        version: Written<'_>,
        life: VersionLife,
        form: Form,
        fence: &Fence,
    ) -> Result<Outcome, StoreError> {
        let Written { entries, by_product, served, stats, delta, len } = version;
        let announced = announced(key).ok_or_else(|| StoreError::Corrupt(format!("{key:?} has no versions")))?;
        let pointer = self.keys.pointer(key);
        // The lease key shares the ranking's hash slot (a day's rankings and its lease are
        // tagged by the day), so the script can read it on a cluster too. Unchecked: the
        // pointer stands in for it and the token is empty.
        let lease = match fence.lease() {
            Some(lease) => {
                let lease_key = self.keys.lock(&lease.name);
                if !self.keys.same_slot(&lease_key, &pointer) {
                    let problem = format!("the lease {} does not guard {key:?}", lease.name);
                    return Err(StoreError::Corrupt(problem));
                }
                Some((lease_key, lease))
            }
            None => None,
        };
        let sorted_set = form == Form::Full && matches!(key, RankingKey::Daily(_));
        let staged = match delta {
            Some((previous, changes)) => self.stage_delta(key, (previous, len), changes).await.map_err(unavailable)?,
            None => self.stage(key, entries, by_product, sorted_set).await.map_err(unavailable)?,
        };
        let (has_pins, has_served) = match served {
            Some(parts) => self.stage_served(&staged, parts).await.map_err(unavailable)?,
            None => (false, false),
        };
        if let Some(stats) = stats {
            self.stage_stats(&staged, stats).await.map_err(unavailable)?;
        }
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let published = Publication {
            staged_zset: &staged.zset,
            pointer: &pointer,
            superseded: &self.keys.superseded(key),
            staged_packed: &staged.packed,
            staged_index: &staged.index,
            daily_zset: &self.keys.base(key),
            version_prefix: &self.keys.versions(key),
            expire_at: life.expire_at.timestamp(),
            superseded_life_ms: ms(life.superseded_for),
            channel: &self.keys.channel(),
            announced: &announced,
            has_entries: !entries.is_empty(),
            replaces_sorted_set: sorted_set,
            spacing_ms: ms(life.superseded_spacing()),
            grace_ms: ms(life.superseded_grace()),
            lease_key: lease.as_ref().map_or(pointer.as_str(), |(key, _)| key.as_str()),
            lease_token: lease.as_ref().map_or("", |(_, lease)| lease.token.as_str()),
            has_pins,
            has_served,
            has_stats: stats.is_some(),
            delta_of: delta.map(|(previous, _)| previous),
            chain_max: delta.map_or(super::delta::CHAIN, |(_, changes)| super::delta::chain_max(len, changes)),
            delta_layout: if has_pins { 3 } else { 2 },
        }
        .invoke(&self.scripts.publish, &mut self.conn.clone())
        .await;
        if published.is_err() && (!entries.is_empty() || has_served || stats.is_some() || delta.is_some()) {
            let _ = redis::cmd("UNLINK").arg(&staged.keys()).query_async::<()>(&mut self.conn.clone()).await;
        }
        let board = if key.segment().is_some() { "segment" } else { key.window().name() };
        match (&published, delta) {
            (Ok(_), Some((_, changes))) => {
                self.written.count(("delta", board), changes.len(), super::delta::size(changes));
            }
            (Ok(_), None) => self.written.count(("whole", board), entries.len(), entries.len() * (PACKED + INDEXED)),
            (Err(e), _) if e.code() == Some("REBASE") => return Ok(Outcome::Rebase),
            _ => {}
        }
        published.map(Outcome::Published).map_err(|e| match (e.code(), &lease) {
            (Some("FENCED"), Some((_, lease))) => {
                let left = e.detail().and_then(|d| d.trim().parse::<i64>().ok()).unwrap_or(-2);
                let detail = if left >= 0 {
                    format!("another holder has it for another {left} ms")
                } else {
                    "it expired and nobody holds it".to_string()
                };
                StoreError::LostLease { lease: lease.name.clone(), detail }
            }
            _ => unavailable(e),
        })
    }

    /// The changes to write instead of `publishing.copy` whole, when the layout in force has
    /// deltas: against the version before it (this replica's copy of it), when neither
    /// board has pins (a pin moves the entries between it and its place), the daily
    /// ranking's sorted set is not to be replaced (`form`), and they are at most one
    /// [`super::delta::DELTA_SHARE`]th of the version. The script still checks that the
    /// version before is the current one.
    pub(super) async fn delta_after(
        &self,
        key: RankingKey,
        publishing: Publishing<'_>,
        form: Form,
    ) -> Result<Option<(u64, Changes)>, StoreError> {
        let Publishing { copy, previous, .. } = publishing;
        let sorted_set = form == Form::Full && matches!(key, RankingKey::Daily(_));
        let Some((version, before)) = previous.filter(|_| self.layout.get() >= 2 && !sorted_set) else {
            return Ok(None);
        };
        // A board with pins is put back in its served order from its served parts, which
        // replicas reading only layout 2 cannot do.
        let pins = !copy.pinned().is_empty() || !before.pinned().is_empty();
        if copy.is_empty() || (pins && self.layout.get() < 3) {
            return Ok(None);
        }
        let (before, after) = (Arc::clone(before), Arc::clone(copy));
        let at_most = copy.len() / super::delta::DELTA_SHARE;
        // A walk of a million entries (stopped past the share): off the runtime's workers.
        let changes = tokio::task::spawn_blocking(move || Changes::of_at_most(&before, &after, at_most))
            .await
            .map_err(|e| StoreError::Corrupt(format!("the changes of {key:?}: {e}")))?
            .map_err(StoreError::ranking)?;
        Ok(changes.map(|changes| (version, changes)))
    }

    /// Writes a served board's parts beside its staged entries: the pins' positions (4 bytes
    /// each, which `scripts/packed_placements.lua` searches) when there are any, and the
    /// parts whole. Returns which of the two were written.
    async fn stage_served(&self, staged: &Staged, parts: &ServedParts) -> Result<(bool, bool), RedisError> {
        let ttl = self.staging_ttl.as_secs().max(1);
        let mut pipe = redis::pipe();
        let has_pins = !parts.pinned.is_empty();
        if has_pins {
            pipe.cmd("SET").arg(&staged.pins).arg(super::served::pins(&parts.pinned)).arg("EX").arg(ttl).ignore();
        }
        pipe.cmd("SET").arg(&staged.served).arg(super::served::encode(parts)).arg("EX").arg(ttl).ignore();
        pipe.query_async::<()>(&mut self.conn.clone()).await?;
        Ok((has_pins, true))
    }

    /// Writes a version's statistics beside its staged entries.
    async fn stage_stats(&self, staged: &Staged, stats: &VersionStats) -> Result<(), RedisError> {
        let ttl = self.staging_ttl.as_secs().max(1);
        redis::cmd("SET")
            .arg(&staged.stats)
            .arg(super::stats::encode(stats))
            .arg("EX")
            .arg(ttl)
            .query_async::<()>(&mut self.conn.clone())
            .await
    }

    /// Writes the changes after version `previous` into a fresh staging key of `key`.
    /// `len`: the version's entries.
    async fn stage_delta(
        &self,
        key: RankingKey,
        (previous, len): (u64, usize),
        changes: &Changes,
    ) -> Result<Staged, RedisError> {
        let staged = Staged::named(self.keys.staging(key));
        let ttl = self.staging_ttl.as_secs().max(1);
        redis::cmd("SET")
            .arg(&staged.delta)
            .arg(super::delta::encode(previous, len, changes))
            .arg("EX")
            .arg(ttl)
            .query_async::<()>(&mut self.conn.clone())
            .await?;
        Ok(staged)
    }

    /// Writes `entries` into fresh staging keys of `key`: the packed copy (a string, for
    /// replicas to load), its product index, and a sorted set when `sorted_set`.
    async fn stage(
        &self,
        key: RankingKey,
        entries: &[Scored],
        by_product: Option<&[u32]>,
        sorted_set: bool,
    ) -> Result<Staged, RedisError> {
        let mut conn = self.conn.clone();
        let staged = Staged::named(self.keys.staging(key));
        let ttl = self.staging_ttl.as_secs().max(1);
        let order = match by_product {
            Some(index) => std::borrow::Cow::Borrowed(index),
            None => std::borrow::Cow::Owned(product_order(entries)),
        };
        let mut index = order.chunks(STAGE_GROUP);
        for group in entries.chunks(STAGE_GROUP) {
            let mut pipe = redis::pipe();
            for chunk in group.chunks(ZADD_CHUNK).filter(|_| sorted_set) {
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
