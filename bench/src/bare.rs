//! `bare-top`: the limit of a 1 KB answer on this stack. A tonic server with no layers, no
//! metrics and no spans, answering every GetTopN with one fixed, already encoded
//! GetTopNResponse (the real server's answer of the same call, read from a file), and
//! nothing else. The read benchmark runs it in a process of its own beside the real server
//! and drives both with the same h2load calls, so that GetTopN(20)'s rate and CPU are
//! compared with what the transport alone costs for the same bytes.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use bytes::Bytes;
use ranking_proto::Encoded;
use ranking_proto::server::ranking_service_server::{RankingService, RankingServiceServer};
use ranking_proto::v1;
use tokio::io::AsyncBufReadExt;
use tonic::{Request, Response, Status};

/// Answers GetTopN with `answer`; every other RPC is UNIMPLEMENTED.
struct Bare {
    answer: Bytes,
}

fn none<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("bare server: GetTopN only"))
}

#[tonic::async_trait]
impl RankingService for Bare {
    async fn record_event(
        &self,
        _: Request<v1::RecordEventRequest>,
    ) -> Result<Response<v1::RecordEventResponse>, Status> {
        none()
    }
    async fn record_events(
        &self,
        _: Request<v1::RecordEventsRequest>,
    ) -> Result<Response<v1::RecordEventsResponse>, Status> {
        none()
    }
    async fn get_top_n(
        &self,
        _: Request<v1::GetTopNRequest>,
    ) -> Result<Response<Encoded<v1::GetTopNResponse>>, Status> {
        Ok(Response::new(Encoded::from_encoding(self.answer.clone())))
    }
    async fn get_rank(&self, _: Request<v1::GetRankRequest>) -> Result<Response<v1::GetRankResponse>, Status> {
        none()
    }
    async fn get_ranks(&self, _: Request<v1::GetRanksRequest>) -> Result<Response<v1::GetRanksResponse>, Status> {
        none()
    }
    async fn list_movers(&self, _: Request<v1::ListMoversRequest>) -> Result<Response<v1::ListMoversResponse>, Status> {
        none()
    }
    async fn recompute(&self, _: Request<v1::RecomputeRequest>) -> Result<Response<v1::RecomputeResponse>, Status> {
        none()
    }
    type WatchTopNStream = futures_util::stream::Empty<Result<v1::WatchTopNResponse, Status>>;
    async fn watch_top_n(&self, _: Request<v1::WatchTopNRequest>) -> Result<Response<Self::WatchTopNStream>, Status> {
        none()
    }
    async fn update_catalog(
        &self,
        _: Request<v1::UpdateCatalogRequest>,
    ) -> Result<Response<v1::UpdateCatalogResponse>, Status> {
        none()
    }
    async fn explain_rank(
        &self,
        _: Request<v1::ExplainRankRequest>,
    ) -> Result<Response<v1::ExplainRankResponse>, Status> {
        none()
    }
    async fn get_access(&self, _: Request<v1::GetAccessRequest>) -> Result<Response<v1::GetAccessResponse>, Status> {
        none()
    }
    async fn put_control(&self, _: Request<v1::PutControlRequest>) -> Result<Response<v1::PutControlResponse>, Status> {
        none()
    }
    async fn delete_control(
        &self,
        _: Request<v1::DeleteControlRequest>,
    ) -> Result<Response<v1::DeleteControlResponse>, Status> {
        none()
    }
    async fn list_controls(
        &self,
        _: Request<v1::ListControlsRequest>,
    ) -> Result<Response<v1::ListControlsResponse>, Status> {
        none()
    }
    async fn preview_top_n(
        &self,
        _: Request<v1::PreviewTopNRequest>,
    ) -> Result<Response<Encoded<v1::GetTopNResponse>>, Status> {
        none()
    }
    async fn get_catalog(&self, _: Request<v1::GetCatalogRequest>) -> Result<Response<v1::GetCatalogResponse>, Status> {
        none()
    }
    async fn get_rank_history(
        &self,
        _: Request<v1::GetRankHistoryRequest>,
    ) -> Result<Response<v1::GetRankHistoryResponse>, Status> {
        none()
    }
    async fn compare_rankings(
        &self,
        _: Request<v1::CompareRankingsRequest>,
    ) -> Result<Response<v1::CompareRankingsResponse>, Status> {
        none()
    }

    async fn get_status(&self, _: Request<v1::GetStatusRequest>) -> Result<Response<v1::GetStatusResponse>, Status> {
        none()
    }
}

/// Serves the bare server on a free port of 127.0.0.1, answering GetTopN with the encoded
/// message in `answer` (a file, or `http://…`: the GetTopN(20) of the server there); prints
/// `listening <addr>` once bound.
pub async fn serve(answer: &Path) {
    let answer = match answer.to_str().filter(|a| a.starts_with("http://")) {
        Some(server) => {
            let mut client = ranking_client::connect(server.to_string()).await.expect("the server");
            let top = v1::GetTopNRequest { limit: 20, ..Default::default() };
            Bytes::from(prost::Message::encode_to_vec(&client.get_top_n(top).await.expect("GetTopN").into_inner()))
        }
        None => Bytes::from(std::fs::read(answer).expect("the answer's file")),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    println!("listening {}", listener.local_addr().expect("addr"));
    let incoming = tokio_stream_of(listener);
    tonic::transport::Server::builder()
        .add_service(RankingServiceServer::new(Bare { answer }))
        .serve_with_incoming(incoming)
        .await
        .expect("serve");
}

fn tokio_stream_of(
    listener: tokio::net::TcpListener,
) -> impl futures_util::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures_util::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| {
            let _ = stream.set_nodelay(true);
            stream
        });
        Some((accepted, listener))
    })
}

/// The bare server in a process of its own (this binary, `bare-top`), answering `answer`:
/// the child, its address.
pub async fn start(answer: &[u8]) -> (tokio::process::Child, SocketAddr) {
    let file = std::env::temp_dir().join(format!("rk-bare-top-{}.bin", std::process::id()));
    std::fs::write(&file, answer).expect("write the answer");
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("this binary"))
        .arg("bare-top")
        .arg(&file)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the bare server");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = lines.next_line().await.expect("read").expect("a line");
    let addr = line.strip_prefix("listening ").expect("listening <addr>").parse().expect("an address");
    (child, addr)
}
