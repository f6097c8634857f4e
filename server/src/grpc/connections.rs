//! Connection hygiene below HTTP: a cap on open connections, a handshake timeout, an idle
//! timeout, a bound on an HTTP/1.1 request head, and closing every connection when the
//! shutdown grace runs out.
//!
//! [`incoming`] accepts TCP connections and wraps each in a [`TrackedIo`]. At
//! `RANKING_MAX_CONNECTIONS` a new connection takes the place of the open one idle longest
//! (no call in progress: it was only holding a slot), and is closed as soon as it is accepted
//! when every open one has a call in progress. A `TrackedIo` fails its next read (which makes
//! hyper drop the connection) when
//! - no call has arrived within the handshake timeout of the accept (TCP, TLS and HTTP/2
//!   handshakes included), or
//! - no call has been in progress for the idle timeout, or
//! - it was chosen to make room for a new connection, or
//! - an HTTP/1.1 peer sent more than [`MAX_HTTP1_HEAD`] bytes without a request coming of
//!   them (hyper would buffer ~400 KB of unfinished headers; HTTP/2's header list is bounded
//!   at 16 KB), or
//! - the server's `close_all` token is cancelled (the shutdown grace ran out).
//!
//! Calls find their connection's [`Activity`] in the request extensions ([`ConnInfo`], put
//! there by tonic through [`Connected`]); [`super::layers::hygiene::Hygiene`] counts them in and out.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
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
    /// Closed by the handshake or idle timeout, or for an HTTP/1.1 request head too large.
    pub timed_out: Counter,
    /// Idle connections closed to make room for a new one at the cap.
    pub evicted: Counter,
}

/// Bytes an HTTP/1.1 peer may send while no call of its connection is in progress: a request
/// head (its line and headers, bounded like HTTP/2's 16 KB header list) and the first bytes
/// of its body.
pub const MAX_HTTP1_HEAD: usize = 16 * 1024 + 1024;

/// The kernel's send buffer of a connection. Left to itself Linux grows it to megabytes for a
/// peer that does not read (a watcher that never reads its updates held 287 KB there); this
/// keeps what such a peer costs small and lets the backlog show where the service sees it
/// (a watch then skips to the latest state). Answers here are kilobytes: a few round trips
/// at most for the largest page.
pub const SEND_BUFFER: usize = 64 * 1024;

/// What a connection speaks, told by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// Nothing read yet.
    Unknown,
    /// Plaintext HTTP/1.1: its request heads are bounded here.
    Http1,
    /// HTTP/2 (the connection preface), or TLS: hyper and h2 bound what they buffer.
    Other,
}

/// What the calls of one connection tell its I/O.
#[derive(Debug)]
pub struct Activity {
    /// Calls in progress (response not yet finished).
    in_flight: AtomicUsize,
    /// Whether a call has arrived yet.
    called: AtomicBool,
    /// Calls started so far.
    started: AtomicU64,
    /// When the last call finished, milliseconds after `epoch`.
    idle_since_ms: AtomicU64,
    epoch: Instant,
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            called: AtomicBool::new(false),
            started: AtomicU64::new(0),
            idle_since_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// A call started on this connection.
    pub fn call_started(&self) {
        self.called.store(true, Ordering::Relaxed);
        self.started.fetch_add(1, Ordering::AcqRel);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    /// A call of this connection finished (its response is complete or dropped).
    pub fn call_finished(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.idle_since_ms.store(ms, Ordering::Relaxed);
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// How willingly the connection makes room for a new one, lowest first: one that never
    /// made a call, then the one idle longest; `None` while a call is in progress.
    fn eviction_order(&self) -> Option<(bool, Instant)> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = self.epoch + Duration::from_millis(self.idle_since_ms.load(Ordering::Relaxed));
        Some((self.called.load(Ordering::Relaxed), since))
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

/// A TCP connection that closes itself on timeout, when told to make room, or at the end of
/// the shutdown grace.
pub struct TrackedIo {
    tcp: TcpStream,
    info: ConnInfo,
    limits: ConnectionLimits,
    timer: Pin<Box<Sleep>>,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
    metrics: ConnectionMetrics,
    protocol: Protocol,
    /// Bytes read since a call of this connection last started or was seen in progress.
    unclaimed: usize,
    /// The calls started when `unclaimed` was last reset.
    seen_calls: u64,
}

/// The open connections, so that one idle can be closed to make room for a new one. Closed
/// connections leave it when it is next pruned: at the cap, or when it has grown to twice
/// its size after the last pruning.
#[derive(Default)]
struct Open(Mutex<OpenList>);

#[derive(Default)]
struct OpenList {
    entries: Vec<(Weak<Activity>, CancellationToken)>,
    /// The length at which the next addition prunes the list.
    prune_at: usize,
}

impl OpenList {
    fn prune(&mut self) {
        self.entries.retain(|(activity, close)| activity.strong_count() > 0 && !close.is_cancelled());
        self.prune_at = (self.entries.len() * 2).max(64);
    }
}

impl Open {
    /// Closes the connection that makes room most willingly ([`Activity::eviction_order`]),
    /// if any has no call in progress.
    fn evict_one(&self) -> bool {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        open.prune();
        let oldest = open
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, (activity, _))| Some((i, activity.upgrade()?.eviction_order()?)))
            .min_by_key(|(_, order)| *order);
        let Some((i, _)) = oldest else { return false };
        let (_, close) = open.entries.swap_remove(i);
        close.cancel();
        true
    }

    fn add(&self, activity: &Arc<Activity>, close: CancellationToken) {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if open.entries.len() >= open.prune_at {
            open.prune();
        }
        open.entries.push((Arc::downgrade(activity), close));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).entries.len()
    }
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
            return Some(io::Error::new(io::ErrorKind::ConnectionAborted, "closed by the server"));
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
        let started = self.info.activity.started.load(Ordering::Acquire);
        if started != self.seen_calls || self.info.activity.in_flight.load(Ordering::Acquire) > 0 {
            (self.unclaimed, self.seen_calls) = (0, started);
        }
        if self.protocol != Protocol::Http1 {
            let before = buf.filled().len();
            let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
            if self.protocol == Protocol::Unknown && buf.filled().len() > before {
                let first = &buf.filled()[before..];
                // HTTP/2's connection preface, or a TLS record: not bounded here.
                let other = first.starts_with(b"PRI ") || first[0] == 0x16;
                self.protocol = if other { Protocol::Other } else { Protocol::Http1 };
                self.unclaimed = first.len();
            }
            return polled;
        }
        if self.info.activity.in_flight.load(Ordering::Acquire) > 0 {
            return Pin::new(&mut self.tcp).poll_read(cx, buf);
        }
        // No call in progress: what comes is a request head, read at most up to the bound.
        let room = MAX_HTTP1_HEAD.saturating_sub(self.unclaimed);
        if room == 0 {
            self.metrics.timed_out.inc();
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, "HTTP/1.1 request head too large")));
        }
        let mut head = [0u8; 4096];
        let n = room.min(head.len()).min(buf.remaining());
        let mut part = ReadBuf::new(&mut head[..n]);
        let polled = Pin::new(&mut self.tcp).poll_read(cx, &mut part);
        if let Poll::Ready(Ok(())) = polled {
            buf.put_slice(part.filled());
            self.unclaimed += part.filled().len();
        }
        polled
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
    let open = Arc::new(Open::default());
    futures_util::stream::unfold(listener, move |listener| {
        let (metrics, close_all, open) = (metrics.clone(), close_all.clone(), open.clone());
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
                    if !open.evict_one() {
                        metrics.refused.inc();
                        drop(tcp);
                        continue;
                    }
                    metrics.evicted.inc();
                }
                // Without TCP_NODELAY a response's trailers wait for the ACK of its data
                // frame, which the peer delays by up to 40 ms.
                let _ = tcp.set_nodelay(true);
                let _ = socket2::SockRef::from(&tcp).set_send_buffer_size(SEND_BUFFER);
                metrics.open.inc();
                let activity = Arc::new(Activity::new());
                let close = close_all.child_token();
                open.add(&activity, close.clone());
                let io = TrackedIo {
                    tcp,
                    info: ConnInfo { remote_addr: remote, activity },
                    limits,
                    timer: Box::pin(tokio::time::sleep(limits.handshake_timeout)),
                    closed: Box::pin(close.cancelled_owned()),
                    metrics,
                    protocol: Protocol::Unknown,
                    unclaimed: 0,
                    seen_calls: 0,
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

    #[test]
    fn closed_connections_leave_the_list_and_a_busy_one_is_never_chosen() {
        let open = Open::default();
        let busy = Arc::new(Activity::new());
        busy.call_started();
        open.add(&busy, CancellationToken::new());
        for _ in 0..1_000 {
            // Each closed (its activity gone) before the next arrives.
            open.add(&Arc::new(Activity::new()), CancellationToken::new());
        }
        assert!(open.len() <= 130, "pruned as it grows: {}", open.len());
        assert!(!open.evict_one(), "the only open connection has a call in progress");
        let idle = Arc::new(Activity::new());
        let close = CancellationToken::new();
        open.add(&idle, close.clone());
        assert!(open.evict_one() && close.is_cancelled(), "the idle one makes room");
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
