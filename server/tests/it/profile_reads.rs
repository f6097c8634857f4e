//! Reads name a scoring profile (empty: `default`) and may carry the shopper they are for;
//! every answer says which profile it was read from. With the one profile the service has,
//! another name is NOT_FOUND on every read, and an `actor_id` past its bound is refused.

use chrono::Utc;
use ranking_client::tonic::Code;
use ranking_client::v1;

use crate::helpers::{TestApp, views};

#[tokio::test]
async fn every_read_names_its_profile_and_an_unknown_one_is_not_found() {
    let mut app = TestApp::spawn(&[]).await;
    app.record(views("p", 7, 3, Utc::now() - chrono::Duration::seconds(5))).await;
    app.recompute("").await;
    let c = &mut app.client;
    for profile in ["", "default"] {
        let top = v1::GetTopNRequest { profile: profile.into(), actor_id: "shopper-1".into(), ..Default::default() };
        assert_eq!(c.get_top_n(top).await.expect("top").into_inner().profile, "default");
        let rank = v1::GetRankRequest { product_id: 7, profile: profile.into(), ..Default::default() };
        assert_eq!(c.get_rank(rank).await.expect("rank").into_inner().profile, "default");
        let ranks = v1::GetRanksRequest { product_ids: vec![7], profile: profile.into(), ..Default::default() };
        assert_eq!(c.get_ranks(ranks).await.expect("ranks").into_inner().profile, "default");
        let movers = v1::ListMoversRequest { profile: profile.into(), ..Default::default() };
        assert_eq!(c.list_movers(movers).await.expect("movers").into_inner().profile, "default");
        let explain = v1::ExplainRankRequest { product_id: 7, profile: profile.into(), ..Default::default() };
        assert_eq!(c.explain_rank(explain).await.expect("explain").into_inner().profile, "default");
        let watch = v1::WatchTopNRequest { limit: 5, profile: profile.into(), ..Default::default() };
        let mut stream = c.watch_top_n(watch).await.expect("watch").into_inner();
        assert_eq!(stream.message().await.expect("frame").expect("a frame").profile, "default");
    }
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
