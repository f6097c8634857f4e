//! Tower layers of the gRPC server, outermost first:
//!
//! - [`ObserveLayer`] ([`observe`]): one span per RPC and the RPC metrics, the standard
//!   gRPC families among them ([`standard`]).
//! - [`HygieneLayer`] ([`hygiene`]): the call counted on its connection; a unary request
//!   received whole, within time, size and buffer budgets, before it may take a slot.
//! - [`AdmissionLayer`] ([`admission`]): a bound on calls in progress, refusing at once.
//!
//! Each reads what an RPC is from [`crate::grpc::rpcs`], the one table of RPCs.

pub mod admission;
pub mod hygiene;
pub mod observe;
pub mod standard;
pub mod tapped;

pub use admission::AdmissionLayer;
pub use hygiene::HygieneLayer;
pub use observe::{ObserveLayer, code_name};

/// The service to call now, leaving a fresh clone in its place: `inner` is the clone that
/// was polled ready, so it is the one that must take the call (tower's contract), while the
/// clone waits for the next `poll_ready`.
fn ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}
