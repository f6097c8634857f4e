//! Typed gRPC client of the ranking service, for sibling services.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ranking_client::{connect, v1};
//!
//! let mut client = connect("http://127.0.0.1:50051").await?;
//! let top = client
//!     .get_top_n(v1::GetTopNRequest { limit: 10, ..Default::default() })
//!     .await?
//!     .into_inner();
//! for p in top.products {
//!     println!("#{} product {} ({})", p.rank, p.product_id, p.score);
//! }
//! # Ok(())
//! # }
//! ```

pub use ranking_proto::v1;
pub use ranking_proto::v1::ranking_service_client::RankingServiceClient;
pub use tonic;

use tonic::transport::{Channel, Endpoint};

/// Connects to a ranking server at `endpoint` (e.g. `http://127.0.0.1:50051`).
pub async fn connect(endpoint: impl Into<String>) -> Result<RankingServiceClient<Channel>, tonic::transport::Error> {
    let channel = Endpoint::from_shared(endpoint.into())?.connect().await?;
    Ok(RankingServiceClient::new(channel))
}

/// A `google.protobuf.Timestamp` for a Unix time in seconds and nanoseconds.
pub fn timestamp(seconds: i64, nanos: i32) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds, nanos }
}
