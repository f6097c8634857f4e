//! The merchandising controls as stored: PutControl, DeleteControl and ListControls, with
//! revisions that only grow, conflicts refused, every field checked and named, the bounds
//! refused by name, and the admin token to change them.

use chrono::{Duration as Age, Utc};
use ranking_client::tonic::{Code, Request, Status};
use ranking_client::v1;

use crate::helpers::TestApp;

fn at(t: chrono::DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds: t.timestamp(), nanos: t.timestamp_subsec_nanos() as i32 }
}

fn pin(id: &str, product_id: i64, position: u32) -> v1::Control {
    v1::Control {
        control_id: id.into(),
        action: Some(v1::control::Action::Pin(v1::Pin { product_id, position })),
        ..Default::default()
    }
}

fn boost(id: &str, product_ids: Vec<i64>, points: f64) -> v1::Control {
    v1::Control {
        control_id: id.into(),
        action: Some(v1::control::Action::Boost(v1::Boost { product_ids, points })),
        ..Default::default()
    }
}

async fn put(app: &mut TestApp, control: v1::Control, expected_revision: u64) -> Result<v1::Control, Status> {
    let request = v1::PutControlRequest { control: Some(control), expected_revision };
    Ok(app.client.put_control(request).await?.into_inner().control.expect("control"))
}

async fn delete(app: &mut TestApp, id: &str, expected_revision: u64) -> Result<bool, Status> {
    let request = v1::DeleteControlRequest { control_id: id.into(), expected_revision };
    Ok(app.client.delete_control(request).await?.into_inner().deleted)
}

async fn list(app: &mut TestApp, request: v1::ListControlsRequest) -> Vec<String> {
    let listed = app.client.list_controls(request).await.expect("ListControls").into_inner();
    listed.controls.into_iter().map(|c| c.control_id).collect()
}

#[tokio::test]
async fn controls_are_stored_with_revisions_that_only_grow_and_conflicts_are_refused() {
    let mut app = TestApp::spawn(&[]).await;
    let before = Utc::now();
    let first = put(&mut app, pin("campaign", 7, 1), 0).await.expect("put");
    assert!(first.revision > 0);
    let from = first.active_from.expect("an unset start is now");
    assert!(from.seconds >= before.timestamp() - 1 && first.updated_at.is_some());
    assert_eq!((first.active_until, first.action.clone()), (None, pin("campaign", 7, 1).action));

    // Replaced with the revision read: the next revision.
    let second = put(&mut app, pin("campaign", 7, 2), first.revision).await.expect("replace");
    assert!(second.revision > first.revision);
    // A merchandiser still holding the first revision is refused, and nothing changes.
    let stale = put(&mut app, pin("campaign", 7, 9), first.revision).await.expect_err("stale");
    assert_eq!(stale.code(), Code::FailedPrecondition, "{stale:?}");
    assert!(stale.message().contains(&second.revision.to_string()), "{}", stale.message());
    let other = put(&mut app, boost("brand-week", vec![1, 2], 2.5), 0).await.expect("put");
    assert!(other.revision > second.revision, "one revision for every control");
    let listed = app.client.list_controls(v1::ListControlsRequest::default()).await.expect("list").into_inner();
    let kept = listed.controls.iter().find(|c| c.control_id == "campaign").expect("listed");
    assert_eq!((kept.revision, kept.action.clone()), (second.revision, pin("campaign", 7, 2).action));
    assert_eq!(listed.controls.iter().map(|c| c.control_id.as_str()).collect::<Vec<_>>(), ["brand-week", "campaign"]);

    // A put expecting a revision of a control that is not stored is a conflict too.
    assert_eq!(put(&mut app, pin("new", 1, 1), 5).await.expect_err("not stored").code(), Code::FailedPrecondition);
    assert_eq!(delete(&mut app, "campaign", first.revision).await.expect_err("stale").code(), Code::FailedPrecondition);
    assert!(delete(&mut app, "campaign", second.revision).await.expect("delete"));
    assert!(!delete(&mut app, "campaign", 0).await.expect("nothing to delete"));
    assert_eq!(delete(&mut app, "campaign", second.revision).await.expect_err("gone").code(), Code::FailedPrecondition);
    // Recreated after its delete: a revision past every earlier one.
    let again = put(&mut app, pin("campaign", 7, 1), 0).await.expect("recreate");
    assert!(again.revision > other.revision);
    app.stop().await;
}

#[tokio::test]
async fn list_controls_selects_a_board_and_an_instant() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    let mut shoes = boost("shoes-now", vec![3], -4.0);
    shoes.segment = "category:shoes".into();
    put(&mut app, shoes, 0).await.expect("put");
    let mut tomorrow = pin("tomorrow", 5, 3);
    tomorrow.active_from = Some(at(now + Age::days(1)));
    tomorrow.active_until = Some(at(now + Age::days(2)));
    put(&mut app, tomorrow, 0).await.expect("put");
    let mut ended = pin("ended", 5, 4);
    ended.active_from = Some(at(now - Age::days(2)));
    ended.active_until = Some(at(now - Age::days(1)));
    put(&mut app, ended, 0).await.expect("a schedule in the past is stored");

    let all = list(&mut app, v1::ListControlsRequest::default()).await;
    assert_eq!(all, ["ended", "shoes-now", "tomorrow"]);
    let now_active = list(&mut app, v1::ListControlsRequest { active_only: true, ..Default::default() }).await;
    assert_eq!(now_active, ["shoes-now"]);
    let later = v1::ListControlsRequest { active_only: true, at: Some(at(now + Age::hours(36))), ..Default::default() };
    assert_eq!(list(&mut app, later).await, ["shoes-now", "tomorrow"]);
    let board = v1::ListControlsRequest { segment: "category:shoes".into(), ..Default::default() };
    assert_eq!(list(&mut app, board).await, ["shoes-now"]);
    let bad = v1::ListControlsRequest { segment: "Shoes!".into(), ..Default::default() };
    let err = app.client.list_controls(bad).await.expect_err("bad segment");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("segment:"), "{}", err.message());
    app.stop().await;
}

#[tokio::test]
async fn a_refused_control_names_its_field_and_stores_nothing() {
    let mut app = TestApp::spawn(&[]).await;
    let now = Utc::now();
    let mut backwards = pin("p", 1, 1);
    backwards.active_from = Some(at(now));
    backwards.active_until = Some(at(now - Age::seconds(1)));
    let mut hourly = pin("p", 1, 1);
    hourly.windows = vec![v1::Window::Hourly.into()];
    let mut long_note = pin("p", 1, 1);
    long_note.note = "n".repeat(257);
    let mut bad_segment = pin("p", 1, 1);
    bad_segment.segment = "Shoes".into();
    let cases = [
        (pin("Bad Id", 1, 1), "control.control_id:"),
        (pin("p", 1, 0), "control.pin.position:"),
        (pin("p", 1, 1_001), "control.pin.position:"),
        (pin("p", -1, 1), "control.pin.product_id:"),
        (boost("p", vec![], 1.0), "control.boost.product_ids:"),
        (boost("p", vec![1], 0.0), "control.boost.points:"),
        (boost("p", vec![1], 2e6), "control.boost.points:"),
        (v1::Control { control_id: "p".into(), ..Default::default() }, "control.action:"),
        (backwards, "control.active_until:"),
        (hourly, "control.windows[0]:"),
        (long_note, "control.note:"),
        (bad_segment, "control.segment:"),
    ];
    for (control, field) in cases {
        let err = put(&mut app, control.clone(), 0).await.expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{control:?}");
        assert!(err.message().starts_with(field), "{field}: {}", err.message());
    }
    let missing = app.client.put_control(v1::PutControlRequest::default()).await.expect_err("no control");
    assert!(missing.message().starts_with("control:"), "{}", missing.message());
    let err = delete(&mut app, "", 0).await.expect_err("no id");
    assert!(err.message().starts_with("control_id:"), "{}", err.message());
    assert!(list(&mut app, v1::ListControlsRequest::default()).await.is_empty(), "nothing stored");
    app.stop().await;
}

#[tokio::test]
async fn a_board_takes_100_pins_and_1000_controls_at_once_and_the_bound_is_named() {
    let mut app = TestApp::spawn(&[]).await;
    for i in 0..100 {
        put(&mut app, pin(&format!("pin-{i}"), i + 1, 1), 0).await.expect("within the bound");
    }
    let err = put(&mut app, pin("pin-100", 500, 1), 0).await.expect_err("the 101st pin");
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(err.message().contains("100 active pins per board"), "{}", err.message());
    // The same pin on another board, or after one of the 100 ends, is stored.
    let mut elsewhere = pin("pin-100", 500, 1);
    elsewhere.segment = "brand:acme".into();
    put(&mut app, elsewhere, 0).await.expect("another board");
    let mut later = pin("pin-101", 501, 1);
    later.active_from = Some(at(Utc::now() + Age::days(1)));
    let mut ending = pin("pin-0", 1, 1);
    ending.active_until = Some(at(Utc::now() + Age::hours(1)));
    put(&mut app, ending, 0).await.expect("pin-0 now ends within the hour");
    put(&mut app, later, 0).await.expect("a pin that starts after pin-0 ended");

    for i in 0..899 {
        put(&mut app, boost(&format!("boost-{i}"), vec![i + 1], 1.0), 0).await.expect("within the bound");
    }
    // 100 pins and 899 boosts now (pin-101 takes pin-0's place later): 999 at once; one more
    // makes 1,000.
    put(&mut app, boost("boost-899", vec![1], 1.0), 0).await.expect("the 1,000th");
    let err = put(&mut app, boost("boost-900", vec![1], 1.0), 0).await.expect_err("the 1,001st");
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(err.message().contains("1000 active controls per board"), "{}", err.message());
    let mut weekly = boost("boost-900", vec![1], 1.0);
    weekly.windows = vec![v1::Window::Weekly.into()];
    let err = put(&mut app, weekly, 0).await.expect_err("all windows count on the weekly board too");
    assert_eq!(err.code(), Code::ResourceExhausted);
    app.stop().await;
}

#[tokio::test]
async fn changing_controls_needs_the_admin_token_and_reading_them_the_read_token() {
    let mut app = TestApp::spawn(&["--read-token=r-secret", "--write-token=w-secret", "--admin-token=a-secret"]).await;
    let with = |token: &str, control: v1::Control| {
        let mut request = Request::new(v1::PutControlRequest { control: Some(control), expected_revision: 0 });
        request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().expect("ascii"));
        request
    };
    for token in ["r-secret", "w-secret"] {
        let err = app.client.put_control(with(token, pin("p", 1, 1))).await.expect_err("admin only");
        assert_eq!(err.code(), Code::Unauthenticated, "{token}");
    }
    app.client.put_control(with("a-secret", pin("p", 1, 1))).await.expect("admin");
    let mut request = Request::new(v1::ListControlsRequest::default());
    assert_eq!(
        app.client.list_controls(Request::new(v1::ListControlsRequest::default())).await.expect_err("token").code(),
        Code::Unauthenticated
    );
    request.metadata_mut().insert("authorization", "Bearer r-secret".parse().expect("ascii"));
    let listed = app.client.list_controls(request).await.expect("read token").into_inner();
    assert_eq!(listed.controls.len(), 1);
    app.stop().await;
}

/// A board larger than a replica holds (`RANKING_SNAPSHOT_MAX_ENTRIES` below its size) takes a
/// pin and a withdrawal like any other: the control pass and the withdrawal read the board
/// whole from the store for their work, and the pass's look at which boards are due reads no
/// entry at all.
#[tokio::test]
async fn a_board_larger_than_a_replica_holds_takes_a_pin_and_a_withdrawal() {
    let db = crate::helpers::TestDb::create().await;
    let mut app = TestApp::spawn_on(crate::helpers::settings(&db.url, &["--snapshot-max-entries=1000"])).await;
    crate::helpers::faults::seed_day(&db.url, Utc::now().date_naive(), 3_000).await;
    app.recompute("").await;
    let top = |offset: u32, limit: u32| v1::GetTopNRequest { offset, limit, ..Default::default() };
    let board = app.client.get_top_n(top(0, 2)).await.expect("GetTopN").into_inner();
    assert_eq!(board.total, 3_000);
    let middle = app.client.get_top_n(top(1_500, 1)).await.expect("GetTopN").into_inner().products[0].product_id;

    put(&mut app, pin("pin-middle", middle, 1), 0).await.expect("stored");
    let mut client = app.client.clone();
    ranking_server::test_support::eventually("the pin served on the big board", || {
        let mut client = client.clone();
        async move {
            let first = client.get_top_n(top(0, 1)).await.map(|t| t.into_inner().products[0].product_id);
            first.is_ok_and(|p| p == middle)
        }
    })
    .await;

    // Hidden: out of the big board when UpdateCatalog answers, the pin still served.
    let hidden = board.products[0].product_id;
    let entry = v1::CatalogEntry { product_id: hidden, hidden: true, ..Default::default() };
    client.update_catalog(v1::UpdateCatalogRequest { products: vec![entry] }).await.expect("UpdateCatalog");
    let after = client.get_top_n(top(0, 3)).await.expect("GetTopN").into_inner();
    let ids: Vec<i64> = after.products.iter().map(|p| p.product_id).collect();
    assert_eq!(after.total, 2_999, "one product withdrawn: {ids:?}");
    assert_eq!(ids[0], middle, "the pin stays");
    assert!(!ids.contains(&hidden), "{ids:?}");
    let metrics = app.scrape_metrics().await;
    let failed = crate::helpers::metric_or_zero(&metrics, "ranking_control_passes_total{outcome=\"failed\"}");
    assert_eq!(failed, 0.0, "no control pass failed");
    app.stop().await;
    db.drop_db().await;
}
