//! The gRPC edge: the `RankingService` handlers, proto ↔ domain conversions, the single
//! error → status mapping, and the tower layers (instrumentation, admission, bearer tokens).
//!
//! Proto types stop here: everything below works on domain types and ports.

pub mod auth;
pub mod connections;
pub mod controls;
pub mod convert;
pub mod error;
pub mod history;
pub mod layers;
pub mod rpcs;
pub mod service;
