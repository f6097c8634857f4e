//! Wiring: stores from the settings, the application services, the gRPC server with health
//! and reflection, the scheduler, and graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use ranking_proto::v1::ranking_service_server::RankingServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

use crate::adapters::coalescing::CoalescingStore;
use crate::adapters::memory::MemoryRankingStore;
use crate::adapters::redis::{RedisOptions, RedisRankingStore};
use crate::adapters::sql::{SqlMetricsStore, SqlOptions};
use crate::config::Settings;
use crate::domain::calendar::RankingCalendar;
use crate::grpc::auth::{AccessPolicy, AuthLayer};
use crate::grpc::layers::{AdmissionLayer, ObserveLayer};
use crate::grpc::service::RankingApi;
use crate::ingest::{Ingest, IngestRules};
use crate::metrics::Metrics;
use crate::metrics_endpoint::MetricsEndpoint;
use crate::ports::{LeaseLock, MetricsStore, RankingStore};
use crate::recompute::{Recompute, RecomputeRules};
use crate::scheduler::Scheduler;

/// A built, bound, not yet serving application.
pub struct Application {
    listener: TcpListener,
    local_addr: SocketAddr,
    api: RankingApi,
    scheduler: Arc<Scheduler>,
    metrics: Arc<Metrics>,
    metrics_endpoint: Option<MetricsEndpoint>,
    settings: Settings,
}

impl Application {
    /// Connects the stores (applying migrations), builds the services and binds the port.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        settings.validate().map_err(anyhow::Error::msg)?;
        let mut sql = SqlOptions::new(settings.database_url.clone());
        sql.max_connections = settings.db_max_connections;
        sql.connect_timeout = settings.db_timeout;
        let store = Arc::new(SqlMetricsStore::connect(&sql).await.context("failed to open the SQL database")?);

        let metrics = Arc::new(Metrics::new());
        let (rankings, leases): (Arc<dyn RankingStore>, Arc<dyn LeaseLock>) = match &settings.redis_url {
            Some(url) => {
                let mut options = RedisOptions::new(url.clone());
                options.prefix = settings.redis_prefix.clone();
                let redis = Arc::new(RedisRankingStore::connect(&options).context("invalid REDIS_URL")?);
                (Arc::new(CoalescingStore::new(redis.clone(), metrics.top_fetches.clone())), redis)
            }
            None => {
                let memory = Arc::new(MemoryRankingStore::new());
                (memory.clone(), memory)
            }
        };

        let calendar = RankingCalendar::new(settings.tz);
        let weights = settings.weights();
        let metrics_store: Arc<dyn MetricsStore> = store.clone();
        let ingest = Ingest::start(
            metrics_store.clone(),
            rankings.clone(),
            IngestRules { calendar, weights, accept_days: settings.accept_days },
            metrics.clone(),
            settings.ingest_workers,
        );
        let recompute = Arc::new(Recompute::new(
            metrics_store.clone(),
            rankings.clone(),
            leases.clone(),
            RecomputeRules {
                calendar,
                weights,
                carry_days: settings.carry_days,
                retention_days: settings.retention_days,
                lease: std::time::Duration::from_secs(300),
            },
            metrics.clone(),
        ));
        let scheduler = Arc::new(Scheduler::new(
            recompute.clone(),
            metrics_store,
            rankings.clone(),
            leases,
            settings.recompute_interval,
            settings.retention_days,
        ));
        let api = RankingApi::new(ingest, rankings, recompute, calendar, settings.retention_days);

        let listener =
            TcpListener::bind(settings.listen).await.with_context(|| format!("failed to bind {}", settings.listen))?;
        let local_addr = listener.local_addr()?;
        let metrics_endpoint = match settings.metrics_listen.as_str() {
            "" => None,
            addr => {
                // `validate` checked the address.
                let addr: SocketAddr = addr.parse().context("RANKING_METRICS_LISTEN")?;
                Some(
                    MetricsEndpoint::bind(addr, metrics.clone())
                        .await
                        .with_context(|| format!("failed to bind {addr}"))?,
                )
            }
        };
        Ok(Self { listener, local_addr, api, scheduler, metrics, metrics_endpoint, settings })
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address of the Prometheus endpoint, when it is on.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_endpoint.as_ref().and_then(|m| m.local_addr().ok())
    }

    /// The scheduler, for tests that drive ticks themselves.
    pub fn scheduler(&self) -> Arc<Scheduler> {
        self.scheduler.clone()
    }

    /// Serves until `shutdown` resolves: health turns NOT_SERVING, new connections are
    /// refused, in-flight calls finish, the scheduler stops.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_serving::<RankingServiceServer<RankingApi>>().await;
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(ranking_proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        // Both reflection versions: grpcurl before 1.9 and many other tools speak only v1alpha.
        let reflection_v1 = reflection().build_v1().context("failed to build the reflection service")?;
        let reflection_v1alpha = reflection().build_v1alpha().context("failed to build the reflection service")?;

        let (stop_tx, stop_rx) = watch::channel(false);
        let scheduler = tokio::spawn(self.scheduler.clone().run(wait_for_stop(stop_rx.clone())));
        if let Some(endpoint) = self.metrics_endpoint {
            tracing::info!(addr = ?endpoint.local_addr().ok(), "serving Prometheus metrics at /metrics");
            let stop = wait_for_stop(stop_rx);
            tokio::spawn(async move {
                if let Err(e) = endpoint.serve(stop).await {
                    tracing::error!(error = %e, "metrics endpoint failed");
                }
            });
        }

        tracing::info!(addr = %self.local_addr, "serving ranking.v1.RankingService");
        let signal = async move {
            shutdown.await;
            tracing::info!("shutting down: refusing new calls, finishing in-flight ones");
            health.set_not_serving::<RankingServiceServer<RankingApi>>().await;
            let _ = stop_tx.send(true);
        };
        let settings = &self.settings;
        let access = AccessPolicy {
            write: settings.write_token.clone(),
            admin: settings.admin_token.clone(),
            read: settings.read_token.clone(),
        };
        let ranking = RankingServiceServer::new(self.api).max_decoding_message_size(settings.max_message_bytes);
        // Outermost first: every call is observed, refusals included; admission runs before
        // authentication so that a flood of bad tokens is bounded too.
        let mut server = Server::builder();
        if let Some(tls) = tls_config(settings)? {
            server = server.tls_config(tls).context("invalid TLS configuration")?;
        }
        server
            .timeout(settings.request_timeout)
            .layer(ObserveLayer::new(self.metrics.clone()))
            .layer(AdmissionLayer::new(settings.max_concurrent_calls))
            .layer(AuthLayer::new(access))
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(ranking)
            // Without TCP_NODELAY a response's trailers wait for the ACK of its data frame,
            // which the peer delays by up to 40 ms.
            .serve_with_incoming_shutdown(TcpIncoming::from(self.listener).with_nodelay(Some(true)), signal)
            .await
            .context("gRPC server failed")?;
        scheduler.abort();
        let _ = scheduler.await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// The server TLS settings from the PEM files, or `None` for plaintext.
fn tls_config(settings: &Settings) -> anyhow::Result<Option<ServerTlsConfig>> {
    let (Some(cert), Some(key)) = (&settings.tls_cert, &settings.tls_key) else { return Ok(None) };
    let read = |path: &std::path::Path| std::fs::read(path).with_context(|| format!("cannot read {}", path.display()));
    let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(read(cert)?, read(key)?));
    if let Some(ca) = &settings.tls_client_ca {
        tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    Ok(Some(tls))
}

async fn wait_for_stop(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}
