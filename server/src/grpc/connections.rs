//! Connection hygiene below HTTP/2: a cap on open connections, a handshake timeout, an idle
//! timeout, and closing every connection when the shutdown grace runs out.
//!
//! [`incoming`] accepts TCP connections and wraps each in a [`TrackedIo`]. A connection
//! beyond `RANKING_MAX_CONNECTIONS` is closed as soon as it is accepted. A `TrackedIo` fails
//! its next read (which makes hyper drop the connection) when
//! - no call has arrived within the handshake timeout of the accept (TCP, TLS and HTTP/2
//!   handshakes included), or
//! - no call has been in progress for the idle timeout, or
//! - the server's `close_all` token is cancelled (the shutdown grace ran out).
//!
//! Calls find their connection's [`Activity`] in the request extensions ([`ConnInfo`], put
//! there by tonic through [`Connected`]); [`super::layers::hygiene::Hygiene`] counts them in and out.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tonic::transport::server::Connected;

/// Limits of one listener's connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Open connections at most.
    pub max_connections: usize,
    /// Accept → first call.
    pub handshake_timeout: Duration,
    /// No call in progress for this long closes the connection.
    pub idle_timeout: Duration,
}

/// Metrics of the connections.
#[derive(Clone)]
pub struct ConnectionMetrics {
    /// Open connections.
    pub open: Gauge,
    /// Closed at accept because the cap was reached.
    pub refused: Counter,
    /// Closed by the handshake or idle timeout.
    pub timed_out: Counter,
}

/// What the calls of one connection tell its I/O.
#[derive(Debug)]
pub struct Activity {
    /// Calls in progress (response not yet finished).
    in_flight: AtomicUsize,
    /// Whether a call has arrived yet.
    called: AtomicBool,
    /// When the last call finished, milliseconds after `epoch`.
    idle_since_ms: AtomicU64,
    epoch: Instant,
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            called: AtomicBool::new(false),
            idle_since_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// A call started on this connection.
    pub fn call_started(&self) {
        self.called.store(true, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    /// A call of this connection finished (its response is complete or dropped).
    pub fn call_finished(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.idle_since_ms.store(ms, Ordering::Relaxed);
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// When the connection must close if nothing changes, or `None` while a call is in
    /// progress.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        if !self.called.load(Ordering::Relaxed) {
            return Some(self.epoch + limits.handshake_timeout);
        }
        Some(self.epoch + Duration::from_millis(self.idle_since_ms.load(Ordering::Relaxed)) + limits.idle_timeout)
    }
}

/// The connect info of a [`TrackedIo`], found in every request's extensions.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The peer.
    pub remote_addr: SocketAddr,
    /// The connection's calls.
    pub activity: Arc<Activity>,
}

/// A TCP connection that closes itself on timeout or at the end of the shutdown grace.
pub struct TrackedIo {
    tcp: TcpStream,
    info: ConnInfo,
    limits: ConnectionLimits,
    timer: Pin<Box<Sleep>>,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
    metrics: ConnectionMetrics,
}

impl Drop for TrackedIo {
    fn drop(&mut self) {
        self.metrics.open.dec();
    }
}

impl TrackedIo {
    /// Whether the connection must close now; re-arms the timer otherwise.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.closed.as_mut().poll(cx).is_ready() {
            return Some(io::Error::new(io::ErrorKind::ConnectionAborted, "server shutting down"));
        }
        loop {
            let deadline =
                self.info.activity.deadline(&self.limits).unwrap_or_else(|| Instant::now() + self.limits.idle_timeout);
            if self.timer.deadline() != deadline {
                self.timer.as_mut().reset(deadline);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return None;
            }
            // The timer fired: still expired once the activity is read again?
            if self.info.activity.deadline(&self.limits).is_some_and(|d| d <= Instant::now()) {
                self.metrics.timed_out.inc();
                return Some(io::Error::new(io::ErrorKind::TimedOut, "connection idle"));
            }
        }
    }
}

impl AsyncRead for TrackedIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    /// Reported as not vectored on purpose. With vectored writes, h2 sends a DATA payload
    /// above 256 bytes by reference and cannot queue the trailers behind it until that write
    /// is done: a GetTopN(20) answer (~650 bytes) costs two `sendmsg` calls where a health
    /// check costs one. Without, h2 copies payloads up to 1 KiB into its buffer, and headers,
    /// message and trailers leave in one write (see BENCHMARKS.md, reads).
    fn is_write_vectored(&self) -> bool {
        false
    }
}

impl Connected for TrackedIo {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.info.clone()
    }
}

/// The accepted connections of `listener`, each a [`TrackedIo`]; connections beyond the cap
/// are closed at once. Accept errors (such as running out of descriptors) are logged and
/// retried after a pause, never passed to the server.
pub fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
    metrics: ConnectionMetrics,
    close_all: CancellationToken,
) -> impl Stream<Item = Result<TrackedIo, io::Error>> {
    futures_util::stream::unfold(listener, move |listener| {
        let (metrics, close_all) = (metrics.clone(), close_all.clone());
        async move {
            loop {
                let (tcp, remote) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed; pausing before the next accept");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // The count goes up here and down when the `TrackedIo` is dropped.
                let now_open = usize::try_from(metrics.open.get()).unwrap_or(0);
                if now_open >= limits.max_connections {
                    metrics.refused.inc();
                    drop(tcp);
                    continue;
                }
                // Without TCP_NODELAY a response's trailers wait for the ACK of its data
                // frame, which the peer delays by up to 40 ms.
                let _ = tcp.set_nodelay(true);
                metrics.open.inc();
                let activity = Arc::new(Activity::new());
                let io = TrackedIo {
                    tcp,
                    info: ConnInfo { remote_addr: remote, activity },
                    limits,
                    timer: Box::pin(tokio::time::sleep(limits.handshake_timeout)),
                    closed: Box::pin(close_all.cancelled_owned()),
                    metrics,
                };
                return Some((Ok(io), listener));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 10,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_moves_from_handshake_to_idle_and_pauses_during_calls() {
        let a = Activity::new();
        let start = a.epoch;
        assert_eq!(a.deadline(&limits()), Some(start + Duration::from_secs(10)), "handshake");
        a.call_started();
        assert_eq!(a.deadline(&limits()), None, "a call in progress keeps it open");
        tokio::time::advance(Duration::from_secs(30)).await;
        a.call_finished();
        assert_eq!(a.deadline(&limits()), Some(start + Duration::from_secs(90)), "idle from the last call");
    }
}
