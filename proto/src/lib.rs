//! The `ranking.v1` wire contract, generated from `ranking/v1/ranking.proto`.
//!
//! Both the server and the client crate depend on this crate alone for wire types, so the
//! contract has one definition.

mod conversions;
mod encoded;
pub mod feed;
mod window;

pub use encoded::Encoded;

/// Package `ranking.v1`: messages and `ranking_service_client`.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("ranking.v1");
}

/// `ranking_service_server` of package `ranking.v1`: the messages of [`v1`], except that
/// `GetTopN` answers with an [`Encoded`] `GetTopNResponse`.
pub mod server {
    #![allow(clippy::all, missing_docs)]
    include!(concat!(env!("OUT_DIR"), "/server/ranking.v1.rs"));
}

/// Encoded `FileDescriptorSet` of the contract (imports included), for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ranking_descriptor.bin"));
