//! What browsers reach on the API port, outside the gRPC layers:
//!
//! - [`host`]: HTTP/1.1 and browser requests only for the host names the server is known
//!   by (`RANKING_ALLOWED_HOSTS`), against DNS rebinding;
//! - [`console`]: the web console's assets at `/console/`, embedded in the binary;
//! - [`cors`]: cross-origin calls allowed from `RANKING_CORS_ORIGINS` only;
//! - gRPC-Web itself is `tonic_web`'s layer, placed by [`crate::startup`] right inside these
//!   two and outside every gRPC layer, so a gRPC-Web call is translated first and then
//!   observed, admitted, authenticated and limited exactly as a gRPC call is.

pub mod console;
pub mod cors;
pub mod host;
