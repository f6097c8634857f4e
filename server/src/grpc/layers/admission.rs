//! [`AdmissionLayer`]: a bound on calls in progress; calls beyond it are refused at once
//! (RESOURCE_EXHAUSTED) rather than queued. Health checks are not counted, so a flood cannot
//! make a healthy server look dead.
//!
//! Streams anyone may open without a token (health Watch, reflection) have a bound of their
//! own, `RANKING_MAX_PUBLIC_STREAMS`, held for the stream's whole life: each keeps its
//! connection open, so without it a crowd of them would hold every connection of the cap
//! for as long as they like.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use prometheus_client::metrics::gauge::Gauge;
use tokio_util::sync::CancellationToken;
use tonic::codegen::http;
use tower::{Layer, Service};

use super::ready;
use crate::grpc::rpcs::{self, Class};

/// Bounds the calls in progress; the next one gets RESOURCE_EXHAUSTED immediately, so a
/// flood turns into fast refusals instead of an unbounded queue and growing latency.
#[derive(Clone)]
pub struct AdmissionLayer {
    permits: Arc<tokio::sync::Semaphore>,
    public_streams: Arc<tokio::sync::Semaphore>,
    in_flight: Gauge,
    /// Cancelled when the server starts to stop: public streams end then.
    stopping: CancellationToken,
}

impl AdmissionLayer {
    /// Admits at most `max_in_flight` calls and `max_public_streams` streams without a token
    /// at once (process-wide: clones share the bounds), counting the calls in `in_flight`;
    /// the public streams end with UNAVAILABLE once `stopping` is cancelled.
    pub fn new(max_in_flight: usize, max_public_streams: usize, in_flight: Gauge, stopping: CancellationToken) -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(max_in_flight)),
            public_streams: Arc::new(tokio::sync::Semaphore::new(max_public_streams)),
            in_flight,
            stopping,
        }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission { inner, layer: self.clone() }
    }
}

/// The service of [`AdmissionLayer`].
#[derive(Clone)]
pub struct Admission<S> {
    inner: S,
    layer: AdmissionLayer,
}

/// A public stream's response: its body until the server starts to stop, then (after a
/// message already waiting) UNAVAILABLE trailers, so the peer reconnects elsewhere rather
/// than holding the process for the whole shutdown grace; its permit rides along.
struct PublicStream {
    inner: tonic::body::Body,
    stopping: Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
    ended: bool,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl http_body::Body for PublicStream {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if polled.is_ready() || this.stopping.as_mut().poll(cx).is_pending() {
            return polled;
        }
        this.ended = true;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("14"));
        trailers.insert("grpc-message", http::HeaderValue::from_static("server%20shutting%20down"));
        Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }
}

/// Paths that bypass admission: the health check must answer while ordinary calls are
/// refused, or orchestrators would restart a server that is only busy.
fn bypasses_admission(rpc: Option<&'static rpcs::Rpc>) -> bool {
    rpc.is_some_and(|rpc| rpc.class == Class::Health)
}

/// Decrements a gauge when dropped.
struct GaugeGuard(Gauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl<S, B> Service<http::Request<B>> for Admission<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let rpc = rpcs::called(&request);
        if rpc.is_some_and(rpcs::Rpc::public_stream) {
            let Ok(permit) = self.layer.public_streams.clone().try_acquire_owned() else {
                let refused = crate::grpc::error::shed(
                    "too many health watches and reflection streams open (RANKING_MAX_PUBLIC_STREAMS); retry with backoff",
                );
                return Box::pin(std::future::ready(Ok(refused.into_http())));
            };
            let mut inner = ready(&mut self.inner);
            let stopping = Box::pin(self.layer.stopping.clone().cancelled_owned());
            return Box::pin(async move {
                let response = inner.call(request).await?;
                Ok(response.map(|inner| {
                    tonic::body::Body::new(PublicStream { inner, stopping, ended: false, _permit: permit })
                }))
            });
        }
        if bypasses_admission(rpc) {
            let mut inner = ready(&mut self.inner);
            return Box::pin(async move { inner.call(request).await });
        }
        let Ok(permit) = self.layer.permits.clone().try_acquire_owned() else {
            let refused = crate::grpc::error::shed("server is at its concurrent-call limit; retry with backoff");
            return Box::pin(std::future::ready(Ok(refused.into_http())));
        };
        let mut inner = ready(&mut self.inner);
        self.layer.in_flight.inc();
        let counted = GaugeGuard(self.layer.in_flight.clone());
        Box::pin(async move {
            let response = inner.call(request).await;
            drop(permit);
            drop(counted);
            response
        })
    }
}
