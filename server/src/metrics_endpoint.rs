//! The Prometheus scrape endpoint: `GET /metrics` on its own port (`RANKING_METRICS_LISTEN`),
//! apart from the gRPC port so it can stay on an internal interface.
//!
//! It shares the process (and its descriptors) with the API, so it has bounds of its own,
//! far below the API's: at most [`MAX_CONNECTIONS`] connections (more are closed as they are
//! accepted), a request head within [`HEAD_TIMEOUT`] and at most [`MAX_HEAD_BYTES`], and a
//! connection closed after [`CONNECTION_LIFE`] whatever it does. A crowd of half-sent
//! requests costs a few connections, never the API's descriptors.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use crate::metrics::Metrics;

/// Scrape connections open at once (a Prometheus or two, an agent, a person with curl).
pub const MAX_CONNECTIONS: usize = 32;
/// Time a request head may take to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request head (hyper's smallest buffer; a scrape's head is a few hundred bytes).
pub const MAX_HEAD_BYTES: usize = 8_192;
/// Longest a connection stays open: scrapers reconnect.
pub const CONNECTION_LIFE: Duration = Duration::from_secs(120);

fn scrape(metrics: &Metrics, request: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&Method::GET | &Method::HEAD, "/metrics") => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Bytes::from(metrics.render()),
        ),
        _ => (StatusCode::NOT_FOUND, "text/plain; charset=utf-8", Bytes::from_static(b"GET /metrics\n")),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    response
}

/// A bound metrics endpoint.
pub struct MetricsEndpoint {
    listener: TcpListener,
    metrics: Arc<Metrics>,
}

impl MetricsEndpoint {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<Self> {
        Ok(Self { listener: TcpListener::bind(addr).await?, metrics })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves; then open connections are closed.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let connections = TaskTracker::new();
        let stop = tokio_util::sync::CancellationToken::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let (tcp, _) = tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics endpoint: accept failed; pausing");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                drop(tcp);
                continue;
            };
            let metrics = self.metrics.clone();
            let stop = stop.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let response = scrape(&metrics, &request);
                    async move { Ok::<_, Infallible>(response) }
                });
                let mut http = hyper::server::conn::http1::Builder::new();
                http.timer(TokioTimer::new()).header_read_timeout(HEAD_TIMEOUT).max_buf_size(MAX_HEAD_BYTES);
                let connection = http.serve_connection(TokioIo::new(tcp), service);
                tokio::select! {
                    _ = connection => {}
                    () = tokio::time::sleep(CONNECTION_LIFE) => {}
                    () = stop.cancelled() => {}
                }
                drop(slot);
            });
        }
        stop.cancel();
        connections.close();
        connections.wait().await;
        Ok(())
    }
}
