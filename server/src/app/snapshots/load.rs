//! How copies get in: installed by this replica's recompute, loaded from the store on an
//! announcement or at the poll (the changes after the copy held applied to it, or the
//! version read in chunks), and the loop that keeps them current.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Snapshots;
use crate::domain::snapshot::{Snapshot, SnapshotError};
use crate::metrics::StoreLabels;
use crate::ports::{Announcement, Announcements, RankingKey, Scored, ServedParts, StoreError, VersionCopy};

/// Entries per read while loading a version (4 MB of packed entries from Redis).
pub const LOAD_CHUNK: u64 = 262_144;
/// Wait before subscribing again after the subscription failed or ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(5);

/// What reading a version whole found.
pub(super) enum Read {
    /// The version is no longer kept.
    Gone,
    /// It has this many entries, more than allowed.
    TooLarge(u64),
    /// Its entries, in ranking order (a served board's: but at its pins), and a served board's
    /// parts.
    Entries(Vec<Scored>, Option<ServedParts>),
}

impl Snapshots {
    /// Reads one version whole, in chunks, unless it has more than `max` entries.
    pub(super) async fn read_version(&self, key: RankingKey, version: u64, max: u64) -> Result<Read, StoreError> {
        let Some(first) = self.rankings.version_chunk(key, version, 0, LOAD_CHUNK).await? else {
            return Ok(Read::Gone);
        };
        if first.total > max {
            return Ok(Read::TooLarge(first.total));
        }
        let total = first.total as usize;
        let mut entries = Vec::with_capacity(total);
        entries.extend(first.entries);
        while entries.len() < total {
            let Some(page) = self.rankings.version_chunk(key, version, entries.len() as u64, LOAD_CHUNK).await? else {
                return Ok(Read::Gone);
            };
            if page.entries.is_empty() {
                break;
            }
            entries.extend(page.entries);
        }
        if entries.len() != total {
            return Err(StoreError::Corrupt(format!(
                "version {version} of {key:?} changed while loading ({} of {total} entries)",
                entries.len()
            )));
        }
        let served = self.rankings.version_served(key, version).await?;
        Ok(Read::Entries(entries, served))
    }

    /// Installs a version from its entries in ranking order, when the ranking is one this
    /// replica keeps: what [`Snapshots::install_copy`] does with a publication's own copy, for
    /// tests that have entries only.
    #[cfg(any(test, feature = "test-support"))]
    pub async fn install(&self, key: RankingKey, version: u64, entries: Vec<Scored>) {
        self.wanted.present(key);
        if !self.is_wanted(key, self.policy.now()) {
            return;
        }
        let _one = self.installing.lock().await;
        if self.holds(key, version) {
            return;
        }
        // Known too large before a copy is built.
        let len = entries.len() as u64;
        if len > self.room(key) {
            return self.swap(vec![(key, version, Err(len))]);
        }
        match self.held_as(key, entries) {
            Ok(ranking) => self.swap(vec![(key, version, Ok(Arc::new(ranking)))]),
            Err(e) => tracing::error!(?key, version, error = %e, "published ranking cannot be held"),
        }
    }

    /// Installs a copy a recompute of this replica already made of a version it just
    /// published (a whole ranking, or a segment's as positions in that copy).
    pub async fn install_copy(&self, key: RankingKey, version: u64, ranking: Arc<Snapshot>) {
        self.install_copies(vec![(key, version, ranking)]).await;
    }

    /// [`Snapshots::install_copy`] of many rankings at once (a recompute's segment
    /// rankings): one swap of the held copies for all of them, in the order given as far as
    /// the bound allows.
    pub async fn install_copies(&self, copies: Vec<(RankingKey, u64, Arc<Snapshot>)>) {
        let now = self.policy.now();
        for (key, ..) in &copies {
            self.wanted.present(*key);
        }
        let copies = copies
            .into_iter()
            .filter(|(key, ..)| self.is_wanted(*key, now))
            .map(|(key, version, ranking)| (key, version, Ok(ranking)))
            .collect();
        let _one = self.installing.lock().await;
        self.swap(copies);
    }

    /// The copy of `entries` (in ranking order) of `key`: a segment ranking whose entries are
    /// those of the held copy of its whole ranking (same products, scores and order, as a
    /// recompute publishes them) is held as positions in that copy, 4 bytes an entry; any
    /// other ranking, or a segment of another version than the held whole one, on its own.
    fn held_as(&self, key: RankingKey, entries: Vec<Scored>) -> Result<Snapshot, SnapshotError> {
        if key.segment().is_some()
            && let Some(whole) = self.get(key.whole())
            && let Some(within) = Snapshot::within(&whole.ranking, &entries)
        {
            return Ok(within);
        }
        Snapshot::from_ranked(entries)
    }

    /// A segment's copy built from a delta (entries of its own) held again as positions in
    /// the held copy of its whole board, as a segment read whole is, when it lies within it.
    fn within_whole(&self, key: RankingKey, copy: Arc<Snapshot>) -> Arc<Snapshot> {
        if key.segment().is_none() || !copy.pinned().is_empty() {
            return copy;
        }
        let Some(whole) = self.get(key.whole()) else { return copy };
        match Snapshot::within(&whole.ranking, &copy.page(0, u64::MAX)) {
            Some(within) => Arc::new(within),
            None => copy,
        }
    }

    /// Loads `version` of `key` from the store unless it or a newer one is held, or this
    /// replica is publishing `key` (it installs its own copy).
    pub async fn load(&self, key: RankingKey, version: u64) -> Result<(), StoreError> {
        if self.own.contains(key) {
            return Ok(());
        }
        let _one = self.installing.lock().await;
        if self.holds(key, version) || self.known_too_large(key, version) {
            return Ok(());
        }
        // A version stored as the changes after the copy held: that copy with them applied.
        let held = self.get(key);
        let held = held.as_ref().map(|h| (h.version, &h.ranking));
        if let Some(copy) = self.rankings.version_copy(key, version, held, self.room(key)).await? {
            let copy = match copy {
                VersionCopy::Copy(copy) => Ok(self.within_whole(key, copy)),
                VersionCopy::TooLarge(total) => Err(total),
            };
            self.swap(vec![(key, version, copy)]);
            return Ok(());
        }
        let copy = match self.read_version(key, version, self.room(key)).await? {
            // Superseded and dropped already: its successor is loaded next.
            Read::Gone => return Ok(()),
            Read::TooLarge(total) => Err(total),
            Read::Entries(entries, served) => {
                let total = entries.len();
                let ranking = match served {
                    Some(parts) => Snapshot::from_parts(entries, Some(parts)),
                    None => self.held_as(key, entries),
                }
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                tracing::debug!(?key, version, entries = total, "loaded ranking snapshot");
                Ok(Arc::new(ranking))
            }
        };
        self.swap(vec![(key, version, copy)]);
        Ok(())
    }

    /// Drops copies of rankings no longer wanted, then loads every wanted ranking whose
    /// current version is newer than its copy (segment rankings when they are due:
    /// [`Snapshots::segments_due`]).
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let now = self.policy.now();
        let wholes = self.wholes(now);
        let whole_versions = self.rankings.versions(&wholes).await?;
        let due = self.segments_due(&wholes, &whole_versions);
        let mut found = Vec::with_capacity(due.len());
        for whole in &due {
            found.push((*whole, self.rankings.published_segments(*whole).await?));
        }
        self.wanted.found_segments(&wholes, &found);
        self.forget_unwanted(now);
        self.report(now);

        let segment_keys: Vec<RankingKey> = {
            let known = self.wanted.segments();
            due.iter()
                .flat_map(|whole| known.get(whole).into_iter().flatten().filter_map(|s| whole.restricted(Some(*s))))
                .collect()
        };
        let mut keys = wholes;
        let mut versions = whole_versions;
        if !segment_keys.is_empty() {
            versions.extend(self.rankings.versions(&segment_keys).await?);
        }
        keys.extend(segment_keys);
        let wanted = self.wanted(now);
        self.wanted.polled(&keys, &versions, &wanted);
        for (key, version) in keys.into_iter().zip(versions) {
            if let Some(version) = version {
                self.load(key, version).await?;
            }
        }
        Ok(())
    }

    async fn announced(&self, a: Announcement) -> Result<(), StoreError> {
        self.wanted.present(a.key);
        // This replica's own publications come back announced: held already.
        if self.holds(a.key, a.version) {
            return Ok(());
        }
        let now = self.policy.now();
        // A segment first published now is not known yet: its whole ranking says it is wanted.
        let wanted =
            self.is_wanted(a.key, now) || (a.key.segment().is_some() && self.wholes(now).contains(&a.key.whole()));
        if wanted { self.load(a.key, a.version).await } else { Ok(()) }
    }

    /// Keeps the copies current until `stop`: loads announced versions at once, polls the
    /// current versions every [`crate::app::policy::Policy::snapshot_poll`], subscribes again
    /// after the subscription is lost.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut subscription: Option<Announcements> = None;
        let mut subscribe_at = Instant::now();
        let mut poll = tokio::time::interval(self.policy.snapshot_poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            if subscription.is_none() && Instant::now() >= subscribe_at {
                tokio::select! {
                    () = stop.cancelled() => return,
                    s = self.rankings.announcements() => match s {
                        Ok(s) => subscription = Some(s),
                        Err(e) => {
                            tracing::debug!(error = %e, "cannot subscribe to ranking versions; polling");
                            subscribe_at = Instant::now() + RESUBSCRIBE_AFTER;
                        }
                    },
                }
            }
            let result = tokio::select! {
                () = stop.cancelled() => return,
                _ = poll.tick() => tokio::select! {
                    () = stop.cancelled() => return,
                    r = self.refresh() => r,
                },
                a = next(&mut subscription) => match a {
                    Some(a) => tokio::select! {
                        () = stop.cancelled() => return,
                        r = self.announced(a) => r,
                    },
                    None => {
                        tracing::debug!("ranking version subscription ended; polling until it is back");
                        subscription = None;
                        subscribe_at = Instant::now() + RESUBSCRIBE_AFTER;
                        Ok(())
                    }
                },
            };
            let reachable = i64::from(result.is_ok());
            self.metrics.stores.reachable.get_or_create(&StoreLabels { store: "ranking" }).set(reachable);
            match result {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("ranking snapshots are current again");
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "cannot refresh ranking snapshots; serving the versions held");
                }
                _ => {}
            }
        }
    }
}

/// The next announcement, or never when there is no subscription.
async fn next(subscription: &mut Option<Announcements>) -> Option<Announcement> {
    match subscription {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}
