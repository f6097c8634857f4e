//! Cross-origin calls over gRPC-Web: a browser page from an origin in
//! `RANKING_CORS_ORIGINS` may call the API (with its own bearer token, never cookies); pages
//! from any other origin get answers without the CORS headers, which their browser refuses
//! to hand them. The console is served from the API's own origin and needs no entry.

use std::time::Duration;

use tonic::codegen::http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use crate::config::Origins;

/// How long a browser may cache a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// Response headers a gRPC-Web client must be able to read: a call refused before its
/// body (a trailers-only answer) carries its status in them.
const EXPOSED: [&str; 3] = ["grpc-status", "grpc-message", "grpc-status-details-bin"];

/// The CORS layer for `origins` (none: no cross-origin caller is allowed).
pub fn layer(origins: &Origins) -> CorsLayer {
    let allowed: Vec<HeaderValue> = origins.0.iter().filter_map(|o| HeaderValue::from_str(o).ok()).collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(allowed))
        .allow_methods([Method::POST])
        // gRPC-Web clients send their own headers (x-grpc-web, x-user-agent, grpc-timeout,
        // authorization, custom metadata); the origin check is what guards the API.
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers(EXPOSED.map(HeaderName::from_static))
        .max_age(PREFLIGHT_MAX_AGE)
}
