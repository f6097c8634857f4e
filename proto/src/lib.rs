//! The `ranking.v1` wire contract, generated from `ranking/v1/ranking.proto`.
//!
//! Both the server and the client crate depend on this crate alone for wire types, so the
//! contract has one definition.

/// Package `ranking.v1`: messages, `ranking_service_client` and `ranking_service_server`.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("ranking.v1");
}

/// Encoded `FileDescriptorSet` of the contract (imports included), for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ranking_descriptor.bin"));
