//! The unary calls, each in one shape: its request message (or what converts into it) in,
//! its response message out, retried by the policy, split where the service's bounds
//! require.

use std::future::Future;
use tonic::Status;

use crate::retry::next_wait;
use crate::{Inner, RankingClient, v1};

/// Most events (and catalog entries) the service takes in one call.
pub const MAX_BATCH: usize = 10_000;
/// Most product ids the service takes in one GetRanks.
pub const MAX_PRODUCT_IDS: usize = 1_000;

impl RankingClient {
    /// Runs `call` until it succeeds, fails with a status that is not worth retrying
    /// ([`crate::retryable`]), the attempts run out, or the next wait would end past the policy's
    /// overall deadline.
    async fn retrying<T, F, Fut>(&self, mut call: F) -> Result<T, Status>
    where
        F: FnMut(Inner) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let deadline = tokio::time::Instant::now() + self.retry.deadline;
        let mut delays = self.retry.delays();
        loop {
            let status = match call(self.inner.clone()).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) => status,
            };
            let Some(delay) = next_wait(&mut delays, &status) else { return Err(status) };
            if tokio::time::Instant::now() + delay > deadline {
                return Err(status);
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// One attempt after another of a unary call of `request` (cloned per attempt), under
    /// [`RankingClient::retrying`].
    async fn unary<Q: Clone, T, Fut>(&self, request: Q, call: impl Fn(Inner, Q) -> Fut) -> Result<T, Status>
    where
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        self.retrying(|inner| call(inner, request.clone())).await
    }

    /// Records one event; ACCEPTED or DUPLICATE (`response.outcome()`) once it is durably
    /// stored.
    pub async fn record_event(
        &self,
        request: impl Into<v1::RecordEventRequest>,
    ) -> Result<v1::RecordEventResponse, Status> {
        self.unary(request.into(), |mut c, r| async move { c.record_event(r).await }).await
    }

    /// Records events: each call of up to [`MAX_BATCH`] events lands whole or not at all; a
    /// longer list is sent as several calls in order (outcomes in the order given, counts
    /// summed), and an error leaves the calls before it recorded (send the same events again:
    /// their ids make the repeat land once).
    pub async fn record_events(
        &self,
        request: impl Into<v1::RecordEventsRequest>,
    ) -> Result<v1::RecordEventsResponse, Status> {
        let events = request.into().events;
        let mut all = v1::RecordEventsResponse::default();
        for batch in chunks(events, MAX_BATCH) {
            let request = v1::RecordEventsRequest { events: batch };
            let answer = self.unary(request, |mut c, r| async move { c.record_events(r).await }).await?;
            all.outcomes.extend(answer.outcomes);
            all.accepted += answer.accepted;
            all.duplicates += answer.duplicates;
        }
        Ok(all)
    }

    /// A page of a ranking.
    pub async fn top_n(&self, request: impl Into<v1::GetTopNRequest>) -> Result<v1::GetTopNResponse, Status> {
        self.unary(request.into(), |mut c, r| async move { c.get_top_n(r).await }).await
    }

    /// One product's entry (and, with `neighbors` 1-50, the entries around it, from one
    /// version); NOT_FOUND when it is not ranked.
    pub async fn rank(&self, request: impl Into<v1::GetRankRequest>) -> Result<v1::GetRankResponse, Status> {
        self.unary(request.into(), |mut c, r| async move { c.get_rank(r).await }).await
    }

    /// Several products' entries, from one version: ranked ones in request order, the
    /// others in `missing`. A listing page's badges in one call; more than
    /// [`MAX_PRODUCT_IDS`] ids are read in several calls, read again (up to the retry
    /// policy's attempts) until they all come from one version, else ABORTED.
    pub async fn ranks(&self, request: impl Into<v1::GetRanksRequest>) -> Result<v1::GetRanksResponse, Status> {
        let request = request.into();
        let read = |ids: Vec<i64>| {
            let request = v1::GetRanksRequest { product_ids: ids, ..request.clone() };
            self.unary(request, |mut c, r| async move { c.get_ranks(r).await })
        };
        if request.product_ids.len() <= MAX_PRODUCT_IDS {
            return read(request.product_ids.clone()).await;
        }
        for _ in 0..self.retry.max_attempts.max(1) {
            let mut all = v1::GetRanksResponse::default();
            let mut versions = Vec::new();
            for ids in chunks(request.product_ids.clone(), MAX_PRODUCT_IDS) {
                let answer = read(ids).await?;
                versions.push(answer.version);
                all.products.extend(answer.products);
                all.missing.extend(answer.missing);
                (all.total, all.version) = (answer.total, answer.version);
            }
            if versions.windows(2).all(|w| w[0] == w[1]) {
                return Ok(all);
            }
        }
        Err(Status::aborted("the ranking moved on while its products were read in several calls; retry"))
    }

    /// The products that moved most since the previous period (RISING by default; set
    /// `within_top` to ignore moves far down the ranking).
    pub async fn movers(&self, request: impl Into<v1::ListMoversRequest>) -> Result<v1::ListMoversResponse, Status> {
        self.unary(request.into(), |mut c, r| async move { c.list_movers(r).await }).await
    }

    /// Why a product holds its place in a daily ranking (a product id alone: today's whole
    /// ranking; set `date` and `segment` in the request for another day or a segment):
    /// counts, weighted contributions, carry-over and the tie-break axes.
    pub async fn explain_rank(
        &self,
        request: impl Into<v1::ExplainRankRequest>,
    ) -> Result<v1::ExplainRankResponse, Status> {
        self.unary(request.into(), |mut c, r| async move { c.explain_rank(r).await }).await
    }

    /// Sets products' segments and hidden flags (a write: `RANKING_WRITE_TOKEN`). Hidden
    /// products leave today's rankings when the call returns. More than [`MAX_BATCH`]
    /// entries are sent as several calls (`updated` summed).
    pub async fn update_catalog(
        &self,
        request: impl Into<v1::UpdateCatalogRequest>,
    ) -> Result<v1::UpdateCatalogResponse, Status> {
        let mut all = v1::UpdateCatalogResponse::default();
        for products in chunks(request.into().products, MAX_BATCH) {
            let request = v1::UpdateCatalogRequest { products };
            let answer = self.unary(request, |mut c, r| async move { c.update_catalog(r).await }).await?;
            all.updated += answer.updated;
        }
        Ok(all)
    }

    /// The catalog entries (segments, hidden flag, title) of up to 1,000 products, and the
    /// products without one.
    pub async fn catalog(&self, product_ids: Vec<i64>) -> Result<v1::GetCatalogResponse, Status> {
        let request = v1::GetCatalogRequest { product_ids };
        self.unary(request, |mut c, r| async move { c.get_catalog(r).await }).await
    }

    /// Creates or replaces a merchandising control (admin token); `expected_revision` 0 puts
    /// whatever is stored, another value only over that revision (FAILED_PRECONDITION
    /// otherwise). Today's boards are served with it within a second.
    pub async fn put_control(&self, control: v1::Control, expected_revision: u64) -> Result<v1::Control, Status> {
        let request = v1::PutControlRequest { control: Some(control), expected_revision };
        let answer = self.unary(request, |mut c, r| async move { c.put_control(r).await }).await?;
        answer.control.ok_or_else(|| Status::internal("PutControl answered without the control"))
    }

    /// Deletes a merchandising control (admin token); whether there was one.
    pub async fn delete_control(&self, control_id: impl Into<String>, expected_revision: u64) -> Result<bool, Status> {
        let request = v1::DeleteControlRequest { control_id: control_id.into(), expected_revision };
        Ok(self.unary(request, |mut c, r| async move { c.delete_control(r).await }).await?.deleted)
    }

    /// The stored merchandising controls the request selects, by id.
    pub async fn list_controls(&self, request: v1::ListControlsRequest) -> Result<Vec<v1::Control>, Status> {
        Ok(self.unary(request, |mut c, r| async move { c.list_controls(r).await }).await?.controls)
    }

    /// A board as it would be served at an instant, with draft controls put and others
    /// deleted; writes nothing.
    pub async fn preview_top_n(&self, request: v1::PreviewTopNRequest) -> Result<v1::GetTopNResponse, Status> {
        self.unary(request, |mut c, r| async move { c.preview_top_n(r).await }).await
    }

    /// A product's rank history on a board (read token): each ended day of the range, its
    /// best rank, days in the top 10 and 100, streak and restated days.
    pub async fn rank_history(&self, request: v1::GetRankHistoryRequest) -> Result<v1::GetRankHistoryResponse, Status> {
        self.unary(request, |mut c, r| async move { c.get_rank_history(r).await }).await
    }

    /// Two boards compared (read token): rank-biased overlap, weighted tau, overlaps, shifts.
    pub async fn compare_rankings(
        &self,
        request: v1::CompareRankingsRequest,
    ) -> Result<v1::CompareRankingsResponse, Status> {
        self.unary(request, |mut c, r| async move { c.compare_rankings(r).await }).await
    }

    /// What the answering replica knows of the running replicas (admin token): the ranking
    /// store's layout in force and each live replica's announcement.
    pub async fn status(&self) -> Result<v1::GetStatusResponse, Status> {
        self.unary(v1::GetStatusRequest {}, |mut c, r| async move { c.get_status(r).await }).await
    }

    /// Recomputes a day (a `YYYY-MM-DD` date converts into the request; empty for today).
    pub async fn recompute(&self, request: impl Into<v1::RecomputeRequest>) -> Result<v1::RecomputeResponse, Status> {
        self.unary(request.into(), |mut c, r| async move { c.recompute(r).await }).await
    }
}

/// `items` in runs of at most `size` (one empty run for an empty list: the call is still made).
fn chunks<T: Clone>(items: Vec<T>, size: usize) -> Vec<Vec<T>> {
    if items.len() <= size {
        return vec![items];
    }
    items.chunks(size).map(<[T]>::to_vec).collect()
}
