//! Tower layers of the gRPC server, outermost first:
//!
//! - [`ObserveLayer`]: one tracing span per RPC with method, status code and latency, and the
//!   RPC metrics.
//! - [`HygieneLayer`]: counts the call on its connection (for the idle timeout), and waits
//!   for the whole request message of a unary call, within `RANKING_BODY_TIMEOUT` and
//!   `RANKING_MAX_MESSAGE_BYTES`, before the call may take a slot: a stream whose message
//!   never comes costs no slot and goes away after the body timeout.
//! - [`AdmissionLayer`]: a bound on calls in progress; calls beyond it are refused at once
//!   rather than queued. Health checks are not counted, so a flood cannot make a healthy
//!   server look dead.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tonic::codegen::http;
use tower::{Layer, Service};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::metrics::Metrics;
use prometheus_client::metrics::gauge::Gauge;

/// Adds [`Observe`] around every call.
#[derive(Clone)]
pub struct ObserveLayer {
    metrics: Arc<Metrics>,
}

impl ObserveLayer {
    /// A layer recording into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Observe { inner, metrics: self.metrics.clone() }
    }
}

/// Times a call and records its outcome.
#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

/// Reads propagation fields from HTTP/2 request headers.
struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl opentelemetry::propagation::Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The gRPC status of a response: from the headers of a trailers-only (error) response, OK
/// otherwise (unary successes put `grpc-status: 0` in the trailers).
fn status_of<B>(response: &http::Response<B>) -> tonic::Code {
    response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(tonic::Code::from)
        .unwrap_or(tonic::Code::Ok)
}

impl<S, B, RB> Service<http::Request<B>> for Observe<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The clone is the one that was polled ready; keep it and leave the fresh clone.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let metrics = self.metrics.clone();
        let (service, method) = rpc_name(request.uri().path());
        let span = tracing::info_span!(
            "rpc",
            rpc.system = "grpc",
            rpc.service = service,
            rpc.method = method,
            rpc.code = tracing::field::Empty,
            latency_ms = tracing::field::Empty,
        );
        // Continue the caller's trace when it sent W3C trace context.
        let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(request.headers())));
        let _ = span.set_parent(parent);
        Box::pin(
            async move {
                let started = Instant::now();
                let result = inner.call(request).await;
                let code = match &result {
                    Ok(response) => status_of(response),
                    Err(_) => tonic::Code::Unknown,
                };
                let seconds = started.elapsed().as_secs_f64();
                let span = tracing::Span::current();
                span.record("rpc.code", code_name(code));
                span.record("latency_ms", seconds * 1e3);
                tracing::debug!(code = code_name(code), latency_ms = seconds * 1e3, "rpc finished");
                metrics.rpc_finished(method, code_name(code), seconds);
                result
            }
            .instrument(span),
        )
    }
}

/// Services and methods this server answers, as static names for spans and metric labels.
/// Anything else is reported as `unknown`, so probing random paths cannot create
/// unbounded metric series.
const KNOWN_RPCS: &[(&str, &[&str])] = &[
    (
        "ranking.v1.RankingService",
        &[
            "RecordEvent",
            "RecordEvents",
            "GetTopN",
            "GetRank",
            "GetRanks",
            "ListMovers",
            "ExplainRank",
            "UpdateCatalog",
            "WatchTopN",
            "Recompute",
        ],
    ),
    ("grpc.health.v1.Health", &["Check", "Watch", "List"]),
    ("grpc.reflection.v1.ServerReflection", &["ServerReflectionInfo"]),
    ("grpc.reflection.v1alpha.ServerReflection", &["ServerReflectionInfo"]),
];

/// `(service, method)` of a gRPC request path `/package.Service/Method`.
pub fn rpc_name(path: &str) -> (&'static str, &'static str) {
    let (service, method) = path.trim_start_matches('/').split_once('/').unwrap_or_default();
    KNOWN_RPCS
        .iter()
        .find(|(s, _)| *s == service)
        .and_then(|(s, methods)| methods.iter().find(|m| **m == method).map(|m| (*s, *m)))
        .unwrap_or(("unknown", "unknown"))
}

/// The name of a status code as the gRPC spec writes it in CamelCase (`Ok`, `NotFound`).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "Ok",
        Cancelled => "Cancelled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

/// Bounds the calls in progress; the next one gets RESOURCE_EXHAUSTED immediately, so a
/// flood turns into fast refusals instead of an unbounded queue and growing latency.
#[derive(Clone)]
pub struct AdmissionLayer {
    permits: Arc<tokio::sync::Semaphore>,
    in_flight: Gauge,
}

impl AdmissionLayer {
    /// Admits at most `max_in_flight` calls at once (process-wide: clones share the bound),
    /// counting them in `in_flight`.
    pub fn new(max_in_flight: usize, in_flight: Gauge) -> Self {
        Self { permits: Arc::new(tokio::sync::Semaphore::new(max_in_flight)), in_flight }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission { inner, permits: self.permits.clone(), in_flight: self.in_flight.clone() }
    }
}

/// The service of [`AdmissionLayer`].
#[derive(Clone)]
pub struct Admission<S> {
    inner: S,
    permits: Arc<tokio::sync::Semaphore>,
    in_flight: Gauge,
}

/// Paths that bypass admission: the health check must answer while ordinary calls are
/// refused, or orchestrators would restart a server that is only busy.
fn bypasses_admission(path: &str) -> bool {
    path.starts_with("/grpc.health.v1.Health/")
}

/// Decrements a gauge when dropped.
struct GaugeGuard(Gauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl<S, B, RB> Service<http::Request<B>> for Admission<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    RB: Default + Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if bypasses_admission(request.uri().path()) {
            let clone = self.inner.clone();
            let mut inner = std::mem::replace(&mut self.inner, clone);
            return Box::pin(async move { inner.call(request).await });
        }
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            let refused =
                tonic::Status::resource_exhausted("server is at its concurrent-call limit; retry with backoff");
            return Box::pin(std::future::ready(Ok(refused.into_http())));
        };
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        self.in_flight.inc();
        let counted = GaugeGuard(self.in_flight.clone());
        Box::pin(async move {
            let response = inner.call(request).await;
            drop(permit);
            drop(counted);
            response
        })
    }
}

/// Where the calls of a connection are counted and how long and large a request message
/// may be.
#[derive(Clone)]
pub struct HygieneLayer {
    body_timeout: std::time::Duration,
    max_body_bytes: usize,
    buffered: Arc<BufferBudget>,
}

/// Bytes of unary request messages held by this process, from their first byte until their
/// call is answered.
struct BufferBudget {
    used: std::sync::atomic::AtomicUsize,
    limit: usize,
}

/// A share of the [`BufferBudget`], given back when dropped.
struct BudgetShare {
    budget: Arc<BufferBudget>,
    bytes: usize,
}

impl BudgetShare {
    /// Takes `n` more bytes; `false` (the bytes still counted until the drop) when that goes
    /// beyond the limit.
    fn take(&mut self, n: usize) -> bool {
        let before = self.budget.used.fetch_add(n, std::sync::atomic::Ordering::AcqRel);
        self.bytes += n;
        before + n <= self.budget.limit
    }
}

impl Drop for BudgetShare {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, std::sync::atomic::Ordering::AcqRel);
    }
}

impl HygieneLayer {
    /// Unary request messages must arrive within `body_timeout` and be at most
    /// `max_message_bytes`; at most `max_buffered_bytes` of them are held at once.
    pub fn new(body_timeout: std::time::Duration, max_message_bytes: usize, max_buffered_bytes: usize) -> Self {
        Self {
            body_timeout,
            // A gRPC message travels with a 5-byte frame header.
            max_body_bytes: max_message_bytes.saturating_add(5),
            buffered: Arc::new(BufferBudget { used: Default::default(), limit: max_buffered_bytes }),
        }
    }
}

impl<S> Layer<S> for HygieneLayer {
    type Service = Hygiene<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Hygiene { inner, settings: self.clone() }
    }
}

/// The service of [`HygieneLayer`].
#[derive(Clone)]
pub struct Hygiene<S> {
    inner: S,
    settings: HygieneLayer,
}

/// Unary RPCs, whose request is one message: their body is awaited before admission.
/// Streaming RPCs (health Watch, reflection) pass through as they are.
fn is_unary(path: &str) -> bool {
    path.starts_with("/ranking.v1.RankingService/") || path == "/grpc.health.v1.Health/Check"
}

/// The connection activity of a request (plaintext or TLS).
fn activity<B>(request: &http::Request<B>) -> Option<Arc<super::connections::Activity>> {
    use super::connections::ConnInfo;
    let ext = request.extensions();
    ext.get::<ConnInfo>()
        .or_else(|| ext.get::<tonic::transport::server::TlsConnectInfo<ConnInfo>>().map(|t| t.get_ref()))
        .map(|info| info.activity.clone())
}

/// Marks the call finished on its connection when dropped (with the response body).
struct CallGuard(Option<Arc<super::connections::Activity>>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(a) = &self.0 {
            a.call_finished();
        }
    }
}

/// A response body that holds its call's [`CallGuard`] until it is finished or dropped.
struct GuardedBody {
    inner: tonic::body::Body,
    _guard: CallGuard,
}

impl http_body::Body for GuardedBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Why a request message was not taken.
enum BodyRefusal {
    TooLarge,
    TooSlow,
    Busy,
    Broken(String),
}

impl HygieneLayer {
    /// The whole request message, within the time, size and buffer budgets, and the share
    /// of the buffer budget it holds until dropped (after the call is answered).
    async fn receive(&self, body: tonic::body::Body) -> Result<(bytes::Bytes, BudgetShare), BodyRefusal> {
        use http_body_util::BodyExt;
        let mut share = BudgetShare { budget: self.buffered.clone(), bytes: 0 };
        let received = tokio::time::timeout(self.body_timeout, async {
            let mut body = std::pin::pin!(body);
            let mut parts = bytes::BytesMut::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| BodyRefusal::Broken(e.to_string()))?;
                let Ok(data) = frame.into_data() else { continue };
                if parts.len() + data.len() > self.max_body_bytes {
                    return Err(BodyRefusal::TooLarge);
                }
                if !share.take(data.len()) {
                    return Err(BodyRefusal::Busy);
                }
                parts.extend_from_slice(&data);
            }
            Ok(parts.freeze())
        })
        .await;
        let message = received.unwrap_or(Err(BodyRefusal::TooSlow))?;
        Ok((message, share))
    }
}

impl<S> Service<http::Request<tonic::body::Body>> for Hygiene<S>
where
    S: Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let settings = self.settings.clone();
        let activity = activity(&request);
        if let Some(a) = &activity {
            a.call_started();
        }
        let guard = CallGuard(activity);
        let unary = is_unary(request.uri().path());
        Box::pin(async move {
            let mut share = None;
            let request = if unary {
                let (parts, body) = request.into_parts();
                match settings.receive(body).await {
                    Ok((bytes, held)) => {
                        share = Some(held);
                        http::Request::from_parts(parts, tonic::body::Body::new(http_body_util::Full::new(bytes)))
                    }
                    Err(refusal) => {
                        let status = match refusal {
                            BodyRefusal::TooLarge => tonic::Status::resource_exhausted(format!(
                                "request message larger than {} bytes (RANKING_MAX_MESSAGE_BYTES)",
                                settings.max_body_bytes - 5
                            )),
                            BodyRefusal::TooSlow => tonic::Status::deadline_exceeded(format!(
                                "request message not received within {:?} (RANKING_BODY_TIMEOUT)",
                                settings.body_timeout
                            )),
                            BodyRefusal::Busy => tonic::Status::resource_exhausted(
                                "server is receiving too many request messages; retry with backoff",
                            ),
                            BodyRefusal::Broken(why) => {
                                tonic::Status::cancelled(format!("request stream broken: {why}"))
                            }
                        };
                        return Ok(status.into_http());
                    }
                }
            } else {
                request
            };
            let response = inner.call(request).await;
            // The handler has decoded (and dropped) the message by the time it answers.
            drop(share);
            let response = response?;
            Ok(response.map(|body| tonic::body::Body::new(GuardedBody { inner: body, _guard: guard })))
        })
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn every_rpc_of_the_ranking_service_has_a_static_name() {
        let set = prost_types::FileDescriptorSet::decode(ranking_proto::FILE_DESCRIPTOR_SET).expect("descriptor set");
        let mut seen = 0;
        for file in &set.file {
            for service in &file.service {
                let full = format!("{}.{}", file.package(), service.name());
                for method in &service.method {
                    let path = format!("/{full}/{}", method.name());
                    assert_eq!(rpc_name(&path), (full.as_str(), method.name()), "{path}");
                    seen += 1;
                }
            }
        }
        assert!(seen >= 5);
    }

    #[test]
    fn unknown_paths_share_one_name() {
        assert_eq!(rpc_name("/ranking.v1.RankingService/Nope"), ("unknown", "unknown"));
        assert_eq!(rpc_name("/x.Y/GetTopN"), ("unknown", "unknown"));
        assert_eq!(rpc_name("garbage"), ("unknown", "unknown"));
        assert_eq!(rpc_name("/grpc.health.v1.Health/Check"), ("grpc.health.v1.Health", "Check"));
    }

    fn body(n: usize) -> tonic::body::Body {
        tonic::body::Body::new(http_body_util::Full::new(bytes::Bytes::from(vec![0u8; n])))
    }

    #[tokio::test]
    async fn request_messages_hold_their_share_of_the_buffer_until_dropped() {
        let layer = HygieneLayer::new(std::time::Duration::from_secs(5), 1_000, 100);
        let (message, held) = layer.receive(body(80)).await.ok().expect("within budget");
        assert_eq!(message.len(), 80);
        assert!(matches!(layer.receive(body(80)).await, Err(BodyRefusal::Busy)), "80 + 80 > 100 while held");
        drop(held);
        assert!(layer.receive(body(80)).await.is_ok(), "the share came back");
        assert!(matches!(layer.receive(body(1_006)).await, Err(BodyRefusal::TooLarge)));
        assert_eq!(layer.buffered.used.load(std::sync::atomic::Ordering::Acquire), 0, "refusals hold nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_that_never_ends_times_out() {
        let layer = HygieneLayer::new(std::time::Duration::from_secs(5), 1_000, 100);
        let (_tx, never) = tokio::sync::mpsc::channel::<Result<http_body::Frame<bytes::Bytes>, tonic::Status>>(1);
        let stream = http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(never));
        assert!(matches!(layer.receive(tonic::body::Body::new(stream)).await, Err(BodyRefusal::TooSlow)));
    }

    #[test]
    fn code_names_match_their_debug_form() {
        for n in 0..=16 {
            let code = tonic::Code::from(n);
            assert_eq!(code_name(code), format!("{code:?}"));
        }
    }
}
