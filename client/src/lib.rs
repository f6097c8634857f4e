//! Typed gRPC client of the ranking service, for sibling services.
//!
//! [`RankingClient`] wraps the generated client with what a caller needs in production:
//! timeouts, TLS, a bearer token, W3C trace-context propagation from the current tracing
//! span (with `tracing-opentelemetry` and a global text-map propagator), retries with
//! backoff and jitter within an overall deadline on UNAVAILABLE and on load shedding for
//! calls that are safe to repeat (all of them: writes carry idempotent event ids, reads and
//! recomputes have no side effect that a repeat could double), and batches over the
//! service's bounds split into several calls. [`events`] builds events with a fresh
//! time-ordered id (UUID v7) and the current time. [`feed`] follows a board of the ranking
//! feed from its records, checking every version.
//!
//! The crate's `cli` feature (on by default) builds `rankctl`; a service that only calls the
//! ranking service depends on it with `default-features = false`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use ranking_client::{RankingClient, events, v1};
//!
//! let client = RankingClient::builder("http://127.0.0.1:50051")
//!     .request_timeout(Duration::from_secs(2))
//!     .bearer_token("write-token")
//!     .connect()
//!     .await?;
//! client.record_event(events::view(101)).await?;
//! client.record_event(events::order(101, 10_000)).await?;
//! let top = client.top_n(v1::GetTopNRequest { limit: 10, ..Default::default() }).await?;
//! let rank = client.rank(101).await?; // a product id is a GetRankRequest of today's daily ranking
//! for p in top.products {
//!     println!("#{} product {} ({})", p.rank, p.product_id, p.score);
//! }
//! # Ok(())
//! # }
//! ```

use futures_util::stream::BoxStream;
use tonic::Status;
use tonic::transport::{Channel, Endpoint};

mod builder;
mod calls;
pub mod events;
pub mod feed;
mod retry;
mod streams;

pub use builder::{BuildError, CallMetadata, RankingClient, RankingClientBuilder};
pub use calls::{MAX_BATCH, MAX_PRODUCT_IDS};
pub use ranking_proto::v1;
pub use ranking_proto::v1::ranking_service_client::RankingServiceClient;
pub use retry::{RetryPolicy, retry_after, retryable};
pub use tonic;

/// Connects the bare generated client to `endpoint` (e.g. `http://127.0.0.1:50051`).
pub async fn connect(endpoint: impl Into<String>) -> Result<RankingServiceClient<Channel>, tonic::transport::Error> {
    let channel = Endpoint::from_shared(endpoint.into())?.connect().await?;
    Ok(RankingServiceClient::new(channel))
}

/// The generated client behind [`RankingClient`].
pub type Inner = RankingServiceClient<tonic::service::interceptor::InterceptedService<Channel, CallMetadata>>;

/// A stream of answers of the service.
pub type Answers<T> = BoxStream<'static, Result<T, Status>>;
