//! `rankctl controls`: list, put, delete and preview merchandising controls.

use chrono::{DateTime, Utc};
use clap::Subcommand;
use ranking_client::{RankingClient, v1};

use crate::output::{Value, entries_json, instant, json, table};

#[derive(Subcommand)]
pub enum ControlsAction {
    /// List the stored controls (all, one board's, or those active at an instant).
    List {
        /// Only this segment's board (category:shoes…); `-` for the whole ranking's.
        #[arg(long)]
        segment: Option<String>,
        /// Only the controls active now (or at --at).
        #[arg(long)]
        active: bool,
        /// The instant of --active, RFC 3339 (2026-11-27T00:00:00Z).
        #[arg(long)]
        at: Option<DateTime<Utc>>,
    },
    /// Create or replace a control: one of --pin, --boost or --exclude.
    Put {
        /// Its id: [a-z0-9][a-z0-9_.-]{0,63}.
        control_id: String,
        /// Place a product at a position: PRODUCT@POSITION (42@1).
        #[arg(long, group = "action", value_parser = parse_pin)]
        pin: Option<(i64, u32)>,
        /// Add these points to the main score of --products (negative buries).
        #[arg(long, group = "action", allow_hyphen_values = true)]
        boost: Option<f64>,
        /// Take --products off the board.
        #[arg(long, group = "action")]
        exclude: bool,
        /// The products of --boost or --exclude, comma-separated.
        #[arg(long, value_delimiter = ',')]
        products: Vec<i64>,
        /// The board: a segment's ranking (default: the whole ranking).
        #[arg(long, default_value = "")]
        segment: String,
        /// Only these windows (daily, weekly, trending; repeat for several; default: all).
        #[arg(long = "window", value_parser = crate::window_arg)]
        windows: Vec<v1::Window>,
        /// Start, RFC 3339 (default: now).
        #[arg(long)]
        from: Option<DateTime<Utc>>,
        /// End, RFC 3339 (default: until deleted).
        #[arg(long)]
        until: Option<DateTime<Utc>>,
        /// Why, for the next merchandiser.
        #[arg(long, default_value = "")]
        note: String,
        /// Only over this revision of the stored control (what `list` showed).
        #[arg(long, default_value_t = 0)]
        expected_revision: u64,
    },
    /// Delete a control.
    Delete {
        control_id: String,
        /// Only this revision of it.
        #[arg(long, default_value_t = 0)]
        expected_revision: u64,
    },
    /// Show a board as it would be served at an instant (default now), writing nothing.
    Preview {
        /// A segment's board.
        #[arg(long, default_value = "")]
        segment: String,
        /// The weekly board instead of the daily one (`--window weekly`).
        #[arg(long, conflicts_with = "window")]
        weekly: bool,
        /// The board's window: daily (the default), weekly or trending.
        #[arg(long, value_parser = crate::window_arg)]
        window: Option<v1::Window>,
        /// The instant, RFC 3339.
        #[arg(long)]
        at: Option<DateTime<Utc>>,
        /// As if this control were deleted (repeat for several).
        #[arg(long)]
        without: Vec<String>,
        /// The organic board: no control counts.
        #[arg(long, conflicts_with = "without")]
        organic: bool,
        #[arg(long, default_value_t = 10)]
        limit: u32,
    },
}

fn parse_pin(text: &str) -> Result<(i64, u32), String> {
    let (product, position) = text.split_once('@').ok_or("PRODUCT@POSITION, e.g. 42@1")?;
    Ok((product.parse().map_err(|e| format!("product: {e}"))?, position.parse().map_err(|e| format!("position: {e}"))?))
}

fn timestamp(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: t.timestamp(), nanos: t.timestamp_subsec_nanos() as i32 }
}

/// What a control does, in a few words.
fn action(c: &v1::Control) -> (&'static str, String) {
    let ids = |ids: &[i64]| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    match &c.action {
        Some(v1::control::Action::Pin(p)) => ("pin", format!("{}@{}", p.product_id, p.position)),
        Some(v1::control::Action::Boost(b)) => ("boost", format!("{:+} {}", b.points, ids(&b.product_ids))),
        Some(v1::control::Action::Exclude(e)) => ("exclude", ids(&e.product_ids)),
        None => ("?", String::new()),
    }
}

fn control_json(c: &v1::Control) -> Value {
    let (kind, what) = action(c);
    let windows: Vec<&str> =
        c.windows.iter().map(|w| v1::Window::try_from(*w).unwrap_or_default().as_str_name()).collect();
    json!({
        "control_id": c.control_id,
        "kind": kind,
        "action": what,
        "segment": c.segment,
        "windows": windows,
        "active_from": instant(c.active_from.as_ref()),
        "active_until": instant(c.active_until.as_ref()),
        "note": c.note,
        "revision": c.revision,
        "updated_at": instant(c.updated_at.as_ref()),
    })
}

fn controls_table(controls: &[v1::Control]) {
    println!(
        "{:<24}  {:<7}  {:<20}  {:<16}  {:<20}  {:<20}  {:>6}  NOTE",
        "ID", "KIND", "ACTION", "BOARD", "FROM", "UNTIL", "REV"
    );
    for c in controls {
        let (kind, what) = action(c);
        let board = if c.segment.is_empty() { "(whole)" } else { &c.segment };
        println!(
            "{:<24}  {kind:<7}  {what:<20}  {board:<16}  {:<20}  {:<20}  {:>6}  {}",
            c.control_id,
            instant(c.active_from.as_ref()),
            instant(c.active_until.as_ref()),
            c.revision,
            c.note
        );
    }
}

pub async fn run(client: &RankingClient, action: ControlsAction, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    match action {
        ControlsAction::List { segment, active, at } => {
            let request = v1::ListControlsRequest {
                segment: segment.filter(|s| s != "-").unwrap_or_default(),
                active_only: active,
                at: at.map(timestamp),
            };
            let controls = client.list_controls(request).await?;
            if json {
                println!("{}", Value::Array(controls.iter().map(control_json).collect()));
            } else {
                controls_table(&controls);
            }
        }
        ControlsAction::Put {
            control_id,
            pin,
            boost,
            exclude,
            products,
            segment,
            windows,
            from,
            until,
            note,
            expected_revision,
        } => {
            let action = match (pin, boost, exclude) {
                (Some((product_id, position)), ..) => v1::control::Action::Pin(v1::Pin { product_id, position }),
                (_, Some(points), _) => v1::control::Action::Boost(v1::Boost { product_ids: products, points }),
                (.., true) => v1::control::Action::Exclude(v1::Exclude { product_ids: products }),
                _ => return Err("one of --pin, --boost or --exclude".into()),
            };
            let control = v1::Control {
                control_id,
                segment,
                windows: windows.iter().map(|w| *w as i32).collect(),
                active_from: from.map(timestamp),
                active_until: until.map(timestamp),
                action: Some(action),
                note,
                ..Default::default()
            };
            let stored = client.put_control(control, expected_revision).await?;
            if json {
                println!("{}", control_json(&stored));
            } else {
                println!("stored {} at revision {}", stored.control_id, stored.revision);
            }
        }
        ControlsAction::Delete { control_id, expected_revision } => {
            let deleted = client.delete_control(&control_id, expected_revision).await?;
            if json {
                println!("{}", json!({ "deleted": deleted }));
            } else {
                println!("{} {control_id}", if deleted { "deleted" } else { "no control" });
            }
        }
        ControlsAction::Preview { segment, weekly, window: named, at, without, organic, limit } => {
            let window = match (weekly, named) {
                (true, _) => v1::Window::Weekly as i32,
                (false, Some(named)) => named as i32,
                (false, None) => v1::Window::Daily as i32,
            };
            let selector = v1::GetTopNRequest { window, segment, limit, ..Default::default() };
            let request = v1::PreviewTopNRequest {
                selector: Some(selector),
                at: at.map(timestamp),
                drafts: Vec::new(),
                without,
                organic,
            };
            let r = client.preview_top_n(request).await?;
            if json {
                println!("{}", json!({ "date": r.date, "total": r.total, "products": entries_json(&r.products) }));
            } else {
                println!("{} — {} served (preview)", r.date, r.total);
                table(&r.products);
            }
        }
    }
    Ok(())
}
