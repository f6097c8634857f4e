//! PreviewTopN: a board as the controls active at an instant would serve it, equal to a
//! reference written here from the rules alone and applied to the organic board read before;
//! drafts and deletions count, nothing is written, and a bad request names its field.

use chrono::{Duration as Age, Utc};
use ranking_client::tonic::Code;
use ranking_client::v1;

use crate::helpers::{TestApp, views};
use ranking_server::test_support::eventually;

pub(crate) fn at(t: chrono::DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: t.timestamp(), nanos: t.timestamp_subsec_nanos() as i32 }
}

fn control(id: &str, action: v1::control::Action) -> v1::Control {
    v1::Control { control_id: id.into(), action: Some(action), ..Default::default() }
}

pub(crate) fn pin(id: &str, product_id: i64, position: u32) -> v1::Control {
    control(id, v1::control::Action::Pin(v1::Pin { product_id, position }))
}

pub(crate) fn boost(id: &str, product_ids: Vec<i64>, points: f64) -> v1::Control {
    control(id, v1::control::Action::Boost(v1::Boost { product_ids, points }))
}

pub(crate) fn exclude(id: &str, product_ids: Vec<i64>) -> v1::Control {
    control(id, v1::control::Action::Exclude(v1::Exclude { product_ids }))
}

/// One served entry as the reference sees it: product, score, organic rank, controls, tied
/// rank.
pub(crate) type Served = (i64, f64, u64, Vec<String>, u64);

/// An entry placed in a slot: product, score, organic rank, controls, whether a pin placed it.
type Placed = (i64, f64, u64, Vec<String>, bool);

/// The served board of `organic` (GetTopN's entries, best first) under `controls`, from the
/// rules: exclusions leave; each boosted product's main score (its score's integer part) gets
/// its boosts' points summed in id order, floored and never below 0, over the same norms, and
/// the board is sorted again (score, then product id, descending); then pins, in (position,
/// start, id) order, each product at its smallest position, take the first free place at or
/// after it or, past the end, the last free one before it.
pub(crate) fn reference(organic: &[v1::RankedProduct], controls: &[v1::Control]) -> Vec<Served> {
    let mut sorted: Vec<&v1::Control> = controls.iter().collect();
    sorted.sort_by(|a, b| a.control_id.cmp(&b.control_id));
    let action = |c: &v1::Control| c.action.clone().expect("action");
    let excluded = |p: i64| {
        sorted.iter().any(|c| matches!(action(c), v1::control::Action::Exclude(e) if e.product_ids.contains(&p)))
    };
    let mut board: Vec<(i64, f64, u64, Vec<String>)> = Vec::new();
    for (i, e) in organic.iter().enumerate() {
        if excluded(e.product_id) {
            continue;
        }
        let (mut sum, mut ids) = (0.0, Vec::new());
        for c in &sorted {
            if let v1::control::Action::Boost(b) = action(c)
                && b.product_ids.contains(&e.product_id)
            {
                sum += b.points;
                ids.push(c.control_id.clone());
            }
        }
        let score = if sum != 0.0 {
            let n = (e.score * 1e9).round() as u64;
            let floor = ((n / 1_000_000_000) as f64 + sum).floor().max(0.0) as u64;
            (floor * 1_000_000_000 + n % 1_000_000_000) as f64 / 1e9
        } else {
            e.score
        };
        board.push((e.product_id, score, i as u64 + 1, ids));
    }
    board.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    let mut pins: Vec<(u32, i64, String, i64)> = Vec::new();
    for c in &sorted {
        if let v1::control::Action::Pin(p) = action(c) {
            if excluded(p.product_id) {
                continue;
            }
            let from = c.active_from.as_ref().map_or(0, |t| t.seconds * 1_000_000_000 + i64::from(t.nanos));
            let this = (p.position, from, c.control_id.clone(), p.product_id);
            match pins.iter_mut().find(|kept| kept.3 == p.product_id) {
                Some(kept) if this < *kept => *kept = this,
                Some(_) => {}
                None => pins.push(this),
            }
        }
    }
    pins.sort();
    let n = board.iter().filter(|e| !pins.iter().any(|p| p.3 == e.0)).count() + pins.len();
    let mut slots: Vec<Option<Placed>> = vec![None; n];
    for (position, _, id, product) in &pins {
        let wanted = (*position as usize).min(n) - 1;
        let free =
            (wanted..n).find(|i| slots[*i].is_none()).or_else(|| (0..wanted).rev().find(|i| slots[*i].is_none()));
        let (score, organic_rank, mut ids) =
            board.iter().find(|e| e.0 == *product).map_or((0.0, 0, Vec::new()), |e| (e.1, e.2, e.3.clone()));
        ids.push(id.clone());
        ids.sort();
        slots[free.expect("a free place")] = Some((*product, score, organic_rank, ids, true));
    }
    let mut rest = board.into_iter().filter(|e| !pins.iter().any(|p| p.3 == e.0));
    let placed: Vec<Placed> = slots
        .into_iter()
        .map(|s| s.unwrap_or_else(|| rest.next().map(|e| (e.0, e.1, e.2, e.3, false)).expect("an entry")))
        .collect();
    // A pinned entry's tied rank is its rank; the others share the rank of the first unpinned
    // entry of their score.
    let mut served: Vec<Served> = Vec::new();
    for (i, e) in placed.iter().enumerate() {
        let first = placed.iter().position(|o| !o.4 && o.1 == e.1).filter(|_| !e.4);
        served.push((e.0, e.1, e.2, e.3.clone(), first.unwrap_or(i) as u64 + 1));
    }
    served
}

fn preview_request(
    at_time: Option<chrono::DateTime<Utc>>,
    drafts: Vec<v1::Control>,
    without: Vec<&str>,
) -> v1::PreviewTopNRequest {
    v1::PreviewTopNRequest {
        selector: Some(v1::GetTopNRequest { limit: 100, ..Default::default() }),
        at: at_time.map(at),
        drafts,
        without: without.into_iter().map(String::from).collect(),
        organic: false,
    }
}

pub(crate) fn of(top: &v1::GetTopNResponse) -> Vec<Served> {
    top.products.iter().map(|p| (p.product_id, p.score, p.organic_rank, p.control_ids.clone(), p.tied_rank)).collect()
}

#[tokio::test]
async fn a_preview_serves_the_board_as_the_rules_say_at_any_instant_and_writes_nothing() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    // Products 1..=12, product p with 2p views (11 and 12 level with 10 after rounding of the
    // main score: 2.2, 2.4 → 2).
    let events = (1..=12).flat_map(|p| views(&format!("p{p}"), p, p as usize * 2, now - Age::seconds(30))).collect();
    app.record(events).await;
    app.recompute("").await;
    let organic = app.top("", 100).await;
    assert_eq!(organic.products.len(), 12);
    assert!(organic.products.iter().all(|p| p.organic_rank == p.rank && p.control_ids.is_empty()));

    let mut later = boost("later-lift", vec![1], 50.0);
    later.active_from = Some(at(now + Age::hours(1)));
    let mut shoes = pin("shoes-only", 2, 1);
    shoes.segment = "category:shoes".into();
    let mut weekly = exclude("weekly-only", vec![12]);
    weekly.windows = vec![v1::Window::Weekly.into()];
    let stored = vec![
        pin("campaign", 3, 1),
        pin("new-arrival", 99, 2),
        pin("clash", 4, 2),
        pin("far", 5, 900),
        boost("brand-a", vec![6, 8], 1.0),
        boost("brand-b", vec![6], 0.6),
        boost("bury", vec![12], -100.0),
        exclude("recall", vec![7]),
        later.clone(),
        shoes,
        weekly,
    ];
    for c in &stored {
        app.client
            .put_control(v1::PutControlRequest { control: Some(c.clone()), expected_revision: 0 })
            .await
            .expect("put");
    }
    let listed = app.client.list_controls(v1::ListControlsRequest::default()).await.expect("list").into_inner();
    let active_now: Vec<v1::Control> = listed
        .controls
        .iter()
        .filter(|c| !["later-lift", "shoes-only", "weekly-only"].contains(&c.control_id.as_str()))
        .cloned()
        .collect();

    let preview = app.client.preview_top_n(preview_request(None, vec![], vec![])).await.expect("preview").into_inner();
    let expected = reference(&organic.products, &active_now);
    assert_eq!(of(&preview), expected);
    assert_eq!(preview.total, expected.len() as u64);
    // Read from the current version (the organic one, or the one the puts were served in).
    assert!(preview.version >= organic.version && preview.next_page_token.is_empty());
    let ranks: Vec<u64> = preview.products.iter().map(|p| p.rank).collect();
    assert_eq!(ranks, (1..=expected.len() as u64).collect::<Vec<_>>());
    // The campaign pin is first, the product without events second with no organic rank,
    // the recalled product gone, the far pin last.
    assert_eq!(
        &of(&preview)[..2].iter().map(|e| (e.0, e.2)).collect::<Vec<_>>(),
        &[(3, organic_rank(&organic, 3)), (99, 0)]
    );
    assert!(!preview.products.iter().any(|p| p.product_id == 7));
    assert_eq!(preview.products.last().map(|p| p.product_id), Some(5));

    // The organic board, whatever acts on it.
    let plain = v1::PreviewTopNRequest { organic: true, ..preview_request(Some(now + Age::hours(2)), vec![], vec![]) };
    let preview = app.client.preview_top_n(plain).await.expect("preview").into_inner();
    assert_eq!(of(&preview), of(&organic));

    // An hour later the later boost acts too.
    let then = now + Age::hours(2);
    let preview =
        app.client.preview_top_n(preview_request(Some(then), vec![], vec![])).await.expect("preview").into_inner();
    let mut active_then = active_now.clone();
    active_then.push(listed.controls.iter().find(|c| c.control_id == "later-lift").cloned().expect("stored"));
    assert_eq!(of(&preview), reference(&organic.products, &active_then));

    // A draft replaces a stored control of its id; a deletion takes one out.
    let draft = pin("campaign", 3, 5);
    let preview = app
        .client
        .preview_top_n(preview_request(None, vec![draft.clone()], vec!["bury", "recall"]))
        .await
        .expect("preview")
        .into_inner();
    let mut drafted: Vec<v1::Control> = active_now
        .iter()
        .filter(|c| !["campaign", "bury", "recall"].contains(&c.control_id.as_str()))
        .cloned()
        .collect();
    drafted.push(draft);
    assert_eq!(of(&preview), reference(&organic.products, &drafted));

    // Nothing was written: the controls are as they were, and the board is served under them
    // alone, not the drafts.
    let again = app.client.list_controls(v1::ListControlsRequest::default()).await.expect("list").into_inner();
    assert_eq!(again.controls, listed.controls);
    let served = reference(&organic.products, &active_now);
    eventually("the board served under the stored controls", async || of(&app.top("", 100).await) == served).await;
    app.stop().await;
}

fn organic_rank(top: &v1::GetTopNResponse, product_id: i64) -> u64 {
    top.products.iter().find(|p| p.product_id == product_id).map_or(0, |p| p.rank)
}

#[tokio::test]
async fn a_bad_preview_names_its_field() {
    let mut app = TestApp::spawn(&[]).await;
    let hourly = v1::GetTopNRequest { window: v1::Window::Hourly.into(), ..Default::default() };
    let token = v1::GetTopNRequest { page_token: "abc".into(), ..Default::default() };
    let cases = [
        (v1::PreviewTopNRequest { selector: Some(hourly), ..Default::default() }, "selector.window:"),
        (v1::PreviewTopNRequest { selector: Some(token), ..Default::default() }, "selector.page_token:"),
        (v1::PreviewTopNRequest { drafts: vec![pin("d", 1, 0)], ..Default::default() }, "drafts[0].pin.position:"),
        (
            v1::PreviewTopNRequest { drafts: vec![pin("ok", 1, 1), pin("D", 1, 1)], ..Default::default() },
            "drafts[1].control_id:",
        ),
        (
            v1::PreviewTopNRequest { without: vec!["fine".into(), "Not Fine".into()], ..Default::default() },
            "without[1]:",
        ),
        (v1::PreviewTopNRequest { organic: true, drafts: vec![pin("ok", 1, 1)], ..Default::default() }, "drafts:"),
        (v1::PreviewTopNRequest { organic: true, without: vec!["fine".into()], ..Default::default() }, "without:"),
    ];
    for (request, field) in cases {
        let err = app.client.preview_top_n(request).await.expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{field}");
        assert!(err.message().starts_with(field), "{field}: {}", err.message());
    }
    app.stop().await;
}
