//! The integration tests, one binary: each module is an area, `helpers` (the
//! `ranking-test-kit` crate, shared with the benchmarks) holds the
//! fixtures (a server per test on port 0 with its own database and Redis key prefix, free
//! ports, throwaway PostgreSQL/MariaDB/Redis servers, the binaries of the workspace).
//!
//! One binary links the server, sea-orm and tonic once instead of once per area.

#![allow(dead_code)]

mod annotations;
mod api;
mod binary;
mod bus;
mod caps;
mod catalog;
mod chaos;
mod client;
mod client_calls;
mod cluster;
mod compare;
mod controls;
mod dashboard;
mod deltas;
mod explain;
mod feed;
mod fencing;
mod frozen;
mod frozen_holder;
mod gate;
mod grpc_metrics;
mod grpc_web;
mod hardening;
mod history;
mod hostile_web;
use ranking_test_kit as helpers;
mod kafka_faults;
mod layouts;
mod ledger;
mod live;
mod operations;
mod otel;
mod previews;
mod profile_reads;
mod profile_reference;
mod profiles;
mod rankctl;
mod redis_store;
mod retractions;
mod rolling;
mod scheduler;
mod segments;
mod served;
mod shoppers;
mod snapshots;
mod storage;
mod trending;
mod upgrades;
mod variants;
mod watch;
mod weekly;

/// The in-process servers' logs on the test's output when `RANKING_TEST_LOG` names a filter
/// (`RANKING_TEST_LOG=info,ranking_server::bus=debug`): what a failing run leaves to read. The
/// subscriber is global: `otel::` wants its own, skip it in such a run.
pub fn test_logs() {
    if let Ok(filter) = std::env::var("RANKING_TEST_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    }
}
