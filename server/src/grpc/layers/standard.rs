//! The go-grpc-prometheus families that existing gRPC dashboards read, counted
//! around every call by [`super::ObserveLayer`]: a call is started when it arrives, its
//! messages are counted as their gRPC frames pass (the request's as the server reads them,
//! the response's as they are sent: one per WatchTopN update), and it is handled, with its
//! code, when its response ends: at the trailers (an answer's status travels there), with the
//! headers of a trailers-only refusal, or `Canceled` when the response is dropped before it
//! ended. Label
//! values come from the RPC table.

use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use tonic::codegen::http;

use super::tapped::{Polled, Tap, Tapped};
use crate::grpc::rpcs::{self, Kind};
use crate::metrics::{GrpcCodeLabels, GrpcLabels, Metrics};

/// The labels of a request path: from the RPC table, or one fixed set for any other path.
pub fn labels(path: &str) -> GrpcLabels {
    labels_of(rpcs::of(path))
}

/// The labels of an RPC of the table, or the fixed set of any other path (`None`).
pub fn labels_of(rpc: Option<&'static rpcs::Rpc>) -> GrpcLabels {
    match rpc {
        Some(rpc) => GrpcLabels { grpc_type: grpc_type(rpc.kind), grpc_service: rpc.service, grpc_method: rpc.method },
        None => GrpcLabels { grpc_type: "unknown", grpc_service: "unknown", grpc_method: "unknown" },
    }
}

/// The labels of every RPC of the table, for the zero series of the families.
pub fn every_rpc() -> Vec<GrpcLabels> {
    rpcs::RPCS
        .iter()
        .map(|rpc| GrpcLabels { grpc_type: grpc_type(rpc.kind), grpc_service: rpc.service, grpc_method: rpc.method })
        .collect()
}

/// go-grpc-prometheus's name of an RPC's kind.
pub fn grpc_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Unary => "unary",
        Kind::ServerStream => "server_stream",
        Kind::BidiStream => "bidi_stream",
    }
}

/// The name Go gives a status code (`OK`, `Canceled`, `InvalidArgument`), the value of
/// `grpc_code`.
pub fn go_code_name(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Ok => "OK",
        tonic::Code::Cancelled => "Canceled",
        other => super::code_name(other),
    }
}

/// Counts the gRPC messages in a stream of data frames (each message is a 5-byte prefix,
/// its length in the last four, then that many bytes; a message may span frames and a frame
/// may hold several).
#[derive(Debug, Default)]
pub struct MessageCounter {
    /// Bytes of the current prefix read so far.
    prefix: [u8; 5],
    prefix_read: usize,
    /// Bytes of the current message still to come.
    remaining: u64,
}

impl MessageCounter {
    /// Reads `data`; returns how many messages started in it.
    pub fn feed(&mut self, mut data: &[u8]) -> u64 {
        let mut started = 0;
        while !data.is_empty() {
            if self.remaining > 0 {
                let take = data.len().min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
                self.remaining -= take as u64;
                data = &data[take..];
                continue;
            }
            let take = data.len().min(5 - self.prefix_read);
            self.prefix[self.prefix_read..self.prefix_read + take].copy_from_slice(&data[..take]);
            self.prefix_read += take;
            data = &data[take..];
            if self.prefix_read == 5 {
                started += 1;
                self.prefix_read = 0;
                self.remaining =
                    u64::from(u32::from_be_bytes([self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]]));
            }
        }
        started
    }
}

/// One call as the standard families see it.
pub struct Call {
    metrics: Arc<Metrics>,
    labels: GrpcLabels,
    started: Instant,
}

impl Call {
    /// A call of `path` arriving now: counted as started.
    pub fn start(metrics: Arc<Metrics>, rpc: Option<&'static rpcs::Rpc>) -> Self {
        let labels = labels_of(rpc);
        metrics.grpc.started.get_or_create(&labels).inc();
        Self { metrics, labels, started: Instant::now() }
    }

    /// `(service, method)` of the call, as the RPC table names them (`unknown` for any other
    /// path).
    pub fn names(&self) -> (&'static str, &'static str) {
        (self.labels.grpc_service, self.labels.grpc_method)
    }

    fn received(&self, messages: u64) {
        if messages > 0 {
            self.metrics.grpc.msg_received.get_or_create(&self.labels).inc_by(messages);
        }
    }

    fn sent(&self, messages: u64) {
        if messages > 0 {
            self.metrics.grpc.msg_sent.get_or_create(&self.labels).inc_by(messages);
        }
    }

    fn handled(&self, code: tonic::Code) {
        let labels = &self.labels;
        let with_code = GrpcCodeLabels {
            grpc_type: labels.grpc_type,
            grpc_service: labels.grpc_service,
            grpc_method: labels.grpc_method,
            grpc_code: go_code_name(code),
        };
        self.metrics.grpc.handled.get_or_create(&with_code).inc();
        self.metrics.grpc.handling_seconds.get_or_create(labels).observe(self.started.elapsed().as_secs_f64());
    }
}

/// The status in a header map (`grpc-status`), if any.
pub fn status_in(headers: &http::HeaderMap) -> Option<tonic::Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?.parse::<i32>().ok()?;
    Some(tonic::Code::from(value))
}

/// Rides along a request body: counts the messages the server reads from it.
pub struct RequestTap {
    counter: MessageCounter,
    call: Arc<Call>,
}

impl RequestTap {
    /// `body`, counted into `call`.
    pub fn wrap(body: tonic::body::Body, call: Arc<Call>) -> tonic::body::Body {
        Tapped::body(body, Self { counter: MessageCounter::default(), call })
    }
}

impl Tap for RequestTap {
    fn polled(&mut self, polled: &Polled) {
        if let Poll::Ready(Some(Ok(frame))) = polled
            && let Some(data) = frame.data_ref()
        {
            self.call.received(self.counter.feed(data));
        }
    }
}

/// Rides along a response body: counts the messages sent and records the call handled when
/// the body ends (or `Canceled` when it is dropped first).
pub struct ResponseTap {
    counter: MessageCounter,
    call: Arc<Call>,
    /// The code of a trailers-only response (its headers carry it), else OK until the
    /// trailers say otherwise.
    code: tonic::Code,
    done: bool,
}

impl ResponseTap {
    /// The body of `response`, counted into `call`. A trailers-only response (a refusal, an
    /// error) is complete with its headers: handled now, with the code they carry.
    pub fn wrap(response: http::Response<tonic::body::Body>, call: Arc<Call>) -> http::Response<tonic::body::Body> {
        let trailers_only = status_in(response.headers());
        if let Some(code) = trailers_only {
            call.handled(code);
        }
        let (code, done) = (trailers_only.unwrap_or(tonic::Code::Ok), trailers_only.is_some());
        response.map(|body| Tapped::body(body, Self { counter: MessageCounter::default(), call, code, done }))
    }

    fn finish(&mut self, code: tonic::Code) {
        if !self.done {
            self.done = true;
            self.call.handled(code);
        }
    }
}

impl Tap for ResponseTap {
    fn polled(&mut self, polled: &Polled) {
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.call.sent(self.counter.feed(data));
                } else if let Some(trailers) = frame.trailers_ref() {
                    self.finish(status_in(trailers).unwrap_or(self.code));
                }
            }
            Poll::Ready(None) => self.finish(self.code),
            Poll::Ready(Some(Err(status))) => self.finish(status.code()),
            Poll::Pending => {}
        }
    }
}

impl Drop for ResponseTap {
    fn drop(&mut self) {
        // Dropped before its end: the peer went away (or the server stopped) mid-call.
        self.finish(tonic::Code::Cancelled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(len: u32) -> Vec<u8> {
        let mut m = vec![0u8];
        m.extend_from_slice(&len.to_be_bytes());
        m.extend(std::iter::repeat_n(7u8, len as usize));
        m
    }

    #[test]
    fn messages_are_counted_across_and_within_frames() {
        let mut stream = message(3);
        stream.extend(message(0));
        stream.extend(message(70_000));
        stream.extend(message(1));
        for split in [1, 2, 5, 6, 17, 1_000, stream.len()] {
            let mut counter = MessageCounter::default();
            let counted: u64 = stream.chunks(split).map(|frame| counter.feed(frame)).sum();
            assert_eq!(counted, 4, "frames of {split} bytes");
        }
    }

    #[test]
    fn labels_come_from_the_table_and_codes_have_go_names() {
        let l = labels("/ranking.v1.RankingService/WatchTopN");
        assert_eq!(
            (l.grpc_type, l.grpc_service, l.grpc_method),
            ("server_stream", "ranking.v1.RankingService", "WatchTopN")
        );
        for path in ["/evil/path?x=1", "/ranking.v1.RankingService/Nope", "garbage"] {
            let unknown = labels(path);
            assert_eq!(
                (unknown.grpc_type, unknown.grpc_service, unknown.grpc_method),
                ("unknown", "unknown", "unknown")
            );
        }
        assert_eq!(go_code_name(tonic::Code::Ok), "OK");
        assert_eq!(go_code_name(tonic::Code::Cancelled), "Canceled");
        assert_eq!(go_code_name(tonic::Code::ResourceExhausted), "ResourceExhausted");
    }
}
