//! The feed's JetStream sink: each record published to `<prefix>.<profile>.<window>.<segment
//! or _all>` with `Nats-Msg-Id` = board, version and product (`v` for the closing record), so
//! that a repeated record is dropped by the stream. When no stream holds the subjects, the
//! sink creates one (`<prefix>.>`, records kept twice `RANKING_FEED_SNAPSHOT`). It connects
//! on its first batch and again after a failure to.

use std::time::Duration;

use async_nats::jetstream::{self, stream};
use async_trait::async_trait;
use tokio::sync::Mutex;

use super::{board_key, board_name, records, subject};
use crate::ports::{FeedBatch, FeedSink, StoreError};

/// Longest a connection attempt may take before the batch counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The JetStream sink.
pub struct JetStreamFeed {
    url: String,
    prefix: String,
    keep: Duration,
    context: Mutex<Option<jetstream::Context>>,
}

impl JetStreamFeed {
    /// A sink of subjects under `prefix` on the server at `url`, its stream keeping records
    /// for `keep` when the sink creates it.
    pub fn new(url: &str, prefix: &str, keep: Duration) -> Self {
        Self { url: url.to_string(), prefix: prefix.to_string(), keep, context: Mutex::new(None) }
    }

    async fn context(&self) -> Result<jetstream::Context, StoreError> {
        let mut held = self.context.lock().await;
        if let Some(context) = held.as_ref() {
            return Ok(context.clone());
        }
        let connect = async_nats::ConnectOptions::new().name("ranking-feed").connect(self.url.as_str());
        let client = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| failed("connecting timed out"))?
            .map_err(failed)?;
        let context = jetstream::new(client);
        let subjects = format!("{}.>", self.prefix);
        if context.stream_by_subject(&subjects).await.is_err() {
            let name = format!("RANKING_FEED_{}", self.prefix.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
            let config = stream::Config { name, subjects: vec![subjects], max_age: self.keep, ..Default::default() };
            context.get_or_create_stream(config).await.map_err(failed)?;
        }
        *held = Some(context.clone());
        Ok(context)
    }
}

fn failed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable {
        store: "feed (jetstream)",
        cause: std::sync::Arc::new(std::io::Error::other(e.to_string())),
    }
}

#[async_trait]
impl FeedSink for JetStreamFeed {
    fn name(&self) -> &'static str {
        "jetstream"
    }

    async fn send(&self, batch: &FeedBatch) -> Result<(), StoreError> {
        let context = self.context().await?;
        let board = board_key(batch.board, &batch.profile);
        let (subject, name) = (subject(&self.prefix, &board), board_name(&board));
        let mut acks = Vec::new();
        for record in records(batch) {
            let id = match record.product_id {
                Some(product) => format!("{name}:{}:{product}", batch.version),
                None => format!("{name}:{}:v", batch.version),
            };
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", id.as_str());
            let sent = context.publish_with_headers(subject.clone(), headers, record.bytes.into()).await;
            acks.push(sent.map_err(failed)?);
        }
        for ack in acks {
            ack.await.map_err(failed)?;
        }
        Ok(())
    }
}
