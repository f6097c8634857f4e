//! The merchandising controls on the wire: `Control` and its actions read into the domain's
//! (each field checked and named), and back.

use ranking_proto::v1 as pb;

use crate::app::controls::ControlFilter;
use crate::app::invalid::Invalid;
use crate::domain::catalog::Segment;
use crate::domain::controls::{Action, Control, Windows};

/// Unix microseconds of a wire instant, the field named when it is none.
pub fn instant_us(field: &'static str, t: &prost_types::Timestamp) -> Result<i64, Invalid> {
    crate::wire::instant(field, t).map(|at| at.timestamp_micros())
}

pub(super) fn timestamp(us: i64) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: us.div_euclid(1_000_000), nanos: (us.rem_euclid(1_000_000) * 1_000) as i32 }
}

/// A board's segment: empty is the whole ranking.
pub fn segment(field: &'static str, name: &str) -> Result<Option<Segment>, Invalid> {
    if name.is_empty() {
        return Ok(None);
    }
    Segment::parse(name).map(Some).map_err(|problem| Invalid::field(field, problem))
}

/// A control as a caller put it (`now_us`: an unset start), within the message it came in.
/// Its revision and update time are the store's to set.
pub fn control(c: pb::Control, now_us: i64) -> Result<Control, Invalid> {
    let mut named = Vec::with_capacity(c.windows.len());
    for (i, w) in c.windows.iter().enumerate() {
        match crate::wire::window("windows", *w) {
            Ok(Some(window)) if window.is_versioned() => named.push(window),
            _ => return Err(Invalid::element("windows", i, "must be WINDOW_DAILY, WINDOW_WEEKLY or WINDOW_TRENDING")),
        }
    }
    let windows = Windows::of(named).expect("versioned windows only");
    let active_from_us = c.active_from.as_ref().map(|t| instant_us("active_from", t)).transpose()?.unwrap_or(now_us);
    let active_until_us = c.active_until.as_ref().map(|t| instant_us("active_until", t)).transpose()?;
    let action = match c.action {
        Some(pb::control::Action::Pin(p)) => Action::Pin { product_id: p.product_id, position: p.position },
        Some(pb::control::Action::Boost(b)) => Action::Boost { product_ids: b.product_ids, points: b.points },
        Some(pb::control::Action::Exclude(e)) => Action::Exclude { product_ids: e.product_ids },
        None => return Err(Invalid::field("action", "one of pin, boost or exclude is required")),
    };
    Ok(Control {
        id: c.control_id,
        segment: segment("segment", &c.segment)?,
        windows,
        profile: Some(c.profile).filter(|p| !p.is_empty()),
        active_from_us,
        active_until_us,
        action,
        note: c.note,
        revision: 0,
        updated_at_us: 0,
    })
}

/// A stored control on the wire.
pub fn wire_control(c: &Control) -> pb::Control {
    let windows = c.windows.named().map(|w| crate::wire::wire_window(w).into()).collect();
    let action = match &c.action {
        Action::Pin { product_id, position } => {
            pb::control::Action::Pin(pb::Pin { product_id: *product_id, position: *position })
        }
        Action::Boost { product_ids, points } => {
            pb::control::Action::Boost(pb::Boost { product_ids: product_ids.clone(), points: *points })
        }
        Action::Exclude { product_ids } => {
            pb::control::Action::Exclude(pb::Exclude { product_ids: product_ids.clone() })
        }
    };
    pb::Control {
        control_id: c.id.clone(),
        segment: c.segment.map(|s| s.as_str().to_string()).unwrap_or_default(),
        windows,
        active_from: Some(timestamp(c.active_from_us)),
        active_until: c.active_until_us.map(timestamp),
        action: Some(action),
        note: c.note.clone(),
        revision: c.revision,
        updated_at: Some(timestamp(c.updated_at_us)),
        profile: c.profile.clone().unwrap_or_default(),
    }
}

/// ListControls' selection (`now_us`: an unset `at`). An empty segment lists every board's.
pub fn filter(req: &pb::ListControlsRequest, now_us: i64) -> Result<ControlFilter, Invalid> {
    let segment = if req.segment.is_empty() { None } else { Some(segment("segment", &req.segment)?) };
    let at = req.at.as_ref().map(|t| instant_us("at", t)).transpose()?;
    Ok(ControlFilter { segment, active_at_us: req.active_only.then(|| at.unwrap_or(now_us)) })
}
