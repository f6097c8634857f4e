//! Conversions between the wire types of `ranking.v1` and the application's types. Only
//! the shape of a value is checked here (an enum value the service knows, a date written
//! `YYYY-MM-DD`, a timestamp in range); the rules live in the application.

use chrono::NaiveDate;
use prost::Message;
use ranking_proto::v1 as pb;

use super::controls;
use crate::app::controls::Preview;
use crate::app::explain::ExplainAnswer;
use crate::app::invalid::{Invalid, quote};
use crate::app::queries::{
    Direction, EntryControls, MoversAnswer, RankAnswer, RankedEntry, RanksAnswer, Selector, TopAnswer, Window,
};
use crate::app::watch::Frame;
use crate::domain::catalog::{CatalogEntry, Segment};
use crate::domain::explain::Axis;
use crate::domain::layout::Breakdown;
use crate::domain::profile::{AxisRef, RECENCY, SignalRef};
use crate::ports::Outcome;

/// The outcome on the wire.
pub fn outcome(o: Outcome) -> pb::RecordOutcome {
    match o {
        Outcome::Accepted => pb::RecordOutcome::Accepted,
        Outcome::Duplicate => pb::RecordOutcome::Duplicate,
        Outcome::Retracted => pb::RecordOutcome::Retracted,
    }
}

/// The window; `None` for UNSPECIFIED (which the read rules take as DAILY).
pub fn window(value: i32) -> Result<Option<Window>, Invalid> {
    crate::wire::window("window", value)
}

/// The mover direction; UNSPECIFIED means RISING.
pub fn direction(value: i32) -> Result<Direction, Invalid> {
    match pb::MoverDirection::try_from(value) {
        Ok(pb::MoverDirection::Unspecified | pb::MoverDirection::Rising) => Ok(Direction::Rising),
        Ok(pb::MoverDirection::Falling) => Ok(Direction::Falling),
        Err(_) => Err(Invalid::field(
            "direction",
            format!("unknown value {value}; use MOVER_DIRECTION_RISING or MOVER_DIRECTION_FALLING"),
        )),
    }
}

/// `YYYY-MM-DD` exactly (four-digit year, nothing before or after); empty is `None`.
pub fn date(value: &str) -> Result<Option<NaiveDate>, Invalid> {
    named_date("date", value)
}

/// A YYYY-MM-DD date of the field `name` (empty: none).
pub fn named_date(name: &'static str, value: &str) -> Result<Option<NaiveDate>, Invalid> {
    if value.is_empty() {
        return Ok(None);
    }
    let shape_ok = value.len() == 10
        && value.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    shape_ok
        .then(|| NaiveDate::parse_from_str(value, "%Y-%m-%d").ok())
        .flatten()
        .map(Some)
        .ok_or_else(|| Invalid::field(name, format!("{} is not a date in YYYY-MM-DD form", quote(value))))
}

/// The ranking a read names.
pub fn selector(window_value: i32, date_value: &str, hour: Option<u32>, segment: &str) -> Result<Selector, Invalid> {
    Ok(Selector { window: window(window_value)?, date: date(date_value)?, hour, segment: self::segment(segment)? })
}

/// A segment name (empty: none), checked against the segment syntax.
pub fn segment(value: &str) -> Result<Option<Segment>, Invalid> {
    if value.is_empty() {
        return Ok(None);
    }
    Segment::parse(value).map(Some).map_err(|problem| Invalid::field("segment", format!("{} {problem}", quote(value))))
}

/// A score taken apart on the wire: every axis's norm, and the original three named
/// norms when the profile's axes are the built-in ones (views, likes, recency).
fn breakdown(b: &Breakdown) -> pb::ScoreBreakdown {
    let norms = b.norms();
    let named = |i: usize| if b.built_in_axes { norms.get(i).copied().unwrap_or(0) } else { 0 };
    pb::ScoreBreakdown {
        main_floor: i64::try_from(b.main_floor).unwrap_or(i64::MAX),
        view_norm: named(0),
        like_norm: named(1),
        recency_norm: named(2),
        axis_norms: norms.to_vec(),
    }
}

/// An entry on the wire, with the controls acting on it among `controls`.
pub fn ranked(e: &RankedEntry, controls: &EntryControls) -> pb::RankedProduct {
    pb::RankedProduct {
        rank: e.rank,
        product_id: e.product_id,
        score: e.score,
        breakdown: e.breakdown.map(|b| breakdown(&b)),
        previous_rank: e.previous_rank,
        rank_change: e.rank_change,
        tied_rank: e.tied_rank,
        top_percent: e.top_percent,
        organic_rank: e.organic_rank,
        control_ids: controls.of(e.product_id).to_vec(),
    }
}

/// A page on the wire.
/// `answer` on the wire, encoded once however many callers it is sent to: the hot pages of
/// held copies are kept answers, sent to thousands of callers between two versions, each a
/// copy of the same bytes.
pub fn encoded_top(answer: &TopAnswer, profile: &str) -> ranking_proto::Encoded<pb::GetTopNResponse> {
    ranking_proto::Encoded::from_encoding(
        answer.encoding.get_or_init(|| top_response(answer, profile).encode_to_vec().into()),
    )
}

pub fn top_response(a: &TopAnswer, profile: &str) -> pb::GetTopNResponse {
    pb::GetTopNResponse {
        profile: profile.to_string(),
        products: a.entries.iter().map(|e| ranked(e, &a.controls)).collect(),
        total: a.total,
        date: a.date.to_string(),
        next_page_token: a.next_page_token.clone().unwrap_or_default(),
        version: a.version.unwrap_or_default(),
    }
}

/// One product's entry on the wire.
pub fn rank_response(a: RankAnswer, profile: &str) -> pb::GetRankResponse {
    pb::GetRankResponse {
        profile: profile.to_string(),
        product: Some(ranked(&a.entry, &a.controls)),
        total: a.total,
        above: a.above.iter().map(|e| ranked(e, &a.controls)).collect(),
        below: a.below.iter().map(|e| ranked(e, &a.controls)).collect(),
        version: a.version.unwrap_or_default(),
    }
}

fn axis(name: &str, a: &Axis) -> pb::AxisExplanation {
    pb::AxisExplanation { raw: a.raw, mean: a.mean, std: a.std, z: a.z, norm: a.norm, axis: name.into() }
}

/// A wire catalog entry (its rules are checked by the catalog service).
/// A stored catalog entry on the wire.
pub fn wire_catalog_entry(e: CatalogEntry) -> pb::CatalogEntry {
    pb::CatalogEntry { product_id: e.product_id, segments: e.segments, hidden: e.hidden, title: e.title }
}

pub fn catalog_entry(e: pb::CatalogEntry) -> CatalogEntry {
    CatalogEntry { product_id: e.product_id, segments: e.segments, hidden: e.hidden, title: e.title }
}

/// An explanation on the wire.
pub fn explain_response(a: ExplainAnswer, profile_name: &str) -> pb::ExplainRankResponse {
    let e = &a.explanation;
    let profile = &e.profile;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    // The original fields name the built-in signals and axes; a profile without one of
    // them leaves its field empty, and `signals` / `axes` hold every term and axis.
    let named_axis = |name: &str, which: AxisRef| e.axis(which).map(|a| axis(name, a));
    pb::ExplainRankResponse {
        profile: profile_name.to_string(),
        product: Some(ranked(&a.entry, &a.controls)),
        date: a.date.to_string(),
        views: count(e.metrics.views),
        likes: count(e.metrics.likes),
        orders: count(e.metrics.orders),
        order_amount: e.metrics.order_amount,
        view_points: e.points_of(SignalRef::Views),
        like_points: e.points_of(SignalRef::Likes),
        order_points: e.points_of(SignalRef::OrderAmount),
        carry_points: e.carry_points,
        main_score: e.main,
        views_axis: named_axis("views", AxisRef::Signal(SignalRef::Views)),
        likes_axis: named_axis("likes", AxisRef::Signal(SignalRef::Likes)),
        recency_axis: named_axis(RECENCY, AxisRef::Recency),
        above: a.above.as_ref().map(|e| ranked(e, &a.controls)),
        points_to_overtake: a.points_to_overtake,
        version: a.version,
        stale: a.stale,
        signals: e
            .terms
            .iter()
            .chain(&e.unscored)
            .map(|t| {
                let cap = a.capped.iter().find(|c| c.signal == t.signal);
                let over_cap = cap.map_or(0, |c| c.over_cap);
                pb::SignalExplanation {
                    signal: profile.signal_name(t.signal).into(),
                    value: t.value as f64,
                    points: t.points,
                    per_actor: cap.map_or(0, |c| c.per_actor),
                    events: cap.map_or(0, |c| count(t.value).saturating_add(c.over_cap)),
                    over_cap,
                }
            })
            .collect(),
        axes: e.axes.iter().enumerate().map(|(i, a)| axis(profile.axis_name(i), a)).collect(),
        retracted_views: a.retracted.views.max(0) as u64,
        retracted_likes: a.retracted.likes.max(0) as u64,
        retracted_orders: a.retracted.orders.max(0) as u64,
        retracted_order_amount: a.retracted.order_amount,
        organic_rank: a.entry.organic_rank,
        controls: a.acting.iter().map(controls::wire_control).collect(),
        trending_at: a.trending.as_ref().map(|t| controls::timestamp(t.at_us)),
        hours: a
            .trending
            .iter()
            .flat_map(|t| &t.hours)
            .map(|h| pb::HourExplanation {
                start: Some(controls::timestamp(h.start_us)),
                main_score: h.main,
                weight: h.weight,
                points: h.points,
            })
            .collect(),
    }
}

/// One state of a watched top on the wire.
pub fn watch_response(frame: &Frame, profile: &str) -> pb::WatchTopNResponse {
    let a = &frame.answer;
    pb::WatchTopNResponse {
        profile: profile.to_string(),
        products: a.entries.iter().map(|e| ranked(e, &a.controls)).collect(),
        total: a.total,
        date: a.date.to_string(),
        version: a.version.unwrap_or_default(),
        hour: frame.hour,
    }
}

/// Movers on the wire.
pub fn movers_response(a: MoversAnswer, profile: &str) -> pb::ListMoversResponse {
    pb::ListMoversResponse {
        profile: profile.to_string(),
        products: a.entries.iter().map(|e| ranked(e, &EntryControls::default())).collect(),
        date: a.date.to_string(),
        version: a.version.unwrap_or_default(),
    }
}

/// Several products' entries on the wire.
pub fn ranks_response(a: RanksAnswer, profile: &str) -> pb::GetRanksResponse {
    pb::GetRanksResponse {
        profile: profile.to_string(),
        products: a.entries.iter().map(|e| ranked(e, &a.controls)).collect(),
        missing: a.missing,
        total: a.total,
        version: a.version.unwrap_or_default(),
    }
}

/// CompareRankings' answer on the wire.
pub fn comparison(a: crate::app::queries::CompareAnswer) -> pb::CompareRankingsResponse {
    let c = a.comparison;
    pb::CompareRankingsResponse {
        rbo_ext: c.rbo_ext,
        rbo_min: c.rbo_min,
        weighted_tau: c.weighted_tau,
        overlap_at_10: c.overlap_at_10,
        overlap_at_100: c.overlap_at_100,
        largest_shifts: c
            .largest_shifts
            .iter()
            .map(|s| pb::ProductShift { product_id: s.product_id, rank_a: s.rank_a, rank_b: s.rank_b })
            .collect(),
        version_a: a.version_a.unwrap_or_default(),
        version_b: a.version_b.unwrap_or_default(),
    }
}

/// PreviewTopN's request (`now_us`: an unset start of a draft).
pub fn preview(req: pb::PreviewTopNRequest, now_us: i64) -> Result<Preview, Invalid> {
    let board = req.selector.unwrap_or_default();
    if !board.page_token.is_empty() {
        return Err(Invalid::field("page_token", "must be empty: a preview has no pages of its own").within("selector"));
    }
    let drafts = req
        .drafts
        .into_iter()
        .enumerate()
        .map(|(i, d)| controls::control(d, now_us).map_err(|e| e.within_element("drafts", i)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Preview {
        selector: selector(board.window, &board.date, board.hour, &board.segment).map_err(|e| e.within("selector"))?,
        offset: board.offset,
        limit: board.limit,
        at_us: req.at.as_ref().map(|t| controls::instant_us("at", t)).transpose()?,
        drafts,
        without: req.without,
        organic: req.organic,
    })
}

/// GetStatus's answer: the layout in force and each live replica's announcement.
pub fn status_response(status: crate::app::layout::LayoutStatus) -> pb::GetStatusResponse {
    pb::GetStatusResponse {
        layout_in_force: u32::from(status.in_force),
        replica: status.replica,
        replicas: status
            .replicas
            .into_iter()
            .map(|a| pb::ReplicaStatus {
                replica: a.replica,
                release: a.release,
                reads_min: u32::from(*a.reads.start()),
                reads_max: u32::from(*a.reads.end()),
                seen_at: Some(super::controls::timestamp(a.seen_at_ms.saturating_mul(1_000))),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_must_be_strict_iso() {
        assert_eq!(date("").expect("empty is today"), None);
        assert_eq!(date("2026-04-01").expect("valid").map(|d| d.to_string()).as_deref(), Some("2026-04-01"));
        for bad in [
            "2026-4-1",
            "2026-02-30",
            "20260401",
            "yesterday",
            "2026-04-01T00:00",
            "+026-11-30",
            " 026-11-30",
            "2026-11-3 ",
        ] {
            let e = date(bad).expect_err(bad);
            assert_eq!(e.path.0, vec![crate::app::invalid::PathSegment::Field("date")], "{bad}");
        }
    }

    #[test]
    fn an_answer_is_encoded_once_for_all_its_callers() {
        let answer = TopAnswer {
            controls: Default::default(),
            entries: Vec::new(),
            total: 3,
            date: "2026-12-01".parse().expect("date"),
            version: Some(7),
            next_page_token: Some("next".into()),
            encoding: Default::default(),
        };
        let first = encoded_top(&answer, "default");
        let second = encoded_top(&answer, "default");
        assert_eq!(first.bytes().as_ptr(), second.bytes().as_ptr(), "the second caller copies the kept bytes");
        assert_eq!(
            pb::GetTopNResponse::decode(first.bytes().clone()).expect("decodes"),
            top_response(&answer, "default")
        );
        // An answer built anew is encoded anew.
        let again = TopAnswer { encoding: Default::default(), ..answer.clone() };
        assert_ne!(encoded_top(&again, "default").bytes().as_ptr(), first.bytes().as_ptr());
    }

    #[test]
    fn a_huge_date_is_quoted_by_a_prefix() {
        let e = date(&"\0".repeat(1 << 20)).expect_err("not a date");
        assert!(e.reason.len() < 400, "{} bytes", e.reason.len());
    }

    #[test]
    fn unknown_enums_are_rejected_or_unspecified() {
        assert_eq!(window(0).expect("unspecified"), None);
        assert_eq!(window(2).expect("hourly"), Some(Window::Hourly));
        assert!(window(9).is_err());
    }
}
