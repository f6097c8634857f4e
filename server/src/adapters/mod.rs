//! Implementations of the ports: SQL through sea-orm, rankings in Redis or in memory.

pub mod memory;
pub mod redis;
pub mod sql;
