//! [`HostLayer`]: HTTP/1.1 and browser requests are answered only for the host names this
//! server is reached by (`RANKING_ALLOWED_HOSTS`); any other `Host` gets 421 Misdirected
//! Request before anything else runs.
//!
//! Why: a page of another site can make a browser resolve its own name to 127.0.0.1 (DNS
//! rebinding) and then call the API as a same-origin page: its `Origin` and `Host` both name
//! the attacker's host, so CORS cannot tell. The `Host` can: a request that names a host this
//! server is not known by came through a name nobody gave it. Plain gRPC over HTTP/2 (not a
//! browser: no `Origin`, no gRPC-Web) is left alone, since service meshes and load balancers
//! set `:authority` to names of their own.
//!
//! By default the allowed names are the listen address's and the loopback names
//! (`localhost`, `127.0.0.1`, `::1`), with any port.

use std::task::{Context, Poll};

use futures_util::future::{Either, Ready, ready};
use http_body_util::Full;
use tonic::codegen::http::{self, HeaderValue, StatusCode, header};
use tower::{Layer, Service};

use crate::config::AllowedHosts;

/// Refuses browser and HTTP/1.1 requests for hosts not in the list.
#[derive(Debug, Clone)]
pub struct HostLayer {
    allowed: std::sync::Arc<AllowedHosts>,
}

impl HostLayer {
    /// A layer allowing `allowed`.
    pub fn new(allowed: AllowedHosts) -> Self {
        Self { allowed: std::sync::Arc::new(allowed) }
    }
}

impl<S> Layer<S> for HostLayer {
    type Service = Host<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Host { inner, allowed: self.allowed.clone() }
    }
}

/// The service of [`HostLayer`].
#[derive(Debug, Clone)]
pub struct Host<S> {
    inner: S,
    allowed: std::sync::Arc<AllowedHosts>,
}

/// Whether a request comes from a browser or over HTTP/1.1: the requests a rebound page
/// can make.
fn checked<B>(request: &http::Request<B>) -> bool {
    let browser = request.headers().contains_key(header::ORIGIN)
        || request
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|c| c.as_bytes().starts_with(b"application/grpc-web"));
    browser || request.version() < http::Version::HTTP_2
}

/// The host a request names: `Host`, else the URI's authority (HTTP/2's `:authority`).
fn named_host<B>(request: &http::Request<B>) -> Option<&str> {
    match request.headers().get(header::HOST) {
        Some(host) => host.to_str().ok(),
        None => request.uri().authority().map(|a| a.as_str()),
    }
}

impl<S, B> Service<http::Request<B>> for Host<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Either<Ready<Result<Self::Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if !checked(&request) || named_host(&request).is_some_and(|h| self.allowed.admits(h)) {
            return Either::Right(self.inner.call(request));
        }
        let mut response = http::Response::new(tonic::body::Body::new(Full::new(bytes::Bytes::from_static(
            b"this server does not answer for that host name (RANKING_ALLOWED_HOSTS)\n",
        ))));
        *response.status_mut() = StatusCode::MISDIRECTED_REQUEST;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        Either::Left(ready(Ok(response)))
    }
}
