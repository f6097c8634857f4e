//! Wiring and lifecycle.
//!
//! [`Application::build`] does every fallible step (settings, database and migrations,
//! stores, TLS files, reflection, binding both ports) and spawns nothing, so a failure
//! leaves nothing behind. [`Application::run_until_stopped`] starts the background tasks on
//! one [`TaskTracker`] (group-commit workers, scheduler, live passes, control passes, snapshot refresher, event-bus
//! sources, metrics endpoint), serves until the
//! shutdown future resolves, gives in-flight calls the drain grace, then cancels the tasks
//! and joins every one of them before returning.
//!
//! - [`lanes`]: the services and tasks of one scoring profile, built once per profile.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use ranking_proto::server::ranking_service_server::RankingServiceServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::service::Routes;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic_health::server::HealthReporter;
use tonic_web::GrpcWebLayer;

use crate::adapters::sql::SqlMetricsStore;
use crate::app::catalog::Catalog;
use crate::app::controls::Controls;
use crate::app::ingest::{GroupCommit, Ingest};
use crate::app::layout::LayoutGate;
use crate::app::profiles::Profiles;
use crate::app::scheduler::Scheduler;
use crate::app::watch::WatchHub;
use crate::bus::BusSources;
use crate::config::{AccessSettings, BrowserSettings, ServerSettings, Settings};
use crate::grpc::auth::{AccessPolicy, AuthLayer};
use crate::grpc::connections::{self, ConnectionLimits, ConnectionMetrics};
use crate::grpc::layers::{AdmissionLayer, HygieneLayer, ObserveLayer};
use crate::grpc::service::RankingApi;
use crate::metrics::Metrics;
use crate::metrics_endpoint::MetricsEndpoint;
use crate::ports::{FeedSink, MetricsStore};
use crate::web::console::ConsoleLayer;
use crate::web::cors;
use crate::web::host::HostLayer;

mod lanes;

/// A built, bound, not yet serving application.
pub struct Application {
    listener: TcpListener,
    local_addr: SocketAddr,
    server: Server,
    routes: Routes,
    health: HealthReporter,
    access: AccessPolicy,
    group_commit: GroupCommit,
    bus: BusSources,
    ingest_workers: usize,
    /// Every profile's background work, the service's own first.
    lanes: Vec<lanes::LaneTasks>,
    metrics: Arc<Metrics>,
    metrics_endpoint: Option<MetricsEndpoint>,
    settings: ServerSettings,
    browser: BrowserSettings,
    /// This replica's side of the agreement on the ranking store's layout.
    layout: Arc<LayoutGate>,
    /// The one tracker of background tasks: the ones `run_until_stopped` starts and those
    /// the services start while serving (withdrawals).
    tasks: TaskTracker,
}

impl Application {
    /// Connects the stores (applying migrations), builds the services and binds the ports.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        settings.validate().map_err(anyhow::Error::msg)?;
        let policy = settings.ranking.policy().map_err(anyhow::Error::msg)?;
        let policy = Arc::new(policy.with_sql_tx_timeout(settings.database.sql_tx_timeout));
        let metrics = Arc::new(Metrics::with_rpcs(&crate::grpc::layers::standard::every_rpc()));
        let mut sql_options = settings.database.options();
        sql_options.limits = metrics.stores.sql_limits.clone();
        let sql = Arc::new(SqlMetricsStore::connect(&sql_options).await.context("failed to open the SQL database")?);
        let store: Arc<dyn MetricsStore> = sql.clone();
        let layout = LayoutGate::join(
            sql,
            (announcement(&settings), settings.ranking.store_layout),
            settings.ranking.replica_ttl,
            policy.clock,
            metrics.clone(),
        )
        .await
        .context("this replica cannot serve beside the running ones")?;
        store.register_signals(policy.profile.custom_names()).await.context("failed to register the custom signals")?;
        let variants = crate::config::profile::variants(&settings.ranking.profiles, &policy.profile)
            .map_err(anyhow::Error::msg)?;
        let mut names = vec![crate::app::policy::DEFAULT_PROFILE];
        names.extend(variants.iter().map(|(name, _)| name.as_str()));
        let experiment =
            crate::config::profile::experiment(&settings.ranking.experiment, &names).map_err(anyhow::Error::msg)?;

        // Every background task of the service, joined by `run_until_stopped`.
        let tasks = TaskTracker::new();
        // One lane per profile, the service's own first: every version records its profile's
        // fingerprint, and the profile itself is kept once so that ExplainRank explains a
        // version with its own profile after a change.
        let shared = lanes::Shared {
            settings: &settings,
            store: store.clone(),
            metrics: metrics.clone(),
            tasks: tasks.clone(),
            sinks: feed_sinks(&settings).map_err(anyhow::Error::msg)?,
            profiles: 1 + variants.len(),
            layout: layout.in_force(),
        };
        let own = lanes::build(&shared, policy.clone(), None).await?;
        let rankings = own.rankings.clone();
        let mut variant_lanes = Vec::new();
        for (name, profile) in variants {
            let variant = Arc::new(policy.as_ref().clone().for_variant(&name, Arc::new(profile)));
            variant_lanes.push(lanes::build(&shared, variant, Some(&own)).await?);
        }
        own.lane.recompute.adopt(variant_lanes.iter().map(|v| v.lane.recompute.clone()).collect());
        let mut built = vec![own];
        built.extend(variant_lanes);
        let (lanes, lane_tasks): (Vec<_>, Vec<_>) = built.into_iter().map(|b| (b.lane, b.tasks)).unzip();

        let (ingest, group_commit) =
            Ingest::new(store.clone(), store.clone(), rankings, policy.clone(), metrics.clone());
        let withdrawals = lane_tasks.iter().map(|t| t.withdrawals.clone()).collect();
        let catalog = Arc::new(Catalog::new(store.clone(), withdrawals, policy.clone()));
        let passes = lane_tasks.iter().map(|t| t.control_passes.clone()).collect();
        let controls = Arc::new(Controls::new(store, passes, policy));
        let profiles = Arc::new(Profiles::new(lanes, experiment, metrics.clone()));
        let bus = BusSources::build(
            settings.bus.kafka().map_err(anyhow::Error::msg)?,
            settings.bus.jetstream(),
            ingest.clone(),
            metrics.clone(),
        )
        .context("invalid event-bus settings")?;
        let access = access_policy(&settings.access);
        let api = RankingApi {
            ingest,
            profiles,
            catalog,
            controls,
            access: Arc::new(access.clone()),
            layout: layout.clone(),
        };

        let server_settings = settings.server.clone();
        let (health, routes) = routes(api, &server_settings).await?;
        let server = server(&server_settings)?;
        let listen = server_settings.listen;
        let listener = TcpListener::bind(listen).await.with_context(|| format!("failed to bind {listen}"))?;
        let local_addr = listener.local_addr()?;
        let metrics_endpoint = match settings.observability.metrics_listen.0 {
            None => None,
            Some(addr) => Some(
                MetricsEndpoint::bind(addr, metrics.clone()).await.with_context(|| format!("failed to bind {addr}"))?,
            ),
        };
        Ok(Self {
            listener,
            local_addr,
            server,
            routes,
            health,
            access,
            group_commit,
            bus,
            ingest_workers: settings.database.ingest_workers.get(),
            lanes: lane_tasks,
            metrics,
            metrics_endpoint,
            settings: server_settings,
            browser: settings.browser.clone(),
            layout,
            tasks,
        })
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
        self.lanes[0].scheduler.clone().expect("the service profile's lane has the scheduler")
    }

    /// Serves until `shutdown` resolves. Then health turns NOT_SERVING, new connections are
    /// refused and in-flight calls get `RANKING_SHUTDOWN_GRACE` to finish; connections still
    /// open after it are closed. Finally every background task is stopped and joined.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        let tasks = self.tasks;
        let stop_tasks = CancellationToken::new();
        self.group_commit.spawn(self.ingest_workers, &tasks, stop_tasks.clone());
        for lane in &self.lanes {
            lane.spawn(&tasks, &stop_tasks);
        }
        tasks.spawn(self.layout.clone().run(stop_tasks.clone()));
        if let Some(endpoint) = self.metrics_endpoint {
            tracing::info!(addr = ?endpoint.local_addr().ok(), "serving Prometheus metrics at /metrics");
            let stop = stop_tasks.clone().cancelled_owned();
            tasks.spawn(async move {
                if let Err(e) = endpoint.serve(stop).await {
                    tracing::error!(error = %e, "metrics endpoint failed");
                }
            });
        }

        // The bus sources stop fetching as soon as the shutdown starts; the ingest path
        // they write through stays up until they have finished.
        let stop_bus = CancellationToken::new();
        self.bus.spawn(&tasks, self.health.clone(), stop_bus.clone(), self.settings.shutdown_grace);

        tracing::info!(addr = %self.local_addr, "serving ranking.v1.RankingService");
        let settings = &self.settings;
        let close_all = CancellationToken::new();
        let incoming = connections::incoming(
            self.listener,
            ConnectionLimits {
                max_connections: settings.max_connections.get(),
                handshake_timeout: settings.handshake_timeout,
                idle_timeout: settings.idle_timeout,
            },
            ConnectionMetrics {
                open: self.metrics.connections.open.clone(),
                refused: self.metrics.connections.refused.clone(),
                timed_out: self.metrics.connections.timed_out.clone(),
                evicted: self.metrics.connections.evicted.clone(),
            },
            close_all.clone(),
        );
        let stopping = CancellationToken::new();
        let health = self.health;
        let watches: Vec<Arc<WatchHub>> = self.lanes.iter().map(|l| l.watch.clone()).collect();
        let signal = {
            let stopping = stopping.clone();
            async move {
                shutdown.await;
                tracing::info!("shutting down: refusing new calls, finishing in-flight ones");
                health.set_not_serving::<RankingServiceServer<RankingApi>>().await;
                // Watch streams never finish by themselves: they end now with UNAVAILABLE,
                // so their clients reconnect elsewhere while the other calls drain.
                watches.iter().for_each(|w| w.close());
                stop_bus.cancel();
                stopping.cancel();
            }
        };
        // Outermost first: the console's assets and CORS preflights are answered before
        // anything else, for the host names the server is known by only; a gRPC-Web call is
        // translated to gRPC before the gRPC layers, so it is counted, limited and
        // authenticated as one. Every call is observed, refusals included; the token is
        // checked before a byte of the body is buffered; a call takes a slot only once its
        // request message is complete.
        let max_message = settings.max_message_bytes.get();
        let serve = self
            .server
            .layer(HostLayer::new(self.browser.hosts_for(self.local_addr)))
            .layer(ConsoleLayer::new(self.browser.console))
            .layer(cors::layer(&self.browser.cors_origins))
            .layer(GrpcWebLayer::new())
            .layer(ObserveLayer::new(self.metrics.clone(), settings.request_timeout))
            .layer(AuthLayer::new(self.access))
            .layer(HygieneLayer::new(settings.body_timeout, max_message, max_buffered_bytes(settings)))
            .layer(AdmissionLayer::new(
                settings.max_concurrent_calls.get(),
                settings.max_public_streams.get(),
                self.metrics.connections.calls_in_flight.clone(),
                stopping.clone(),
            ))
            .add_routes(self.routes)
            .serve_with_incoming_shutdown(incoming, signal);
        let grace = settings.shutdown_grace;
        let served = tokio::select! {
            served = serve => served.context("gRPC server failed"),
            () = async { stopping.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!(grace = ?grace, "shutdown grace elapsed; closing the connections still open");
                Ok(())
            }
        };
        // Connections that outlived the server (a client ignoring GOAWAY, or the grace
        // running out) are closed now rather than when their peer lets go.
        close_all.cancel();

        stop_tasks.cancel();
        tasks.close();
        for lane in &self.lanes {
            lane.watch.close();
            let watch = lane.watch.clone();
            tasks.spawn(async move { watch.closed().await });
        }
        if tokio::time::timeout(grace.max(std::time::Duration::from_secs(1)), tasks.wait()).await.is_err() {
            anyhow::bail!("{} background tasks did not stop", tasks.len());
        }
        tracing::info!("stopped");
        served
    }
}

/// Health (SERVING), reflection (v1 and v1alpha) and the ranking service.
async fn routes(api: RankingApi, settings: &ServerSettings) -> anyhow::Result<(HealthReporter, Routes)> {
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
    let ranking = RankingServiceServer::new(api).max_decoding_message_size(settings.max_message_bytes.get());
    let routes =
        Routes::new(health_service).add_service(reflection_v1).add_service(reflection_v1alpha).add_service(ranking);
    Ok((health, routes))
}

/// Unary request-message bytes held at once, from their first byte until their call is
/// answered: eight largest messages, and at least 64 MB (64 full 10,000-event batches).
fn max_buffered_bytes(settings: &ServerSettings) -> usize {
    settings.max_message_bytes.get().saturating_mul(8).max(64 << 20)
}

/// The HTTP/2 server with its limits and, when configured, TLS.
fn server(settings: &ServerSettings) -> anyhow::Result<Server> {
    let mut server = Server::builder()
        // gRPC-Web from browsers comes over HTTP/1.1 as well as HTTP/2.
        .accept_http1(true)
        // hyper's own default (200) is removed by tonic unless set: one connection must not
        // be able to open streams without bound.
        .max_concurrent_streams(Some(settings.max_streams_per_connection.get()))
        .http2_keepalive_interval(Some(settings.keepalive_interval))
        .http2_keepalive_timeout(Some(settings.keepalive_timeout));
    if let Some(tls) = tls_config(settings)? {
        server = server.tls_config(tls).context("invalid TLS configuration")?;
    }
    Ok(server)
}

fn access_policy(access: &AccessSettings) -> AccessPolicy {
    AccessPolicy {
        write: access.write_token.clone(),
        admin: access.admin_token.clone(),
        read: access.read_token.clone(),
    }
}

/// The server TLS settings from the PEM files, or `None` for plaintext.
fn tls_config(settings: &ServerSettings) -> anyhow::Result<Option<ServerTlsConfig>> {
    let (Some(cert), Some(key)) = (&settings.tls_cert, &settings.tls_key) else { return Ok(None) };
    let read = |path: &std::path::Path| std::fs::read(path).with_context(|| format!("cannot read {}", path.display()));
    let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(read(cert)?, read(key)?));
    if let Some(ca) = &settings.tls_client_ca {
        tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    Ok(Some(tls))
}

/// The ranking feed's sinks the settings name (none: the feed is off).
fn feed_sinks(settings: &Settings) -> Result<Vec<Arc<dyn FeedSink>>, String> {
    let mut sinks: Vec<Arc<dyn FeedSink>> = Vec::new();
    if let Some((brokers, topic)) = settings.feed.kafka(&settings.bus)? {
        sinks.push(Arc::new(crate::feed::kafka::KafkaFeed::new(&brokers, &topic)?));
    }
    if let Some((url, subject)) = settings.feed.nats(&settings.bus)? {
        let keep = settings.feed.feed_snapshot * 2;
        sinks.push(Arc::new(crate::feed::jetstream::JetStreamFeed::new(&url, &subject, keep)));
    }
    Ok(sinks)
}

/// What this replica announces of itself: its name (`RANKING_REPLICA_NAME`, else the host
/// name and a random suffix, unique among replicas on one host), the ranking store's layouts
/// it reads, its release.
fn announcement(settings: &Settings) -> crate::ports::Announced {
    let replica = match settings.ranking.replica_name.as_deref().map(str::trim) {
        Some(name) if !name.is_empty() => name.chars().take(128).collect(),
        _ => {
            let host = crate::config::bus::host_name().unwrap_or_else(|| "replica".into());
            let host: String = host.chars().take(110).collect();
            format!("{host}-{:08x}", rand::random::<u32>())
        }
    };
    crate::ports::Announced {
        replica,
        reads: crate::ports::READS,
        release: env!("CARGO_PKG_VERSION").into(),
        seen_at_ms: 0,
    }
}
