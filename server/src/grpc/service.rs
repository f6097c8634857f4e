//! `ranking.v1.RankingService`: validates requests, calls the application, maps results.

use std::sync::Arc;
use std::time::Duration;

use chrono::{Days, Utc};
use ranking_proto::v1 as pb;
use ranking_proto::v1::ranking_service_server::RankingService;
use tonic::{Request, Response, Status};

use super::convert::{self, WindowKind};
use super::error::invalid;
use crate::domain::calendar::{RankingCalendar, RankingHour};
use crate::ingest::Ingest;
use crate::ports::{RankingKey, RankingStore};
use crate::recompute::Recompute;

/// Largest page of `GetTopN`.
pub const MAX_LIMIT: u32 = 1_000;
/// Page size when the request says 0.
pub const DEFAULT_LIMIT: u32 = 10;

/// The service implementation.
pub struct RankingApi {
    ingest: Arc<Ingest>,
    rankings: Arc<dyn RankingStore>,
    recompute: Arc<Recompute>,
    calendar: RankingCalendar,
    retention_days: u32,
}

impl RankingApi {
    /// Wires the handlers to the application.
    pub fn new(
        ingest: Arc<Ingest>,
        rankings: Arc<dyn RankingStore>,
        recompute: Arc<Recompute>,
        calendar: RankingCalendar,
        retention_days: u32,
    ) -> Self {
        Self { ingest, rankings, recompute, calendar, retention_days }
    }

    /// Resolves window, date and hour to a ranking key and the date string to echo.
    fn key(&self, window: i32, date: &str, hour: Option<u32>) -> Result<(RankingKey, WindowKind), Status> {
        let window = convert::window(window)?;
        let now = self.calendar.hour_of(Utc::now());
        let day = convert::date(date, now.date)?;
        let hour = hour.map(convert::hour).transpose()?;
        let key = match window {
            WindowKind::Daily => RankingKey::Daily(day),
            WindowKind::Hourly => {
                let hour = match hour {
                    Some(h) => h,
                    None if day == now.date => now.hour,
                    None => {
                        return Err(invalid(
                            "hour",
                            "required for WINDOW_HOURLY when a date other than today is given",
                        ));
                    }
                };
                RankingKey::Hourly(RankingHour { date: day, hour })
            }
        };
        Ok((key, window))
    }
}

fn key_date(key: RankingKey) -> String {
    match key {
        RankingKey::Daily(d) => d.to_string(),
        RankingKey::Hourly(h) => h.date.to_string(),
    }
}

#[tonic::async_trait]
impl RankingService for RankingApi {
    async fn record_event(
        &self,
        request: Request<pb::RecordEventRequest>,
    ) -> Result<Response<pb::RecordEventResponse>, Status> {
        let event = request.into_inner().event.ok_or_else(|| invalid("event", "is required"))?;
        let outcome = self.ingest.record_one(convert::raw_event(event)).await.map_err(|e| match e {
            crate::ingest::IngestError::Invalid { error, .. } => {
                invalid(&format!("event.{}", error.field), error.reason)
            }
            other => other.into(),
        })?;
        Ok(Response::new(pb::RecordEventResponse { outcome: convert::outcome(outcome).into() }))
    }

    async fn record_events(
        &self,
        request: Request<pb::RecordEventsRequest>,
    ) -> Result<Response<pb::RecordEventsResponse>, Status> {
        let events = request.into_inner().events;
        let outcomes = self.ingest.record_batch(events.into_iter().map(convert::raw_event).collect()).await?;
        let accepted = outcomes.iter().filter(|o| **o == crate::ports::Outcome::Accepted).count();
        Ok(Response::new(pb::RecordEventsResponse {
            accepted: accepted as u32,
            duplicates: (outcomes.len() - accepted) as u32,
            outcomes: outcomes.into_iter().map(|o| convert::outcome(o).into()).collect(),
        }))
    }

    async fn get_top_n(&self, request: Request<pb::GetTopNRequest>) -> Result<Response<pb::GetTopNResponse>, Status> {
        let req = request.into_inner();
        let (key, window) = self.key(req.window, &req.date, req.hour)?;
        let limit = match req.limit {
            0 => DEFAULT_LIMIT,
            n if n > MAX_LIMIT => return Err(invalid("limit", format!("must be at most {MAX_LIMIT}, got {n}"))),
            n => n,
        };
        let page = self.rankings.top(key, u64::from(req.offset), u64::from(limit)).await?;
        let products = page
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| convert::ranked(u64::from(req.offset) + i as u64 + 1, e.product_id, e.score, window))
            .collect();
        Ok(Response::new(pb::GetTopNResponse { products, total: page.total, date: key_date(key) }))
    }

    async fn get_rank(&self, request: Request<pb::GetRankRequest>) -> Result<Response<pb::GetRankResponse>, Status> {
        let req = request.into_inner();
        if req.product_id < 1 {
            return Err(invalid("product_id", format!("must be >= 1, got {}", req.product_id)));
        }
        let (key, window) = self.key(req.window, &req.date, req.hour)?;
        let (placement, total) = self.rankings.placement(key, req.product_id).await?;
        let placement = placement.ok_or_else(|| {
            Status::not_found(format!("product {} is not ranked on {}", req.product_id, key_date(key)))
        })?;
        Ok(Response::new(pb::GetRankResponse {
            product: Some(convert::ranked(placement.index + 1, req.product_id, placement.score, window)),
            total,
        }))
    }

    async fn recompute(
        &self,
        request: Request<pb::RecomputeRequest>,
    ) -> Result<Response<pb::RecomputeResponse>, Status> {
        let req = request.into_inner();
        let today = self.calendar.day_of(Utc::now());
        let date = convert::date(&req.date, today)?;
        if date > today {
            return Err(invalid("date", format!("{date} is in the future")));
        }
        let oldest = today.checked_sub_days(Days::new(u64::from(self.retention_days))).unwrap_or(today);
        if date < oldest {
            return Err(invalid("date", format!("{date} is older than the {}-day retention", self.retention_days)));
        }
        let report = self.recompute.run(date, Duration::from_secs(30)).await?;
        Ok(Response::new(pb::RecomputeResponse {
            date: date.to_string(),
            products: report.products,
            elapsed_ms: report.elapsed.as_millis() as u64,
        }))
    }
}
