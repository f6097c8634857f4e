//! Implementations of the ports: SQL through sea-orm, rankings in Redis or in memory, and
//! read coalescing in front of a remote ranking store.

pub mod coalescing;
pub mod memory;
pub mod redis;
pub mod sql;
