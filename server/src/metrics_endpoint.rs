//! The Prometheus scrape endpoint: `GET /metrics` on its own port (`RANKING_METRICS_LISTEN`),
//! apart from the gRPC port so it can stay on an internal interface.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

async fn scrape(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], metrics.render())
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

    /// Serves until `shutdown` resolves.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let app = Router::new().route("/metrics", get(scrape)).with_state(self.metrics);
        axum::serve(self.listener, app).with_graceful_shutdown(shutdown).await
    }
}
