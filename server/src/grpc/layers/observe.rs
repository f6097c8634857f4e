//! [`ObserveLayer`]: one tracing span per RPC (continuing the caller's W3C trace context)
//! with method, status code and latency, and the RPC metrics: the service's own
//! (`ranking_rpc_*`) and the standard go-grpc-prometheus families ([`super::standard`]).
//! Names come from the RPC table, never from the request path.
//!
//! It also holds the call's deadline: `RANKING_REQUEST_TIMEOUT`, or the caller's
//! `grpc-timeout` when sooner. Held here, inside gRPC-Web's translation, a call that runs out
//! is answered as the caller spoke (gRPC-Web with its CORS headers included) and counted
//! like any other; the transport's own deadline would answer it as plain gRPC, uncounted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tonic::codegen::http;
use tower::{Layer, Service};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{ready, standard};
use crate::metrics::Metrics;

/// Adds [`Observe`] around every call.
#[derive(Clone)]
pub struct ObserveLayer {
    metrics: Arc<Metrics>,
    request_timeout: Duration,
}

impl ObserveLayer {
    /// A layer recording into `metrics`, ending calls after `request_timeout`.
    pub fn new(metrics: Arc<Metrics>, request_timeout: Duration) -> Self {
        Self { metrics, request_timeout }
    }
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Observe { inner, metrics: self.metrics.clone(), request_timeout: self.request_timeout }
    }
}

/// Times a call, records its outcome and holds its deadline.
#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    metrics: Arc<Metrics>,
    request_timeout: Duration,
}

/// The caller's `grpc-timeout` (at most 8 digits and a unit, as the gRPC spec writes it),
/// `None` when absent or malformed.
fn caller_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3_600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// How long a call may run: the server's limit, or the caller's deadline when sooner. The
/// transport holds the caller's deadline too, from a moment before this one: this one is a
/// tick earlier, so that it is this layer's answer the caller gets.
fn call_deadline(headers: &http::HeaderMap, request_timeout: Duration) -> Duration {
    match caller_timeout(headers) {
        Some(caller) => request_timeout.min(caller.saturating_sub(Duration::from_millis(2))),
        None => request_timeout,
    }
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

impl<S> Service<http::Request<tonic::body::Body>> for Observe<S>
where
    S: Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let mut inner = ready(&mut self.inner);
        let metrics = self.metrics.clone();
        let deadline = call_deadline(request.headers(), self.request_timeout);
        // One look-up of the RPC table names the span, the service's own metrics and the
        // standard families.
        let rpc = crate::grpc::rpcs::of(request.uri().path());
        let mut request = request;
        request.extensions_mut().insert(crate::grpc::rpcs::Called(rpc));
        let call = Arc::new(standard::Call::start(metrics.clone(), rpc));
        let (service, method) = call.names();
        let request = request.map(|body| standard::RequestTap::wrap(body, call.clone()));
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
                let result = match tokio::time::timeout(deadline, inner.call(request)).await {
                    Ok(result) => result,
                    Err(_) => Ok(tonic::Status::deadline_exceeded(format!(
                        "the call did not finish within {deadline:?} (the caller's deadline or RANKING_REQUEST_TIMEOUT)"
                    ))
                    .into_http()),
                };
                let code = match &result {
                    // The headers of a trailers-only (error) response carry its status; an
                    // answer's comes in the trailers, and OK is what it will say here.
                    Ok(response) => standard::status_in(response.headers()).unwrap_or(tonic::Code::Ok),
                    Err(_) => tonic::Code::Unknown,
                };
                let seconds = started.elapsed().as_secs_f64();
                let span = tracing::Span::current();
                span.record("rpc.code", code_name(code));
                span.record("latency_ms", seconds * 1e3);
                tracing::debug!(code = code_name(code), latency_ms = seconds * 1e3, "rpc finished");
                metrics.rpc.finished(method, code_name(code), seconds);
                result.map(|response| standard::ResponseTap::wrap(response, call))
            }
            .instrument(span),
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_deadline_shortens_the_servers() {
        let mut headers = http::HeaderMap::new();
        let server = Duration::from_secs(30);
        assert_eq!(call_deadline(&headers, server), server);
        for (value, expected) in
            [("100m", Some(98)), ("2S", Some(1_998)), ("1H", None), ("x", None), ("123456789m", None)]
        {
            headers.insert("grpc-timeout", value.parse().expect("value"));
            let deadline = expected.map_or(server, Duration::from_millis);
            assert_eq!(call_deadline(&headers, server), deadline, "{value}");
        }
    }

    #[test]
    fn code_names_match_their_debug_form() {
        for n in 0..=16 {
            let code = tonic::Code::from(n);
            assert_eq!(code_name(code), format!("{code:?}"));
        }
    }
}
