//! Typed gRPC client of the ranking service, for sibling services.
//!
//! [`RankingClient`] wraps the generated client with what a caller needs in production:
//! timeouts, TLS, a bearer token, W3C trace-context propagation from the current tracing
//! span (with `tracing-opentelemetry` and a global text-map propagator), and retries with backoff and jitter on UNAVAILABLE for
//! calls that are safe to repeat (all of them: writes carry idempotent event ids, reads and
//! recomputes have no side effect that a repeat could double). [`events`] builds events
//! with a fresh time-ordered id (UUID v7) and the current time.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use ranking_client::{RankingClient, events, v1};
//!
//! let mut client = RankingClient::builder("http://127.0.0.1:50051")
//!     .request_timeout(Duration::from_secs(2))
//!     .bearer_token("write-token")
//!     .connect()
//!     .await?;
//! client.record_event(events::view(101)).await?;
//! client.record_event(events::order(101, 10_000)).await?;
//! let top = client.top_n(v1::GetTopNRequest { limit: 10, ..Default::default() }).await?;
//! for p in top.products {
//!     println!("#{} product {} ({})", p.rank, p.product_id, p.score);
//! }
//! # Ok(())
//! # }
//! ```

use std::future::Future;

use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use std::time::Duration;

pub use ranking_proto::v1;
pub use ranking_proto::v1::ranking_service_client::RankingServiceClient;
pub use tonic;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Status};

/// Connects the bare generated client to `endpoint` (e.g. `http://127.0.0.1:50051`).
pub async fn connect(endpoint: impl Into<String>) -> Result<RankingServiceClient<Channel>, tonic::transport::Error> {
    let channel = Endpoint::from_shared(endpoint.into())?.connect().await?;
    Ok(RankingServiceClient::new(channel))
}

/// Adds `authorization: Bearer <token>` and the W3C trace context of the current tracing
/// span (`traceparent`) to every call, so the service's spans join the caller's trace.
#[derive(Clone, Default)]
pub struct CallMetadata(Option<MetadataValue<Ascii>>);

impl Interceptor for CallMetadata {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        let context = tracing_opentelemetry::OpenTelemetrySpanExt::context(&tracing::Span::current());
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&context, &mut MetadataInjector(request.metadata_mut()));
        });
        Ok(request)
    }
}

/// Writes propagation fields into gRPC metadata.
struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl opentelemetry::propagation::Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) =
            (tonic::metadata::MetadataKey::from_bytes(key.as_bytes()), MetadataValue::try_from(value.as_str()))
        {
            self.0.insert(key, value);
        }
    }
}

/// The generated client behind [`RankingClient`].
pub type Inner = RankingServiceClient<InterceptedService<Channel, CallMetadata>>;

/// How often, and how patiently, to retry a call that found the service UNAVAILABLE.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the first retry; doubled each time, with full jitter.
    pub base_delay: Duration,
    /// Upper bound of one delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_attempts: 6, base_delay: Duration::from_millis(50), max_delay: Duration::from_secs(2) }
    }
}

impl RetryPolicy {
    fn delay(&self, retry: u32) -> Duration {
        let cap = self.base_delay.saturating_mul(1 << retry.min(16)).min(self.max_delay);
        cap.mul_f64(rand::random_range(0.5..=1.0))
    }
}

/// Why a client could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The endpoint or TLS settings were rejected, or the first connection failed.
    Transport(tonic::transport::Error),
    /// The token is not valid header text.
    InvalidToken,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "cannot reach the ranking service: {e}"),
            Self::InvalidToken => f.write_str("the bearer token must be visible ASCII"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Transport(e) => Some(e),
            Self::InvalidToken => None,
        }
    }
}

impl From<tonic::transport::Error> for BuildError {
    fn from(e: tonic::transport::Error) -> Self {
        Self::Transport(e)
    }
}

/// Settings of a [`RankingClient`].
#[derive(Debug, Clone)]
pub struct RankingClientBuilder {
    endpoint: String,
    connect_timeout: Duration,
    request_timeout: Duration,
    token: Option<String>,
    tls: Option<ClientTlsConfig>,
    retry: RetryPolicy,
}

impl RankingClientBuilder {
    /// Time to establish a connection (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Deadline of each attempt of a call (default 10 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sends `authorization: Bearer <token>` with every call.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Speaks TLS (use an `https://` endpoint); the config carries the CA and, for mutual
    /// TLS, the client identity.
    pub fn tls(mut self, tls: ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Replaces the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn endpoint(&self) -> Result<Endpoint, BuildError> {
        let mut endpoint = Endpoint::from_shared(self.endpoint.clone())?
            .connect_timeout(self.connect_timeout)
            .timeout(self.request_timeout)
            .tcp_nodelay(true);
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.clone())?;
        }
        Ok(endpoint)
    }

    fn wrap(&self, channel: Channel) -> Result<RankingClient, BuildError> {
        let token = match &self.token {
            Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| BuildError::InvalidToken)?),
            None => None,
        };
        Ok(RankingClient {
            inner: RankingServiceClient::with_interceptor(channel, CallMetadata(token)),
            retry: self.retry,
        })
    }

    /// Connects now; fails when the service cannot be reached.
    pub async fn connect(self) -> Result<RankingClient, BuildError> {
        let channel = self.endpoint()?.connect().await?;
        self.wrap(channel)
    }

    /// Connects on first use (and reconnects after failures) without failing here.
    pub fn connect_lazy(self) -> Result<RankingClient, BuildError> {
        let channel = self.endpoint()?.connect_lazy();
        self.wrap(channel)
    }
}

/// Whether the service could not be reached: UNAVAILABLE, or a call that failed in the
/// transport (a connection reset or closed under it surfaces as UNKNOWN or CANCELLED with a
/// transport error as its source) rather than with an answer of the service.
fn unavailable(status: &Status) -> bool {
    status.code() == Code::Unavailable
        || std::error::Error::source(status).is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some())
}

/// The ranking service client. Cheap to clone: clones share the connection.
#[derive(Clone)]
pub struct RankingClient {
    inner: Inner,
    retry: RetryPolicy,
}

impl RankingClient {
    /// Starts building a client for `endpoint` (`http://host:port` or `https://…`).
    pub fn builder(endpoint: impl Into<String>) -> RankingClientBuilder {
        RankingClientBuilder {
            endpoint: endpoint.into(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            token: None,
            tls: None,
            retry: RetryPolicy::default(),
        }
    }

    /// The generated client, for calls without the retry policy.
    pub fn raw(&mut self) -> &mut Inner {
        &mut self.inner
    }

    /// Runs `call` until it succeeds, fails with something other than UNAVAILABLE, or the
    /// attempts run out.
    async fn retrying<T, F, Fut>(&mut self, mut call: F) -> Result<T, Status>
    where
        F: FnMut(Inner) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut attempt = 1;
        loop {
            match call(self.inner.clone()).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) if unavailable(&status) && attempt < self.retry.max_attempts => {
                    tokio::time::sleep(self.retry.delay(attempt - 1)).await;
                    attempt += 1;
                }
                Err(status) => return Err(status),
            }
        }
    }

    /// Records one event; ACCEPTED or DUPLICATE once it is durably stored.
    pub async fn record_event(&mut self, event: v1::Event) -> Result<v1::RecordOutcome, Status> {
        let response = self
            .retrying(|mut c| {
                let event = event.clone();
                async move { c.record_event(v1::RecordEventRequest { event: Some(event) }).await }
            })
            .await?;
        Ok(v1::RecordOutcome::try_from(response.outcome).unwrap_or(v1::RecordOutcome::Unspecified))
    }

    /// Records up to 10,000 events atomically.
    pub async fn record_events(&mut self, events: Vec<v1::Event>) -> Result<v1::RecordEventsResponse, Status> {
        self.retrying(|mut c| {
            let events = events.clone();
            async move { c.record_events(v1::RecordEventsRequest { events }).await }
        })
        .await
    }

    /// A page of a ranking.
    pub async fn top_n(&mut self, request: v1::GetTopNRequest) -> Result<v1::GetTopNResponse, Status> {
        self.retrying(|mut c| {
            let request = request.clone();
            async move { c.get_top_n(request).await }
        })
        .await
    }

    /// Every page of a ranking from the first `request` names (its `offset` and `limit`)
    /// to the last, following `next_page_token`: all pages come from the version the first
    /// one was read from, so no product is repeated or skipped while the ranking is
    /// recomputed. The stream ends after the last page or at the first error (a
    /// FAILED_PRECONDITION means that version is no longer kept: walk again).
    ///
    /// ```no_run
    /// # async fn demo(client: ranking_client::RankingClient) -> Result<(), tonic::Status> {
    /// use futures_util::TryStreamExt;
    /// use ranking_client::v1;
    ///
    /// let mut pages = client.pages(v1::GetTopNRequest { limit: 1_000, ..Default::default() });
    /// while let Some(page) = pages.try_next().await? {
    ///     println!("{} products of version {}", page.products.len(), page.version);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn pages(&self, request: v1::GetTopNRequest) -> BoxStream<'static, Result<v1::GetTopNResponse, Status>> {
        let client = self.clone();
        futures_util::stream::try_unfold((client, Some(request)), |(mut client, request)| async move {
            let Some(request) = request else { return Ok(None) };
            let page = client.top_n(request.clone()).await?;
            let next = (!page.next_page_token.is_empty()).then(|| v1::GetTopNRequest {
                page_token: page.next_page_token.clone(),
                offset: 0,
                ..request
            });
            Ok(Some((page, (client, next))))
        })
        .boxed()
    }

    /// Watches a top (WatchTopN): its current state at once, then each change. A stream
    /// that breaks (a lost connection, a replica shutting down with UNAVAILABLE) is opened
    /// again by itself after the retry policy's delay; the first message after a resume is the
    /// then current state. Other errors, or the retry policy's attempts in a row running out,
    /// end the stream with that error.
    pub fn watch_top_n(
        &self,
        request: v1::WatchTopNRequest,
    ) -> BoxStream<'static, Result<v1::WatchTopNResponse, Status>> {
        struct Watching {
            inner: Inner,
            retry: RetryPolicy,
            request: v1::WatchTopNRequest,
            stream: Option<tonic::Streaming<v1::WatchTopNResponse>>,
            failures: u32,
        }
        let start = Watching { inner: self.inner.clone(), retry: self.retry, request, stream: None, failures: 0 };
        futures_util::stream::unfold(Some(start), |state| async move {
            let mut w = state?;
            loop {
                let broken = match w.stream.as_mut() {
                    None => match w.inner.watch_top_n(w.request.clone()).await {
                        Ok(response) => {
                            w.stream = Some(response.into_inner());
                            continue;
                        }
                        Err(status) => status,
                    },
                    Some(stream) => match stream.message().await {
                        Ok(Some(message)) => {
                            w.failures = 0;
                            return Some((Ok(message), Some(w)));
                        }
                        Ok(None) => Status::unavailable("the watch stream ended"),
                        Err(status) => status,
                    },
                };
                w.stream = None;
                if !unavailable(&broken) || w.failures + 1 >= w.retry.max_attempts {
                    return Some((Err(broken), None));
                }
                tokio::time::sleep(w.retry.delay(w.failures)).await;
                w.failures += 1;
            }
        })
        .boxed()
    }

    /// Every entry of a ranking, best first, following page tokens as [`RankingClient::pages`].
    pub fn entries(&self, request: v1::GetTopNRequest) -> BoxStream<'static, Result<v1::RankedProduct, Status>> {
        self.pages(request)
            .map_ok(|page| futures_util::stream::iter(page.products.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    /// One product's entry; NOT_FOUND when it is not ranked.
    pub async fn rank(&mut self, request: v1::GetRankRequest) -> Result<v1::GetRankResponse, Status> {
        self.retrying(|mut c| {
            let request = request.clone();
            async move { c.get_rank(request).await }
        })
        .await
    }

    /// Several products' entries at once (up to 1,000), from one version: ranked ones in
    /// request order, the others in `missing`. A listing page's badges in one call.
    pub async fn ranks(&mut self, request: v1::GetRanksRequest) -> Result<v1::GetRanksResponse, Status> {
        self.retrying(|mut c| {
            let request = request.clone();
            async move { c.get_ranks(request).await }
        })
        .await
    }

    /// One product's entry and up to `neighbors` (0-50) entries on each side, from one version.
    pub async fn neighbors(&mut self, product_id: i64, neighbors: u32) -> Result<v1::GetRankResponse, Status> {
        self.rank(v1::GetRankRequest { product_id, neighbors, ..Default::default() }).await
    }

    /// The products that moved most since the previous period (RISING by default; set
    /// `within_top` to ignore moves far down the ranking).
    pub async fn movers(&mut self, request: v1::ListMoversRequest) -> Result<v1::ListMoversResponse, Status> {
        self.retrying(|mut c| {
            let request = request.clone();
            async move { c.list_movers(request).await }
        })
        .await
    }

    /// Why `product_id` holds its place in the daily ranking of `date` (`YYYY-MM-DD`; empty
    /// for today): counts, weighted contributions, carry-over and the tie-break axes.
    /// Set `segment` in a request of your own ([`RankingClient::explain_rank`]) for its place
    /// within a segment.
    pub async fn explain(
        &mut self,
        product_id: i64,
        date: impl Into<String>,
    ) -> Result<v1::ExplainRankResponse, Status> {
        self.explain_rank(v1::ExplainRankRequest { product_id, date: date.into(), segment: String::new() }).await
    }

    /// ExplainRank with every field of the request.
    pub async fn explain_rank(&mut self, request: v1::ExplainRankRequest) -> Result<v1::ExplainRankResponse, Status> {
        self.retrying(|mut c| {
            let request = request.clone();
            async move { c.explain_rank(request).await }
        })
        .await
    }

    /// Sets products' segments and hidden flags (a write: `RANKING_WRITE_TOKEN`). Hidden
    /// products leave today's rankings when the call returns.
    pub async fn update_catalog(&mut self, products: Vec<v1::CatalogEntry>) -> Result<u32, Status> {
        let request = v1::UpdateCatalogRequest { products };
        self.retrying(|mut c| {
            let request = request.clone();
            async move { c.update_catalog(request).await }
        })
        .await
        .map(|r| r.updated)
    }

    /// Recomputes a day (`YYYY-MM-DD`; empty for today).
    pub async fn recompute(&mut self, date: impl Into<String>) -> Result<v1::RecomputeResponse, Status> {
        let date = date.into();
        self.retrying(|mut c| {
            let date = date.clone();
            async move { c.recompute(v1::RecomputeRequest { date }).await }
        })
        .await
    }
}

/// Events with a fresh UUID v7 id (time-ordered, unique without coordination) and the
/// current time. Keep the event to retry it: the id is what makes a retry land once.
pub mod events {
    use super::v1;

    fn now() -> prost_types::Timestamp {
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        prost_types::Timestamp {
            seconds: i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(since_epoch.subsec_nanos()).unwrap_or(0),
        }
    }

    fn event(product_id: i64, kind: v1::EventType, amount: i64) -> v1::Event {
        v1::Event {
            event_id: uuid::Uuid::now_v7().to_string(),
            product_id,
            r#type: kind.into(),
            amount,
            occurred_at: Some(now()),
        }
    }

    /// A product page view.
    pub fn view(product_id: i64) -> v1::Event {
        event(product_id, v1::EventType::View, 0)
    }

    /// A like.
    pub fn like(product_id: i64) -> v1::Event {
        event(product_id, v1::EventType::Like, 0)
    }

    /// A like taken back.
    pub fn unlike(product_id: i64) -> v1::Event {
        event(product_id, v1::EventType::Unlike, 0)
    }

    /// An order of `amount` in the currency's minor unit.
    pub fn order(product_id: i64, amount: i64) -> v1::Event {
        event(product_id, v1::EventType::Order, amount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_get_unique_time_ordered_ids_and_the_current_time() {
        let a = events::view(1);
        let b = events::order(2, 500);
        assert_ne!(a.event_id, b.event_id);
        assert!(a.event_id < b.event_id, "UUID v7 ids sort by creation time");
        assert_eq!((b.r#type, b.amount), (v1::EventType::Order as i32, 500));
        assert!(a.occurred_at.expect("time").seconds > 1_700_000_000);
    }

    #[test]
    fn retry_delays_grow_and_stay_bounded() {
        let p =
            RetryPolicy { max_attempts: 10, base_delay: Duration::from_millis(100), max_delay: Duration::from_secs(1) };
        assert!(p.delay(0) <= Duration::from_millis(100) && p.delay(0) >= Duration::from_millis(50));
        assert!(p.delay(8) <= Duration::from_secs(1) && p.delay(8) >= Duration::from_millis(500));
    }
}
