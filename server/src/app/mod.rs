//! The application layer: one service per use case over the ports, and the policy they
//! share. Nothing here knows about gRPC, SQL or Redis; tests call these services without a
//! server.
//!
//! - [`profiles`]: the scoring profiles served at once, one lane each, and which serves a read.
//! - [`policy`]: calendar, weights, windows of days and time constants, in one place.
//! - [`invalid`]: rejected input as a structured field path and a reason.
//! - [`ingest`]: validation, the durable SQL commit (with group commit), hourly increments.
//! - [`queries`]: the read rules (which ranking, which page) over the ranking store.
//! - [`catalog`]: UpdateCatalog (segments, hidden products; hiding takes effect at once).
//! - [`controls`]: the merchandising controls (pins, boosts, exclusions on a schedule).
//! - [`explain`]: ExplainRank, the one read that consults SQL (a product's rows only).
//! - [`history`]: GetRankHistory, a product's rank on the kept tops of ended days.
//! - [`feed`]: the ranking feed: each published version's changes out to the sinks.
//! - [`recompute`]: SQL → score engine → atomic replace of a daily ranking; live passes,
//!   withdrawals, retention.
//! - [`layout`]: the ranking store's layout written: the newest every live replica reads.
//! - [`lease`]: the day's lease every change of its rankings holds, and the fence it carries.
//! - [`snapshots`]: each replica's in-memory copies of the current ranking versions.
//! - [`page_token`]: the opaque position of a page in one version of a ranking.
//! - [`watch`]: WatchTopN's feeds, one per distinct watched top, shared by its watchers.
//! - [`scheduler`]: the periodic recompute and retention, one deterministic step at a time.

pub mod catalog;
pub mod controls;
pub mod explain;
pub mod feed;
pub mod history;
pub mod ingest;
pub mod invalid;
pub mod layout;
pub mod lease;
pub mod page_token;
pub mod policy;
pub mod profiles;
pub mod queries;
pub mod recompute;
pub mod scheduler;
pub mod snapshots;
pub mod watch;
