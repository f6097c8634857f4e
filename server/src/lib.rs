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
//! - [`scheduler`]: the periodic recompute and retention.
//! - [`ingest`]: validation, SQL commit (with group commit), hourly increments.
//! - [`recompute`]: SQL → score engine → atomic replace of a daily ranking.
//! - [`adapters`]: SQL (sea-orm) and the ranking stores.
//! - [`ports`]: the traits the application needs from its stores.
//! - [`domain`]: the pure score engine and vocabulary.
//! - [`metrics`], [`metrics_endpoint`], [`telemetry`]: Prometheus metrics, their scrape
//!   endpoint, and logging.

pub mod adapters;
pub mod config;
pub mod domain;
pub mod grpc;
pub mod ingest;
pub mod metrics;
pub mod metrics_endpoint;
pub mod ports;
pub mod recompute;
pub mod scheduler;
pub mod startup;
pub mod telemetry;
