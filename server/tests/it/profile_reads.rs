//! Reads name a scoring profile (empty: `default`, or a variant of `RANKING_PROFILES`) and
//! may carry the shopper they are for; every answer says which profile it was read from. An
//! unknown name is NOT_FOUND on every read, and an `actor_id` past its bound is refused.

use chrono::Utc;
use ranking_client::tonic::Code;
use ranking_client::v1;

use crate::helpers::{ProfileFile, TestApp, views};

/// The built-in profile's signals with other weights and axes.
const ALT: &str = "carry_over = 0.0\ncarry_days = 0\n[[main]]\nsignal = \"likes\"\nweight = 1.0\n[[main]]\nsignal = \"views\"\nweight = 0.5\n[[axes]]\nsignal = \"recency\"\ndigits = 3\n";

#[tokio::test]
async fn every_read_names_its_profile_and_an_unknown_one_is_not_found() {
    let alt = ProfileFile::new(ALT);
    let mut app = TestApp::spawn(&[&format!("--profiles=alt={}", alt.path().display())]).await;
    app.record(views("p", 7, 3, Utc::now() - chrono::Duration::seconds(5))).await;
    app.recompute("").await;
    let c = &mut app.client;
    for (profile, name) in [("", "default"), ("default", "default"), ("alt", "alt")] {
        let top = v1::GetTopNRequest { profile: profile.into(), actor_id: "shopper-1".into(), ..Default::default() };
        let top = c.get_top_n(top).await.expect("top").into_inner();
        assert_eq!((top.profile.as_str(), top.products.len()), (name, 1), "{top:?}");
        let rank = v1::GetRankRequest { product_id: 7, profile: profile.into(), ..Default::default() };
        assert_eq!(c.get_rank(rank).await.expect("rank").into_inner().profile, name);
        let ranks = v1::GetRanksRequest { product_ids: vec![7], profile: profile.into(), ..Default::default() };
        assert_eq!(c.get_ranks(ranks).await.expect("ranks").into_inner().profile, name);
        let movers = v1::ListMoversRequest { profile: profile.into(), ..Default::default() };
        assert_eq!(c.list_movers(movers).await.expect("movers").into_inner().profile, name);
        let explain = v1::ExplainRankRequest { product_id: 7, profile: profile.into(), ..Default::default() };
        assert_eq!(c.explain_rank(explain).await.expect("explain").into_inner().profile, name);
        let watch = v1::WatchTopNRequest { limit: 5, profile: profile.into(), ..Default::default() };
        let mut stream = c.watch_top_n(watch).await.expect("watch").into_inner();
        assert_eq!(stream.message().await.expect("frame").expect("a frame").profile, name);
        let preview = v1::PreviewTopNRequest {
            selector: Some(v1::GetTopNRequest { profile: profile.into(), ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(c.preview_top_n(preview).await.expect("preview").into_inner().profile, name);
    }
    // ExplainRank explains the daily score; another window is refused by name.
    let weekly = v1::ExplainRankRequest { product_id: 7, window: v1::Window::Weekly as i32, ..Default::default() };
    let err = c.explain_rank(weekly).await.expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("window:"), "{}", err.message());
    let unknown = "candidate".to_string();
    let statuses = [
        c.get_top_n(v1::GetTopNRequest { profile: unknown.clone(), ..Default::default() }).await.err(),
        c.get_rank(v1::GetRankRequest { product_id: 7, profile: unknown.clone(), ..Default::default() }).await.err(),
        c.get_ranks(v1::GetRanksRequest { product_ids: vec![7], profile: unknown.clone(), ..Default::default() })
            .await
            .err(),
        c.list_movers(v1::ListMoversRequest { profile: unknown.clone(), ..Default::default() }).await.err(),
        c.explain_rank(v1::ExplainRankRequest { product_id: 7, profile: unknown.clone(), ..Default::default() })
            .await
            .err(),
        c.watch_top_n(v1::WatchTopNRequest { profile: unknown.clone(), ..Default::default() }).await.err(),
        c.preview_top_n(v1::PreviewTopNRequest {
            selector: Some(v1::GetTopNRequest { profile: unknown.clone(), ..Default::default() }),
            ..Default::default()
        })
        .await
        .err(),
    ];
    for status in statuses {
        let status = status.expect("refused");
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
        assert!(status.message().contains("no scoring profile"), "{status:?}");
    }
    let long = v1::GetTopNRequest { actor_id: "a".repeat(129), ..Default::default() };
    let err = c.get_top_n(long).await.expect_err("refused");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("actor_id:"), "{}", err.message());
    app.stop().await;
}
