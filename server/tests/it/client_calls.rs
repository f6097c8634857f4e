//! The client's call shapes against a real server on port 0 (batches and id lists over the
//! service's bounds split into several calls), and its retry rules against a scripted fake
//! of the service: load shedding retried, refusals final, the overall deadline kept.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ranking_client::tonic::{self, Code, Request, Response, Status};
use ranking_client::{MAX_BATCH, MAX_PRODUCT_IDS, RankingClient, RetryPolicy, v1};
use ranking_proto::Encoded;
use ranking_proto::server::ranking_service_server::{RankingService, RankingServiceServer};

use crate::helpers::{TestApp, views};

#[tokio::test]
async fn batches_and_id_lists_over_the_bounds_are_split_and_answered_whole() {
    let app = TestApp::spawn(&[]).await;
    let client = RankingClient::builder(format!("http://{}", app.addr)).connect().await.expect("client");
    let at = chrono::Utc::now() - chrono::Duration::seconds(5);
    let events: Vec<v1::Event> =
        (1..=(2 * MAX_BATCH + 5) as i64).flat_map(|p| views(&format!("e{p}"), p, 1, at)).collect();
    let mut sent = events.clone();
    sent.extend(events[..3].iter().cloned()); // three repeated ids, in the last call
    let recorded = client.record_events(sent).await.expect("recorded");
    assert_eq!(
        (recorded.outcomes.len(), recorded.accepted, recorded.duplicates),
        (events.len() + 3, events.len() as u32, 3)
    );
    assert_eq!(recorded.outcomes().next_back(), Some(v1::RecordOutcome::Duplicate));
    client.recompute("").await.expect("recomputed");

    // Ids in request order across the calls; every hundredth one never ranked, listed as missing.
    let ids: Vec<i64> =
        (1..=(2 * MAX_PRODUCT_IDS + 7) as i64).rev().map(|p| if p % 100 == 0 { 1_000_000 + p } else { p }).collect();
    let ranks = client.ranks(ids.clone()).await.expect("ranks");
    let ranked: Vec<i64> = ids.iter().copied().filter(|p| *p < 1_000_000).collect();
    let missing: Vec<i64> = ids.iter().copied().filter(|p| *p >= 1_000_000).collect();
    assert_eq!(ranks.products.iter().map(|p| p.product_id).collect::<Vec<_>>(), ranked);
    assert_eq!(ranks.missing, missing);
    assert_eq!(ranks.total, events.len() as u64);
    app.stop().await;
}

/// A fake of the service answering RecordEvent with the statuses it was given, in turn
/// (OK once they run out), and counting the calls.
#[derive(Clone, Default)]
struct Scripted {
    answers: Arc<Mutex<VecDeque<Status>>>,
    calls: Arc<Mutex<u32>>,
}

#[tonic::async_trait]
impl RankingService for Scripted {
    async fn record_event(
        &self,
        _: Request<v1::RecordEventRequest>,
    ) -> Result<Response<v1::RecordEventResponse>, Status> {
        *self.calls.lock().expect("calls") += 1;
        match self.answers.lock().expect("answers").pop_front() {
            Some(status) => Err(status),
            None => Ok(Response::new(v1::RecordEventResponse { outcome: v1::RecordOutcome::Accepted.into() })),
        }
    }
    async fn record_events(
        &self,
        _: Request<v1::RecordEventsRequest>,
    ) -> Result<Response<v1::RecordEventsResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn get_top_n(
        &self,
        _: Request<v1::GetTopNRequest>,
    ) -> Result<Response<Encoded<v1::GetTopNResponse>>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn get_rank(&self, _: Request<v1::GetRankRequest>) -> Result<Response<v1::GetRankResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn get_ranks(&self, _: Request<v1::GetRanksRequest>) -> Result<Response<v1::GetRanksResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn list_movers(&self, _: Request<v1::ListMoversRequest>) -> Result<Response<v1::ListMoversResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn recompute(&self, _: Request<v1::RecomputeRequest>) -> Result<Response<v1::RecomputeResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    type WatchTopNStream = futures_util::stream::Empty<Result<v1::WatchTopNResponse, Status>>;
    async fn watch_top_n(&self, _: Request<v1::WatchTopNRequest>) -> Result<Response<Self::WatchTopNStream>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn update_catalog(
        &self,
        _: Request<v1::UpdateCatalogRequest>,
    ) -> Result<Response<v1::UpdateCatalogResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn explain_rank(
        &self,
        _: Request<v1::ExplainRankRequest>,
    ) -> Result<Response<v1::ExplainRankResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn get_access(&self, _: Request<v1::GetAccessRequest>) -> Result<Response<v1::GetAccessResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn put_control(&self, _: Request<v1::PutControlRequest>) -> Result<Response<v1::PutControlResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn delete_control(
        &self,
        _: Request<v1::DeleteControlRequest>,
    ) -> Result<Response<v1::DeleteControlResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn list_controls(
        &self,
        _: Request<v1::ListControlsRequest>,
    ) -> Result<Response<v1::ListControlsResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn preview_top_n(
        &self,
        _: Request<v1::PreviewTopNRequest>,
    ) -> Result<Response<Encoded<v1::GetTopNResponse>>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn get_catalog(&self, _: Request<v1::GetCatalogRequest>) -> Result<Response<v1::GetCatalogResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn get_rank_history(
        &self,
        _: Request<v1::GetRankHistoryRequest>,
    ) -> Result<Response<v1::GetRankHistoryResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
    async fn compare_rankings(
        &self,
        _: Request<v1::CompareRankingsRequest>,
    ) -> Result<Response<v1::CompareRankingsResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }

    async fn get_status(&self, _: Request<v1::GetStatusRequest>) -> Result<Response<v1::GetStatusResponse>, Status> {
        Err(Status::unimplemented("fake"))
    }
}

/// The fake served on port 0, and a client of it with `retry`.
async fn scripted(answers: Vec<Status>, retry: RetryPolicy) -> (Scripted, RankingClient) {
    let fake = Scripted { answers: Arc::new(Mutex::new(answers.into())), ..Default::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tonic::transport::Server::builder()
        .add_service(RankingServiceServer::new(fake.clone()))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);
    let client = RankingClient::builder(format!("http://{addr}")).retry(retry).connect_lazy().expect("client");
    (fake, client)
}

fn policy(max_attempts: u32, deadline: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(100),
        deadline,
    }
}

#[tokio::test]
async fn shed_calls_are_retried_refusals_are_final_and_the_deadline_holds() {
    // Shed as the service sheds: RESOURCE_EXHAUSTED with a RetryInfo detail.
    let shed = || ranking_server::grpc::error::shed("server is at its concurrent-call limit; retry with backoff");
    let (fake, client) = scripted(vec![shed(), shed()], policy(10, Duration::from_secs(60))).await;
    let answer = client.record_event(ranking_client::events::view(1)).await.expect("accepted after two refusals");
    assert_eq!((answer.outcome(), *fake.calls.lock().expect("calls")), (v1::RecordOutcome::Accepted, 3));

    let too_large = Status::resource_exhausted("request message larger than 8388608 bytes (RANKING_MAX_MESSAGE_BYTES)");
    let (fake, client) = scripted(vec![too_large], policy(10, Duration::from_secs(60))).await;
    let refused = client.record_event(ranking_client::events::view(1)).await.expect_err("refused");
    assert_eq!((refused.code(), *fake.calls.lock().expect("calls")), (Code::ResourceExhausted, 1));

    // Unavailable forever, 100 attempts allowed, but no wait may end past 350 ms: each wait
    // is at least 100 ms, so at most 3 waits fit, 4 attempts.
    let down = (0..100).map(|_| Status::unavailable("database unavailable; retry later")).collect();
    let (fake, client) = scripted(down, policy(100, Duration::from_millis(350))).await;
    let gave_up = client.record_event(ranking_client::events::view(1)).await.expect_err("gave up");
    let calls = *fake.calls.lock().expect("calls");
    assert_eq!(gave_up.code(), Code::Unavailable);
    assert!((2..=4).contains(&calls), "{calls} attempts within the deadline");
}
