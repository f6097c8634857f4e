//! GetRankHistory on the wire: the request read into a [`HistoryQuery`] (fields named as the
//! contract names them), the summary written back.

use chrono::NaiveDate;
use ranking_proto::v1 as pb;

use super::convert::{named_date, segment};
use crate::app::history::HistoryQuery;
use crate::app::invalid::Invalid;
use crate::domain::history::Summary;

/// The query of a GetRankHistory request.
pub fn query(req: pb::GetRankHistoryRequest) -> Result<HistoryQuery, Invalid> {
    Ok(HistoryQuery {
        product_id: req.product_id,
        segment: segment(&req.segment)?,
        window: super::convert::window(req.window)?,
        from: named_date("from", &req.from)?,
        to: named_date("to", &req.to)?,
        profile: req.profile,
    })
}

/// The response of a history over `from..=to`.
pub fn response(summary: Summary) -> pb::GetRankHistoryResponse {
    let date = |d: NaiveDate| d.format("%Y-%m-%d").to_string();
    pb::GetRankHistoryResponse {
        days: summary
            .days
            .iter()
            .map(|d| pb::DayRank {
                date: date(d.date),
                rank: d.rank,
                organic_rank: d.organic_rank,
                main_floor: d.main_floor,
            })
            .collect(),
        best_rank: summary.best.map_or(0, |(rank, _)| rank),
        best_rank_date: summary.best.map(|(_, d)| date(d)).unwrap_or_default(),
        days_in_top_10: summary.days_in_top_10,
        days_in_top_100: summary.days_in_top_100,
        streak_in_top_100: summary.streak_in_top_100,
        restated_days: summary.restated_days,
    }
}
