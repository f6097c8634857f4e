//! Which rankings a replica keeps copies of: today's and yesterday's daily and weekly
//! rankings, then the segment rankings published with them; and when the versions of those
//! segments are polled.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::Snapshots;
use crate::ports::{RankingKey, Segment};

/// How long after a whole ranking's version moved its segments' versions are polled on
/// every poll (a recompute publishes the segments after the whole ranking, for seconds when
/// there are thousands).
const SEGMENT_POLL_AFTER_CHANGE: Duration = Duration::from_secs(60);

/// Otherwise, how often the segments' versions are polled (the fallback for announcements
/// lost outside those windows).
const SEGMENT_POLL_EVERY: Duration = Duration::from_secs(30);

/// When a whole ranking's segment versions were polled.
#[derive(Debug, Clone, Copy)]
pub(super) struct SegmentPoll {
    /// The whole ranking's version seen.
    seen: Option<u64>,
    /// When that version was first seen.
    changed: Instant,
    /// The last poll of its segments.
    polled: Option<Instant>,
}

/// What a replica knows of the rankings it wants beyond the whole ones.
#[derive(Default)]
pub(super) struct Wanted {
    /// The segments published with each whole ranking a replica keeps (their rankings are
    /// kept too, after the whole ones, within the same bound).
    segments: ArcSwap<HashMap<RankingKey, Vec<Segment>>>,
    /// Wanted rankings the store had no version of at the last poll (yesterday's, on a
    /// service's first day): reads that annotate with them need not ask the store.
    absent: ArcSwap<HashSet<RankingKey>>,
    /// When each whole ranking's segment versions were last polled, and when its own version
    /// last moved.
    segment_polls: Mutex<HashMap<RankingKey, SegmentPoll>>,
}

impl Wanted {
    /// Whether the store had no version of this wanted ranking at the last poll (and none
    /// was announced since).
    pub fn absent(&self, key: RankingKey) -> bool {
        self.absent.load().contains(&key)
    }

    /// `key` has a version now.
    pub fn present(&self, key: RankingKey) {
        if self.absent(key) {
            self.absent.rcu(|absent| {
                let mut absent = HashSet::clone(absent);
                absent.remove(&key);
                absent
            });
        }
    }

    /// After a poll of `keys` at `versions`: the absent ones are those without a version,
    /// and those still wanted (`wanted`) that were absent before and not polled now.
    pub fn polled(&self, keys: &[RankingKey], versions: &[Option<u64>], wanted: &[RankingKey]) {
        self.absent.rcu(|absent| {
            let mut absent: HashSet<RankingKey> =
                absent.iter().filter(|k| wanted.contains(k) && !keys.contains(k)).copied().collect();
            absent.extend(keys.iter().zip(versions).filter(|(_, v)| v.is_none()).map(|(k, _)| *k));
            absent
        });
    }

    /// The segments known of each whole ranking.
    pub fn segments(&self) -> Arc<HashMap<RankingKey, Vec<Segment>>> {
        self.segments.load_full()
    }

    /// What a poll found of the segments: only the whole rankings in `wholes` are known
    /// any more, and each of `found` (read from the store) has its segments added to those
    /// known. Merged into what is known now rather than stored over it: a publication of this
    /// replica may have noted its segments ([`Snapshots::know_segments`]) while the poll read
    /// the store's older list, and its copies must not be dropped for that.
    pub fn found_segments(&self, wholes: &[RankingKey], found: &[(RankingKey, Vec<Segment>)]) {
        self.segments.rcu(|known| {
            let mut known = HashMap::clone(known);
            known.retain(|k, _| wholes.contains(k));
            for (whole, segments) in found {
                let list = known.entry(*whole).or_default();
                list.extend_from_slice(segments);
                list.sort_unstable();
                list.dedup();
            }
            known
        });
    }
}

impl Snapshots {
    /// The rankings a replica keeps copies of at `now`: today's and yesterday's daily and
    /// weekly rankings, then the segment rankings published with them (whole rankings come
    /// first, so they are the last to be left out by the bound).
    pub fn wanted(&self, now: DateTime<Utc>) -> Vec<RankingKey> {
        let mut keys = self.wholes(now);
        let segments = self.wanted.segments();
        let restricted: Vec<RankingKey> = keys
            .iter()
            .flat_map(|whole| segments.get(whole).into_iter().flatten().filter_map(|s| whole.restricted(Some(*s))))
            .collect();
        keys.extend(restricted);
        keys
    }

    /// Whether `key` is one of [`Snapshots::wanted`], without listing them (a recompute
    /// installs and hears of thousands of segment rankings; each look costs two searches).
    pub(super) fn is_wanted(&self, key: RankingKey, now: DateTime<Utc>) -> bool {
        let whole = key.whole();
        self.wholes(now).contains(&whole)
            && key
                .segment()
                .is_none_or(|s| self.wanted.segments.load().get(&whole).is_some_and(|k| k.binary_search(&s).is_ok()))
    }

    /// The whole rankings wanted at `now`.
    pub(super) fn wholes(&self, now: DateTime<Utc>) -> Vec<RankingKey> {
        let today = self.policy.today(now);
        let mut keys = vec![RankingKey::Daily(today), RankingKey::Weekly(today), RankingKey::Trending(today)];
        keys.extend(today.pred_opt().into_iter().flat_map(|d| [RankingKey::Daily(d), RankingKey::Weekly(d)]));
        keys
    }

    /// Notes the segments published with `whole` (by this replica's recompute, or found by
    /// the poll), so that their rankings are wanted.
    pub fn know_segments(&self, whole: RankingKey, segments: &[Segment]) {
        if !self.wholes(self.policy.now()).contains(&whole) {
            return;
        }
        // Sorted, for `is_wanted`'s search.
        let mut segments = segments.to_vec();
        segments.sort_unstable();
        segments.dedup();
        self.wanted.segments.rcu(|known| {
            let mut known = HashMap::clone(known);
            known.insert(whole, segments.clone());
            known
        });
        self.forget_unwanted(self.policy.now());
    }

    /// Drops copies of rankings no longer wanted.
    pub(super) fn forget_unwanted(&self, now: DateTime<Utc>) {
        let wanted = self.wanted(now);
        self.held.retain(|k| wanted.contains(k));
    }

    /// The whole rankings (of `wholes`, at `versions`) whose segments' versions are due to be
    /// polled now: those whose own version moved within [`SEGMENT_POLL_AFTER_CHANGE`], and
    /// the others once per [`SEGMENT_POLL_EVERY`]. Segment rankings change only with their
    /// whole ranking (a recompute or a withdrawal publishes the whole one first), so
    /// thousands of segments do not cost thousands of reads a poll.
    pub(super) fn segments_due(&self, wholes: &[RankingKey], versions: &[Option<u64>]) -> Vec<RankingKey> {
        let mut polls = self.wanted.segment_polls.lock().unwrap_or_else(|e| e.into_inner());
        polls.retain(|k, _| wholes.contains(k));
        let at = Instant::now();
        wholes
            .iter()
            .zip(versions)
            .filter(|(whole, version)| {
                let poll = polls.entry(**whole).or_insert(SegmentPoll { seen: None, changed: at, polled: None });
                if poll.seen != **version {
                    *poll = SegmentPoll { seen: **version, changed: at, polled: poll.polled };
                }
                let due = at.duration_since(poll.changed) <= SEGMENT_POLL_AFTER_CHANGE
                    || poll.polled.is_none_or(|p| at.duration_since(p) >= SEGMENT_POLL_EVERY);
                if due {
                    poll.polled = Some(at);
                }
                due
            })
            .map(|(whole, _)| *whole)
            .collect()
    }
}
