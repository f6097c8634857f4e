//! The answers of the most asked pages (the home page's top 20 …) of held copies, so that
//! the thousands of identical reads between two versions cost a lookup and a copy. Kept in
//! one bounded cache (moka's: what is asked least goes first when it is full), together
//! with their encoding once the transport has made it ([`super::types::Encoding`]).

use std::sync::Arc;

use moka::sync::Cache;

use super::resolve::previous_period;
use super::types::TopAnswer;
use crate::app::snapshots::Snapshots;
use crate::ports::RankingKey;

/// What a page answered from held copies depends on: the ranking and its version, the
/// previous period's held version (its ranks annotate the entries), the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct AnswerKey {
    key: RankingKey,
    /// The version the answer must come from to be kept.
    pub(super) version: u64,
    previous: u64,
    offset: u64,
    limit: u32,
}

/// Most answers kept.
pub(super) const MAX_ANSWERS: u64 = 1_024;

/// Kept answers, at most [`MAX_ANSWERS`]; an answer never outlives the versions in its key
/// as far as a reader can tell: a newer version is a new key.
pub(super) struct Answers(Cache<AnswerKey, Arc<TopAnswer>>);

impl Default for Answers {
    fn default() -> Self {
        Self(Cache::new(MAX_ANSWERS))
    }
}

impl Answers {
    /// The key of a page when the ranking, and the previous period's when there is one, are
    /// both held copies; `None` otherwise (such answers are not kept).
    pub(super) fn key(&self, snapshots: &Snapshots, key: RankingKey, offset: u64, limit: u32) -> Option<AnswerKey> {
        let version = snapshots.get(key)?.version;
        let previous = match previous_period(key) {
            Some(previous) if snapshots.absent(previous) => 0,
            Some(previous) => snapshots.get(previous)?.version,
            None => 0,
        };
        Some(AnswerKey { key, version, previous, offset, limit })
    }

    pub(super) fn get(&self, key: &AnswerKey) -> Option<Arc<TopAnswer>> {
        self.0.get(key)
    }

    pub(super) fn put(&self, key: AnswerKey, answer: &Arc<TopAnswer>) {
        self.0.insert(key, answer.clone());
    }
}
