//! [`AdmissionLayer`]: a bound on calls in progress; calls beyond it are refused at once
//! (RESOURCE_EXHAUSTED) rather than queued. Health checks are not counted, so a flood cannot
//! make a healthy server look dead.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use prometheus_client::metrics::gauge::Gauge;
use tonic::codegen::http;
use tower::{Layer, Service};

use super::ready;
use crate::grpc::rpcs::{self, Class};

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
    rpcs::of(path).is_some_and(|rpc| rpc.class == Class::Health)
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
            let mut inner = ready(&mut self.inner);
            return Box::pin(async move { inner.call(request).await });
        }
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            let refused = crate::grpc::error::shed("server is at its concurrent-call limit; retry with backoff");
            return Box::pin(std::future::ready(Ok(refused.into_http())));
        };
        let mut inner = ready(&mut self.inner);
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
