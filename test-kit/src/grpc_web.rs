//! A gRPC-Web client over raw HTTP/1.1, as a browser speaks it (`application/grpc-web+proto`,
//! chunked answers, the trailers in a final frame), for the tests and the benchmark: it
//! can send half a request, hold a connection open, and read an answer as it streams.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What came back on an HTTP/1.1 gRPC-Web call so far.
#[derive(Debug, Default)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The response messages, in order.
    pub messages: Vec<Bytes>,
    /// The trailers frame, once it came.
    pub trailers: Option<String>,
    /// The whole HTTP response has arrived (the last chunk, or all of content-length).
    pub complete: bool,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The call's grpc-status: from a trailers-only answer's headers, else the trailers.
    pub fn code(&self) -> Option<i32> {
        let from_trailers = self.trailers.as_deref().and_then(|t| {
            t.lines().find_map(|l| l.strip_prefix("grpc-status:")).map(|v| v.trim().parse().expect("code"))
        });
        self.header("grpc-status").map(|v| v.parse().expect("code")).or(from_trailers)
    }

    /// Message `i`, decoded.
    pub fn message<M: Message + Default>(&self, i: usize) -> M {
        M::decode(self.messages[i].clone()).expect("a message")
    }
}

/// A gRPC-Web frame of `message`.
pub fn frame(message: &impl Message) -> Vec<u8> {
    let payload = message.encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
    body.extend_from_slice(&payload);
    body
}

/// A gRPC-Web request over HTTP/1.1 to `path` with `extra` headers; only its first `send`
/// bytes of body when set (the rest never comes).
pub fn request(path: &str, message: &impl Message, extra: &[(&str, &str)], send: Option<usize>) -> Vec<u8> {
    let body = frame(message);
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/grpc-web+proto\r\nx-grpc-web: 1\r\n\
         content-length: {}\r\n",
        body.len()
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body[..send.unwrap_or(body.len())]);
    bytes
}

/// Parses what an HTTP/1.1 response has delivered so far (chunked or not); `None` until its
/// head is complete.
pub fn parse(raw: &[u8]) -> Option<Answer> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).expect("ascii head");
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut answer = Answer { status, headers, ..Answer::default() };
    let mut rest = &raw[end + 4..];
    let mut body = Vec::new();
    if answer.header("transfer-encoding") == Some("chunked") {
        while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).expect("size"), 16).expect("hex");
            if rest.len() < line_end + 2 + size + 2 {
                break;
            }
            body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            rest = &rest[line_end + 2 + size + 2..];
            if size == 0 {
                answer.complete = true;
                break;
            }
        }
    } else {
        let length = answer.header("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
        answer.complete = rest.len() >= length;
        body.extend_from_slice(rest);
    }
    let mut frames = Bytes::from(body);
    while frames.len() >= 5 {
        let flag = frames[0];
        let len = u32::from_be_bytes([frames[1], frames[2], frames[3], frames[4]]) as usize;
        if frames.len() < 5 + len {
            break;
        }
        frames.advance(5);
        let frame = frames.split_to(len);
        if flag & 0x80 != 0 {
            answer.trailers = Some(String::from_utf8(frame.to_vec()).expect("trailers"));
        } else {
            answer.messages.push(frame);
        }
    }
    Some(answer)
}

/// Reads from `tcp` into `raw` until `done` holds for the answer so far or the peer closes;
/// panics when nothing more comes within `patience`.
pub async fn read_until(
    tcp: &mut TcpStream,
    raw: &mut Vec<u8>,
    patience: Duration,
    done: impl Fn(&Answer) -> bool,
) -> Answer {
    let mut buf = [0u8; 16 * 1024];
    loop {
        if let Some(answer) = parse(raw).filter(&done) {
            return answer;
        }
        let n = tokio::time::timeout(patience, tcp.read(&mut buf)).await.expect("an answer in time").expect("read");
        if n == 0 {
            return parse(raw).unwrap_or_default();
        }
        raw.extend_from_slice(&buf[..n]);
    }
}

/// One HTTP/1.1 connection making gRPC-Web calls one after the other (keep-alive).
pub struct Connection {
    tcp: TcpStream,
    raw: Vec<u8>,
}

impl Connection {
    pub async fn open(addr: SocketAddr) -> Self {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        Self { tcp, raw: Vec::new() }
    }

    /// A unary call of `ranking.v1.RankingService/{method}`, with `token` as bearer when set.
    pub async fn call(&mut self, method: &str, message: &impl Message, token: Option<&str>) -> Answer {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let extra: Vec<(&str, &str)> = bearer.iter().map(|b| ("authorization", b.as_str())).collect();
        let bytes = request(&format!("/ranking.v1.RankingService/{method}"), message, &extra, None);
        self.tcp.write_all(&bytes).await.expect("write");
        self.raw.clear();
        read_until(&mut self.tcp, &mut self.raw, Duration::from_secs(60), |a| a.complete).await
    }
}

/// One unary call on a fresh connection.
pub async fn call(addr: SocketAddr, method: &str, message: &impl Message, token: Option<&str>) -> Answer {
    Connection::open(addr).await.call(method, message, token).await
}
