//! [`ObserveLayer`]: one tracing span per RPC (continuing the caller's W3C trace context)
//! with method, status code and latency, and the RPC metrics: the service's own
//! (`ranking_rpc_*`) and the standard go-grpc-prometheus families ([`super::standard`]).
//! Names come from the RPC table, never from the request path.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

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
        // One look-up of the RPC table names the span, the service's own metrics and the
        // standard families.
        let call = Arc::new(standard::Call::start(metrics.clone(), request.uri().path()));
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
                let result = inner.call(request).await;
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
                metrics.rpc_finished(method, code_name(code), seconds);
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
    fn code_names_match_their_debug_form() {
        for n in 0..=16 {
            let code = tonic::Code::from(n);
            assert_eq!(code_name(code), format!("{code:?}"));
        }
    }
}
