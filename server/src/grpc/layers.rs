//! Tower layers of the gRPC server: per-call instrumentation (one tracing span per RPC with
//! method, status code and latency, and the RPC metrics) and admission control (a bound on
//! calls in progress; calls beyond it are refused at once rather than queued).

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
    ("ranking.v1.RankingService", &["RecordEvent", "RecordEvents", "GetTopN", "GetRank", "Recompute"]),
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
}

impl AdmissionLayer {
    /// Admits at most `max_in_flight` calls at once (process-wide: clones share the bound).
    pub fn new(max_in_flight: usize) -> Self {
        Self { permits: Arc::new(tokio::sync::Semaphore::new(max_in_flight)) }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission { inner, permits: self.permits.clone() }
    }
}

/// The service of [`AdmissionLayer`].
#[derive(Clone)]
pub struct Admission<S> {
    inner: S,
    permits: Arc<tokio::sync::Semaphore>,
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
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            let refused =
                tonic::Status::resource_exhausted("server is at its concurrent-call limit; retry with backoff");
            return Box::pin(std::future::ready(Ok(refused.into_http())));
        };
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let response = inner.call(request).await;
            drop(permit);
            response
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

    #[test]
    fn code_names_match_their_debug_form() {
        for n in 0..=16 {
            let code = tonic::Code::from(n);
            assert_eq!(code_name(code), format!("{code:?}"));
        }
    }
}
