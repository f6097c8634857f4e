//! The go-grpc-prometheus families on `/metrics`, scraped from a server on port
//! 0: started, handled by Go's code names, messages each way, the handling histogram; calls
//! refused by authentication counted like the others; a watch stream counted per update.

use chrono::Utc;
use ranking_client::tonic::{Code, Request};
use ranking_client::v1;
use ranking_server::test_support::eventually;

use crate::helpers::{TestApp, metric_value, views};

const RANKING: &str = "ranking.v1.RankingService";

fn series(family: &str, grpc_type: &str, method: &str, code: Option<&str>) -> String {
    let code = code.map(|c| format!(",grpc_code=\"{c}\"")).unwrap_or_default();
    format!("{family}{{grpc_type=\"{grpc_type}\",grpc_service=\"{RANKING}\",grpc_method=\"{method}\"{code}}}")
}

fn read<T>(message: T) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert("authorization", "Bearer r-secret".parse().expect("ascii"));
    request
}

#[tokio::test]
async fn every_call_is_counted_in_the_standard_families() {
    let mut app = TestApp::spawn(&["--read-token=r-secret", "--watch-interval=50ms"]).await;
    let at = Utc::now() - chrono::Duration::seconds(5);
    app.record(views("a", 1, 3, at)).await;
    app.recompute("").await;
    let unary = |family: &str, method: &str, code: Option<&str>| series(family, "unary", method, code);

    for _ in 0..2 {
        app.client.get_top_n(read(v1::GetTopNRequest::default())).await.expect("read");
    }
    let refused = app.client.get_top_n(v1::GetTopNRequest::default()).await.expect_err("no token");
    assert_eq!(refused.code(), Code::Unauthenticated);
    let invalid = app.client.get_rank(read(v1::GetRankRequest::default())).await.expect_err("product 0");
    assert_eq!(invalid.code(), Code::InvalidArgument);

    // A watch: its first state, then one message per change, until the caller goes away.
    let mut watch = app.client.watch_top_n(read(v1::WatchTopNRequest::default())).await.expect("watch").into_inner();
    watch.message().await.expect("first").expect("state");
    app.record(views("b", 2, 9, at)).await;
    app.recompute("").await;
    let changed = watch.message().await.expect("second").expect("state");
    assert_eq!(changed.products[0].product_id, 2);
    drop(watch);

    let stream = |family: &str, code: Option<&str>| series(family, "server_stream", "WatchTopN", code);
    eventually("the dropped watch counted as handled", || {
        let app = &app;
        async move {
            let m = app.scrape_metrics().await;
            m.contains(&stream("grpc_server_handled_total", Some("Canceled")))
        }
    })
    .await;
    let m = app.scrape_metrics().await;
    let v = |s: String| metric_value(&m, &s);
    assert_eq!(v(unary("grpc_server_started_total", "GetTopN", None)), 3.0);
    assert_eq!(v(unary("grpc_server_handled_total", "GetTopN", Some("OK"))), 2.0);
    assert_eq!(v(unary("grpc_server_handled_total", "GetTopN", Some("Unauthenticated"))), 1.0);
    assert_eq!(v(unary("grpc_server_handled_total", "GetRank", Some("InvalidArgument"))), 1.0);
    // The token is checked before the request message is read: the refused call's is never
    // received. Answers only for calls that had one.
    assert_eq!(v(unary("grpc_server_msg_received_total", "GetTopN", None)), 2.0);
    assert_eq!(v(unary("grpc_server_msg_sent_total", "GetTopN", None)), 2.0);
    assert_eq!(v(unary("grpc_server_handling_seconds_count", "GetTopN", None)), 3.0);
    assert_eq!(v(stream("grpc_server_started_total", None)), 1.0);
    assert_eq!(v(stream("grpc_server_msg_received_total", None)), 1.0);
    assert!(v(stream("grpc_server_msg_sent_total", None)) >= 2.0, "{m}");
    assert_eq!(v(stream("grpc_server_handled_total", Some("Canceled"))), 1.0);
    // A method never called has its zero series from the start.
    assert_eq!(v(unary("grpc_server_started_total", "ListMovers", None)), 0.0);
    assert_eq!(v(unary("grpc_server_handled_total", "ListMovers", Some("OK"))), 0.0);
    assert!(m.contains("process_resident_memory_bytes "), "{m}");
    assert_eq!(m.matches("# EOF").count(), 1, "one exposition");
    app.stop().await;
}
