//! [`HygieneLayer`]: counts the call on its connection (for the idle timeout), and waits for
//! the whole request message of a unary or server-streaming call, within
//! `RANKING_BODY_TIMEOUT` and `RANKING_MAX_MESSAGE_BYTES` and a process-wide budget of
//! buffered bytes, before the call may take a slot: a stream whose message never comes costs
//! no slot and goes away after the body timeout. It runs after authentication, so no byte of
//! a body is buffered (and no `100 Continue` sent) for a caller without the right token.
//!
//! Request values are never echoed back at length: a compressed request (this server takes
//! none) is refused with a fixed message rather than one quoting its `grpc-encoding`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::codegen::http;
use tower::{Layer, Service};

use super::ready;
use super::tapped::{Tap, Tapped};
use crate::grpc::rpcs;

/// Where the calls of a connection are counted and how long and large a request message
/// may be.
#[derive(Clone)]
pub struct HygieneLayer {
    body_timeout: std::time::Duration,
    max_body_bytes: usize,
    buffered: Arc<BufferBudget>,
}

/// Bytes of unary request messages held by this process, from their first byte until their
/// call is answered.
struct BufferBudget {
    used: std::sync::atomic::AtomicUsize,
    limit: usize,
}

/// A share of the [`BufferBudget`], given back when dropped.
struct BudgetShare {
    budget: Arc<BufferBudget>,
    bytes: usize,
}

impl BudgetShare {
    /// Takes `n` more bytes; `false` (the bytes still counted until the drop) when that goes
    /// beyond the limit.
    fn take(&mut self, n: usize) -> bool {
        let before = self.budget.used.fetch_add(n, std::sync::atomic::Ordering::AcqRel);
        self.bytes += n;
        before + n <= self.budget.limit
    }
}

impl Drop for BudgetShare {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, std::sync::atomic::Ordering::AcqRel);
    }
}

impl HygieneLayer {
    /// Unary request messages must arrive within `body_timeout` and be at most
    /// `max_message_bytes`; at most `max_buffered_bytes` of them are held at once.
    pub fn new(body_timeout: std::time::Duration, max_message_bytes: usize, max_buffered_bytes: usize) -> Self {
        Self {
            body_timeout,
            // A gRPC message travels with a 5-byte frame header.
            max_body_bytes: max_message_bytes.saturating_add(5),
            buffered: Arc::new(BufferBudget { used: Default::default(), limit: max_buffered_bytes }),
        }
    }
}

impl<S> Layer<S> for HygieneLayer {
    type Service = Hygiene<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Hygiene { inner, settings: self.clone() }
    }
}

/// The service of [`HygieneLayer`].
#[derive(Clone)]
pub struct Hygiene<S> {
    inner: S,
    settings: HygieneLayer,
}

/// RPCs whose request is one message (unary, WatchTopN, health Watch): their body is awaited
/// before admission. Reflection's two-way streams pass through as they are, and so do paths
/// that are no RPC of this server (the router refuses them without reading a byte).
fn one_message<B>(request: &http::Request<B>) -> bool {
    rpcs::called(request).is_some_and(rpcs::Rpc::one_message)
}

/// Whether a request says its message is compressed (`grpc-encoding` other than identity).
fn compressed<B>(request: &http::Request<B>) -> bool {
    request.headers().get("grpc-encoding").is_some_and(|e| e.as_bytes() != b"identity")
}

/// The connection activity of a request (plaintext or TLS).
pub(crate) fn activity<B>(request: &http::Request<B>) -> Option<Arc<crate::grpc::connections::Activity>> {
    use crate::grpc::connections::ConnInfo;
    let ext = request.extensions();
    ext.get::<ConnInfo>()
        .or_else(|| ext.get::<tonic::transport::server::TlsConnectInfo<ConnInfo>>().map(|t| t.get_ref()))
        .map(|info| info.activity.clone())
}

/// Marks the call finished on its connection when dropped (with the response body).
struct CallGuard(Option<Arc<crate::grpc::connections::Activity>>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(a) = &self.0 {
            a.call_finished();
        }
    }
}

/// The guard rides along the response body until it is finished or dropped.
impl Tap for CallGuard {}

/// Why a request message was not taken.
enum BodyRefusal {
    TooLarge,
    TooSlow,
    Busy,
    Malformed,
    Broken(String),
}

impl HygieneLayer {
    /// The whole request message, within the time, size and buffer budgets, and the share
    /// of the buffer budget it holds until dropped (after the call is answered).
    async fn receive(&self, body: tonic::body::Body) -> Result<(bytes::Bytes, BudgetShare), BodyRefusal> {
        use http_body_util::BodyExt;
        let mut share = BudgetShare { budget: self.buffered.clone(), bytes: 0 };
        let received = tokio::time::timeout(self.body_timeout, async {
            let mut body = std::pin::pin!(body);
            let mut parts = bytes::BytesMut::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| {
                    // gRPC-Web's decoding of the body (grpc-web-text is base64) failed: the
                    // caller sent something malformed, not a broken stream.
                    if e.code() == tonic::Code::Internal && e.message().starts_with("tonic-web:") {
                        BodyRefusal::Malformed
                    } else {
                        BodyRefusal::Broken(e.to_string())
                    }
                })?;
                let Ok(data) = frame.into_data() else { continue };
                if parts.len() + data.len() > self.max_body_bytes {
                    return Err(BodyRefusal::TooLarge);
                }
                if !share.take(data.len()) {
                    return Err(BodyRefusal::Busy);
                }
                parts.extend_from_slice(&data);
            }
            Ok(parts.freeze())
        })
        .await;
        let message = received.unwrap_or(Err(BodyRefusal::TooSlow))?;
        Ok((message, share))
    }
}

impl<S> Service<http::Request<tonic::body::Body>> for Hygiene<S>
where
    S: Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let mut inner = ready(&mut self.inner);
        let settings = self.settings.clone();
        let activity = activity(&request);
        if let Some(a) = &activity {
            a.call_started();
        }
        let guard = CallGuard(activity);
        let one_message = one_message(&request);
        if compressed(&request) {
            let refused = tonic::Status::unimplemented("compressed requests are not supported (grpc-encoding)");
            return Box::pin(std::future::ready(Ok(refused.into_http())));
        }
        Box::pin(async move {
            let mut share = None;
            let request = if one_message {
                let (parts, body) = request.into_parts();
                match settings.receive(body).await {
                    Ok((bytes, held)) => {
                        share = Some(held);
                        http::Request::from_parts(parts, tonic::body::Body::new(http_body_util::Full::new(bytes)))
                    }
                    Err(refusal) => {
                        let status = match refusal {
                            BodyRefusal::TooLarge => tonic::Status::resource_exhausted(format!(
                                "request message larger than {} bytes (RANKING_MAX_MESSAGE_BYTES)",
                                settings.max_body_bytes - 5
                            )),
                            BodyRefusal::TooSlow => tonic::Status::deadline_exceeded(format!(
                                "request message not received within {:?} (RANKING_BODY_TIMEOUT)",
                                settings.body_timeout
                            )),
                            BodyRefusal::Busy => crate::grpc::error::shed(
                                "server is receiving too many request messages; retry with backoff",
                            ),
                            BodyRefusal::Malformed => tonic::Status::invalid_argument(
                                "request body is not valid gRPC-Web (grpc-web-text must be base64)",
                            ),
                            BodyRefusal::Broken(why) => {
                                tonic::Status::cancelled(format!("request stream broken: {why}"))
                            }
                        };
                        return Ok(status.into_http());
                    }
                }
            } else {
                request
            };
            let response = inner.call(request).await;
            // The handler has decoded (and dropped) the message by the time it answers.
            drop(share);
            let response = response?;
            Ok(response.map(|body| Tapped::body(body, guard)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(n: usize) -> tonic::body::Body {
        tonic::body::Body::new(http_body_util::Full::new(bytes::Bytes::from(vec![0u8; n])))
    }

    #[tokio::test]
    async fn request_messages_hold_their_share_of_the_buffer_until_dropped() {
        let layer = HygieneLayer::new(std::time::Duration::from_secs(5), 1_000, 100);
        let (message, held) = layer.receive(body(80)).await.ok().expect("within budget");
        assert_eq!(message.len(), 80);
        assert!(matches!(layer.receive(body(80)).await, Err(BodyRefusal::Busy)), "80 + 80 > 100 while held");
        drop(held);
        assert!(layer.receive(body(80)).await.is_ok(), "the share came back");
        assert!(matches!(layer.receive(body(1_006)).await, Err(BodyRefusal::TooLarge)));
        assert_eq!(layer.buffered.used.load(std::sync::atomic::Ordering::Acquire), 0, "refusals hold nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_that_never_ends_times_out() {
        let layer = HygieneLayer::new(std::time::Duration::from_secs(5), 1_000, 100);
        let (_tx, never) = tokio::sync::mpsc::channel::<Result<http_body::Frame<bytes::Bytes>, tonic::Status>>(1);
        let stream = http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(never));
        assert!(matches!(layer.receive(tonic::body::Body::new(stream)).await, Err(BodyRefusal::TooSlow)));
    }
}
