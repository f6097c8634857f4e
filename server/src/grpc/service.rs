//! `ranking.v1.RankingService`: converts each request, calls the application service for
//! it, converts the answer. No rule is decided here.

use std::sync::Arc;

use prost::Message;
use ranking_proto::Encoded;
use ranking_proto::server::ranking_service_server::RankingService;
use ranking_proto::v1 as pb;
use tonic::{Request, Response, Status};

use super::auth::{self, AccessPolicy};
use super::rpcs::Class;
use super::{controls, convert, history};
use crate::app::catalog::Catalog;
use crate::app::controls::Controls;
use crate::app::explain::ExplainQuery;
use crate::app::ingest::Ingest;
use crate::app::invalid::Invalid;
use crate::app::profiles::{Lane, Profiles};
use crate::app::queries::{MoversQuery, Queries, RankQuery, RanksQuery, TopQuery};
use crate::app::watch::WatchQuery;
use crate::ports::Outcome;
use crate::wire;

/// The service implementation: the application's services it delegates to.
pub struct RankingApi {
    pub ingest: Arc<Ingest>,
    /// Every scoring profile's reads, and which one serves a read.
    pub profiles: Arc<Profiles>,
    pub catalog: Arc<Catalog>,
    pub controls: Arc<Controls>,
    /// Which token opens which calls, for GetAccess.
    pub access: Arc<AccessPolicy>,
    /// The agreement on the ranking store's layout, for GetStatus.
    pub layout: Arc<crate::app::layout::LayoutGate>,
}

#[tonic::async_trait]
impl RankingService for RankingApi {
    async fn record_event(
        &self,
        request: Request<pb::RecordEventRequest>,
    ) -> Result<Response<pb::RecordEventResponse>, Status> {
        let event = request.into_inner().event.ok_or_else(|| Invalid::field("event", "is required"))?;
        let raw = wire::raw_event(event).map_err(|e| e.within("event"))?;
        let outcome = self.ingest.record_one(raw).await?;
        Ok(Response::new(pb::RecordEventResponse { outcome: convert::outcome(outcome).into() }))
    }

    async fn record_events(
        &self,
        request: Request<pb::RecordEventsRequest>,
    ) -> Result<Response<pb::RecordEventsResponse>, Status> {
        let raw = wire::raw_events(request.into_inner().events)?;
        let outcomes = self.ingest.record_batch(raw).await?;
        let count = |outcome: Outcome| outcomes.iter().filter(|o| **o == outcome).count() as u32;
        Ok(Response::new(pb::RecordEventsResponse {
            accepted: count(Outcome::Accepted),
            duplicates: count(Outcome::Duplicate),
            retracted: count(Outcome::Retracted),
            outcomes: outcomes.into_iter().map(|o| convert::outcome(o).into()).collect(),
        }))
    }

    async fn get_top_n(
        &self,
        request: Request<pb::GetTopNRequest>,
    ) -> Result<Response<Encoded<pb::GetTopNResponse>>, Status> {
        let req = request.into_inner();
        let lane = self.profiles.route(&req.profile, &req.actor_id)?;
        let query = TopQuery {
            selector: convert::selector(req.window, &req.date, req.hour, &req.segment)?,
            offset: req.offset,
            limit: req.limit,
            page_token: Some(req.page_token).filter(|t| !t.is_empty()),
        };
        let lane = self.profiles.holding(lane, &query.selector);
        Ok(Response::new(convert::encoded_top(&*lane.queries.top(query).await?, lane.name())))
    }

    async fn get_rank(&self, request: Request<pb::GetRankRequest>) -> Result<Response<pb::GetRankResponse>, Status> {
        let req = request.into_inner();
        let lane = self.profiles.route(&req.profile, &req.actor_id)?;
        let query = RankQuery {
            selector: convert::selector(req.window, &req.date, req.hour, &req.segment)?,
            product_id: req.product_id,
            neighbors: req.neighbors,
        };
        let lane = self.profiles.holding(lane, &query.selector);
        Ok(Response::new(convert::rank_response(lane.queries.rank(query).await?, lane.name())))
    }

    async fn get_ranks(&self, request: Request<pb::GetRanksRequest>) -> Result<Response<pb::GetRanksResponse>, Status> {
        let req = request.into_inner();
        let lane = self.profiles.route(&req.profile, &req.actor_id)?;
        let query = RanksQuery {
            selector: convert::selector(req.window, &req.date, req.hour, &req.segment)?,
            product_ids: req.product_ids,
        };
        let lane = self.profiles.holding(lane, &query.selector);
        Ok(Response::new(convert::ranks_response(lane.queries.ranks(query).await?, lane.name())))
    }

    async fn list_movers(
        &self,
        request: Request<pb::ListMoversRequest>,
    ) -> Result<Response<pb::ListMoversResponse>, Status> {
        let req = request.into_inner();
        let lane = self.profiles.route(&req.profile, &req.actor_id)?;
        let query = MoversQuery {
            selector: convert::selector(req.window, &req.date, req.hour, &req.segment)?,
            direction: convert::direction(req.direction)?,
            limit: req.limit,
            within_top: req.within_top,
        };
        let lane = self.profiles.holding(lane, &query.selector);
        Ok(Response::new(convert::movers_response(lane.queries.movers(query).await?, lane.name())))
    }

    async fn get_access(
        &self,
        request: Request<pb::GetAccessRequest>,
    ) -> Result<Response<pb::GetAccessResponse>, Status> {
        // A malformed authorization header is no token: it opens what is open.
        let token = request.metadata().get("authorization").and_then(|v| auth::bearer(v.as_bytes()).ok());
        let opens = |class| self.access.opens(class, token);
        Ok(Response::new(pb::GetAccessResponse {
            read: opens(Class::Read),
            write: opens(Class::Write),
            catalog: opens(Class::Catalog),
            admin: opens(Class::Admin),
        }))
    }

    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        Ok(Response::new(convert::status_response(self.layout.status())))
    }

    async fn explain_rank(
        &self,
        request: Request<pb::ExplainRankRequest>,
    ) -> Result<Response<pb::ExplainRankResponse>, Status> {
        let req = request.into_inner();
        let lane = self.profiles.route(&req.profile, "")?;
        let query = ExplainQuery {
            product_id: req.product_id,
            date: convert::date(&req.date)?,
            segment: convert::segment(&req.segment)?,
            window: convert::window(req.window)?,
        };
        Ok(Response::new(convert::explain_response(lane.explainer.explain(query).await?, lane.name())))
    }

    type WatchTopNStream = futures_util::stream::BoxStream<'static, Result<pb::WatchTopNResponse, Status>>;

    async fn watch_top_n(
        &self,
        request: Request<pb::WatchTopNRequest>,
    ) -> Result<Response<Self::WatchTopNStream>, Status> {
        let req = request.into_inner();
        let lane = self.profiles.route(&req.profile, &req.actor_id)?;
        let selector = convert::selector(req.window, &req.date, req.hour, &req.segment)?;
        let lane = self.profiles.holding(lane, &selector);
        let query = WatchQuery { selector, limit: req.limit };
        let watcher = lane.watch.watch(query)?;
        let profile: Arc<str> = lane.name().into();
        let frames = futures_util::stream::unfold((watcher, profile), |(mut watcher, profile)| async move {
            let next = watcher.next().await?;
            Some((next.map(|f| convert::watch_response(&f, &profile)).map_err(Status::from), (watcher, profile)))
        });
        Ok(Response::new(Box::pin(frames)))
    }

    async fn update_catalog(
        &self,
        request: Request<pb::UpdateCatalogRequest>,
    ) -> Result<Response<pb::UpdateCatalogResponse>, Status> {
        let entries = request.into_inner().products.into_iter().map(convert::catalog_entry).collect();
        let updated = self.catalog.update(entries).await?;
        Ok(Response::new(pb::UpdateCatalogResponse { updated }))
    }

    async fn recompute(
        &self,
        request: Request<pb::RecomputeRequest>,
    ) -> Result<Response<pb::RecomputeResponse>, Status> {
        let date = convert::date(&request.into_inner().date)?;
        // One read of the rows publishes every profile's boards; the answer is the service
        // profile's.
        let report = self.profiles.default_lane().recompute.requested(date).await?;
        Ok(Response::new(pb::RecomputeResponse {
            date: report.date.to_string(),
            products: report.products,
            elapsed_ms: report.elapsed.as_millis() as u64,
            version: report.version,
        }))
    }

    async fn put_control(
        &self,
        request: Request<pb::PutControlRequest>,
    ) -> Result<Response<pb::PutControlResponse>, Status> {
        let req = request.into_inner();
        let control = req.control.ok_or_else(|| Invalid::field("control", "is required"))?;
        let control = controls::control(control, self.controls.now_us()).map_err(|e| e.within("control"))?;
        let stored = self.controls.put(control, req.expected_revision).await?;
        Ok(Response::new(pb::PutControlResponse { control: Some(controls::wire_control(&stored)) }))
    }

    async fn delete_control(
        &self,
        request: Request<pb::DeleteControlRequest>,
    ) -> Result<Response<pb::DeleteControlResponse>, Status> {
        let req = request.into_inner();
        let deleted = self.controls.delete(&req.control_id, req.expected_revision).await?;
        Ok(Response::new(pb::DeleteControlResponse { deleted }))
    }

    async fn list_controls(
        &self,
        request: Request<pb::ListControlsRequest>,
    ) -> Result<Response<pb::ListControlsResponse>, Status> {
        let filter = controls::filter(request.get_ref(), self.controls.now_us())?;
        let listed = self.controls.list(filter).await?;
        Ok(Response::new(pb::ListControlsResponse { controls: listed.iter().map(controls::wire_control).collect() }))
    }

    async fn preview_top_n(
        &self,
        request: Request<pb::PreviewTopNRequest>,
    ) -> Result<Response<Encoded<pb::GetTopNResponse>>, Status> {
        let req = request.into_inner();
        let lane = match &req.selector {
            Some(selector) => self.profiles.route(&selector.profile, &selector.actor_id)?,
            None => self.profiles.default_lane(),
        };
        let preview = convert::preview(req, self.controls.now_us())?;
        let answer = self.controls.preview(&lane.queries, preview).await?;
        Ok(Response::new(Encoded::from_encoding(convert::top_response(&answer, lane.name()).encode_to_vec().into())))
    }

    async fn get_catalog(
        &self,
        request: Request<pb::GetCatalogRequest>,
    ) -> Result<Response<pb::GetCatalogResponse>, Status> {
        let (entries, missing) = self.catalog.entries(&request.into_inner().product_ids).await?;
        Ok(Response::new(pb::GetCatalogResponse {
            products: entries.into_iter().map(convert::wire_catalog_entry).collect(),
            missing,
        }))
    }

    async fn compare_rankings(
        &self,
        request: Request<pb::CompareRankingsRequest>,
    ) -> Result<Response<pb::CompareRankingsResponse>, Status> {
        let req = request.into_inner();
        let query = |board: Option<pb::GetTopNRequest>, name: &'static str| -> Result<(&Lane, TopQuery), Status> {
            let t = board.unwrap_or_default();
            let lane = self.profiles.route(&t.profile, &t.actor_id)?;
            let query = TopQuery {
                selector: convert::selector(t.window, &t.date, t.hour, &t.segment).map_err(|e| e.within(name))?,
                offset: t.offset,
                limit: t.limit,
                page_token: Some(t.page_token).filter(|t| !t.is_empty()),
            };
            Ok((lane, query))
        };
        let (a, b) = (query(req.a, "a")?, query(req.b, "b")?);
        let answer = Queries::compare((&a.0.queries, a.1), (&b.0.queries, b.1), req.persistence).await?;
        Ok(Response::new(convert::comparison(answer)))
    }

    async fn get_rank_history(
        &self,
        request: Request<pb::GetRankHistoryRequest>,
    ) -> Result<Response<pb::GetRankHistoryResponse>, Status> {
        let query = history::query(request.into_inner())?;
        let lane = self.profiles.route(&query.profile, "")?;
        let (_, _, summary) = lane.history.rank_history(query).await?;
        Ok(Response::new(history::response(summary)))
    }
}
