//! UpdateCatalog: hidden products leave every ranking of today at once, on every
//! replica, and stay out of later recomputes (the others renormalised without them) until
//! shown again; validation refuses a whole call and writes nothing.

use chrono::{Duration as Age, Timelike, Utc};
use ranking_client::tonic::Code;
use ranking_client::{RankingClient, v1};

use crate::helpers::{TestApp, TestDb, rand_u64, views};
use crate::redis_store::redis_settings;
use ranking_server::test_support::eventually;

fn entry(product_id: i64, segments: &[&str], hidden: bool) -> v1::CatalogEntry {
    v1::CatalogEntry {
        product_id,
        segments: segments.iter().map(|s| s.to_string()).collect(),
        hidden,
        title: String::new(),
    }
}

fn request(window: v1::Window) -> v1::GetTopNRequest {
    let hour = (window == v1::Window::Hourly).then(|| Utc::now().hour());
    let date = if window == v1::Window::Hourly { Utc::now().date_naive().to_string() } else { String::new() };
    v1::GetTopNRequest { window: window.into(), date, hour, limit: 100, ..Default::default() }
}

async fn ids(app: &mut TestApp, window: v1::Window) -> Vec<i64> {
    let top = app.client.get_top_n(request(window)).await.expect("GetTopN").into_inner();
    top.products.iter().map(|p| p.product_id).collect()
}

/// §4's norm, computed independently (see the helper).
fn norm(values: &[f64], x: f64) -> u32 {
    crate::helpers::independent_norm(values, x)
}

async fn view_norm(app: &mut TestApp, product_id: i64) -> u32 {
    let rank = app.rank(product_id, "").await.expect("ranked").product.expect("entry");
    rank.breakdown.clone().expect("breakdown").view_norm
}

#[tokio::test]
async fn hidden_products_leave_every_ranking_at_once_and_come_back_at_a_recompute() {
    let db = TestDb::create().await;
    let prefix = format!("t{:x}", rand_u64());
    let mut a = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let mut b = TestApp::spawn_on(redis_settings(&db.url, &prefix, &[])).await;
    let at = Utc::now() - Age::seconds(2);
    // Products 1..=5 with p views each: product p is ranked 6 - p.
    let events = (1..=5).flat_map(|p| views(&format!("p{p}"), p, p as usize * 2, at)).collect();
    a.record(events).await;
    a.recompute("").await;
    let all_views = [2.0, 4.0, 6.0, 8.0, 10.0];
    assert_eq!(view_norm(&mut a, 5).await, norm(&all_views, 10.0));

    let client = RankingClient::builder(format!("http://{}", a.addr)).connect().await.expect("client");
    let updated = client.update_catalog(vec![entry(4, &[], true), entry(2, &["category:shoes"], false)]).await;
    assert_eq!(updated.expect("UpdateCatalog").updated, 2);
    for window in [v1::Window::Daily, v1::Window::Weekly, v1::Window::Hourly] {
        assert_eq!(ids(&mut a, window).await, vec![5, 3, 2, 1], "{window:?} on the replica that was called");
    }
    assert_eq!(a.rank(4, "").await.expect_err("hidden").code(), Code::NotFound);
    // The other replica loads the new versions on the announcement or its poll.
    eventually("replica b stops serving product 4", async || {
        !ids(&mut b, v1::Window::Daily).await.contains(&4) && !ids(&mut b, v1::Window::Weekly).await.contains(&4)
    })
    .await;
    assert_eq!(ids(&mut b, v1::Window::Hourly).await, vec![5, 3, 2, 1]);
    // Until the next recompute the others keep their scores; the hidden product's new
    // events are recorded but reach no ranking.
    assert_eq!(view_norm(&mut a, 5).await, norm(&all_views, 10.0));
    a.record(views("late4", 4, 20, at)).await;
    assert_eq!(ids(&mut a, v1::Window::Hourly).await, vec![5, 3, 2, 1]);

    // The next recompute ranks without it: the norms come from the other four.
    a.recompute("").await;
    assert_eq!(ids(&mut a, v1::Window::Daily).await, vec![5, 3, 2, 1]);
    assert_eq!(ids(&mut a, v1::Window::Weekly).await, vec![5, 3, 2, 1]);
    assert_eq!(view_norm(&mut a, 5).await, norm(&[2.0, 4.0, 6.0, 10.0], 10.0));

    // The same call twice changes nothing; shown again, it is back at the next recompute with
    // the events it had while hidden (28 views now lead).
    for _ in 0..2 {
        assert_eq!(client.update_catalog(vec![entry(4, &[], false)]).await.expect("show").updated, 1);
    }
    assert_eq!(ids(&mut a, v1::Window::Daily).await, vec![5, 3, 2, 1], "un-hiding waits for a recompute");
    a.recompute("").await;
    assert_eq!(ids(&mut a, v1::Window::Daily).await, vec![4, 5, 3, 2, 1]);
    a.stop().await;
    b.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_refused_catalog_call_names_the_field_and_writes_nothing() {
    let mut app = TestApp::spawn(&[]).await;
    app.record(views("v", 7, 2, Utc::now() - Age::seconds(5))).await;
    app.recompute("").await;
    let many: Vec<String> = (0..33).map(|i| format!("s{i}")).collect();
    let cases: Vec<(Vec<v1::CatalogEntry>, &str)> = vec![
        (vec![], "products:"),
        (vec![entry(7, &[], true), entry(0, &[], false)], "products[1].product_id:"),
        (vec![entry(7, &[], true), entry(7, &[], false)], "products[1].product_id:"),
        (vec![entry(7, &["brand:acme", "Shoes"], true)], "products[0].segments[1]:"),
        (
            vec![v1::CatalogEntry { product_id: 7, segments: many, hidden: true, ..Default::default() }],
            "products[0].segments:",
        ),
        (
            vec![v1::CatalogEntry { product_id: 7, hidden: true, title: "t".repeat(201), ..Default::default() }],
            "products[0].title:",
        ),
    ];
    for (products, field) in cases {
        let e = app.client.update_catalog(v1::UpdateCatalogRequest { products }).await.expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument, "{field}");
        assert!(e.message().starts_with(field), "{field}: {}", e.message());
    }
    assert_eq!(app.top("", 10).await.products.len(), 1, "product 7 was never hidden");
    // A title of 200 characters (400 bytes) is kept.
    let mut titled = entry(7, &["brand:acme", "brand:acme", "category:x"], false);
    titled.title = "é".repeat(200);
    let ok = v1::UpdateCatalogRequest { products: vec![titled] };
    assert_eq!(app.client.update_catalog(ok).await.expect("valid").into_inner().updated, 1);
    app.stop().await;
}

#[tokio::test]
async fn get_catalog_reads_the_entries_titles_included_and_names_the_missing() {
    let mut app = TestApp::spawn(&[]).await;
    let mut hero = entry(7, &["brand:acme"], false);
    hero.title = "Trail runner 2 — blue".into();
    let plain = entry(3, &[], true);
    app.client
        .update_catalog(v1::UpdateCatalogRequest { products: vec![hero.clone(), plain.clone()] })
        .await
        .expect("update");
    let read = v1::GetCatalogRequest { product_ids: vec![99, 7, 3, 99] };
    let read = app.client.get_catalog(read).await.expect("GetCatalog").into_inner();
    assert_eq!(read.products, vec![plain, hero], "ascending product id");
    assert_eq!(read.missing, vec![99], "once");
    for (ids, field) in
        [(vec![], "product_ids:"), (vec![1, 0], "product_ids[1]:"), ((1..=1_001).collect(), "product_ids:")]
    {
        let err = app.client.get_catalog(v1::GetCatalogRequest { product_ids: ids }).await.expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().starts_with(field), "{field}: {}", err.message());
    }
    app.stop().await;
}
