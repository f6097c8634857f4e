//! The ranking feed's sinks: a fed version's records encoded as the contract's `FeedRecord`s
//! (protobuf binary) and produced to a Kafka topic ([`kafka`]) or published to JetStream
//! ([`jetstream`]). What to send and when is the application's ([`crate::app::feed`]); this
//! is the wire.
//!
//! A batch is always encoded the same way, so a batch sent again (a feeder that failed after
//! some records were acknowledged, another replica) repeats the same records byte for byte:
//! JetStream drops the repeats by `Nats-Msg-Id`, and a Kafka consumer recognises a repeated
//! record by its board, version and product.

use prost::Message;
use ranking_proto::v1 as pb;

pub use ranking_proto::feed::{board_name, subject};

use crate::ports::{FeedBatch, RankingKey};

pub mod jetstream;
pub mod kafka;

/// The board of `key` in the contract: its window, date, segment and profile.
pub fn board_key(key: RankingKey, profile: &str) -> pb::BoardKey {
    pb::BoardKey {
        window: crate::wire::wire_window(key.window()) as i32,
        date: key.date().format("%Y-%m-%d").to_string(),
        segment: key.segment().map(|s| s.as_str().to_string()).unwrap_or_default(),
        profile: profile.to_string(),
    }
}

/// One encoded record: the product it is about (`None` for the closing version record) and
/// its bytes.
pub struct Encoded {
    pub product_id: Option<i64>,
    pub bytes: Vec<u8>,
}

/// The batch's records in order: every change, then the version record.
pub fn records(batch: &FeedBatch) -> Vec<Encoded> {
    let board = board_key(batch.board, &batch.profile);
    let mut out: Vec<Encoded> = batch
        .changes
        .iter()
        .map(|c| {
            let change = pb::RankingChange {
                board: Some(board.clone()),
                version: batch.version,
                previous_version: batch.previous_version,
                product_id: c.product_id,
                rank: c.rank,
                previous_rank: c.previous_rank,
                score: c.score,
                organic_rank: c.organic_rank,
            };
            let record = pb::FeedRecord { record: Some(pb::feed_record::Record::Change(change)) };
            Encoded { product_id: Some(c.product_id), bytes: record.encode_to_vec() }
        })
        .collect();
    let version = pb::RankingVersion {
        board: Some(board),
        version: batch.version,
        previous_version: batch.previous_version,
        entries: batch.entries,
        changes: batch.changes.len() as u32,
        checksum: batch.checksum,
        cause: batch.cause.as_str().to_string(),
    };
    out.push(Encoded {
        product_id: None,
        bytes: pb::FeedRecord { record: Some(pb::feed_record::Record::Version(version)) }.encode_to_vec(),
    });
    out
}
