//! [`ConsoleLayer`]: the web console, served at `/console/` from assets embedded in the
//! binary when it is built (`console/dist`, made by `make console`). Every other path goes
//! on to gRPC-Web and gRPC untouched.
//!
//! The assets are public (they hold no data); the console calls the API over gRPC-Web with
//! the token its user gives it, under the same checks as any other caller. Its
//! Content-Security-Policy lets the page load and call nothing but this server.

use std::borrow::Cow;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::{Either, Ready, ready};
use http_body_util::Full;
use tonic::codegen::http::{self, HeaderValue, Method, StatusCode, header};
use tower::{Layer, Service};

/// The console's built assets. A binary built before the console was (plain `cargo build`
/// in a fresh clone) has none and says so at `/console/`.
#[derive(rust_embed::RustEmbed)]
#[folder = "../console/dist"]
#[allow_missing = true]
struct Assets;

/// Where the console lives on the API port.
pub const PATH: &str = "/console/";

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                      connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Serves the console's assets, or passes the request on when the console is off or the
/// path is not the console's.
#[derive(Debug, Clone, Copy)]
pub struct ConsoleLayer {
    enabled: bool,
}

impl ConsoleLayer {
    /// `enabled`: `RANKING_CONSOLE=on`.
    pub fn new(enabled: bool) -> Self {
        Self { enabled }
    }
}

impl<S> Layer<S> for ConsoleLayer {
    type Service = Console<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Console { inner, enabled: self.enabled }
    }
}

/// The service of [`ConsoleLayer`].
#[derive(Debug, Clone)]
pub struct Console<S> {
    inner: S,
    enabled: bool,
}

impl<S, B> Service<http::Request<B>> for Console<S>
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
        let path = request.uri().path();
        let ours = self.enabled && (path == "/" || path == "/console" || path.starts_with(PATH));
        if !ours {
            return Either::Right(self.inner.call(request));
        }
        // An asset request counts as a call on its connection, so the handshake timeout
        // does not close a browser's connection that has only fetched the page so far.
        if let Some(activity) = crate::grpc::layers::hygiene::activity(&request) {
            activity.call_started();
            activity.call_finished();
        }
        Either::Left(ready(Ok(answer(request.method(), path))))
    }
}

/// The answer to a console request: an asset, a redirect to the console, or a refusal.
fn answer(method: &Method, path: &str) -> http::Response<tonic::body::Body> {
    if method != Method::GET && method != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "the console is read with GET\n");
    }
    if path == "/" || path == "/console" {
        let mut response = plain(StatusCode::PERMANENT_REDIRECT, "");
        response.headers_mut().insert(header::LOCATION, HeaderValue::from_static(PATH));
        return response;
    }
    let name = match &path[PATH.len()..] {
        "" => "index.html",
        name => name,
    };
    let Some(asset) = Assets::get(name) else {
        if Assets::get("index.html").is_none() {
            return plain(
                StatusCode::NOT_FOUND,
                "this binary was built without the console: run `make console`, then build it again\n",
            );
        }
        return plain(StatusCode::NOT_FOUND, "no such console file\n");
    };
    let body = match asset.data {
        Cow::Borrowed(bytes) => Bytes::from_static(bytes),
        Cow::Owned(bytes) => Bytes::from(bytes),
    };
    let mut response = http::Response::new(tonic::body::Body::new(Full::new(body)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(name)));
    // The bundle's file names carry a hash of their content; the page that names them must
    // be fetched again each time so a new build is picked up.
    let caching = if name.starts_with("assets/") { "public, max-age=31536000, immutable" } else { "no-cache" };
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(caching));
    secure(headers);
    response
}

/// A short text answer.
fn plain(status: StatusCode, text: &'static str) -> http::Response<tonic::body::Body> {
    let mut response = http::Response::new(tonic::body::Body::new(Full::new(Bytes::from_static(text.as_bytes()))));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    secure(response.headers_mut());
    response
}

fn secure(headers: &mut http::HeaderMap) {
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
}

/// The media type of a built asset, by its extension.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_root_redirects_and_other_methods_are_refused() {
        let response = answer(&Method::GET, "/console");
        assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(response.headers()[header::LOCATION], PATH);
        let response = answer(&Method::POST, "/console/");
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        let response = answer(&Method::GET, "/console/../Cargo.toml");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn assets_get_their_media_type() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("assets/index-3f2a.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("assets/x"), "application/octet-stream");
    }
}
