//! # Ranking service
//!
//! Records shopper events (views, likes, unlikes, orders) in SQL and serves daily and
//! hourly product rankings from a ranking store, over gRPC.
//!
//! ## Layout
//!
//! Imports flow one way, from the edges to the core:
//!
//! - [`startup`]: builds everything from [`config::Settings`] and serves until stopped.
//! - [`grpc`]: handlers, conversions, error mapping, instrumentation layer.
//! - [`bus`]: the Kafka and JetStream sources of events, beside the gRPC ingestion.
//! - [`feed`]: the ranking feed's sinks (Kafka, JetStream): fed versions on the wire.
//! - [`wire`]: the wire event read into the domain's, shared by [`grpc`] and [`bus`].
//! - [`app`]: the application services (ingest, queries, recompute, scheduler) and the
//!   one policy they share.
//! - [`adapters`]: SQL (sea-orm) and the ranking stores.
//! - [`ports`]: the traits the application needs from its stores.
//! - [`domain`]: the pure score engine and vocabulary (the `ranking-domain` crate).
//! - [`metrics`], [`metrics_endpoint`], [`telemetry`]: Prometheus metrics, their scrape
//!   endpoint, and logging.

pub mod adapters;
pub mod app;
pub mod bus;
pub mod config;
pub mod feed;
/// The score engine, a crate of its own so that Cargo keeps it pure (`ranking-domain`).
pub use ranking_domain as domain;
pub mod grpc;
pub mod metrics;
pub mod metrics_endpoint;
pub mod ports;
pub mod startup;
pub mod telemetry;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod web;
pub mod wire;
