//! [`FeedCursors`]: where the ranking feed has got to on each board, kept with the board in
//! the ranking store: the last version whose records were all acknowledged, and its fed top
//! (what the next version's changes are taken against). A cursor only moves forward: a
//! feeder that stalled and comes back with an older version changes nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{RankingKey, StoreError};
use crate::domain::feed::FedEntry;

/// A board's feed position.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedCursor {
    /// The last version fed whole (its changes and its closing record acknowledged).
    pub version: u64,
    /// When that version's board was last sent whole, Unix milliseconds.
    pub whole_at_ms: i64,
    /// Its fed top, in rank order.
    pub top: Vec<FedEntry>,
}

/// The boards' feed positions.
#[async_trait]
pub trait FeedCursors: Send + Sync + 'static {
    /// The cursor of `key`'s board; `None` before its first fed version (or once the ranking
    /// store lost it: the next version is then sent whole).
    async fn feed_cursor(&self, key: RankingKey) -> Result<Option<FeedCursor>, StoreError>;

    /// Moves `key`'s cursor to `cursor` unless it is at `cursor.version` or later (`false`
    /// then); it lives until `expire_at`, as the day's rankings do.
    async fn advance_feed_cursor(
        &self,
        key: RankingKey,
        cursor: &FeedCursor,
        expire_at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
}

/// A fed top as stored: 24 bytes per entry, big-endian (product id, score bits, organic rank).
pub fn pack_top(top: &[FedEntry]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(top.len() * 24);
    for e in top {
        bytes.extend_from_slice(&e.product_id.to_be_bytes());
        bytes.extend_from_slice(&e.score.to_bits().to_be_bytes());
        bytes.extend_from_slice(&e.organic_rank.to_be_bytes());
    }
    bytes
}

/// The fed top of [`pack_top`]'s bytes.
pub fn unpack_top(bytes: &[u8]) -> Result<Vec<FedEntry>, StoreError> {
    if !bytes.len().is_multiple_of(24) {
        return Err(StoreError::Corrupt(format!("a feed cursor's top of {} bytes", bytes.len())));
    }
    let word = |c: &[u8]| u64::from_be_bytes(c.try_into().expect("8 bytes"));
    Ok(bytes
        .chunks_exact(24)
        .map(|c| FedEntry {
            product_id: word(&c[..8]) as i64,
            score: f64::from_bits(word(&c[8..16])),
            organic_rank: word(&c[16..]),
        })
        .collect())
}

/// Why a version was published (the closing record's `cause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedCause {
    Recompute,
    LivePass,
    Controls,
    Withdrawal,
}

impl FeedCause {
    /// As the feed spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recompute => "recompute",
            Self::LivePass => "live_pass",
            Self::Controls => "controls",
            Self::Withdrawal => "withdrawal",
        }
    }
}

/// One fed version of a board: its changes against `previous_version`'s top (0: sent whole),
/// then what closes it.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedBatch {
    pub board: RankingKey,
    /// The scoring profile's name (`default`: the service's).
    pub profile: String,
    pub version: u64,
    pub previous_version: u64,
    pub changes: Vec<crate::domain::feed::Change>,
    /// Entries in the fed top of `version`.
    pub entries: u32,
    pub checksum: u64,
    pub cause: FeedCause,
}

/// Where the feed goes (a Kafka topic, a JetStream subject).
#[async_trait]
pub trait FeedSink: Send + Sync + 'static {
    /// Its name in metrics and logs (`kafka`, `jetstream`).
    fn name(&self) -> &'static str;

    /// Sends the batch's records in order, each change then the closing version record, and
    /// returns once the bus acknowledged every one. The same batch sent twice is the same
    /// records, byte for byte.
    async fn send(&self, batch: &FeedBatch) -> Result<(), StoreError>;
}
