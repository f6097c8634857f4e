//! A consumer of the ranking feed, for any transport: [`Follower`] applies a board's
//! `FeedRecord`s in order and checks each closed version: its changes all arrived, it follows
//! the version held, and the top held has the record's size and checksum. Repeated and late
//! records (a version already held) change nothing.

use std::collections::HashMap;

use ranking_proto::v1::{self, feed_record::Record};

/// FNV-1a 64 of a top (product ids in rank order): each id then its rank, 8 bytes
/// big-endian each.
pub fn checksum(product_ids: impl IntoIterator<Item = i64>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (product_id, rank) in product_ids.into_iter().zip(1u64..) {
        for byte in product_id.to_be_bytes().into_iter().chain(rank.to_be_bytes()) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// Why a board's feed cannot be trusted from this record on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedError {
    /// A version follows another than the one held: records were missed.
    Gap { held: u64, previous: u64, version: u64 },
    /// A version closed with other changes than those that arrived.
    Changes { version: u64, arrived: u32, announced: u32 },
    /// The held top is not the version's.
    Checksum { version: u64, held: u64, announced: u64 },
}

impl std::fmt::Display for FeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Gap { held, previous, version } => {
                write!(f, "version {version} follows {previous}, but {held} is held: records were missed")
            }
            Self::Changes { version, arrived, announced } => {
                write!(f, "version {version} announced {announced} changes, {arrived} arrived")
            }
            Self::Checksum { version, held, announced } => {
                write!(f, "version {version}: the held top's checksum is {held:#x}, the record's {announced:#x}")
            }
        }
    }
}

impl std::error::Error for FeedError {}

/// What a board's follower holds.
#[derive(Debug, Default, Clone)]
pub struct Follower {
    version: u64,
    top: HashMap<i64, (u64, f64)>,
    /// Changes applied of the version being read, and that version.
    reading: Option<(u64, u32)>,
}

impl Follower {
    /// The version held (0: none yet).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The top held: (product, score) in rank order.
    pub fn top(&self) -> Vec<(i64, f64)> {
        let mut entries: Vec<(u64, i64, f64)> = self.top.iter().map(|(p, (r, s))| (*r, *p, *s)).collect();
        entries.sort_by_key(|e| e.0);
        entries.into_iter().map(|(_, p, s)| (p, s)).collect()
    }

    /// Applies one record of this board; `Some(version)` when it closed a version.
    pub fn apply(&mut self, record: &v1::FeedRecord) -> Result<Option<u64>, FeedError> {
        match record.record.as_ref() {
            Some(Record::Change(c)) => {
                if c.version <= self.version {
                    return Ok(None);
                }
                self.start(c.version, c.previous_version)?;
                if let Some((_, applied)) = self.reading.as_mut() {
                    *applied += 1;
                }
                if c.rank == 0 {
                    self.top.remove(&c.product_id);
                } else {
                    self.top.insert(c.product_id, (c.rank, c.score));
                }
                Ok(None)
            }
            Some(Record::Version(v)) => {
                if v.version <= self.version {
                    return Ok(None);
                }
                self.start(v.version, v.previous_version)?;
                let arrived = self.reading.map_or(0, |(_, n)| n);
                if arrived != v.changes {
                    return Err(FeedError::Changes { version: v.version, arrived, announced: v.changes });
                }
                let held = checksum(self.top().into_iter().map(|(p, _)| p));
                if held != v.checksum || self.top.len() != v.entries as usize {
                    return Err(FeedError::Checksum { version: v.version, held, announced: v.checksum });
                }
                self.version = v.version;
                self.reading = None;
                Ok(Some(v.version))
            }
            None => Ok(None),
        }
    }

    /// Begins reading `version` (once): afresh when it is sent whole, else after the held one.
    fn start(&mut self, version: u64, previous: u64) -> Result<(), FeedError> {
        if self.reading.is_some_and(|(v, _)| v == version) {
            return Ok(());
        }
        if previous == 0 {
            self.top.clear();
        } else if previous != self.version {
            return Err(FeedError::Gap { held: self.version, previous, version });
        }
        self.reading = Some((version, 0));
        Ok(())
    }
}

pub use ranking_proto::feed::{board_name, subject};

/// The board a record is about.
pub fn board_of(record: &v1::FeedRecord) -> Option<&v1::BoardKey> {
    match record.record.as_ref()? {
        Record::Change(c) => c.board.as_ref(),
        Record::Version(v) => v.board.as_ref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board() -> v1::BoardKey {
        v1::BoardKey { window: 1, date: "2026-12-05".into(), segment: String::new(), profile: "default".into() }
    }

    fn change(version: u64, previous_version: u64, product_id: i64, rank: u64, score: f64) -> v1::FeedRecord {
        let c = v1::RankingChange {
            board: Some(board()),
            version,
            previous_version,
            product_id,
            rank,
            score,
            ..Default::default()
        };
        v1::FeedRecord { record: Some(Record::Change(c)) }
    }

    fn close(version: u64, previous_version: u64, changes: u32, top: &[i64]) -> v1::FeedRecord {
        let v = v1::RankingVersion {
            board: Some(board()),
            version,
            previous_version,
            entries: top.len() as u32,
            changes,
            checksum: checksum(top.iter().copied()),
            cause: "live_pass".into(),
        };
        v1::FeedRecord { record: Some(Record::Version(v)) }
    }

    #[test]
    fn a_follower_holds_each_version_and_skips_repeats() {
        let mut f = Follower::default();
        let records = [
            change(10, 0, 1, 1, 9.0),
            change(10, 0, 2, 2, 8.0),
            close(10, 0, 2, &[1, 2]),
            change(11, 10, 2, 1, 9.5),
            change(11, 10, 1, 2, 9.0),
            close(11, 10, 2, &[2, 1]),
        ];
        let closed: Vec<Option<u64>> = records.iter().map(|r| f.apply(r).expect("valid")).collect();
        assert_eq!(closed, vec![None, None, Some(10), None, None, Some(11)]);
        // The whole feed again: every record a repeat.
        for r in &records {
            assert_eq!(f.apply(r), Ok(None));
        }
        assert_eq!(f.top(), vec![(2, 9.5), (1, 9.0)]);
    }

    #[test]
    fn a_gap_a_missing_change_and_a_wrong_top_are_named() {
        let mut f = Follower::default();
        f.apply(&close(10, 0, 0, &[])).expect("empty board");
        assert_eq!(f.apply(&change(12, 11, 1, 1, 1.0)), Err(FeedError::Gap { held: 10, previous: 11, version: 12 }));
        let mut f = Follower::default();
        assert!(matches!(f.apply(&close(10, 0, 1, &[])), Err(FeedError::Changes { .. })));
        let mut f = Follower::default();
        f.apply(&change(10, 0, 1, 1, 1.0)).expect("change");
        assert!(matches!(f.apply(&close(10, 0, 1, &[2])), Err(FeedError::Checksum { .. })));
    }

    #[test]
    fn the_checksum_is_the_documented_one() {
        assert_eq!(checksum([42]), 10_327_725_056_075_130_052);
    }
}
